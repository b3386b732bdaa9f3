//! The `stages` scenario: ns per packet of each NSH stage (`crates/stages`) through
//! `BPF_PROG_TEST_RUN`, net of the no-op program of the same hook, and with
//! `--chaining-box DIR` the same for Chaining-Box's own stages on the same frames
//! (FuseBox ÷ Chaining-Box per repetition).
//!
//! Every stage rewrites the frame it runs on, and the kernel runs the repetitions of one
//! test run on the same buffer (the second run would see the first one's output: Dec would
//! find no NSH, Cls an NSH frame), so each sample is one test run with one repetition and
//! its in-kernel duration; a repetition of the scenario takes the trimmed mean
//! ([`central_mean`]) of many samples per program, the programs taking turns in runs of 100
//! samples. Before timing, each program is checked once to
//! take the path measured (FuseBox: the stage's `done` counter; Chaining-Box: the frame it
//! returns).

use super::harness::stats;
use super::Bench;
use crate::error::CliError;
use serde_json::json;
use stages::maps::{ClsKey, Counter, CounterStage, FlowKey, FwdAction, FwdVal, NshMeta, StageCfg};
use stages::{Instance, Stage, Standalone};
use std::path::Path;

const OUR_MAC: [u8; 6] = [0x02, 0xfb, 0, 0, 0, 0x01];
const PEER_MAC: [u8; 6] = [0x02, 0xfb, 0, 0, 0, 0x02];
const NEXT_MAC: [u8; 6] = [0x02, 0xfb, 0, 0, 0, 0x03];
const SPI: u32 = 0x42;
/// The path of the `cls+fwd` row's flow (its first hop redirects).
const ENTRY_SPI: u32 = 0x43;
const SI: u8 = 255;
const CTX: [u32; 4] = [1, 2, 3, 4];
/// The interface a test run's packet arrives on (the loopback).
const LO: u32 = 1;

/// One measured stage: its frame, FuseBox's program, Chaining-Box's program(s).
struct Case {
    name: &'static str,
    xdp: bool,
    frame: Vec<u8>,
    fusebox: Stage,
    /// Chaining-Box's programs, (object, program), run one after the other on each
    /// other's output (Enc+Fwd: its Enc then its Fwd).
    peer: Vec<(usize, &'static str)>,
    /// Whether Chaining-Box's programs are XDP ones (its Dec) rather than TC: the no-op of
    /// their own hook is what their time is net of.
    peer_xdp: bool,
}

/// The mean of a program's samples without the lowest and the highest tenth of them.
///
/// The kernel's clock steps in 10 ns on some of the machines here (an AMD EPYC guest: every
/// single run takes a multiple of 10 ns, give or take 1), as much as the whole of some stages;
/// a median of such samples moves in whole steps, and a ratio of two medians with it. Where a
/// run falls against the steps varies from sample to sample, so the mean of many resolves
/// below the step; the tenths left out at both ends keep what the median kept away (a sample
/// an interrupt or a migration lengthened).
fn central_mean(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let cut = s.len() / 10;
    let mid = &s[cut..s.len() - cut];
    if mid.is_empty() {
        return 0.0;
    }
    mid.iter().sum::<f64>() / mid.len() as f64
}

/// `stages`, measured on one core (the last): every test run's duration then comes from
/// the same CPU's caches (runs left to wander between the two cores of the machines here
/// gave ratios that agreed within a run and not between runs). A thread of its own carries
/// the pinning, which ends with it.
pub(super) fn stages(b: &mut Bench) -> Result<(), CliError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(&core) = core_affinity::get_core_ids()
                .as_deref()
                .and_then(<[_]>::last)
            {
                core_affinity::set_for_current(core);
            }
            measure(b)
        })
        .join()
        .unwrap_or_else(|_| {
            Err(CliError::Invalid(
                "--scenario stages: the measuring thread panicked".to_string(),
            ))
        })
    })
}

/// `stages` on the calling thread.
fn measure(b: &mut Bench) -> Result<(), CliError> {
    if let Some(why) = stages::unavailable() {
        return Err(CliError::Invalid(format!("--scenario stages: {why}")));
    }
    let inst = Instance::create(&format!("bench-{}", std::process::id()))?;
    let inner = wire::build::Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 40000, 80)
        .pad_to(60)
        .build();
    let flow = FlowKey {
        saddr: [10, 0, 0, 1].into(),
        daddr: [10, 0, 0, 2].into(),
        sport: 40000,
        dport: 80,
        proto: 6,
    };
    // A second flow that Cls finds only under the any-interface key (a miss on the exact
    // key first).
    let inner_any = wire::build::Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 40001, 80)
        .pad_to(60)
        .build();
    let flow_any = FlowKey {
        sport: 40001,
        ..flow
    };
    // A third flow, on a path of its own whose first hop redirects to an interface: what Cls+Fwd
    // (the program the agents attach at a chain's entry) does with a classified frame.
    let inner_entry = wire::build::Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 40002, 80)
        .pad_to(60)
        .build();
    let flow_entry = FlowKey {
        sport: 40002,
        ..flow
    };
    fill_fusebox(&inst, flow, flow_any, flow_entry)?;
    let nsh = wire::build::Nsh::md1(SPI, SI, CTX);
    let dec_frame = nsh.ethernet(OUR_MAC, PEER_MAC, &inner);
    let fwd_frame = nsh.ethernet([0; 6], [0; 6], &inner);
    let mut cases = vec![
        Case {
            name: "cls",
            xdp: false,
            frame: inner.clone(),
            fusebox: Stage::Cls,
            peer: vec![(1, "classify_tc")],
            peer_xdp: false,
        },
        Case {
            name: "cls-any",
            xdp: false,
            frame: inner_any.clone(),
            fusebox: Stage::Cls,
            peer: vec![(1, "classify_tc")],
            peer_xdp: false,
        },
        // Cls's XDP form on the same frames, against the same Chaining-Box classifier (it
        // has a TC one only); FuseBox's net of the no-op XDP program.
        Case {
            name: "cls-xdp",
            xdp: true,
            frame: inner.clone(),
            fusebox: Stage::ClsXdp,
            peer: vec![(1, "classify_tc")],
            peer_xdp: false,
        },
        Case {
            name: "cls-any-xdp",
            xdp: true,
            frame: inner_any,
            fusebox: Stage::ClsXdp,
            peer: vec![(1, "classify_tc")],
            peer_xdp: false,
        },
        // Cls+Fwd against the same Chaining-Box classifier, which also writes the next hop's
        // MACs from its entry and sends the frame: both are a chain's whole entry stage.
        Case {
            name: "cls+fwd",
            xdp: false,
            frame: inner_entry,
            fusebox: Stage::ClsFwd,
            peer: vec![(1, "classify_tc")],
            peer_xdp: false,
        },
        Case {
            name: "dec",
            xdp: true,
            frame: dec_frame,
            fusebox: Stage::Dec,
            peer: vec![(0, "decap_nsh")],
            peer_xdp: true,
        },
        Case {
            name: "enc",
            xdp: false,
            frame: inner.clone(),
            fusebox: Stage::Enc,
            peer: vec![(0, "encap_nsh")],
            peer_xdp: false,
        },
        Case {
            name: "fwd",
            xdp: false,
            frame: fwd_frame,
            fusebox: Stage::Fwd,
            peer: vec![(0, "sfc_forwarding")],
            peer_xdp: false,
        },
        Case {
            name: "enc+fwd",
            xdp: false,
            frame: inner.clone(),
            fusebox: Stage::EncFwd,
            peer: vec![(0, "encap_nsh"), (0, "sfc_forwarding")],
            peer_xdp: false,
        },
    ];
    let peers = match &b.chaining_box {
        Some(dir) => Some(load_peer(dir, &[flow, flow_any, flow_entry])?),
        None => None,
    };
    // Keep the stages that are built and take the measured path.
    let mut inst = inst;
    cases.retain(|c| {
        if c.fusebox.object_bytes().is_none() {
            b.report.lines.push(format!(
                "  stages {}: not built (bpf/{}.bpf.c missing)",
                c.name,
                c.fusebox.object()
            ));
            return false;
        }
        match check_fusebox(&mut inst, c) {
            Ok(()) => true,
            Err(why) => {
                b.report
                    .lines
                    .push(format!("  stages {}: skipped, {why}", c.name));
                false
            }
        }
    });
    let mut peer_ok = vec![false; cases.len()];
    if let Some(p) = &peers {
        for (k, c) in cases.iter().enumerate() {
            match check_peer(p, c, &inner) {
                Ok(()) => peer_ok[k] = true,
                Err(why) => b.report.lines.push(format!(
                    "  stages {}: Chaining-Box not measured, {why}",
                    c.name
                )),
            }
        }
    }
    let samples = if b.quick { 300 } else { 3000 };
    /// Samples a program takes in a row before the next one's turn.
    const TURN: usize = 100;
    let n = cases.len();
    // Chaining-Box's programs with the frame each runs on: a pair's second program on the
    // frame its first returned (computed once; every run of a program sees the same frame).
    let mut peer_runs: Vec<Vec<(usize, &'static str, Vec<u8>)>> = vec![Vec::new(); n];
    if let Some(p) = &peers {
        for (k, c) in cases.iter().enumerate() {
            if !peer_ok[k] {
                continue;
            }
            let mut frame = c.frame.clone();
            for &(o, prog) in &c.peer {
                let next = p[o].test_run(prog, &frame, 0)?.frame;
                peer_runs[k].push((o, prog, std::mem::replace(&mut frame, next)));
            }
        }
    }
    let (mut fb, mut cb) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    let (mut base_xdp, mut base_tc) = (Vec::new(), Vec::new());
    for _ in 0..b.reps {
        // The programs take turns in runs of TURN samples (both no-ops, then each case's
        // FuseBox program and Chaining-Box's): within a run a program's code and maps stay as
        // warm as a stage's on a stream of packets, and a change in the shared machine's state
        // during a repetition reaches every mean alike, so the ratios stay comparable.
        // (Turns of one sample measured every program cold: their code and maps evicted by
        // the others'.)
        let (mut bx, mut bt) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
        let mut ours: Vec<Vec<f64>> = vec![Vec::with_capacity(samples); n];
        let mut theirs: Vec<Vec<Vec<f64>>> = peer_runs
            .iter()
            .map(|r| vec![Vec::with_capacity(samples); r.len()])
            .collect();
        for turn in (0..samples).step_by(TURN) {
            let m = TURN.min(samples - turn);
            for _ in 0..m {
                bx.push(inst.test_run(Stage::NoopXdp, &inner, 0)?.duration_ns as f64);
            }
            for _ in 0..m {
                bt.push(inst.test_run(Stage::NoopTc, &inner, 0)?.duration_ns as f64);
            }
            for (k, c) in cases.iter().enumerate() {
                for _ in 0..m {
                    ours[k].push(inst.test_run(c.fusebox, &c.frame, 0)?.duration_ns as f64);
                }
                if let Some(p) = &peers {
                    for (j, (o, prog, frame)) in peer_runs[k].iter().enumerate() {
                        for _ in 0..m {
                            theirs[k][j].push(p[*o].test_run(prog, frame, 0)?.duration_ns as f64);
                        }
                    }
                }
            }
        }
        let (bx, bt) = (central_mean(&bx), central_mean(&bt));
        base_xdp.push(bx);
        base_tc.push(bt);
        for (k, c) in cases.iter().enumerate() {
            let base = if c.xdp { bx } else { bt };
            fb[k].push((central_mean(&ours[k]) - base).max(0.0));
            if !theirs[k].is_empty() {
                // The baseline of their hook, subtracted once per program of a pair.
                let base = if c.peer_xdp { bx } else { bt };
                let total: f64 = theirs[k]
                    .iter()
                    .map(|t| (central_mean(t) - base).max(0.0))
                    .sum();
                cb[k].push(total);
            }
        }
    }
    let (bxl, bxm, bxh) = stats(&base_xdp);
    let (btl, btm, bth) = stats(&base_tc);
    b.report.lines.push(format!(
        "stages: ns per packet through BPF_PROG_TEST_RUN ({samples} single runs per program and repetition, their mean without the highest and lowest tenth), net of the no-op (XDP {bxm:.1} ns ({bxl:.1}–{bxh:.1}), TC {btm:.1} ns ({btl:.1}–{bth:.1}))"
    ));
    b.report.records.push(json!({
        "scenario": "stages", "baseline": "noop",
        "xdp_ns": {"min": bxl, "median": bxm, "max": bxh},
        "tc_ns": {"min": btl, "median": btm, "max": bth},
        "samples": samples, "reps": b.reps,
    }));
    for (k, c) in cases.iter().enumerate() {
        let (lo, med, hi) = stats(&fb[k]);
        b.report.records.push(json!({
            "scenario": "stages", "stage": c.name, "impl": "fusebox",
            "ns_per_packet": {"min": lo, "median": med, "max": hi},
            "samples": samples, "reps": b.reps,
        }));
        let mut line = format!(
            "  stages {:<11} fusebox {med:>7.1} ns ({lo:.1}–{hi:.1})",
            c.name
        );
        if !cb[k].is_empty() {
            let (plo, pmed, phi) = stats(&cb[k]);
            // A repetition where Chaining-Box's stage took no longer than the no-op (the
            // clock's steps, a noisy machine) has no ratio: it is left out and said so.
            let ratios: Vec<f64> = fb[k]
                .iter()
                .zip(&cb[k])
                .filter(|(_, y)| **y > 0.0)
                .map(|(x, y)| x / y)
                .collect();
            let left_out = cb[k].len() - ratios.len();
            let (rlo, rmed, rhi) = stats(&ratios);
            b.report.records.push(json!({
                "scenario": "stages", "stage": c.name, "impl": "chaining-box",
                "ns_per_packet": {"min": plo, "median": pmed, "max": phi},
                "samples": samples, "reps": b.reps,
            }));
            b.report.records.push(json!({
                "scenario": "stages", "stage": c.name, "ratio": "fusebox / chaining-box",
                "median": rmed, "min": rlo, "max": rhi, "per_rep": ratios, "left_out": left_out,
            }));
            line.push_str(&format!(
                "   chaining-box {pmed:>7.1} ns ({plo:.1}–{phi:.1})   fusebox / chaining-box = {rmed:.3} (per-rep {rlo:.3}–{rhi:.3})"
            ));
            if left_out > 0 {
                line.push_str(&format!(
                    " ({left_out} repetitions without a ratio: Chaining-Box's stage net of the no-op took 0 ns)"
                ));
            }
        }
        b.report.lines.push(line);
    }
    inst.remove()?;
    Ok(())
}

/// FuseBox's entries: this interface's MAC for Dec, the classifier entries for Cls (`flow`
/// on the exact interface, `flow_any` on any interface), the proxy entry for Enc, next hops
/// (Ethernet, same interface) for (SPI, SI) and (SPI, SI − 1); `flow_entry` on the exact
/// interface for path ENTRY_SPI, whose first hop (Ethernet) redirects to the loopback.
fn fill_fusebox(
    inst: &Instance,
    flow: FlowKey,
    flow_any: FlowKey,
    flow_entry: FlowKey,
) -> Result<(), CliError> {
    inst.insert_cfg(
        LO,
        &StageCfg {
            mac: OUR_MAC,
            flags: 0,
            ifindex: LO,
        },
    )?;
    let meta = NshMeta::md1(SPI, SI, 63, CTX);
    inst.insert_cls(&ClsKey { ifindex: LO, flow }, &meta)?;
    inst.insert_cls(
        &ClsKey {
            ifindex: 0,
            flow: flow_any,
        },
        &meta,
    )?;
    inst.insert_proxy(&flow, &meta)?;
    for si in [SI, SI - 1] {
        let hop = FwdVal {
            action: FwdAction::Ethernet,
            flags: 0,
            dmac: NEXT_MAC,
            smac: OUR_MAC,
            udp_sport: 0,
            ifindex: 0,
            saddr: [0, 0, 0, 0].into(),
            daddr: [0, 0, 0, 0].into(),
            vni: 0,
        };
        inst.insert_fwd(SPI << 8 | u32::from(si), &hop)?;
    }
    inst.insert_cls(
        &ClsKey {
            ifindex: LO,
            flow: flow_entry,
        },
        &NshMeta::md1(ENTRY_SPI, SI, 63, CTX),
    )?;
    inst.insert_fwd(
        ENTRY_SPI << 8 | u32::from(SI),
        &FwdVal {
            action: FwdAction::Ethernet,
            flags: 0,
            dmac: NEXT_MAC,
            smac: OUR_MAC,
            udp_sport: 0,
            ifindex: LO,
            saddr: [0, 0, 0, 0].into(),
            daddr: [0, 0, 0, 0].into(),
            vni: 0,
        },
    )?;
    Ok(())
}

/// Runs FuseBox's stage once: it must count the packet as done (and Cls's XDP form give the
/// TC form's frame).
fn check_fusebox(inst: &mut Instance, c: &Case) -> Result<(), String> {
    if c.fusebox == Stage::ClsXdp {
        let tc = inst
            .test_run(Stage::Cls, &c.frame, 0)
            .map_err(|e| e.to_string())?;
        let xdp = inst
            .test_run(Stage::ClsXdp, &c.frame, 0)
            .map_err(|e| e.to_string())?;
        if tc.frame != xdp.frame {
            return Err("the XDP form's frame is not the TC form's".to_string());
        }
    }
    inst.clear_counters().map_err(|e| e.to_string())?;
    inst.test_run(c.fusebox, &c.frame, 0)
        .map_err(|e| e.to_string())?;
    let stage = match c.fusebox {
        Stage::Cls | Stage::ClsXdp => CounterStage::Cls,
        Stage::Dec => CounterStage::Dec,
        Stage::Enc => CounterStage::Enc,
        _ => CounterStage::Fwd,
    };
    let done = inst.counters(stage).map_err(|e| e.to_string())?;
    if done.get(Counter::Done) == 1 {
        Ok(())
    } else {
        let nonzero: Vec<String> = Counter::ALL
            .iter()
            .filter(|&&k| done.get(k) != 0)
            .map(|&k| format!("{}={}", k.name(), done.get(k)))
            .collect();
        Err(format!(
            "the bench frame did not take the done path ({} counters: {})",
            stage.name(),
            nonzero.join(" ")
        ))
    }
}

/// Chaining-Box's 5-tuple key (`struct ip_5tuple`, packed: addresses and ports as on the
/// wire, then the protocol).
pub(super) fn peer_tuple(flow: FlowKey) -> Vec<u8> {
    let mut k = Vec::with_capacity(13);
    k.extend_from_slice(&flow.saddr.octets());
    k.extend_from_slice(&flow.daddr.octets());
    k.extend_from_slice(&flow.sport.to_be_bytes());
    k.extend_from_slice(&flow.dport.to_be_bytes());
    k.push(flow.proto);
    k
}

/// Loads Chaining-Box's two objects from `dir` (built by scripts/build-chaining-box.sh) and
/// fills their maps with the entries FuseBox's stages got (its classifier has no interface
/// in the key: both flows are plain 5-tuple entries; the proxy entry is `flows[0]`'s).
fn load_peer(dir: &Path, flows: &[FlowKey]) -> Result<Vec<Standalone>, CliError> {
    let st = load_peer_object(dir, PEER_STAGES)?;
    let cl = load_peer_object(dir, PEER_CLASSIFIER)?;
    for o in [&st, &cl] {
        o.update("src_mac", &0u32.to_ne_bytes(), &OUR_MAC)?;
        o.update("src_mac", &1u32.to_ne_bytes(), &OUR_MAC)?;
    }
    let tuple = peer_tuple(flows[0]);
    st.update("nsh_data", &tuple, &peer_nsh(SPI, SI, CTX))?;
    for si in [SI, SI - 1] {
        st.update("fwd_table", &peer_sph(SPI, si), &peer_hop(false, &NEXT_MAC))?;
    }
    let mut cls = peer_sph(SPI, SI).to_vec();
    cls.extend_from_slice(&NEXT_MAC);
    for &f in flows {
        cl.update("cls_table", &peer_tuple(f), &cls)?;
    }
    Ok(vec![st, cl])
}

/// Chaining-Box's object with Dec, Enc and Fwd (`decap_nsh`, `encap_nsh`,
/// `sfc_forwarding`), sharing one proxy table (`nsh_data`) and one forwarding table.
pub(super) const PEER_STAGES: &str = "sfc_stages_kern.o";
/// Chaining-Box's classifier object (`classify_tc`, its `cls_table`).
pub(super) const PEER_CLASSIFIER: &str = "sfc_classifier_kern.o";

/// Loads Chaining-Box's object `file` (one of [`PEER_STAGES`], [`PEER_CLASSIFIER`]) from
/// `dir`, each load with maps of its own.
pub(super) fn load_peer_object(dir: &Path, file: &str) -> Result<Standalone, CliError> {
    let p = dir.join(file);
    let bytes = std::fs::read(&p).map_err(|e| CliError::io(&p, "cannot read: ", e))?;
    Ok(Standalone::load(file, &bytes)?)
}

/// Chaining-Box's key of the forwarding table and value of a classifier entry's path: the
/// service path header as on the wire.
pub(super) fn peer_sph(spi: u32, si: u8) -> [u8; 4] {
    ((spi << 8) | u32::from(si)).to_be_bytes()
}

/// Chaining-Box's forwarding entry (`struct fwd_entry`, packed): flags (bit 0: end of the
/// chain) and the next hop's MAC.
pub(super) fn peer_hop(end: bool, mac: &[u8; 6]) -> Vec<u8> {
    let mut hop = vec![u8::from(end)];
    hop.extend_from_slice(mac);
    hop
}

/// Chaining-Box's proxy entry: the whole MD type 1 NSH as on the wire.
pub(super) fn peer_nsh(spi: u32, si: u8, ctx: [u32; 4]) -> Vec<u8> {
    wire::build::Nsh::md1(spi, si, ctx).header(&[])
}

/// Runs Chaining-Box's program(s) once: Dec must return the inner frame, Cls and Enc add
/// the outer Ethernet and the 24-byte NSH (Cls, for the `cls+fwd` row, with the next hop's
/// MAC), Fwd writes the next hop's MAC.
fn check_peer(p: &[Standalone], c: &Case, inner: &[u8]) -> Result<(), String> {
    let mut frame = c.frame.clone();
    for &(o, prog) in &c.peer {
        frame = p[o]
            .test_run(prog, &frame, 0)
            .map_err(|e| e.to_string())?
            .frame;
    }
    let ok = match c.name {
        "dec" => frame == inner,
        "cls" | "cls-any" | "cls-xdp" | "cls-any-xdp" | "enc" => {
            frame.len() == inner.len() + 14 + 24
        }
        "cls+fwd" => frame.len() == inner.len() + 14 + 24 && frame.get(..6) == Some(&NEXT_MAC[..]),
        _ => frame.get(..6) == Some(&NEXT_MAC[..]),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "its output ({} bytes) is not the measured path's",
            frame.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::central_mean;

    #[test]
    fn central_mean_resolves_below_the_clock_step_and_drops_the_tails() {
        // A run of 103 ns on a clock stepping in 10: 70 samples read 100, 30 read 110; two
        // samples an interrupt lengthened, one cut short.
        let mut v = vec![100.0; 70];
        v.extend([110.0; 30]);
        v.extend([5000.0, 9000.0, 0.0]);
        let m = central_mean(&v);
        assert!((101.5..=104.0).contains(&m), "{m}");
        // The median sits on a step.
        let mut s = v.clone();
        s.sort_by(|a, b| a.total_cmp(b));
        assert_eq!(s[s.len() / 2], 100.0);
        assert_eq!(central_mean(&[]), 0.0);
        assert_eq!(central_mean(&[7.0]), 7.0);
    }
}
