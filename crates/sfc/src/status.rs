//! What each agent publishes under `/fusebox/sfc/v1/status/<host>` every second, and the
//! table `fusebox chain status` prints from it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::dataplane::Counters;
use crate::keys::{Kv, ROOT};
use crate::plan::ChainReport;

/// The stage group of a plan key, as status and counters name it: `<instance>/<kind>` for
/// `…/plan/<host>/i/<instance>/<kind>/…` (`sf1/fwd`, `@cls/cls`), `<instance>` for the
/// instance's own key, `link` for direct links; the key itself for anything else.
pub fn group_of(key: &str) -> String {
    let rest = key
        .strip_prefix(ROOT)
        .and_then(|r| r.strip_prefix("plan/"))
        .and_then(|r| r.split_once('/'))
        .map(|(_, r)| r)
        .unwrap_or(key);
    let parts: Vec<&str> = rest.splitn(4, '/').collect();
    match parts.as_slice() {
        ["i", inst, kind, ..] => format!("{inst}/{kind}"),
        ["i", inst] => (*inst).to_string(),
        ["link", ..] => "link".to_string(),
        _ => rest.to_string(),
    }
}

/// One stage of a host: its installed entries and its counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageStatus {
    /// Installed entries (key relative to the host's plan prefix → value as text).
    pub entries: BTreeMap<String, String>,
    /// The stage's counters.
    pub counters: Counters,
}

/// A host's status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostStatus {
    /// The host's name.
    pub host: String,
    /// Seconds since the Unix epoch when it was published.
    pub time: u64,
    /// The store revision of the plan the agent last reconciled to.
    pub plan_revision: i64,
    /// The generation of that plan's commit ([`crate::keys::Commit`]; 0 for an empty plan).
    #[serde(default)]
    pub plan_generation: u64,
    /// While a change of the plan is being written (or its writer died half-way): why the
    /// keys are not a complete plan yet; the data plane keeps the last complete one.
    #[serde(default)]
    pub pending: Option<String>,
    /// The last reconciliation's error, if it failed.
    pub error: Option<String>,
    /// Stage group ([`group_of`]: `sf1/fwd`, `@cls/cls`, `link`...) → status.
    pub stages: BTreeMap<String, StageStatus>,
}

impl HostStatus {
    /// Groups `entries` (plan keys of `host`) by stage and adds each stage's counters.
    pub fn new(host: &str, entries: &Kv, counters: &BTreeMap<String, Counters>) -> HostStatus {
        let prefix = crate::keys::plan_prefix(host);
        let mut stages: BTreeMap<String, StageStatus> = BTreeMap::new();
        for (k, v) in entries {
            let short = k.strip_prefix(&prefix).unwrap_or(k).to_string();
            let value = String::from_utf8_lossy(v).into_owned();
            stages
                .entry(group_of(k))
                .or_default()
                .entries
                .insert(short, value);
        }
        for (stage, c) in counters {
            stages.entry(stage.clone()).or_default().counters = c.clone();
        }
        HostStatus {
            host: host.to_string(),
            time: now(),
            plan_revision: 0,
            plan_generation: 0,
            pending: None,
            error: None,
            stages,
        }
    }
}

/// What `fusebox chain status` shows: the controller's per-chain report and every host's
/// published status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainStatus {
    /// The controller's report of each chain (its chosen path, installed or why not).
    pub chains: Vec<ChainReport>,
    /// Each host's status, by host name.
    pub hosts: Vec<HostStatus>,
    /// Status keys that did not parse (key: error).
    pub unreadable: Vec<String>,
}

impl ChainStatus {
    /// Reads the report and the status keys from etcd.
    pub async fn fetch(
        store: &mut crate::store::Store,
    ) -> Result<ChainStatus, crate::store::StoreError> {
        let mut out = ChainStatus::default();
        if let Some(report) = store.get(&crate::keys::report_key()).await? {
            match serde_json::from_slice(&report) {
                Ok(chains) => out.chains = chains,
                Err(e) => out
                    .unreadable
                    .push(format!("{}: {e}", crate::keys::report_key())),
            }
        }
        for (k, v) in store.get_prefix(&crate::keys::status_prefix()).await?.kvs {
            match serde_json::from_slice::<HostStatus>(&v) {
                Ok(h) => out.hosts.push(h),
                Err(e) => out.unreadable.push(format!("{k}: {e}")),
            }
        }
        Ok(out)
    }

    /// The table: the chains, then [`render_table`] of the hosts.
    pub fn render(&self, now: u64) -> String {
        let mut out = String::new();
        for c in &self.chains {
            let (state, path) = (c.state(), c.path_text(" -> "));
            let _ = writeln!(out, "chain {}: {state}: {path}", c.id);
            for n in &c.notes {
                let _ = writeln!(out, "  note: {n}");
            }
        }
        for u in &self.unreadable {
            let _ = writeln!(out, "unreadable: {u}");
        }
        out.push_str(&render_table(&self.hosts, now));
        out
    }
}

/// Seconds since the Unix epoch now.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The table of `fusebox chain status`: one block per host, one line per stage with its
/// entry count and counters, then its entries indented.
pub fn render_table(hosts: &[HostStatus], now: u64) -> String {
    let mut out = String::new();
    if hosts.is_empty() {
        out.push_str("no agent has published a status\n");
    }
    for h in hosts {
        let age = now.saturating_sub(h.time);
        let _ = writeln!(
            out,
            "host {}  (status {age} s old, plan revision {}, generation {})",
            h.host, h.plan_revision, h.plan_generation
        );
        if let Some(p) = &h.pending {
            let _ = writeln!(
                out,
                "  pending: {p} (the last complete plan stays installed)"
            );
        }
        if let Some(e) = &h.error {
            let _ = writeln!(out, "  error: {e}");
        }
        let _ = writeln!(out, "  {:<10} {:>8}  counters", "stage", "entries");
        for (name, s) in &h.stages {
            let counters: Vec<String> =
                s.counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(
                out,
                "  {:<10} {:>8}  {}",
                name,
                s.entries.len(),
                counters.join(" ")
            );
            for (k, v) in &s.entries {
                let _ = writeln!(out, "      {k} = {v}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_of_names_instance_and_kind() {
        let p = crate::keys::plan_prefix("server1");
        assert_eq!(group_of(&format!("{p}i/sf1/fwd/100/254")), "sf1/fwd");
        assert_eq!(
            group_of(&format!("{p}i/@cls/cls/3/1.1.1.1/2.2.2.2/6/1/2")),
            "@cls/cls"
        );
        assert_eq!(group_of(&format!("{p}i/sf1")), "sf1");
        assert_eq!(group_of(&format!("{p}link/a/x/b/y")), "link");
        assert_eq!(group_of("odd"), "odd");
    }

    #[test]
    fn status_groups_entries_by_stage_and_renders() {
        let p = crate::keys::plan_prefix("server1");
        let entries: Kv = [
            ("i/sf1/fwd/100/254", "{}"),
            ("i/sf1/fwd/200/254", "{}"),
            ("i/sf1/proxy/x", "{}"),
        ]
        .iter()
        .map(|(k, v)| (format!("{p}{k}"), v.as_bytes().to_vec()))
        .collect();
        let mut counters = BTreeMap::new();
        counters.insert(
            "sf1/fwd".to_string(),
            [("packets".to_string(), 7u64)].into_iter().collect(),
        );
        let mut s = HostStatus::new("server1", &entries, &counters);
        assert_eq!(s.stages["sf1/fwd"].entries.len(), 2);
        assert_eq!(s.stages["sf1/proxy"].entries.len(), 1);
        let t = render_table(std::slice::from_ref(&s), s.time + 2);
        assert!(t.contains("host server1  (status 2 s old"), "{t}");
        assert!(t.contains("packets=7"), "{t}");
        assert!(t.contains("i/sf1/fwd/200/254"), "{t}");
        assert!(t.contains("plan revision 0, generation 0)"), "{t}");
        assert!(!t.contains("pending"), "{t}");
        s.plan_generation = 4;
        s.pending = Some("3 plan keys do not match commit 5 (9 keys)".into());
        let t = render_table(std::slice::from_ref(&s), s.time);
        assert!(t.contains("generation 4)"), "{t}");
        assert!(
            t.contains("  pending: 3 plan keys do not match commit 5 (9 keys)"),
            "{t}"
        );
        // A status published before these fields existed still reads.
        let old = r#"{"host":"h","time":1,"plan_revision":2,"error":null,"stages":{}}"#;
        let old: HostStatus = serde_json::from_str(old).unwrap();
        assert_eq!((old.plan_generation, old.pending), (0, None));
        let back: HostStatus = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
