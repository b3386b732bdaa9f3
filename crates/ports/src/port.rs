//! The one port abstraction: where frames enter ([`RxPort`]) and leave ([`TxPort`]) a run.
//!
//! Offline ports live here: [`PcapRx`] reads a capture file, [`MemoryRx`] replays records
//! held in memory and [`PcapTx`] writes a capture file. Live ports (AF_PACKET, AF_XDP) live
//! in the `nic` crate, the only one allowed `unsafe`, and implement the same traits.
//!
//! A receive call hands frames to a callback instead of returning buffers, so a live port can
//! lend its ring memory for the duration of the call and return the slots to the kernel
//! afterwards; offline ports lend their records the same way.

use std::path::Path;
use std::time::Duration;

use packet::{Precision, Timestamp};

use crate::pcap::{PcapError, PcapReader, PcapWriter, Record};

/// What one receive call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recv {
    /// This many frames were handed over.
    Frames(usize),
    /// Nothing now (live ports); try again.
    Idle,
    /// The port has no more frames (end of file).
    End,
}

/// A port frames are received from.
pub trait RxPort: Send {
    /// The port's name (a device or a file), as messages show it.
    fn name(&self) -> &str;
    /// Hands up to `max` received frames to `f` (timestamp, resolution, bytes) in arrival
    /// order. Waits at most `timeout` for the first frame (live ports), then returns what it
    /// has.
    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        f: &mut dyn FnMut(Timestamp, Precision, &[u8]),
    ) -> Result<Recv, PortError>;
    /// What the port has counted so far.
    fn counters(&self) -> PortCounters;
}

/// Several receive ports read in turn, a round at a time: the one polling rule of the live
/// loops (one worker's `Executor::run_ports`, several workers' reader). A port waits for its
/// first frame only while the last round and this one so far found nothing, so frames
/// received on one port never wait behind another's timeout; with several ports each waits
/// at most 1 ms, so an idle run still sleeps but a frame waits no longer.
#[derive(Debug)]
pub struct Rounds {
    ended: Vec<bool>,
    idle_rounds: u32,
    wait: Duration,
}

impl Rounds {
    /// Rounds over `ports` ports, waiting at most `wait` on a lone idle port.
    pub fn new(ports: usize, wait: Duration) -> Rounds {
        Rounds {
            ended: vec![false; ports],
            idle_rounds: 0,
            wait,
        }
    }

    /// Whether every port has ended (only files end).
    pub fn all_ended(&self) -> bool {
        self.ended.iter().all(|e| *e)
    }

    /// One round: every port that has not ended hands up to `max` frames to `f` (its tag,
    /// timestamp, resolution, bytes), in port order. Returns the frames received; the
    /// first port error ends the round (the frames handed over before it stay handed over).
    pub fn round<T: Copy>(
        &mut self,
        ports: &mut [(T, Box<dyn RxPort>)],
        max: usize,
        mut f: impl FnMut(T, Timestamp, Precision, &[u8]),
    ) -> Result<usize, PortError> {
        let open = self.ended.iter().filter(|e| !**e).count();
        let each = if open > 1 {
            self.wait.min(Duration::from_millis(1))
        } else {
            self.wait
        };
        let mut got = 0;
        for (i, (tag, port)) in ports.iter_mut().enumerate() {
            if self.ended.get(i).copied().unwrap_or(true) {
                continue;
            }
            let w = if self.idle_rounds > 0 && got == 0 {
                each
            } else {
                Duration::ZERO
            };
            let tag = *tag;
            match port.recv(max, w, &mut |ts, pr, data| f(tag, ts, pr, data))? {
                Recv::Frames(n) => got += n,
                Recv::Idle => {}
                Recv::End => self.ended[i] = true,
            }
        }
        self.idle_rounds = if got == 0 {
            self.idle_rounds.saturating_add(1)
        } else {
            0
        };
        Ok(got)
    }
}

/// A port frames are sent to.
pub trait TxPort: Send {
    /// The port's name (a device or a file), as messages show it.
    fn name(&self) -> &str;
    /// Queues one frame for sending. `Ok(false)`: the transmit ring was full and the frame
    /// was dropped and counted in [`PortCounters::tx_full`] (never silent).
    fn send(&mut self, ts: Timestamp, frame: &[u8]) -> Result<bool, PortError>;
    /// Sends everything queued (kicks the kernel) and waits for completions as needed.
    fn flush(&mut self) -> Result<(), PortError>;
    /// What the port has counted so far.
    fn counters(&self) -> PortCounters;
}

/// What a port counted. Receive counters stay zero on a transmit-only port and vice versa.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames handed over by [`RxPort::recv`].
    pub rx_packets: u64,
    /// Bytes of the frames handed over.
    pub rx_bytes: u64,
    /// Frames accepted by [`TxPort::send`].
    pub tx_packets: u64,
    /// Bytes of the frames accepted.
    pub tx_bytes: u64,
    /// Frames dropped because the transmit ring was full.
    pub tx_full: u64,
    /// Frames the kernel dropped before we read them (ring overruns), when it tells us.
    pub rx_kernel_drops: u64,
}

impl PortCounters {
    /// Adds every counter of `other` to this one (sums over ports or workers).
    pub fn add(&mut self, other: &PortCounters) {
        self.rx_packets += other.rx_packets;
        self.rx_bytes += other.rx_bytes;
        self.tx_packets += other.tx_packets;
        self.tx_bytes += other.tx_bytes;
        self.tx_full += other.tx_full;
        self.rx_kernel_drops += other.rx_kernel_drops;
    }
}

/// How FuseBox attaches to a Linux network device (the chain file's `via`, `--iface`'s
/// `,KIND`, and what `nic::open` was asked for and used).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Attach {
    /// AF_XDP where the device and privileges allow it, else AF_PACKET (and the run says so).
    #[default]
    Auto,
    /// An AF_XDP socket on the device's queue (zero-copy where the driver allows, else copy).
    AfXdp,
    /// An AF_PACKET socket with a memory-mapped receive ring.
    AfPacket,
    /// AF_PACKET whose frames are sent through the device's queueing discipline, so TC
    /// egress programs see them (an NSH-aware FuseBox SF with the Fwd stage on its
    /// interface's TC egress); `afpacket` and `afxdp` hand frames to the driver directly.
    AfPacketTc,
}

impl std::fmt::Display for Attach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Attach::Auto => "auto",
            Attach::AfXdp => "afxdp",
            Attach::AfPacket => "afpacket",
            Attach::AfPacketTc => "afpacket-tc",
        })
    }
}

/// A way to attach that is not one of `afxdp`, `afpacket`, `auto`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown way to attach `{0}`: expected afxdp, afpacket, afpacket-tc or auto")]
pub struct UnknownAttach(pub String);

impl std::str::FromStr for Attach {
    type Err = UnknownAttach;
    fn from_str(s: &str) -> Result<Attach, UnknownAttach> {
        match s {
            "auto" | "" => Ok(Attach::Auto),
            "afxdp" => Ok(Attach::AfXdp),
            "afpacket" => Ok(Attach::AfPacket),
            "afpacket-tc" => Ok(Attach::AfPacketTc),
            o => Err(UnknownAttach(o.to_string())),
        }
    }
}

/// The capabilities a port may need; [`PortError::Privilege`] names the one missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Raw sockets (AF_PACKET, AF_XDP).
    NetRaw,
    /// Attaching XDP programs and changing devices.
    NetAdmin,
    /// Loading BPF programs and creating maps (`CAP_BPF`, or `CAP_SYS_ADMIN` on older
    /// kernels).
    Bpf,
    /// Joining another network namespace and other administration.
    SysAdmin,
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Capability::NetRaw => "CAP_NET_RAW",
            Capability::NetAdmin => "CAP_NET_ADMIN",
            Capability::Bpf => "CAP_BPF (or CAP_SYS_ADMIN)",
            Capability::SysAdmin => "CAP_SYS_ADMIN",
        })
    }
}

/// Why a port could not be opened or stopped working. Every message names the device or
/// file and what is missing.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The device does not exist.
    #[error("{dev}: no such device")]
    NoDevice {
        /// The device name asked for.
        dev: String,
    },
    /// The process lacks a capability the port needs.
    #[error("{dev}: {what} needs {cap} (run as root or grant it)")]
    Privilege {
        /// The device.
        dev: String,
        /// What was being done ("opening an AF_PACKET socket").
        what: &'static str,
        /// The capability missing.
        cap: Capability,
    },
    /// The device is down when a port is opened on it.
    #[error("{dev}: is down (bring it up first: ip link set {dev} up)")]
    NotUp {
        /// The device.
        dev: String,
    },
    /// The device was taken down while in use.
    #[error("{dev}: went down")]
    Down {
        /// The device.
        dev: String,
    },
    /// The device was deleted while in use.
    #[error("{dev}: disappeared")]
    Gone {
        /// The device.
        dev: String,
    },
    /// The device (or kernel) cannot run the XDP program or AF_XDP socket asked for.
    #[error("{dev}: no XDP support ({reason})")]
    NoXdp {
        /// The device.
        dev: String,
        /// What failed.
        reason: String,
    },
    /// The device cannot be used this way (wrong link type, frame too large, ...).
    #[error("{dev}: {what}")]
    Unsupported {
        /// The device.
        dev: String,
        /// What is not supported.
        what: String,
    },
    /// A system call failed for another reason.
    #[error("{dev}: {what}: {source}")]
    Io {
        /// The device.
        dev: String,
        /// What was being done.
        what: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing a capture file failed.
    #[error(transparent)]
    Pcap(#[from] PcapError),
}

/// Receives the records of a capture file, streaming (through [`PcapReader`]).
///
/// A read error after some frames (a truncated or corrupt file) is returned by the call
/// after the one that handed those frames over, so no frame before the fault is lost.
#[derive(Debug)]
pub struct PcapRx {
    name: String,
    reader: PcapReader,
    pending: Option<PcapError>,
    done: bool,
    counters: PortCounters,
}

impl PcapRx {
    /// Opens `path` as an Ethernet capture (pcap or pcapng).
    pub fn open(path: &Path) -> Result<PcapRx, PortError> {
        Ok(PcapRx::new(PcapReader::open_ethernet(path)?))
    }

    /// Receives from an already open reader.
    pub fn new(reader: PcapReader) -> PcapRx {
        PcapRx {
            name: reader.path().display().to_string(),
            reader,
            pending: None,
            done: false,
            counters: PortCounters::default(),
        }
    }
}

impl RxPort for PcapRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(
        &mut self,
        max: usize,
        _timeout: Duration,
        f: &mut dyn FnMut(Timestamp, Precision, &[u8]),
    ) -> Result<Recv, PortError> {
        if let Some(e) = self.pending.take() {
            self.done = true;
            return Err(e.into());
        }
        if self.done {
            return Ok(Recv::End);
        }
        let mut n = 0;
        while n < max {
            match self.reader.next_record() {
                None => {
                    self.done = true;
                    break;
                }
                Some(Err(e)) => {
                    if n == 0 {
                        self.done = true;
                        return Err(e.into());
                    }
                    self.pending = Some(e);
                    break;
                }
                Some(Ok(r)) => {
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += r.data.len() as u64;
                    f(r.timestamp, r.precision, &r.data);
                    n += 1;
                }
            }
        }
        Ok(if n > 0 { Recv::Frames(n) } else { Recv::End })
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// Replays records held in memory, in order.
#[derive(Debug)]
pub struct MemoryRx {
    name: String,
    records: std::vec::IntoIter<Record>,
    counters: PortCounters,
}

impl MemoryRx {
    /// Replays `records` under the name `name`.
    pub fn new(name: impl Into<String>, records: Vec<Record>) -> MemoryRx {
        MemoryRx {
            name: name.into(),
            records: records.into_iter(),
            counters: PortCounters::default(),
        }
    }
}

impl RxPort for MemoryRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(
        &mut self,
        max: usize,
        _timeout: Duration,
        f: &mut dyn FnMut(Timestamp, Precision, &[u8]),
    ) -> Result<Recv, PortError> {
        let mut n = 0;
        while n < max {
            let Some(r) = self.records.next() else { break };
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += r.data.len() as u64;
            f(r.timestamp, r.precision, &r.data);
            n += 1;
        }
        Ok(if n > 0 { Recv::Frames(n) } else { Recv::End })
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// Writes sent frames to a capture file (through [`PcapWriter`]); never full.
#[derive(Debug)]
pub struct PcapTx {
    name: String,
    writer: Option<PcapWriter>,
    counters: PortCounters,
}

impl PcapTx {
    /// Creates (or truncates) `path` as an Ethernet capture with timestamps of `precision`.
    pub fn create(path: &Path, precision: Precision) -> Result<PcapTx, PortError> {
        Ok(PcapTx::new(PcapWriter::create(
            path,
            precision,
            crate::pcap::DLT_EN10MB,
        )?))
    }

    /// Sends to an already created writer.
    pub fn new(writer: PcapWriter) -> PcapTx {
        PcapTx {
            name: writer.path().display().to_string(),
            writer: Some(writer),
            counters: PortCounters::default(),
        }
    }

    /// Flushes and closes the file, reporting any write error; returns what was counted.
    pub fn finish(mut self) -> Result<PortCounters, PortError> {
        if let Some(w) = self.writer.take() {
            w.finish()?;
        }
        Ok(self.counters)
    }
}

impl TxPort for PcapTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn send(&mut self, ts: Timestamp, frame: &[u8]) -> Result<bool, PortError> {
        let Some(w) = self.writer.as_mut() else {
            return Err(PortError::Unsupported {
                dev: self.name.clone(),
                what: "sent to after it was finished".into(),
            });
        };
        w.write(ts, frame)?;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += frame.len() as u64;
        Ok(true)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if let Some(w) = self.writer.as_mut() {
            w.flush()?;
        }
        Ok(())
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u8, precision: Precision) -> Record {
        let data = vec![i; 60 + i as usize];
        Record {
            timestamp: Timestamp::from_parts(1_000 + i as u64, 1_000 * i as u32),
            precision,
            orig_len: data.len() as u32,
            data,
        }
    }

    type Got = Vec<(Timestamp, Precision, Vec<u8>)>;

    fn drain(rx: &mut dyn RxPort, max: usize) -> (Got, Vec<Recv>) {
        let mut got = Vec::new();
        let mut calls = Vec::new();
        loop {
            let r = rx
                .recv(max, Duration::ZERO, &mut |ts, p, b| {
                    got.push((ts, p, b.to_vec()))
                })
                .unwrap();
            calls.push(r);
            if r == Recv::End {
                return (got, calls);
            }
            assert!(calls.len() < 1000, "the port never ends");
        }
    }

    #[test]
    fn memory_rx_replays_in_order_in_batches() {
        let recs: Vec<Record> = (0..7).map(|i| rec(i, Precision::Nano)).collect();
        let mut rx = MemoryRx::new("mem", recs.clone());
        assert_eq!(rx.name(), "mem");
        let (got, calls) = drain(&mut rx, 3);
        assert_eq!(
            calls,
            [Recv::Frames(3), Recv::Frames(3), Recv::Frames(1), Recv::End]
        );
        let want: Got = recs
            .iter()
            .map(|r| (r.timestamp, r.precision, r.data.clone()))
            .collect();
        assert_eq!(got, want);
        let c = rx.counters();
        assert_eq!(c.rx_packets, 7);
        assert_eq!(c.rx_bytes, recs.iter().map(|r| r.data.len() as u64).sum());
        assert_eq!((c.tx_packets, c.tx_full), (0, 0));
        // Ended stays ended.
        assert_eq!(
            rx.recv(3, Duration::ZERO, &mut |_, _, _| panic!(
                "no frame expected"
            ))
            .unwrap(),
            Recv::End
        );
    }

    #[test]
    fn pcap_tx_then_pcap_rx_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.pcap");
        let recs: Vec<Record> = (0..5).map(|i| rec(i, Precision::Nano)).collect();
        let mut tx = PcapTx::create(&path, Precision::Nano).unwrap();
        for r in &recs {
            assert!(tx.send(r.timestamp, &r.data).unwrap());
        }
        tx.flush().unwrap();
        let sent = tx.counters();
        assert_eq!(sent.tx_packets, 5);
        assert_eq!(
            sent.tx_bytes,
            recs.iter().map(|r| r.data.len() as u64).sum()
        );
        assert_eq!(tx.finish().unwrap(), sent);

        let mut rx = PcapRx::open(&path).unwrap();
        assert!(rx.name().ends_with("o.pcap"));
        let (got, calls) = drain(&mut rx, 2);
        assert_eq!(
            calls,
            [Recv::Frames(2), Recv::Frames(2), Recv::Frames(1), Recv::End]
        );
        let want: Got = recs
            .iter()
            .map(|r| (r.timestamp, Precision::Nano, r.data.clone()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(rx.counters().rx_packets, 5);
        assert_eq!(rx.counters().rx_bytes, sent.tx_bytes);
    }

    #[test]
    fn pcap_rx_hands_over_frames_before_a_truncation_then_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        let mut tx = PcapTx::create(&path, Precision::Micro).unwrap();
        for i in 0..3 {
            let r = rec(i, Precision::Micro);
            tx.send(r.timestamp, &r.data).unwrap();
        }
        tx.finish().unwrap();
        // Cut the last record in half.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 20]).unwrap();

        let mut rx = PcapRx::open(&path).unwrap();
        let mut got = 0;
        let r = rx.recv(10, Duration::ZERO, &mut |_, p, _| {
            assert_eq!(p, Precision::Micro);
            got += 1;
        });
        assert_eq!(r.unwrap(), Recv::Frames(2));
        assert_eq!(got, 2);
        let e = rx
            .recv(10, Duration::ZERO, &mut |_, _, _| {
                panic!("no frame expected")
            })
            .unwrap_err();
        assert!(
            matches!(
                e,
                PortError::Pcap(PcapError::Truncated {
                    records_read: 2,
                    ..
                })
            ),
            "{e:?}"
        );
        assert_eq!(
            rx.recv(10, Duration::ZERO, &mut |_, _, _| panic!(
                "no frame expected"
            ))
            .unwrap(),
            Recv::End
        );
        assert_eq!(rx.counters().rx_packets, 2);
    }

    #[test]
    fn pcap_rx_missing_file_names_it() {
        let e = PcapRx::open(Path::new("/nonexistent/x.pcap")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.pcap"), "{e}");
    }

    #[test]
    fn errors_name_device_and_capability() {
        let e = PortError::Privilege {
            dev: "veth0".into(),
            what: "opening an AF_PACKET socket",
            cap: Capability::NetRaw,
        };
        assert_eq!(
            e.to_string(),
            "veth0: opening an AF_PACKET socket needs CAP_NET_RAW (run as root or grant it)"
        );
        assert_eq!(
            PortError::NoDevice { dev: "eth9".into() }.to_string(),
            "eth9: no such device"
        );
        assert_eq!(
            PortError::Gone {
                dev: "veth0".into()
            }
            .to_string(),
            "veth0: disappeared"
        );
        assert_eq!(
            PortError::Down {
                dev: "veth0".into()
            }
            .to_string(),
            "veth0: went down"
        );
    }

    #[test]
    fn counters_add() {
        let mut a = PortCounters {
            rx_packets: 1,
            rx_bytes: 2,
            tx_packets: 3,
            tx_bytes: 4,
            tx_full: 5,
            rx_kernel_drops: 6,
        };
        let b = a;
        a.add(&b);
        assert_eq!(a.rx_packets + a.tx_full + a.rx_kernel_drops, 2 + 10 + 12);
    }

    #[test]
    fn rounds_read_every_port_in_turn_until_all_end() {
        let a: Vec<Record> = (0..5).map(|i| rec(i, Precision::Micro)).collect();
        let b: Vec<Record> = (10..12).map(|i| rec(i, Precision::Micro)).collect();
        let mut ports: Vec<(char, Box<dyn RxPort>)> = vec![
            ('a', Box::new(MemoryRx::new("a", a))),
            ('b', Box::new(MemoryRx::new("b", b))),
        ];
        let mut rounds = Rounds::new(ports.len(), Duration::from_millis(5));
        let mut seen = Vec::new();
        let mut got = 0;
        while !rounds.all_ended() {
            got += rounds
                .round(&mut ports, 2, |tag, _, _, data| seen.push((tag, data[0])))
                .unwrap();
        }
        assert_eq!(got, 7);
        // Two from each port per round, port order within a round.
        let want = [
            ('a', 0),
            ('a', 1),
            ('b', 10),
            ('b', 11),
            ('a', 2),
            ('a', 3),
            ('a', 4),
        ];
        assert_eq!(seen, want);
    }
}
