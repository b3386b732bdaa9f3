//! AF_PACKET ports: a TPACKET_V3 memory-mapped receive ring and `sendmmsg` transmission.
//!
//! Receive: the kernel fills blocks of a shared ring with frames and hands a block over when
//! it is full or after [`BLOCK_TIMEOUT_MS`]; frames are lent to the caller straight from the
//! ring and the block is returned to the kernel once every frame in it was handed over.
//! Frames the socket sees going out of the device (`PACKET_OUTGOING`) are ignored, so a port
//! never reads back what FuseBox sent.
//!
//! Transmit: frames are queued in user memory and sent in batches with one `sendmmsg` per
//! batch on a separate socket that receives nothing. `sendmmsg` rather than a TPACKET
//! transmit ring: the kernel copies every frame into a socket buffer either way, the batch
//! already saves the per-frame system call, and `sendmmsg` tells exactly which frame a full
//! device queue refused (an error for that frame), which a transmit ring only reports as
//! status bits on slots reclaimed later. `PACKET_QDISC_BYPASS` hands frames straight to the
//! driver (no queueing discipline in between: less latency and no qdisc lock per frame);
//! a full driver queue then shows as `ENOBUFS`, counted in `tx_full`.

use std::cell::Cell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use packet::{Precision, Timestamp};
use ports::port::{Capability, PortCounters, PortError, Recv, RxPort, TxPort};

use crate::sys::{self, Liveness, Mmap, Pace};

/// Size of one ring block (a multiple of the page size).
const BLOCK_SIZE: u32 = 1 << 18;
/// Number of blocks in the receive ring (16 MiB in all).
const BLOCK_NR: u32 = 64;
/// Frame slot size the kernel is told about (TPACKET_V3 packs frames tighter than this).
const FRAME_SIZE: u32 = 2048;
/// How long the kernel keeps a partly filled block before handing it over, in ms: the
/// latency bound of a quiet link.
pub const BLOCK_TIMEOUT_MS: u32 = 1;
/// Frames queued before `send` sends a batch by itself.
const TX_BATCH: usize = 64;

/// `sizeof(struct tpacket3_hdr)` rounded to TPACKET_ALIGNMENT: where the `sockaddr_ll`
/// of a frame starts.
const SLL_OFFSET: usize = 48;
/// `sll_pkttype`'s offset within `struct sockaddr_ll`.
const SLL_PKTTYPE: usize = 10;
const PACKET_OUTGOING: u8 = 4;

fn eth_p_all() -> u16 {
    (libc::ETH_P_ALL as u16).to_be()
}

fn ll_addr(ifindex: u32, proto: u16) -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: proto,
        sll_ifindex: ifindex as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}

fn open_socket(dev: &str) -> Result<OwnedFd, PortError> {
    // Protocol 0: the socket receives nothing until it is bound to the device.
    sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)
        .map_err(|e| sys::port_err(dev, "opening an AF_PACKET socket", Capability::NetRaw, e))
}

fn io<'a>(dev: &'a str, what: &'static str) -> impl Fn(std::io::Error) -> PortError + 'a {
    move |e| sys::port_err(dev, what, Capability::NetRaw, e)
}

/// Puts the device in promiscuous mode for as long as `fd` is open (the kernel counts the
/// sockets that asked), so a port receives frames addressed to other hosts too.
pub(crate) fn promiscuous(dev: &str, fd: &OwnedFd, ifindex: u32) -> Result<(), PortError> {
    let mr = libc::packet_mreq {
        mr_ifindex: ifindex as i32,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    sys::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr)
        .map_err(io(dev, "entering promiscuous mode"))
}

/// Receives a device's frames through a TPACKET_V3 ring.
pub struct AfPacketRx {
    dev: String,
    live: Liveness,
    ring: Mmap,
    fd: OwnedFd,
    /// Block being read.
    block: u32,
    /// Frames of `block` not handed over yet (0: `block` is not ours yet).
    left: u32,
    /// Offset of the next frame within the ring.
    next: usize,
    counters: PortCounters,
    drops: Cell<u64>,
    scratch: Vec<u8>,
    pace: Pace,
}

impl std::fmt::Debug for AfPacketRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketRx")
            .field("dev", &self.dev)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl AfPacketRx {
    /// Opens a receive ring on `dev` (in the calling thread's network namespace) and puts
    /// the device in promiscuous mode while the port lives. Needs `CAP_NET_RAW`.
    pub fn open(dev: &str) -> Result<AfPacketRx, PortError> {
        let ifindex = sys::ifindex(dev)?;
        let live = Liveness::new(dev, ifindex)?;
        let fd = open_socket(dev)?;
        let v3: libc::c_int = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &v3)
            .map_err(io(dev, "asking for TPACKET_V3"))?;
        // Not fatal on kernels before 4.20: the receive loop also skips outgoing frames.
        let one: libc::c_int = 1;
        let _ = sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one);
        let req = libc::tpacket_req3 {
            tp_block_size: BLOCK_SIZE,
            tp_block_nr: BLOCK_NR,
            tp_frame_size: FRAME_SIZE,
            tp_frame_nr: BLOCK_SIZE / FRAME_SIZE * BLOCK_NR,
            tp_retire_blk_tov: BLOCK_TIMEOUT_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
            .map_err(io(dev, "setting up the receive ring"))?;
        let ring = Mmap::new(Some(&fd), (BLOCK_SIZE * BLOCK_NR) as usize, 0)
            .map_err(io(dev, "mapping the receive ring"))?;
        promiscuous(dev, &fd, ifindex)?;
        sys::bind(&fd, &ll_addr(ifindex, eth_p_all())).map_err(io(dev, "binding to the device"))?;
        live.check_open()?;
        Ok(AfPacketRx {
            dev: dev.to_string(),
            live,
            ring,
            fd,
            block: 0,
            left: 0,
            next: 0,
            counters: PortCounters::default(),
            drops: Cell::new(0),
            scratch: Vec::with_capacity(FRAME_SIZE as usize),
            pace: Pace::new(),
        })
    }

    fn block_base(&self, b: u32) -> usize {
        (b * BLOCK_SIZE) as usize
    }

    /// The status word of block `b`, shared with the kernel.
    fn status(&self, b: u32) -> &AtomicU32 {
        let off = self.block_base(b) + 8; // tpacket_block_desc.hdr.bh1.block_status
                                          // SAFETY: `off` is 4-aligned and inside the mapping (blocks are BLOCK_SIZE bytes,
                                          // page aligned); the kernel accesses this word concurrently, only through
                                          // atomic-width stores, so viewing it as an AtomicU32 is sound for the mapping's life,
                                          // which the returned borrow of `self` bounds.
        unsafe { &*(self.ring.ptr().add(off) as *const AtomicU32) }
    }

    fn read_u32(&self, off: usize) -> u32 {
        debug_assert!(off + 4 <= self.ring.len());
        // SAFETY: callers pass offsets of header fields inside a block the kernel handed
        // over (TP_STATUS_USER seen with Acquire), which it no longer writes until we hand
        // it back; the offset is inside the mapping.
        unsafe { std::ptr::read_unaligned(self.ring.ptr().add(off) as *const u32) }
    }

    fn read_u16(&self, off: usize) -> u16 {
        debug_assert!(off + 2 <= self.ring.len());
        // SAFETY: as for `read_u32`.
        unsafe { std::ptr::read_unaligned(self.ring.ptr().add(off) as *const u16) }
    }

    /// Takes the current block if the kernel handed it over.
    fn take_block(&mut self) -> bool {
        if self.left > 0 {
            return true;
        }
        if self.status(self.block).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return false;
        }
        let base = self.block_base(self.block);
        let num = self.read_u32(base + 12);
        let first = self.read_u32(base + 16) as usize;
        if num == 0 {
            self.release_block();
            return false;
        }
        self.left = num;
        self.next = base + first;
        true
    }

    fn release_block(&mut self) {
        self.status(self.block)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.block = (self.block + 1) % BLOCK_NR;
        self.left = 0;
    }

    /// Hands over frames of owned blocks, at most `max`; returns how many.
    fn drain(&mut self, max: usize, f: &mut dyn FnMut(Timestamp, Precision, &[u8])) -> usize {
        let mut n = 0;
        while n < max && self.take_block() {
            let h = self.next;
            let block_end = self.block_base(self.block) + BLOCK_SIZE as usize;
            let next_off = self.read_u32(h) as usize;
            let sec = self.read_u32(h + 4);
            let nsec = self.read_u32(h + 8);
            let snaplen = self.read_u32(h + 12) as usize;
            let status = self.read_u32(h + 20);
            let mac = self.read_u16(h + 24) as usize;
            let tci = self.read_u32(h + 32) as u16;
            let tpid = self.read_u16(h + 36);
            // SAFETY: inside an owned block (see `read_u32`).
            let pkttype = unsafe { *self.ring.ptr().add(h + SLL_OFFSET + SLL_PKTTYPE) };
            let ok = h + mac + snaplen <= block_end;
            if ok && pkttype != PACKET_OUTGOING {
                // SAFETY: [h+mac, h+mac+snaplen) lies inside the owned block (checked
                // above); the kernel does not write it until the block is released, which
                // happens after `f` returns.
                let data =
                    unsafe { std::slice::from_raw_parts(self.ring.ptr().add(h + mac), snaplen) };
                let ts = Timestamp::from_parts(sec as u64, nsec);
                if status & libc::TP_STATUS_VLAN_VALID != 0 && data.len() >= 12 {
                    // The kernel moved the VLAN tag out of the frame: put it back so the
                    // bytes are the ones on the wire.
                    let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                        tpid
                    } else {
                        0x8100
                    };
                    self.scratch.clear();
                    self.scratch.extend_from_slice(&data[..12]);
                    self.scratch.extend_from_slice(&tpid.to_be_bytes());
                    self.scratch.extend_from_slice(&tci.to_be_bytes());
                    self.scratch.extend_from_slice(&data[12..]);
                    f(ts, Precision::Nano, &self.scratch);
                    self.counters.rx_bytes += self.scratch.len() as u64;
                } else {
                    f(ts, Precision::Nano, data);
                    self.counters.rx_bytes += snaplen as u64;
                }
                self.counters.rx_packets += 1;
                n += 1;
            }
            self.left -= 1;
            if self.left == 0 || next_off == 0 {
                self.release_block();
            } else {
                self.next = h + next_off;
            }
        }
        n
    }

    fn fault(&self) -> Result<(), PortError> {
        let e = sys::take_socket_error(&self.fd);
        if let Some(err) = sys::device_fault(&self.dev, e) {
            return Err(err);
        }
        self.live.check()
    }
}

impl RxPort for AfPacketRx {
    fn name(&self) -> &str {
        &self.dev
    }

    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        f: &mut dyn FnMut(Timestamp, Precision, &[u8]),
    ) -> Result<Recv, PortError> {
        if max == 0 {
            return Ok(Recv::Idle);
        }
        let n = self.drain(max, f);
        if n > 0 {
            return Ok(Recv::Frames(n));
        }
        let ev = sys::poll(self.fd.as_raw_fd(), libc::POLLIN, timeout)
            .map_err(io(&self.dev, "waiting for frames"))?;
        let n = self.drain(max, f);
        if n > 0 {
            return Ok(Recv::Frames(n));
        }
        if ev & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 || self.pace.due() {
            // Nothing came: a good moment to see whether the device is still there.
            self.fault()?;
        }
        Ok(Recv::Idle)
    }

    fn counters(&self) -> PortCounters {
        if let Ok(s) = sys::getsockopt::<libc::tpacket_stats_v3>(
            &self.fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
        ) {
            // Reading the statistics resets them: accumulate.
            self.drops.set(self.drops.get() + s.tp_drops as u64);
        }
        PortCounters {
            rx_kernel_drops: self.drops.get(),
            ..self.counters
        }
    }
}

/// Sends frames to a device with `sendmmsg`, in batches.
pub struct AfPacketTx {
    dev: String,
    live: Liveness,
    fd: OwnedFd,
    /// Queued frames, back to back.
    buf: Vec<u8>,
    /// End offset of each queued frame in `buf`.
    ends: Vec<usize>,
    counters: PortCounters,
}

impl std::fmt::Debug for AfPacketTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketTx")
            .field("dev", &self.dev)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl AfPacketTx {
    /// Opens a transmit socket on `dev` (in the calling thread's network namespace) that
    /// hands frames to the driver directly. It receives nothing. Needs `CAP_NET_RAW`.
    pub fn open(dev: &str) -> Result<AfPacketTx, PortError> {
        AfPacketTx::open_with(dev, true)
    }

    /// As [`AfPacketTx::open`]; `bypass_qdisc` false sends through the device's queueing
    /// discipline, where TC egress programs (FuseBox's Fwd stage) see the frames.
    pub fn open_with(dev: &str, bypass_qdisc: bool) -> Result<AfPacketTx, PortError> {
        let ifindex = sys::ifindex(dev)?;
        let live = Liveness::new(dev, ifindex)?;
        let fd = open_socket(dev)?;
        if bypass_qdisc {
            let one: libc::c_int = 1;
            // Best effort: without it frames go through the device's queueing discipline.
            let _ = sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one);
        }
        sys::bind(&fd, &ll_addr(ifindex, 0)).map_err(io(dev, "binding to the device"))?;
        live.check_open()?;
        Ok(AfPacketTx {
            dev: dev.to_string(),
            live,
            fd,
            buf: Vec::with_capacity(TX_BATCH * 1600),
            ends: Vec::with_capacity(TX_BATCH),
            counters: PortCounters::default(),
        })
    }

    /// Sends every queued frame; frames a full device queue refuses are counted in
    /// `tx_full`.
    fn send_queued(&mut self) -> Result<(), PortError> {
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for &end in &self.ends {
            iov.push(libc::iovec {
                iov_base: self.buf[start..end].as_ptr() as *mut libc::c_void,
                iov_len: end - start,
            });
            start = end;
        }
        // SAFETY: all-zero is a valid mmsghdr (null pointers, zero lengths).
        let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; iov.len()];
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        let mut i = 0;
        let mut retried = false;
        let mut result = Ok(());
        while i < msgs.len() {
            let rest = &mut msgs[i..];
            // SAFETY: `rest` is a live slice of mmsghdr whose iovecs point into `iov` and
            // `self.buf`, both alive and unchanged across the call; the kernel only reads
            // the frames and writes each header's `msg_len`.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    rest.as_mut_ptr(),
                    rest.len().min(1024) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                for m in &rest[..r as usize] {
                    self.counters.tx_packets += 1;
                    self.counters.tx_bytes += m.msg_len as u64;
                }
                i += r as usize;
                retried = false;
                continue;
            }
            let e = sys::last_err();
            let errno = e.raw_os_error().unwrap_or(0);
            match errno {
                libc::EINTR => continue,
                // The socket's send buffer is full of frames still in flight: wait a little
                // for it to drain once, then count the frame as refused.
                libc::EAGAIN if !retried => {
                    retried = true;
                    let _ = sys::poll(
                        self.fd.as_raw_fd(),
                        libc::POLLOUT,
                        Duration::from_millis(10),
                    );
                }
                libc::EAGAIN | libc::ENOBUFS => {
                    self.counters.tx_full += 1;
                    i += 1;
                    retried = false;
                }
                libc::EMSGSIZE => {
                    let len = iov[i].iov_len;
                    result = Err(PortError::Unsupported {
                        dev: self.dev.clone(),
                        what: format!("a frame of {len} bytes exceeds the device's MTU"),
                    });
                    i += 1;
                }
                _ => {
                    result = Err(
                        sys::device_fault(&self.dev, errno).unwrap_or(PortError::Io {
                            dev: self.dev.clone(),
                            what: "sending frames",
                            source: e,
                        }),
                    );
                    break;
                }
            }
        }
        self.buf.clear();
        self.ends.clear();
        result
    }
}

impl TxPort for AfPacketTx {
    fn name(&self) -> &str {
        &self.dev
    }

    /// Queues the frame; every 64 frames (`TX_BATCH`) the queue is sent. Frames the device's
    /// queue refuses when the batch is sent are counted in `tx_full`: this port returns
    /// `Ok(true)` for every frame it queued, so `tx_full`, not the count of `Ok(false)`, is
    /// the number of frames dropped; `tx_packets` counts frames the kernel took.
    fn send(&mut self, _ts: Timestamp, frame: &[u8]) -> Result<bool, PortError> {
        self.buf.extend_from_slice(frame);
        self.ends.push(self.buf.len());
        if self.ends.len() >= TX_BATCH {
            self.send_queued()?;
        }
        Ok(true)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if !self.ends.is_empty() {
            self.send_queued()?;
        }
        Ok(())
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

impl AfPacketTx {
    /// Ok while the device exists and is up.
    pub fn check(&self) -> Result<(), PortError> {
        self.live.check()
    }
}
