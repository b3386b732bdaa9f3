//! What each agent publishes under `/fusebox/sfc/v1/status/<host>` every second, and the
//! table `fusebox chain status` prints from it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::dataplane::Counters;

/// One stage of a host: its installed entries and its counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageStatus {
    /// Installed entries (key relative to the host's plan prefix → value).
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
    /// The last reconciliation's error, if it failed.
    pub error: Option<String>,
    /// Stage name (the first segment of the entry keys: `fwd`, `proxy`, `cls`...) → status.
    pub stages: BTreeMap<String, StageStatus>,
}

impl HostStatus {
    /// Groups `entries` by stage (their first key segment) and adds each stage's counters.
    pub fn new(
        host: &str,
        entries: &BTreeMap<String, String>,
        counters: &BTreeMap<String, Counters>,
    ) -> HostStatus {
        let mut stages: BTreeMap<String, StageStatus> = BTreeMap::new();
        for (k, v) in entries {
            let stage = k.split('/').next().unwrap_or("").to_string();
            stages.entry(stage).or_default().entries.insert(k.clone(), v.clone());
        }
        for (stage, c) in counters {
            stages.entry(stage.clone()).or_default().counters = c.clone();
        }
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        HostStatus { host: host.to_string(), time, plan_revision: 0, error: None, stages }
    }
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
        let _ = writeln!(out, "host {}  (status {age} s old, plan revision {})", h.host, h.plan_revision);
        if let Some(e) = &h.error {
            let _ = writeln!(out, "  error: {e}");
        }
        let _ = writeln!(out, "  {:<10} {:>8}  counters", "stage", "entries");
        for (name, s) in &h.stages {
            let counters: Vec<String> = s.counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "  {:<10} {:>8}  {}", name, s.entries.len(), counters.join(" "));
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
    fn status_groups_entries_by_stage_and_renders() {
        let entries: BTreeMap<String, String> =
            [("fwd/100/254", "{}"), ("fwd/200/254", "{}"), ("proxy/x", "{}")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let mut counters = BTreeMap::new();
        counters.insert("fwd".to_string(), [("packets".to_string(), 7u64)].into_iter().collect());
        let s = HostStatus::new("server1", &entries, &counters);
        assert_eq!(s.stages["fwd"].entries.len(), 2);
        assert_eq!(s.stages["proxy"].entries.len(), 1);
        let t = render_table(&[s.clone()], s.time + 2);
        assert!(t.contains("host server1  (status 2 s old"), "{t}");
        assert!(t.contains("packets=7"), "{t}");
        assert!(t.contains("fwd/200/254"), "{t}");
        let back: HostStatus = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
