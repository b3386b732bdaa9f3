//! The plan as text: per host and SF, its stages and map entries (the shape of the thesis'
//! Fig. 5.10 tables), then what became of each chain. `fusebox controller --dry-run` prints it.

use crate::entries::{FwdAction, FwdVal, Mac, CFG_ANY_DST, CFG_NAT_LEARN};
use crate::plan::Plan;
use crate::registry::Registry;
use std::fmt::Write as _;

fn mac(reg: &Registry, m: [u8; 6]) -> String {
    let m = Mac(m);
    match reg.owner(m) {
        Some(o) => format!("{m} ({o})"),
        None => m.to_string(),
    }
}

fn hop(reg: &Registry, v: &FwdVal) -> String {
    let via = if v.ifindex == 0 {
        String::new()
    } else {
        format!(" via ifindex {}", v.ifindex)
    };
    match v.action {
        FwdAction::End => "end of path (decapsulate, deliver)".to_string(),
        FwdAction::Other(code) => format!("action {code}"),
        FwdAction::Ethernet => {
            format!("ethernet to {} from {}{via}", mac(reg, v.dmac), Mac(v.smac))
        }
        FwdAction::VxlanGpe => format!(
            "vxlan-gpe {} → {} vni {} to {} from {}{via}",
            v.saddr,
            v.daddr,
            v.vni,
            mac(reg, v.dmac),
            Mac(v.smac)
        ),
    }
}

/// A 5-tuple as `src:sport → dst:dport proto P`.
fn flow(f: &stages::maps::FlowKey) -> String {
    format!(
        "{}:{} → {}:{} proto {}",
        f.saddr, f.sport, f.daddr, f.dport, f.proto
    )
}

/// The plan as a table (`reg`: the registry it was computed from, to name MACs).
pub fn render(plan: &Plan, reg: &Registry) -> String {
    let mut out = String::new();
    for (host, hp) in &plan.hosts {
        let _ = writeln!(out, "host {host}");
        if hp.instances.is_empty() && hp.direct_links.is_empty() {
            let _ = writeln!(out, "  (nothing to install)");
        }
        for (name, inst) in &hp.instances {
            let _ = writeln!(out, "  {name}");
            let stages: Vec<String> = inst
                .attach
                .iter()
                .map(|a| format!("{}@{}", a.stage.name(), a.iface))
                .collect();
            let stages = if stages.is_empty() {
                "none (direct links on both sides)".to_string()
            } else {
                stages.join(" ")
            };
            let _ = writeln!(out, "    stages  {stages}");
            for c in inst.cfg.values() {
                let mut flags = Vec::new();
                if c.flags & CFG_NAT_LEARN != 0 {
                    flags.push("nat-learn");
                }
                if c.flags & CFG_ANY_DST != 0 {
                    flags.push("any-dst");
                }
                let flags = if flags.is_empty() {
                    String::new()
                } else {
                    format!(" {}", flags.join(","))
                };
                let _ = writeln!(
                    out,
                    "    cfg     ifindex {} mac {}{flags}",
                    c.ifindex,
                    Mac(c.mac)
                );
            }
            for c in &inst.cls {
                let on = if c.key.ifindex == 0 {
                    "any interface".to_string()
                } else {
                    format!("ifindex {}", c.key.ifindex)
                };
                let (flow, spi, si) = (flow(&c.key.flow), c.meta.spi(), c.meta.si());
                let _ = writeln!(out, "    cls     {flow} on {on} ⇒ ({spi},{si})");
            }
            for p in &inst.proxy {
                let (flow, spi, si) = (flow(&p.key), p.meta.spi(), p.meta.si());
                let _ = writeln!(out, "    proxy   {flow} ⇒ ({spi},{si}) static");
            }
            for f in &inst.fwd {
                let _ = writeln!(
                    out,
                    "    fwd     ({},{}) → {}",
                    f.spi,
                    f.si,
                    hop(reg, &f.val)
                );
            }
        }
        for l in &hp.direct_links {
            let chains: Vec<String> = l.chains.iter().map(u32::to_string).collect();
            let _ = writeln!(
                out,
                "  direct link {}.{} → {}.{} (chains {})",
                l.from.tag,
                l.from.iface,
                l.to.tag,
                l.to.iface,
                chains.join(", ")
            );
        }
    }
    let _ = writeln!(out, "chains");
    for c in &plan.chains {
        let (state, path) = (c.state(), c.path_text(" → "));
        let _ = writeln!(out, "  {:<8} {state}: {path}", c.id);
        for n in &c.notes {
            let _ = writeln!(out, "           {n}");
        }
    }
    out
}
