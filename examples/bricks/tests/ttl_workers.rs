//! Runs the standalone program `ttl_workers` (NetBricks' Listing 2) on a capture it did not
//! write and checks the capture it writes: every packet once, TTL decremented, expired ones
//! dropped, each flow in order.

use packet::{Precision, Timestamp};
use ports::pcap::{read_all, PcapWriter, DLT_EN10MB};
use std::collections::BTreeMap;
use std::process::Command;

/// The input: 24 UDP flows of 15 packets, interleaved; packet `i` carries `i`, and every
/// seventh has TTL 1 (expires).
fn input() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0u16..15 {
        for f in 0u16..24 {
            let ttl = if (i + f) % 7 == 0 { 1 } else { 30 + (f as u8) };
            out.push(
                wire::build::Frame::udp([192, 168, f as u8, 1], [10, 1, 1, 1], 4000 + 37 * f, 53)
                    .ttl(ttl)
                    .payload(&i.to_be_bytes())
                    .build(),
            );
        }
    }
    out
}

fn decremented(frame: &[u8]) -> Option<Vec<u8>> {
    let mut f = frame.to_vec();
    let mut ip = wire::ipv4::Packet::new_unchecked(&mut f[14..]);
    let ttl = ip.ttl();
    if ttl <= 1 {
        return None;
    }
    ip.set_ttl(ttl - 1);
    ip.fill_checksum();
    Some(f)
}

#[test]
fn ttl_workers_writes_every_packet_once_in_flow_order() {
    let dir = tempfile::tempdir().unwrap();
    let (inp, out) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    let frames = input();
    let mut w = PcapWriter::create(&inp, Precision::Nano, DLT_EN10MB).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(Timestamp(1_000_000 + i as u64 * 1000), f).unwrap();
    }
    w.finish().unwrap();
    for workers in ["2", "1", "3"] {
        let run = Command::new(env!("CARGO_BIN_EXE_ttl_workers"))
            .args([inp.as_os_str(), out.as_os_str(), workers.as_ref()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let (records, err) = read_all(&out).unwrap();
        assert!(err.is_none());
        let mut want: Vec<(u64, Vec<u8>)> = frames
            .iter()
            .enumerate()
            .filter_map(|(i, f)| decremented(f).map(|d| (1_000_000 + i as u64 * 1000, d)))
            .collect();
        let expired = frames.len() - want.len();
        assert!(expired > 0 && !want.is_empty());
        assert!(
            stdout.contains(&format!(
                "in {} out {} dropped {{\"ttl-expired\": {expired}}}",
                frames.len(),
                want.len()
            )),
            "{stdout}"
        );
        // Each flow's packets in order (sequence in the payload, timestamps kept).
        let mut last: BTreeMap<u16, u16> = BTreeMap::new();
        for r in &records {
            let (port, seq) = (
                u16::from_be_bytes([r.data[34], r.data[35]]),
                u16::from_be_bytes([r.data[42], r.data[43]]),
            );
            if let Some(prev) = last.insert(port, seq) {
                assert!(seq > prev, "flow {port}: {seq} after {prev}");
            }
        }
        let mut got: Vec<(u64, Vec<u8>)> = records
            .into_iter()
            .map(|r| (r.timestamp.0, r.data))
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
        // Two or more workers: every one of them processed flows.
        let n: usize = workers.parse().unwrap();
        for w in 0..n {
            assert!(stdout.contains(&format!("worker {w}: read")), "{stdout}");
        }
        if n > 1 {
            assert!(!stdout.contains("processed 0,"), "{stdout}");
        }
    }
}
