//! AF_XDP ports: a UMEM shared with the kernel, its fill and completion rings, a socket's
//! receive and transmit rings, and an XDP program (`bpf`) that redirects the device's receive
//! queue into the socket through an XSKMAP.
//!
//! The UMEM is split in two: the first half of its frames circulates between the fill ring
//! and the receive ring (owned by [`AfXdpRx`]), the second half between the transmit ring
//! and the completion ring (owned by [`AfXdpTx`]). Each ring has exactly one user-space side,
//! so the receive and transmit ports can run on different threads.
//!
//! Opening tries the best mode first and falls back: the XDP program in the driver (native)
//! then generic mode; the socket in zero-copy (native only) then copy mode. [`Mode`] says
//! what was used.
//!
//! The rings are this crate's own code on `libc` rather than a ring crate: they are a few
//! dozen lines over the kernel's documented layout, they let faults (a device gone, down,
//! a full ring) be reported exactly as the port contract wants, and they add no dependency
//! (the pure-Rust ring crate available is licensed EUPL-1.2, a copyleft licence, while
//! FuseBox is Apache-2.0).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use packet::{Precision, Timestamp};
use ports::port::{Capability, PortCounters, PortError, Recv, RxPort, TxPort};

use crate::bpf;
use crate::sys::{self, Liveness, Mmap, Pace};

/// Bytes per UMEM frame: the largest frame a port sends (received frames also leave the
/// kernel's 256-byte XDP headroom free in copy mode).
pub const FRAME_SIZE: u32 = 4096;

/// How an AF_XDP port is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The device's receive queue to serve.
    pub queue: u32,
    /// UMEM frames per direction, and the size of every ring (a power of two).
    pub frames: u32,
    /// Frames `send` queues before it kicks the kernel by itself; 0: only `flush` kicks.
    pub tx_batch: u32,
    /// Try zero-copy first.
    pub zero_copy: bool,
    /// Try the XDP program in the driver (native) mode first.
    pub native: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            queue: 0,
            frames: 1024,
            tx_batch: 64,
            zero_copy: true,
            native: true,
        }
    }
}

/// What an opened AF_XDP port runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    /// The socket is bound in zero-copy mode.
    pub zero_copy: bool,
    /// The XDP program runs in the driver (otherwise generic mode).
    pub native: bool,
    /// Why a better mode was not used (None when the best one was).
    pub note: Option<String>,
}

/// The XDP program on one device and what it needs, shared by the sockets of every queue it
/// serves; dropping the last socket detaches it.
struct Program {
    // Dropped first (fields drop in order): the program goes before its map.
    _link: bpf::XdpLink,
    map: OwnedFd,
    _prog: OwnedFd,
    _promisc: Option<OwnedFd>,
}

/// What the receive and transmit sides of one socket share and what must outlive its rings.
struct Xsk {
    dev: String,
    queue: u32,
    live: Liveness,
    fd: OwnedFd,
    umem: Mmap,
    _program: Arc<Program>,
}

/// One ring shared with the kernel: a power-of-two array of `elem`-byte entries with a
/// producer and a consumer index. Exactly one side (ours) produces or consumes.
struct Ring {
    map: Mmap,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    mask: u32,
    size: u32,
    /// Our copy of the index we own and our last view of the kernel's.
    cached_prod: u32,
    cached_cons: u32,
}

impl Ring {
    fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        elem: usize,
        pgoff: i64,
    ) -> std::io::Result<Ring> {
        let len = off.desc as usize + size as usize * elem;
        let map = Mmap::new(Some(fd), len, pgoff)?;
        Ok(Ring {
            map,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            flags: off.flags as usize,
            desc: off.desc as usize,
            mask: size - 1,
            size,
            cached_prod: 0,
            cached_cons: 0,
        })
    }

    fn index(&self, off: usize) -> &AtomicU32 {
        // SAFETY: the kernel's offsets of the producer, consumer and flags words are 4-aligned
        // and inside the mapping (it sized the mapping with them); the kernel updates them
        // concurrently with atomic stores, so an AtomicU32 view is sound while `self.map`
        // lives, which the borrow of `self` bounds.
        unsafe { &*(self.map.ptr().add(off) as *const AtomicU32) }
    }

    /// Producer side: free entries (at least `want` if there are).
    fn free(&mut self, want: u32) -> u32 {
        let free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free >= want {
            return free;
        }
        self.cached_cons = self.index(self.consumer).load(Ordering::Acquire);
        self.size - self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Producer side: publishes `n` entries written after the last published one.
    fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.index(self.producer)
            .store(self.cached_prod, Ordering::Release);
    }

    /// Consumer side: entries ready to read.
    fn ready(&mut self) -> u32 {
        let ready = self.cached_prod.wrapping_sub(self.cached_cons);
        if ready > 0 {
            return ready;
        }
        self.cached_prod = self.index(self.producer).load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Consumer side: gives `n` read entries back.
    fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.index(self.consumer)
            .store(self.cached_cons, Ordering::Release);
    }

    fn needs_wakeup(&self) -> bool {
        self.index(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, i: u32, elem: usize) -> *mut u8 {
        let at = self.desc + (i & self.mask) as usize * elem;
        debug_assert!(at + elem <= self.map.len());
        // SAFETY: `i & mask` < size, and the mapping holds `size` entries of `elem` bytes
        // from `desc`.
        unsafe { self.map.ptr().add(at) }
    }

    /// Writes an address entry (fill ring) at position `i`.
    fn put_addr(&mut self, i: u32, addr: u64) {
        // SAFETY: a producer writes entries between its published index and the kernel's
        // consumer index, which the kernel does not read until `submit` publishes them;
        // `slot` is inside the mapping and 8-aligned (offsets and sizes are).
        unsafe { std::ptr::write_volatile(self.slot(i, 8) as *mut u64, addr) }
    }

    /// Reads an address entry (completion ring) at position `i`.
    fn addr(&self, i: u32) -> u64 {
        // SAFETY: a consumer reads entries the kernel published (index below the producer
        // index read with Acquire) and not yet released; inside the mapping, 8-aligned.
        unsafe { std::ptr::read_volatile(self.slot(i, 8) as *const u64) }
    }

    /// Writes a descriptor (transmit ring) at position `i`.
    fn put_desc(&mut self, i: u32, addr: u64, len: u32) {
        let d = libc::xdp_desc {
            addr,
            len,
            options: 0,
        };
        // SAFETY: as for `put_addr`; entries are 16-byte `xdp_desc`s.
        unsafe { std::ptr::write_volatile(self.slot(i, 16) as *mut libc::xdp_desc, d) }
    }

    /// Reads a descriptor (receive ring) at position `i`.
    fn desc(&self, i: u32) -> (u64, u32) {
        // SAFETY: as for `addr`; entries are 16-byte `xdp_desc`s.
        let d = unsafe { std::ptr::read_volatile(self.slot(i, 16) as *const libc::xdp_desc) };
        (d.addr, d.len)
    }
}

/// Receives a device queue's frames through an AF_XDP socket.
pub struct AfXdpRx {
    xsk: Arc<Xsk>,
    fill: Ring,
    rx: Ring,
    counters: PortCounters,
    pace: Pace,
}

/// Sends frames through an AF_XDP socket's transmit ring.
pub struct AfXdpTx {
    xsk: Arc<Xsk>,
    tx: Ring,
    comp: Ring,
    /// UMEM frames free for sending.
    free: Vec<u64>,
    /// Descriptors written but not published yet.
    pending: u32,
    /// Frames published and not completed yet.
    in_flight: u32,
    batch: u32,
    counters: PortCounters,
}

impl std::fmt::Debug for AfXdpRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpRx")
            .field("dev", &self.xsk.dev)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for AfXdpTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpTx")
            .field("dev", &self.xsk.dev)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// What creating the XSKMAP and loading an XDP program need, in the order the kernel checks.
const BPF_NEEDS: &[Capability] = &[Capability::Bpf, Capability::NetAdmin];
/// What attaching the program to a device needs.
const ATTACH_NEEDS: &[Capability] = &[Capability::NetAdmin, Capability::Bpf];

fn no_xdp(dev: &str, reason: String) -> PortError {
    PortError::NoXdp {
        dev: dev.to_string(),
        reason,
    }
}

/// Maps an error of a bpf or XDP step: a missing privilege names `cap`, anything else means
/// the kernel or device cannot run AF_XDP.
fn xdp_err(dev: &str, what: &'static str, needs: &[Capability], e: std::io::Error) -> PortError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => PortError::Privilege {
            dev: dev.to_string(),
            what,
            cap: sys::missing(needs),
        },
        Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::Gone {
            dev: dev.to_string(),
        },
        _ => no_xdp(dev, format!("{what}: {e}")),
    }
}

/// A socket with its UMEM and rings, bound.
struct Bound {
    fd: OwnedFd,
    umem: Mmap,
    fill: Ring,
    comp: Ring,
    rx: Ring,
    tx: Ring,
}

fn bind_socket(
    dev: &str,
    ifindex: u32,
    cfg: &Config,
    queue: u32,
    flags: u16,
) -> Result<Bound, PortError> {
    let what = "setting up the AF_XDP socket";
    let err = |e: std::io::Error| xdp_err(dev, what, &[Capability::NetRaw], e);
    let frames = cfg.frames;
    let umem = Mmap::new(None, (2 * frames * FRAME_SIZE) as usize, 0)
        .map_err(|e| sys::port_err(dev, "allocating the UMEM", Capability::NetAdmin, e))?;
    let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0).map_err(|e| match e.raw_os_error() {
        Some(libc::EAFNOSUPPORT) => no_xdp(dev, "the kernel has no AF_XDP sockets".into()),
        _ => sys::port_err(dev, "opening an AF_XDP socket", Capability::NetRaw, e),
    })?;
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr() as u64,
        len: umem.len() as u64,
        chunk_size: FRAME_SIZE,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg).map_err(err)?;
    for opt in [
        libc::XDP_UMEM_FILL_RING,
        libc::XDP_UMEM_COMPLETION_RING,
        libc::XDP_RX_RING,
        libc::XDP_TX_RING,
    ] {
        sys::setsockopt(&fd, libc::SOL_XDP, opt, &frames).map_err(err)?;
    }
    let off: libc::xdp_mmap_offsets =
        sys::getsockopt(&fd, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS).map_err(err)?;
    let rx = Ring::map(&fd, &off.rx, frames, 16, libc::XDP_PGOFF_RX_RING).map_err(err)?;
    let tx = Ring::map(&fd, &off.tx, frames, 16, libc::XDP_PGOFF_TX_RING).map_err(err)?;
    let mut fill = Ring::map(
        &fd,
        &off.fr,
        frames,
        8,
        libc::XDP_UMEM_PGOFF_FILL_RING as i64,
    )
    .map_err(err)?;
    let comp = Ring::map(
        &fd,
        &off.cr,
        frames,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
    )
    .map_err(err)?;
    // The first half of the UMEM receives: every frame starts in the fill ring.
    for i in 0..frames {
        fill.put_addr(i, i as u64 * FRAME_SIZE as u64);
    }
    fill.submit(frames);
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // A socket closed on this queue moments ago is torn down by the kernel in the
    // background and holds the queue until then (EBUSY): wait for it, a second at most.
    let mut tries = 0;
    let bound = loop {
        match sys::bind(&fd, &addr) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => break other,
        }
    };
    bound.map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => PortError::Privilege {
            dev: dev.to_string(),
            what: "binding an AF_XDP socket",
            cap: sys::missing(&[Capability::NetRaw]),
        },
        Some(libc::ENODEV) => PortError::Gone {
            dev: dev.to_string(),
        },
        Some(libc::EINVAL) => no_xdp(dev, format!("no receive queue {queue}")),
        _ => no_xdp(
            dev,
            format!(
                "binding in {} mode: {e}",
                if flags & libc::XDP_ZEROCOPY != 0 {
                    "zero-copy"
                } else {
                    "copy"
                }
            ),
        ),
    })?;
    Ok(Bound {
        fd,
        umem,
        fill,
        comp,
        rx,
        tx,
    })
}

/// Opens an AF_XDP socket on `dev`'s queue `cfg.queue` (in the calling thread's network
/// namespace), attaches the redirect program, and returns the receive and transmit ports
/// and the mode used. Frames arriving on the device's other queues go on to the kernel
/// ([`open_queues`] serves several). Needs `CAP_NET_ADMIN`, `CAP_BPF` (or `CAP_SYS_ADMIN`)
/// and `CAP_NET_RAW`. The program is detached when both ports are dropped.
pub fn open(dev: &str, cfg: &Config) -> Result<(AfXdpRx, AfXdpTx, Mode), PortError> {
    let (mut ports, mode) = open_range(dev, cfg, cfg.queue, cfg.queue + 1)?;
    let (rx, tx) = ports
        .pop()
        .ok_or_else(|| no_xdp(dev, "no queue opened".into()))?;
    Ok((rx, tx, mode))
}

/// Opens one AF_XDP socket for each of the device's first `queues` receive queues, all fed
/// by one XDP program (`cfg.queue` is ignored): a worker per queue, each with its own
/// receive and transmit port (transmitting on the queue of the same number). The program is
/// detached when every port is dropped.
pub fn open_queues(
    dev: &str,
    cfg: &Config,
    queues: u32,
) -> Result<(Vec<(AfXdpRx, AfXdpTx)>, Mode), PortError> {
    if queues == 0 {
        return Err(PortError::Unsupported {
            dev: dev.to_string(),
            what: "zero AF_XDP queues".into(),
        });
    }
    open_range(dev, cfg, 0, queues)
}

/// How many receive queues `dev` has (what the driver reports through ethtool: receive-only
/// plus combined channels; 1 when it reports nothing).
pub fn rx_queues(dev: &str) -> Result<u32, PortError> {
    let ifindex = sys::ifindex(dev)?;
    Liveness::new(dev, ifindex)?.rx_queues()
}

fn open_range(
    dev: &str,
    cfg: &Config,
    first: u32,
    end: u32,
) -> Result<(Vec<(AfXdpRx, AfXdpTx)>, Mode), PortError> {
    if !cfg.frames.is_power_of_two() || cfg.frames < 8 {
        return Err(PortError::Unsupported {
            dev: dev.to_string(),
            what: format!("{} AF_XDP frames (a power of two, at least 8)", cfg.frames),
        });
    }
    let ifindex = sys::ifindex(dev)?;
    Liveness::new(dev, ifindex)?.check_open()?;
    let mut notes = Vec::new();

    let map = bpf::xsk_map(end).map_err(|e| xdp_err(dev, "creating an XSKMAP", BPF_NEEDS, e))?;
    let prog = bpf::load_redirect(&map).map_err(|(e, log)| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => PortError::Privilege {
            dev: dev.to_string(),
            what: "loading an XDP program",
            cap: sys::missing(BPF_NEEDS),
        },
        _ => no_xdp(dev, format!("loading the XDP program: {e} {log}")),
    })?;
    let attach = |flags| {
        bpf::attach(&prog, ifindex, flags).map_err(|e| match e.raw_os_error() {
            Some(libc::EBUSY) | Some(libc::EEXIST) => {
                no_xdp(dev, "another XDP program is attached".into())
            }
            _ => xdp_err(dev, "attaching an XDP program", ATTACH_NEEDS, e),
        })
    };
    let mut native = false;
    let link = if cfg.native {
        match attach(bpf::XDP_FLAGS_DRV_MODE) {
            Ok(l) => {
                native = true;
                l
            }
            Err(e @ (PortError::Privilege { .. } | PortError::Gone { .. })) => return Err(e),
            Err(e) => {
                notes.push(format!("no native XDP ({e}), generic mode"));
                attach(bpf::XDP_FLAGS_SKB_MODE)?
            }
        }
    } else {
        attach(bpf::XDP_FLAGS_SKB_MODE)?
    };
    // Frames addressed to other hosts must reach the program too (real NICs filter them).
    let promisc = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)
        .ok()
        .filter(|p| crate::afpacket::promiscuous(dev, p, ifindex).is_ok());
    if promisc.is_none() {
        notes.push("not promiscuous".into());
    }
    let program = Arc::new(Program {
        _link: link,
        map,
        _prog: prog,
        _promisc: promisc,
    });

    let copy = libc::XDP_COPY | libc::XDP_USE_NEED_WAKEUP;
    let mut zero_copy = cfg.zero_copy && native;
    if cfg.zero_copy && !native {
        notes.push("AF_XDP in copy mode".into());
    }
    let mut ports = Vec::new();
    for queue in first..end {
        let bound = if zero_copy {
            match bind_socket(
                dev,
                ifindex,
                cfg,
                queue,
                libc::XDP_ZEROCOPY | libc::XDP_USE_NEED_WAKEUP,
            ) {
                Ok(b) => b,
                Err(e @ (PortError::Privilege { .. } | PortError::Gone { .. })) => return Err(e),
                Err(e) => {
                    let why = match &e {
                        PortError::NoXdp { reason, .. } => reason.clone(),
                        other => other.to_string(),
                    };
                    notes.push(format!("no zero-copy ({why}), AF_XDP in copy mode"));
                    // Every queue in the same mode: earlier zero-copy sockets are redone.
                    zero_copy = false;
                    ports.clear();
                    for q in first..queue {
                        let b = bind_socket(dev, ifindex, cfg, q, copy)?;
                        ports.push(ports_of(dev, q, ifindex, b, &program, cfg)?);
                    }
                    bind_socket(dev, ifindex, cfg, queue, copy)?
                }
            }
        } else {
            bind_socket(dev, ifindex, cfg, queue, copy)?
        };
        ports.push(ports_of(dev, queue, ifindex, bound, &program, cfg)?);
    }
    let note = (!notes.is_empty()).then(|| format!("{dev}: {}", notes.join("; ")));
    Ok((
        ports,
        Mode {
            zero_copy,
            native,
            note,
        },
    ))
}

/// Registers a bound socket in the program's map and splits it into its two ports.
fn ports_of(
    dev: &str,
    queue: u32,
    ifindex: u32,
    bound: Bound,
    program: &Arc<Program>,
    cfg: &Config,
) -> Result<(AfXdpRx, AfXdpTx), PortError> {
    bpf::set_socket(&program.map, queue, &bound.fd)
        .map_err(|e| xdp_err(dev, "adding the socket to the XSKMAP", BPF_NEEDS, e))?;
    let Bound {
        fd,
        umem,
        fill,
        comp,
        rx,
        tx,
    } = bound;
    let xsk = Arc::new(Xsk {
        dev: dev.to_string(),
        queue,
        live: Liveness::new(dev, ifindex)?,
        fd,
        umem,
        _program: program.clone(),
    });
    let frames = cfg.frames;
    let rxp = AfXdpRx {
        xsk: xsk.clone(),
        fill,
        rx,
        counters: PortCounters::default(),
        pace: Pace::new(),
    };
    let txp = AfXdpTx {
        xsk,
        tx,
        comp,
        free: (frames..2 * frames)
            .rev()
            .map(|i| i as u64 * FRAME_SIZE as u64)
            .collect(),
        pending: 0,
        in_flight: 0,
        batch: cfg.tx_batch,
        counters: PortCounters::default(),
    };
    Ok((rxp, txp))
}

impl Xsk {
    fn umem_slice(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let end = addr.checked_add(len as u64)?;
        if end > self.umem.len() as u64 {
            return None;
        }
        // SAFETY: [addr, addr+len) is inside the UMEM (checked); the kernel handed this
        // frame to us through the receive ring and does not write it until we return its
        // address through the fill ring, after the borrow ends.
        Some(unsafe {
            std::slice::from_raw_parts(self.umem.ptr().add(addr as usize), len as usize)
        })
    }

    /// Wakes the kernel to send what the transmit ring holds.
    fn kick(&self) -> Result<(), PortError> {
        // SAFETY: a zero-length send with no buffer and no address; the kernel reads nothing.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            return Ok(());
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        match errno {
            libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR => Ok(()),
            _ => match sys::device_fault(&self.dev, errno) {
                Some(e) => {
                    // Unbound because the device was deleted, or down: say which.
                    self.live.check()?;
                    Err(e)
                }
                None => Err(PortError::Io {
                    dev: self.dev.clone(),
                    what: "sending frames",
                    source: std::io::Error::from_raw_os_error(errno),
                }),
            },
        }
    }

    fn fault(&self) -> Result<(), PortError> {
        let _ = sys::take_socket_error(&self.fd);
        self.live.check()
    }
}

impl AfXdpRx {
    /// The device queue this port serves.
    pub fn queue(&self) -> u32 {
        self.xsk.queue
    }

    /// Hands over up to `max` frames already in the receive ring, without waiting.
    fn take(&mut self, max: u32, f: &mut dyn FnMut(Timestamp, Precision, &[u8])) -> u32 {
        let n = self.rx.ready().min(max);
        if n == 0 {
            return 0;
        }
        let ts = sys::now();
        // Every receive frame is in the fill ring, in the receive ring or lent here, so the
        // fill ring has room for the ones about to be returned once the kernel has published
        // its consumer index (which it may do just after the receive entries: then fewer
        // frames are handed over now and the rest on the next call).
        let n = n.min(self.fill.free(n));
        let start_rx = self.rx.cached_cons;
        let start_fill = self.fill.cached_prod;
        let mut handed = 0;
        for i in 0..n {
            let (addr, len) = self.rx.desc(start_rx.wrapping_add(i));
            if let Some(data) = self.xsk.umem_slice(addr, len) {
                f(ts, Precision::Nano, data);
                self.counters.rx_packets += 1;
                self.counters.rx_bytes += len as u64;
                handed += 1;
            }
            self.fill
                .put_addr(start_fill.wrapping_add(i), addr - addr % FRAME_SIZE as u64);
        }
        self.rx.release(n);
        self.fill.submit(n);
        if self.fill.needs_wakeup() {
            // Zero-copy drivers wait for a wake-up to take the refilled frames.
            let _ = sys::poll(self.xsk.fd.as_raw_fd(), libc::POLLIN, Duration::ZERO);
        }
        handed
    }
}

fn wait_err(dev: &str, e: std::io::Error) -> PortError {
    PortError::Io {
        dev: dev.to_string(),
        what: "waiting for frames",
        source: e,
    }
}

impl RxPort for AfXdpRx {
    fn name(&self) -> &str {
        &self.xsk.dev
    }

    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        f: &mut dyn FnMut(Timestamp, Precision, &[u8]),
    ) -> Result<Recv, PortError> {
        let max = max.min(u32::MAX as usize) as u32;
        if max == 0 {
            return Ok(Recv::Idle);
        }
        let n = self.take(max, f);
        if n > 0 {
            return Ok(Recv::Frames(n as usize));
        }
        let ev = sys::poll(self.xsk.fd.as_raw_fd(), libc::POLLIN, timeout)
            .map_err(|e| wait_err(&self.xsk.dev, e))?;
        let n = self.take(max, f);
        if n > 0 {
            return Ok(Recv::Frames(n as usize));
        }
        if ev & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 || self.pace.due() {
            self.xsk.fault()?;
        }
        Ok(Recv::Idle)
    }

    fn counters(&self) -> PortCounters {
        let drops = sys::getsockopt::<libc::xdp_statistics>(
            &self.xsk.fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
        )
        .map(|s| s.rx_dropped + s.rx_ring_full)
        .unwrap_or(0);
        PortCounters {
            rx_kernel_drops: drops,
            ..self.counters
        }
    }
}

/// Receives from several queues' AF_XDP sockets of one device as one port (a device with
/// several receive queues served by one worker). Each queue's frames keep their order;
/// frames of different queues are interleaved batch by batch, queues taken in turn.
pub struct AfXdpQueuesRx {
    ports: Vec<AfXdpRx>,
    next: usize,
    pace: Pace,
}

impl std::fmt::Debug for AfXdpQueuesRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpQueuesRx")
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

impl AfXdpQueuesRx {
    /// One port over `ports` (at least one, all of the same device).
    pub fn new(ports: Vec<AfXdpRx>) -> Option<AfXdpQueuesRx> {
        (!ports.is_empty()).then(|| AfXdpQueuesRx {
            ports,
            next: 0,
            pace: Pace::new(),
        })
    }

    fn take(&mut self, max: u32, f: &mut dyn FnMut(Timestamp, Precision, &[u8])) -> u32 {
        let n = self.ports.len();
        let mut got = 0;
        for k in 0..n {
            if got == max {
                break;
            }
            let i = (self.next + k) % n;
            got += self.ports[i].take(max - got, f);
        }
        self.next = (self.next + 1) % n;
        got
    }
}

impl RxPort for AfXdpQueuesRx {
    fn name(&self) -> &str {
        self.ports[0].name()
    }

    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        f: &mut dyn FnMut(Timestamp, Precision, &[u8]),
    ) -> Result<Recv, PortError> {
        let max = max.min(u32::MAX as usize) as u32;
        if max == 0 {
            return Ok(Recv::Idle);
        }
        let n = self.take(max, f);
        if n > 0 {
            return Ok(Recv::Frames(n as usize));
        }
        let mut fds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .map(|p| libc::pollfd {
                fd: p.xsk.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        sys::poll_many(&mut fds, timeout).map_err(|e| wait_err(self.name(), e))?;
        let n = self.take(max, f);
        if n > 0 {
            return Ok(Recv::Frames(n as usize));
        }
        let error = fds
            .iter()
            .any(|p| p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0);
        if error || self.pace.due() {
            self.ports[0].xsk.fault()?;
        }
        Ok(Recv::Idle)
    }

    fn counters(&self) -> PortCounters {
        let mut c = PortCounters::default();
        for p in &self.ports {
            c.add(&p.counters());
        }
        c
    }
}

impl AfXdpTx {
    /// Takes completed frames back into the free list.
    fn reclaim(&mut self) {
        let n = self.comp.ready();
        if n == 0 {
            return;
        }
        let start = self.comp.cached_cons;
        for i in 0..n {
            let addr = self.comp.addr(start.wrapping_add(i));
            self.free.push(addr - addr % FRAME_SIZE as u64);
        }
        self.comp.release(n);
        self.in_flight = self.in_flight.saturating_sub(n);
    }

    /// Publishes the written descriptors and kicks the kernel.
    fn submit(&mut self) -> Result<(), PortError> {
        if self.pending > 0 {
            self.tx.submit(self.pending);
            self.in_flight += self.pending;
            self.pending = 0;
        }
        if self.in_flight > 0 {
            self.xsk.kick()?;
        }
        Ok(())
    }
}

impl TxPort for AfXdpTx {
    fn name(&self) -> &str {
        &self.xsk.dev
    }

    fn send(&mut self, _ts: Timestamp, frame: &[u8]) -> Result<bool, PortError> {
        if frame.len() > FRAME_SIZE as usize {
            return Err(PortError::Unsupported {
                dev: self.xsk.dev.clone(),
                what: format!(
                    "a frame of {} bytes exceeds AF_XDP's {FRAME_SIZE}-byte frames",
                    frame.len()
                ),
            });
        }
        if self.free.is_empty() {
            self.reclaim();
        }
        if self.free.is_empty() || self.tx.free(self.pending + 1) < self.pending + 1 {
            self.counters.tx_full += 1;
            return Ok(false);
        }
        let Some(addr) = self.free.pop() else {
            self.counters.tx_full += 1;
            return Ok(false);
        };
        // SAFETY: `addr` is a transmit frame of the UMEM (second half, FRAME_SIZE bytes,
        // `frame.len()` <= FRAME_SIZE checked above) that is in the free list: neither in the
        // transmit ring nor being sent, so the kernel does not read it and no other borrow
        // of the memory exists.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.xsk.umem.ptr().add(addr as usize),
                frame.len(),
            );
        }
        let at = self.tx.cached_prod.wrapping_add(self.pending);
        self.tx.put_desc(at, addr, frame.len() as u32);
        self.pending += 1;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += frame.len() as u64;
        if self.batch > 0 && self.pending >= self.batch {
            self.submit()?;
            self.reclaim();
        }
        Ok(true)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.submit()?;
        // Copy mode sends a bounded number of frames per kick: kick until everything was
        // completed, for at most a moment, then check the device.
        let deadline = Instant::now() + Duration::from_millis(500);
        loop {
            self.reclaim();
            if self.in_flight == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                return self.xsk.fault();
            }
            self.xsk.kick()?;
            if self.comp.ready() == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}
