//! Declarative elements: configuration only, no packets.
//!
//! Click's `AddressInfo(NAME ADDR [ADDR...], ...)` declares address names, and
//! `IPRewriterPatterns(NAME SADDR SPORT DADDR DPORT, ...)` rewriter patterns; FuseBox's graph
//! builder collects both into [`crate::Names`] before building the other elements, so here
//! they are only validated. `ScheduleInfo`, `ControlSocket`, `ChatterSocket`,
//! `DriverManager`, `Script`, `StaticThreadSched`, `BalancedThreadSched`, `AlignmentInfo`,
//! `AnnotationInfo` and `Message` tune Click's scheduler, handlers, threads or run-time
//! scripting: run-to-completion replay has none of these, so they are accepted with any
//! arguments and have no effect. All have ports `0/0`; a packet pushed to one anyway (a
//! graph error) is dropped as `no-input`.

use crate::reason::InputReason;
use crate::{Args, ConfigError, Context, Element, Names, PortCount, Verdict};
use packet::Packet;

/// A configuration-only element (`AddressInfo`, `DriverManager`, ...): no ports, no effect.
#[derive(Debug, Clone)]
pub struct Declarative {
    class: &'static str,
}

/// The configuration text again, one argument per entry, for [`Names`]' parsers.
fn config_text(args: &Args) -> String {
    args.all()
        .iter()
        .map(|a| match &a.keyword {
            Some(k) => format!("{k} {}", a.value),
            None => a.value.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Declarative {
    /// Validates `AddressInfo` and `IPRewriterPatterns` entries; accepts anything for the rest.
    pub fn configure(class: &'static str, args: &Args) -> Result<Declarative, ConfigError> {
        match class {
            "AddressInfo" => Names::new().add_address_info(&config_text(args))?,
            "IPRewriterPatterns" => Names::new().add_patterns(&config_text(args))?,
            _ => {}
        }
        Ok(Declarative { class })
    }
}

impl Element for Declarative {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(0, 0)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Drop(packet, InputReason::NoInput.into())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn accepted_with_no_ports() {
        for class in [
            "AddressInfo",
            "IPRewriterPatterns",
            "ScheduleInfo",
            "ControlSocket",
            "ChatterSocket",
            "DriverManager",
            "Script",
            "StaticThreadSched",
            "BalancedThreadSched",
            "AlignmentInfo",
            "AnnotationInfo",
            "Message",
        ] {
            let e = ok(class, "", 0);
            assert_eq!(e.class_name(), class);
            assert_eq!(e.port_count().describe(), "0/0");
        }
        ok("DriverManager", "pause, stop", 0);
        ok("Script", "TYPE ACTIVE, print hello", 0);
        ok(
            "AddressInfo",
            "ext 10.0.0.1 00:01:02:03:04:05, int 192.168.1.0/24",
            0,
        );
        ok("IPRewriterPatterns", "NAT 1.2.3.4 1024-65535 - -", 0);
    }

    #[test]
    fn address_info_validated() {
        assert!(err("AddressInfo", "ext 10.0.0", 0).contains("expected an IP address"));
        assert!(err("AddressInfo", "ext", 0).contains("expected addresses after `ext`"));
        assert!(err("IPRewriterPatterns", "lonely", 0).contains("expected `NAME SADDR"));
        assert!(err("AddressInfo", "ext 10.0.0", 0).starts_with("AddressInfo: "));
    }

    #[test]
    fn stray_packets_dropped() {
        let mut e = ok("ScheduleInfo", "a 1", 0);
        assert_eq!(run(e.as_mut(), pkt(&frame())).drops, vec!["no-input"]);
    }
}
