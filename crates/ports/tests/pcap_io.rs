//! pcap / pcapng reading and writing.

use packet::{Precision, Timestamp};
use ports::pcap::{read_all, Corruption, PcapError, PcapReader, PcapWriter, Record, DLT_EN10MB};
use std::path::{Path, PathBuf};

fn frame(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

fn write_file(path: &Path, precision: Precision, packets: &[(Timestamp, Vec<u8>)]) {
    let mut w = PcapWriter::create(path, precision, DLT_EN10MB).unwrap();
    for (ts, data) in packets {
        w.write(*ts, data).unwrap();
    }
    assert_eq!(w.packets(), packets.len() as u64);
    w.finish().unwrap();
}

fn collect(path: &Path) -> (Vec<Record>, Option<PcapError>, u64) {
    let mut r = PcapReader::open(path).unwrap();
    let mut recs = Vec::new();
    let mut err = None;
    while let Some(x) = r.next_record() {
        match x {
            Ok(rec) => recs.push(rec),
            Err(e) => {
                assert!(err.is_none(), "two errors");
                err = Some(e);
            }
        }
    }
    assert!(r.next_record().is_none(), "reader resumed after the end");
    (recs, err, r.records_read())
}

fn sample() -> Vec<(Timestamp, Vec<u8>)> {
    vec![
        (
            Timestamp::from_parts(1_700_000_000, 123_456_789),
            frame(60, 1),
        ),
        (
            Timestamp::from_parts(1_700_000_001, 999_999_999),
            frame(1514, 2),
        ),
        (Timestamp::from_parts(1_700_000_002, 1), frame(42, 3)),
    ]
}

#[test]
fn round_trip_micro() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("micro.pcap");
    write_file(&p, Precision::Micro, &sample());
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(&bytes[..4], &0xa1b2_c3d4u32.to_le_bytes());
    assert_eq!(bytes.len(), 24 + 3 * 16 + 60 + 1514 + 42);
    let (recs, err, n) = collect(&p);
    assert!(err.is_none());
    assert_eq!(n, 3);
    let want_ts = [
        Timestamp::from_parts(1_700_000_000, 123_456_000),
        Timestamp::from_parts(1_700_000_001, 999_999_000),
        Timestamp::from_parts(1_700_000_002, 0),
    ];
    for ((rec, (_, data)), ts) in recs.iter().zip(sample()).zip(want_ts) {
        assert_eq!(rec.timestamp, ts);
        assert_eq!(rec.precision, Precision::Micro);
        assert_eq!(rec.data, data);
        assert_eq!(rec.orig_len as usize, data.len());
    }
    let r = PcapReader::open(&p).unwrap();
    assert_eq!(
        (r.linktype(), r.precision()),
        (DLT_EN10MB, Precision::Micro)
    );
}

#[test]
fn round_trip_nano() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nano.pcap");
    write_file(&p, Precision::Nano, &sample());
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(&bytes[..4], &0xa1b2_3c4du32.to_le_bytes());
    let (recs, err, _) = collect(&p);
    assert!(err.is_none());
    let got: Vec<(Timestamp, Vec<u8>)> =
        recs.iter().map(|r| (r.timestamp, r.data.clone())).collect();
    assert_eq!(got, sample());
    assert!(recs.iter().all(|r| r.precision == Precision::Nano));
}

#[test]
fn orig_len_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("snap.pcap");
    let mut w = PcapWriter::create(&p, Precision::Micro, 101).unwrap();
    w.write_with_orig_len(Timestamp(5_000), &frame(68, 9), 1500)
        .unwrap();
    w.finish().unwrap();
    let (recs, err) = read_all(&p).unwrap();
    assert!(err.is_none());
    assert_eq!(recs.len(), 1);
    assert_eq!((recs[0].orig_len, recs[0].data.len()), (1500, 68));
    assert_eq!(PcapReader::open(&p).unwrap().linktype(), 101);
}

#[test]
fn record_larger_than_the_read_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.pcap");
    let pkts = vec![
        (Timestamp(1_000), frame(200_000, 4)),
        (Timestamp(2_000), frame(100, 5)),
        (Timestamp(3_000), frame(150_000, 6)),
    ];
    write_file(&p, Precision::Nano, &pkts);
    let (recs, err, _) = collect(&p);
    assert!(err.is_none(), "{err:?}");
    let got: Vec<(Timestamp, Vec<u8>)> = recs.into_iter().map(|r| (r.timestamp, r.data)).collect();
    assert_eq!(got, pkts);
}

/// Builds pcapng blocks in either byte order.
struct PcapngWriter {
    be: bool,
    out: Vec<u8>,
}

impl PcapngWriter {
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn block(&mut self, kind: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let total = (body.len() + 12) as u32;
        let (k, t) = (self.u32(kind), self.u32(total));
        self.out.extend_from_slice(&k);
        self.out.extend_from_slice(&t);
        self.out.extend_from_slice(&body);
        self.out.extend_from_slice(&t);
    }
    fn shb(&mut self) {
        let mut b = Vec::new();
        b.extend_from_slice(&self.u32(0x1a2b_3c4d));
        b.extend_from_slice(&self.u16(1));
        b.extend_from_slice(&self.u16(0));
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // section length: unknown
        self.block(0x0a0d_0d0a, &b);
    }
    /// Interface with an optional if_tsresol and if_tsoffset.
    fn idb(&mut self, linktype: u16, snaplen: u32, tsresol: Option<u8>, tsoffset: Option<i64>) {
        let mut b = Vec::new();
        b.extend_from_slice(&self.u16(linktype));
        b.extend_from_slice(&self.u16(0));
        b.extend_from_slice(&self.u32(snaplen));
        if let Some(r) = tsresol {
            b.extend_from_slice(&self.u16(9));
            b.extend_from_slice(&self.u16(1));
            b.extend_from_slice(&[r, 0, 0, 0]);
        }
        if let Some(o) = tsoffset {
            b.extend_from_slice(&self.u16(14));
            b.extend_from_slice(&self.u16(8));
            let bytes = if self.be {
                o.to_be_bytes()
            } else {
                o.to_le_bytes()
            };
            b.extend_from_slice(&bytes);
        }
        if tsresol.is_some() || tsoffset.is_some() {
            b.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        }
        self.block(1, &b);
    }
    fn epb(&mut self, iface: u32, units: u64, data: &[u8], orig_len: u32) {
        let mut b = Vec::new();
        b.extend_from_slice(&self.u32(iface));
        b.extend_from_slice(&self.u32((units >> 32) as u32));
        b.extend_from_slice(&self.u32(units as u32));
        b.extend_from_slice(&self.u32(data.len() as u32));
        b.extend_from_slice(&self.u32(orig_len));
        b.extend_from_slice(data);
        self.block(6, &b);
    }
    fn spb(&mut self, data: &[u8]) {
        let mut b = Vec::new();
        b.extend_from_slice(&self.u32(data.len() as u32));
        b.extend_from_slice(data);
        self.block(3, &b);
    }
}

fn sample_pcapng(be: bool) -> Vec<u8> {
    let mut ng = PcapngWriter {
        be,
        out: Vec::new(),
    };
    ng.shb();
    ng.idb(1, 0, Some(9), None); // Ethernet, nanoseconds
    ng.idb(101, 0, None, None); // raw IP, default microseconds
    ng.epb(0, 1_700_000_000_123_456_789, &frame(61, 1), 61);
    ng.block(4, &[0, 0, 0, 0]); // name resolution block: skipped
    ng.epb(1, 1_700_000_000_654_321, &frame(40, 2), 40);
    ng.block(0x0000_0bad, &[1, 2, 3, 4, 5, 6, 7, 8]); // custom block: skipped
    ng.spb(&frame(63, 3));
    ng.epb(0, 5, &frame(30, 4), 1500); // snapped
                                       // A second section: interface ids start again.
    ng.shb();
    ng.idb(1, 0, Some(3), Some(1_000)); // milliseconds, offset 1000 s
    ng.epb(0, 2_500, &frame(20, 5), 20);
    ng.out
}

fn check_sample_pcapng(path: &Path) {
    let mut r = PcapReader::open(path).unwrap();
    assert_eq!(r.linktype(), 1, "first interface known before any packet");
    assert_eq!(r.precision(), Precision::Nano);
    let mut got = Vec::new();
    while let Some(x) = r.next_record() {
        let rec = x.unwrap();
        assert_eq!(r.precision(), rec.precision);
        got.push((rec, r.linktype()));
    }
    assert_eq!(r.records_read(), 5);
    let want = [
        (
            Timestamp(1_700_000_000_123_456_789),
            Precision::Nano,
            frame(61, 1),
            61,
            1,
        ),
        (
            Timestamp(1_700_000_000_654_321_000),
            Precision::Micro,
            frame(40, 2),
            40,
            101,
        ),
        (Timestamp(0), Precision::Nano, frame(63, 3), 63, 1),
        (Timestamp(5), Precision::Nano, frame(30, 4), 1500, 1),
        (
            Timestamp(1_002_500_000_000),
            Precision::Micro,
            frame(20, 5),
            20,
            1,
        ),
    ];
    assert_eq!(got.len(), want.len());
    for ((rec, lt), (ts, prec, data, orig, wlt)) in got.into_iter().zip(want) {
        assert_eq!(rec.timestamp, ts);
        assert_eq!(rec.precision, prec);
        assert_eq!(rec.data, data);
        assert_eq!(rec.orig_len, orig);
        assert_eq!(lt, wlt);
    }
}

#[test]
fn pcapng_interfaces_tsresol_and_blocks() {
    let dir = tempfile::tempdir().unwrap();
    for be in [false, true] {
        let p = dir.path().join(format!("sample-{be}.pcapng"));
        std::fs::write(&p, sample_pcapng(be)).unwrap();
        check_sample_pcapng(&p);
    }
}

#[test]
fn pcapng_packet_on_undescribed_interface_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("noif.pcapng");
    let mut ng = PcapngWriter {
        be: false,
        out: Vec::new(),
    };
    ng.shb();
    ng.idb(1, 0, None, None);
    ng.epb(0, 1, &frame(20, 1), 20);
    ng.epb(3, 2, &frame(20, 2), 20);
    std::fs::write(&p, &ng.out).unwrap();
    let (recs, err, _) = collect(&p);
    assert_eq!(recs.len(), 1);
    match err {
        Some(PcapError::Corrupt {
            records_read: 1,
            what:
                Corruption::UnknownInterface {
                    interface: 3,
                    described: 1,
                },
            ..
        }) => {}
        other => panic!("expected corrupt, got {other:?}"),
    }
}

#[test]
fn truncated_pcap_yields_complete_records_then_error() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.pcap");
    let pkts: Vec<_> = (0..5)
        .map(|i| (Timestamp(i * 1000), frame(100, i as u8)))
        .collect();
    write_file(&full, Precision::Micro, &pkts);
    let bytes = std::fs::read(&full).unwrap();
    let rec_len = 16 + 100;
    // Cut inside the data of the 4th record, then inside its record header.
    for cut in [24 + 3 * rec_len + 50, 24 + 3 * rec_len + 7] {
        let p = dir.path().join(format!("cut{cut}.pcap"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let (recs, err, n) = collect(&p);
        assert_eq!(recs.len(), 3);
        assert_eq!(n, 3);
        let err = err.expect("an error after the complete records");
        match &err {
            PcapError::Truncated {
                records_read,
                offset,
                path,
            } => {
                assert_eq!((*records_read, *offset), (3, (24 + 3 * rec_len) as u64));
                assert_eq!(path, &p);
            }
            other => panic!("expected Truncated, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.starts_with(&p.display().to_string()), "{msg}");
        assert!(
            msg.contains(&format!("truncated record at byte {}", 24 + 3 * rec_len)),
            "{msg}"
        );
        assert!(msg.contains("after 3 complete packets"), "{msg}");
        // read_all gives the same.
        let (all, e) = read_all(&p).unwrap();
        assert_eq!(all, recs);
        assert!(matches!(e, Some(PcapError::Truncated { .. })));
    }
}

#[test]
fn truncated_pcapng_yields_complete_records_then_error() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = sample_pcapng(false);
    let p = dir.path().join("cut.pcapng");
    std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
    let (recs, err, _) = collect(&p);
    assert_eq!(recs.len(), 4);
    assert!(
        matches!(
            err,
            Some(PcapError::Truncated {
                records_read: 4,
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn bad_magic() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("text.pcap");
    std::fs::write(&p, b"hello, this is not a capture file at all").unwrap();
    let err = PcapReader::open(&p).unwrap_err();
    assert!(
        matches!(
            err,
            PcapError::BadMagic {
                found: [b'h', b'e', b'l', b'l'],
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("text.pcap") && msg.contains("not a pcap"),
        "{msg}"
    );
    // Shorter than a magic number.
    std::fs::write(&p, b"ab").unwrap();
    assert!(matches!(
        PcapReader::open(&p),
        Err(PcapError::BadMagic {
            found: [b'a', b'b', 0, 0],
            ..
        })
    ));
}

#[test]
fn empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty.pcap");
    std::fs::write(&p, b"").unwrap();
    let err = PcapReader::open(&p).unwrap_err();
    assert!(matches!(err, PcapError::Empty { .. }), "{err:?}");
    assert!(err.to_string().contains("empty.pcap"));
    assert!(read_all(&p).is_err());
}

#[test]
fn header_only_and_partial_header() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("header.pcap");
    write_file(&p, Precision::Nano, &[]);
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 24);
    let (recs, err, n) = collect(&p);
    assert!(recs.is_empty() && err.is_none() && n == 0);
    assert_eq!(PcapReader::open(&p).unwrap().precision(), Precision::Nano);

    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..10]).unwrap();
    let err = PcapReader::open(&p).unwrap_err();
    assert!(
        matches!(
            err,
            PcapError::Truncated {
                records_read: 0,
                offset: 0,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("truncated file header"));

    // pcapng with only a section header: no packets, no error, no interface.
    let q = dir.path().join("shb.pcapng");
    let mut ng = PcapngWriter {
        be: false,
        out: Vec::new(),
    };
    ng.shb();
    std::fs::write(&q, &ng.out).unwrap();
    let (recs, err, _) = collect(&q);
    assert!(recs.is_empty() && err.is_none());
}

#[test]
fn corrupt_capture_length() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("corrupt.pcap");
    let pkts: Vec<_> = (0..3)
        .map(|i| (Timestamp(i * 1000), frame(80, i as u8)))
        .collect();
    write_file(&p, Precision::Micro, &pkts);
    let mut bytes = std::fs::read(&p).unwrap();
    let second = 24 + 16 + 80;
    bytes[second + 8..second + 12].copy_from_slice(&0xfff0_0000u32.to_le_bytes());
    std::fs::write(&p, &bytes).unwrap();
    let (recs, err, _) = collect(&p);
    assert_eq!(recs.len(), 1);
    match err {
        Some(
            e @ PcapError::Corrupt {
                records_read: 1, ..
            },
        ) => {
            let msg = e.to_string();
            assert!(
                msg.contains("corrupt.pcap") && msg.contains(&format!("byte {second}")),
                "{msg}"
            );
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn big_endian_classic_pcap() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("be.pcap");
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_be_bytes());
    b.extend_from_slice(&2u16.to_be_bytes());
    b.extend_from_slice(&4u16.to_be_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    for (sec, usec, n) in [(10u32, 5u32, 60u32), (11, 999_999, 42)] {
        b.extend_from_slice(&sec.to_be_bytes());
        b.extend_from_slice(&usec.to_be_bytes());
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(&frame(n as usize, 0));
    }
    std::fs::write(&p, &b).unwrap();
    let (recs, err, _) = collect(&p);
    assert!(err.is_none());
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].timestamp, Timestamp::from_parts(10, 5_000));
    assert_eq!(recs[1].timestamp, Timestamp::from_parts(11, 999_999_000));
    assert_eq!(recs[1].data, frame(42, 0));
}

#[test]
fn missing_file_and_unwritable_path() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nope.pcap");
    let err = PcapReader::open(&p).unwrap_err();
    assert!(matches!(err, PcapError::Io { .. }));
    assert!(err.to_string().contains("nope.pcap"));
    let bad: PathBuf = dir.path().join("no/such/dir/out.pcap");
    let err = PcapWriter::create(&bad, Precision::Micro, 1).unwrap_err();
    assert!(err.to_string().contains("out.pcap"));
}

/// Mutated and truncated files: no panic, records then at most one error, then the end.
#[test]
fn damaged_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.pcap");
    let pkts: Vec<_> = (0..6)
        .map(|i| (Timestamp(i * 1000), frame(50 + i as usize * 13, i as u8)))
        .collect();
    write_file(&full, Precision::Nano, &pkts);
    let sources = [
        std::fs::read(&full).unwrap(),
        sample_pcapng(false),
        sample_pcapng(true),
    ];
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let p = dir.path().join("damaged");
    let mut errors = 0;
    for src in &sources {
        for _ in 0..400 {
            let mut b = src.clone();
            let flips = 1 + rand() % 4;
            for _ in 0..flips {
                let i = (rand() % b.len() as u64) as usize;
                b[i] = rand() as u8;
            }
            if rand() % 3 == 0 {
                let cut = (rand() % b.len() as u64) as usize;
                b.truncate(cut);
            }
            std::fs::write(&p, &b).unwrap();
            let Ok(mut r) = PcapReader::open(&p) else {
                errors += 1;
                continue;
            };
            let mut n = 0;
            while let Some(x) = r.next_record() {
                match x {
                    Ok(_) => n += 1,
                    Err(e) => {
                        errors += 1;
                        assert!(e.to_string().contains("damaged"));
                    }
                }
                assert!(n < 100, "runaway reader");
            }
            assert_eq!(r.records_read(), n);
        }
    }
    assert!(errors > 0, "no damaged file was detected");
}

#[test]
fn unsupported_versions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.pcap");
    write_file(&p, Precision::Micro, &[(Timestamp(1), frame(20, 1))]);
    let good = std::fs::read(&p).unwrap();
    for (major, minor) in [(1u16, 0u16), (2, 5), (3, 4)] {
        let mut b = good.clone();
        b[4..6].copy_from_slice(&major.to_le_bytes());
        b[6..8].copy_from_slice(&minor.to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        let err = PcapReader::open(&p).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("unsupported pcap version {major}.{minor}")),
            "{err}"
        );
    }
    let q = dir.path().join("v.pcapng");
    let mut ng = sample_pcapng(false);
    ng[12..14].copy_from_slice(&1u16.to_le_bytes());
    ng[14..16].copy_from_slice(&1u16.to_le_bytes());
    std::fs::write(&q, &ng).unwrap();
    let err = PcapReader::open(&q).unwrap_err();
    assert!(
        err.to_string().contains("unsupported pcapng version 1.1"),
        "{err}"
    );
}
