//! Thin, checked wrappers around the system calls the ports use: file descriptors, shared
//! mappings, socket options, poll, and the device liveness check.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::time::Duration;

use ports::port::{Capability, PortError};

/// The error of the last failed system call.
pub(crate) fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Maps a system call's error to a port error: missing privilege names `cap`, a vanished
/// device is [`PortError::Gone`], a down one [`PortError::Down`].
pub(crate) fn port_err(dev: &str, what: &'static str, cap: Capability, e: io::Error) -> PortError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => PortError::Privilege {
            dev: dev.to_string(),
            what,
            cap: missing(&[cap]),
        },
        Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::Gone {
            dev: dev.to_string(),
        },
        Some(libc::ENETDOWN) => PortError::Down {
            dev: dev.to_string(),
        },
        _ => PortError::Io {
            dev: dev.to_string(),
            what,
            source: e,
        },
    }
}

/// Opens a socket; the descriptor is closed on drop.
pub(crate) fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; any argument values are safe to pass.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: `fd` was just returned by socket(2), is open, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets a socket option whose value is the plain-data `val`.
pub(crate) fn setsockopt<T: Copy>(fd: &OwnedFd, level: i32, name: i32, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of `size_of::<T>()` bytes for the duration of the
    // call; the kernel only reads that many bytes.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_err())
    } else {
        Ok(())
    }
}

/// Reads a socket option into a zero-initialised plain-data `T`.
///
/// `T` must be a plain-old-data structure (integers only) for which all-zero bytes are a
/// valid value; every caller passes one of the kernel's option structures or an integer.
pub(crate) fn getsockopt<T: Copy>(fd: &OwnedFd, level: i32, name: i32) -> io::Result<T> {
    // SAFETY: callers only instantiate `T` with integer-only structures, for which the
    // all-zero bit pattern is a valid value.
    let mut val: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is a live, writable `T` and `len` holds its size; the kernel writes at
    // most `len` bytes and updates `len`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut val as *mut T).cast(),
            &mut len,
        )
    };
    if r < 0 {
        Err(last_err())
    } else {
        Ok(val)
    }
}

/// Binds a socket to the plain-data address `addr`.
pub(crate) fn bind<T: Copy>(fd: &OwnedFd, addr: &T) -> io::Result<()> {
    // SAFETY: `addr` points to a live socket address structure of `size_of::<T>()` bytes;
    // the kernel only reads it.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_err())
    } else {
        Ok(())
    }
}

/// Waits up to `timeout` for `events` on `fd`; returns the events that happened (0 on time
/// out). An interrupted wait returns 0, so callers simply try again.
pub(crate) fn poll(fd: RawFd, events: i16, timeout: Duration) -> io::Result<i16> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // Round up so a sub-millisecond wait still waits.
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
    // SAFETY: `p` is one live pollfd and the count passed is 1.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = last_err();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(if r == 0 { 0 } else { p.revents })
}

/// Waits up to `timeout` for the events asked in `fds`; returns how many descriptors have
/// events (0 on time out or interruption), their `revents` filled in.
pub(crate) fn poll_many(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
    // SAFETY: `fds` is a live, writable slice of pollfd and its length is passed with it.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = last_err();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// Reads and clears the socket's pending error (`SO_ERROR`); 0 when there is none.
pub(crate) fn take_socket_error(fd: &OwnedFd) -> i32 {
    getsockopt::<libc::c_int>(fd, libc::SOL_SOCKET, libc::SO_ERROR).unwrap_or(0)
}

/// A shared memory mapping, unmapped on drop.
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to another thread moves
// that ownership. Concurrent access to the memory is governed by the rings' own protocol
// (atomics on producer/consumer indices), not by this type.
unsafe impl Send for Mmap {}
// SAFETY: `Mmap` hands out only raw pointers; readers through `&Mmap` synchronise via the
// rings' atomics.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at `offset` (a ring), or anonymous memory when `fd` is None.
    pub(crate) fn new(fd: Option<&OwnedFd>, len: usize, offset: i64) -> io::Result<Mmap> {
        let (flags, raw) = match fd {
            Some(f) => (libc::MAP_SHARED | libc::MAP_POPULATE, f.as_raw_fd()),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: a fresh mapping at an address the kernel chooses; it aliases no Rust
        // object. The arguments are checked by the kernel.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                raw,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_err());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Mmap { ptr, len })
    }

    /// The first byte of the mapping.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The mapping's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping made by `Mmap::new` and not yet unmapped;
        // every pointer derived from it is owned by the value being dropped.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The interface index of `dev` in the calling thread's network namespace.
pub(crate) fn ifindex(dev: &str) -> Result<u32, PortError> {
    let missing = || PortError::NoDevice {
        dev: dev.to_string(),
    };
    if dev.is_empty() || dev.len() >= libc::IFNAMSIZ {
        return Err(missing());
    }
    let c = CString::new(dev).map_err(|_| missing())?;
    // SAFETY: `c` is a NUL-terminated string that lives across the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(missing())
    } else {
        Ok(i)
    }
}

/// `struct ifreq` with the union read as raw bytes (name, then index or flags).
#[repr(C)]
#[derive(Clone, Copy)]
struct IfReq {
    name: [u8; 16],
    data: [u8; 24],
}

const SIOCGIFNAME: libc::c_ulong = 0x8910;
const SIOCGIFFLAGS: libc::c_ulong = 0x8913;

/// Watches one device: is it still there (by index, whatever it is renamed to) and up? The
/// check runs through a datagram socket created in the device's network namespace, so it
/// answers for that namespace whichever thread asks.
pub(crate) struct Liveness {
    dev: String,
    ifindex: u32,
    ctl: OwnedFd,
}

impl Liveness {
    /// Watches `dev` (index `ifindex`) from the calling thread's network namespace.
    pub(crate) fn new(dev: &str, ifindex: u32) -> Result<Liveness, PortError> {
        let ctl = socket(libc::AF_INET, libc::SOCK_DGRAM, 0).map_err(|e| PortError::Io {
            dev: dev.to_string(),
            what: "opening a control socket",
            source: e,
        })?;
        Ok(Liveness {
            dev: dev.to_string(),
            ifindex,
            ctl,
        })
    }

    fn ioctl(&self, req: libc::c_ulong, r: &mut IfReq) -> io::Result<()> {
        // SAFETY: `r` is a live, writable ifreq-sized buffer (40 bytes, as the kernel's
        // `struct ifreq` on 64-bit Linux). SIOCGIFNAME and SIOCGIFFLAGS read and write only
        // that structure; SIOCETHTOOL also writes the `ethtool_channels` whose address its
        // caller put in the union and keeps alive across the call.
        let rc = unsafe { libc::ioctl(self.ctl.as_raw_fd(), req as _, r as *mut IfReq) };
        if rc < 0 {
            Err(last_err())
        } else {
            Ok(())
        }
    }

    /// The device's current name (it may have been renamed), or `Gone`.
    fn current_name(&self) -> Result<[u8; 16], PortError> {
        let mut r = IfReq {
            name: [0; 16],
            data: [0; 24],
        };
        r.data[..4].copy_from_slice(&(self.ifindex as i32).to_ne_bytes());
        self.ioctl(SIOCGIFNAME, &mut r)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::Gone {
                    dev: self.dev.clone(),
                },
                _ => PortError::Io {
                    dev: self.dev.clone(),
                    what: "looking the device up",
                    source: e,
                },
            })?;
        Ok(r.name)
    }

    /// How many receive queues the driver reports (ethtool's receive-only plus combined
    /// channels), 1 when it reports none.
    pub(crate) fn rx_queues(&self) -> Result<u32, PortError> {
        const SIOCETHTOOL: libc::c_ulong = 0x8946;
        const ETHTOOL_GCHANNELS: u32 = 0x3c;
        // struct ethtool_channels: cmd, max_rx, max_tx, max_other, max_combined, rx_count,
        // tx_count, other_count, combined_count.
        let mut ch = [0u32; 9];
        ch[0] = ETHTOOL_GCHANNELS;
        let mut r = IfReq {
            name: self.current_name()?,
            data: [0; 24],
        };
        r.data[..8].copy_from_slice(&(ch.as_mut_ptr() as u64).to_ne_bytes());
        // `ch` lives until the end of this function, past the ioctl that writes it.
        match self.ioctl(SIOCETHTOOL, &mut r) {
            Ok(()) => Ok((ch[5] + ch[8]).max(1)),
            Err(_) => Ok(1),
        }
    }

    /// As [`Liveness::check`] for a device about to be opened: down is [`PortError::NotUp`].
    pub(crate) fn check_open(&self) -> Result<(), PortError> {
        match self.check() {
            Err(PortError::Down { dev }) => Err(PortError::NotUp { dev }),
            other => other,
        }
    }

    /// Ok while the device exists and is up; [`PortError::Gone`] once it was deleted,
    /// [`PortError::Down`] while it is down.
    pub(crate) fn check(&self) -> Result<(), PortError> {
        let mut r = IfReq {
            name: self.current_name()?,
            data: [0; 24],
        };
        if let Err(e) = self.ioctl(SIOCGIFFLAGS, &mut r) {
            return Err(match e.raw_os_error() {
                Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::Gone {
                    dev: self.dev.clone(),
                },
                _ => PortError::Io {
                    dev: self.dev.clone(),
                    what: "reading the device's flags",
                    source: e,
                },
            });
        }
        let flags = i16::from_ne_bytes([r.data[0], r.data[1]]) as i32;
        if flags & libc::IFF_UP == 0 {
            return Err(PortError::Down {
                dev: self.dev.clone(),
            });
        }
        Ok(())
    }
}

/// Whether an error of a send or receive call means the device went away or down, and which.
pub(crate) fn device_fault(dev: &str, errno: i32) -> Option<PortError> {
    match errno {
        libc::ENXIO | libc::ENODEV => Some(PortError::Gone {
            dev: dev.to_string(),
        }),
        libc::ENETDOWN => Some(PortError::Down {
            dev: dev.to_string(),
        }),
        _ => None,
    }
}

/// The current wall-clock time as a packet timestamp.
pub(crate) fn now() -> packet::Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    packet::Timestamp::from_parts(d.as_secs(), d.subsec_nanos())
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets in two 32-bit words.
const CAP_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The calling thread's effective capability set (bit n: capability n), or None when it
/// cannot be read.
fn effective_caps() -> Option<u64> {
    let mut h = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: capget(2) with a version-3 header reads the header and writes two CapData
    // entries, both live and writable for the call.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut CapHeader, d.as_mut_ptr()) };
    (r == 0).then(|| d[0].effective as u64 | (d[1].effective as u64) << 32)
}

fn holds(caps: u64, c: Capability) -> bool {
    const NET_ADMIN: u32 = 12;
    const NET_RAW: u32 = 13;
    const SYS_ADMIN: u32 = 21;
    const BPF: u32 = 39;
    let has = |n: u32| caps & (1u64 << n) != 0;
    match c {
        Capability::NetRaw => has(NET_RAW),
        Capability::NetAdmin => has(NET_ADMIN),
        Capability::Bpf => has(BPF) || has(SYS_ADMIN),
        Capability::SysAdmin => has(SYS_ADMIN),
    }
}

/// Of the capabilities an operation needs (`needs`, in the order the kernel checks them),
/// the first the calling thread lacks; the first of `needs` when it holds them all (the
/// refusal then came from elsewhere, a security module, and this is the best guess).
pub(crate) fn missing(needs: &[Capability]) -> Capability {
    let first = needs.first().copied().unwrap_or(Capability::NetRaw);
    match effective_caps() {
        Some(caps) => needs
            .iter()
            .copied()
            .find(|&c| !holds(caps, c))
            .unwrap_or(first),
        None => first,
    }
}

/// How often an idle receive port asks whether its device is still there and up, at most.
pub(crate) const LIVENESS_PERIOD: Duration = Duration::from_millis(10);

/// Paces an idle port's device checks (three system calls) to one per [`LIVENESS_PERIOD`],
/// however often a caller polls with a zero timeout.
pub(crate) struct Pace(std::time::Instant);

impl Pace {
    /// A pace whose first check is due at once.
    pub(crate) fn new() -> Pace {
        Pace(std::time::Instant::now() - LIVENESS_PERIOD)
    }

    /// Whether a check is due (and if so, restarts the period).
    pub(crate) fn due(&mut self) -> bool {
        let now = std::time::Instant::now();
        if now.duration_since(self.0) >= LIVENESS_PERIOD {
            self.0 = now;
            true
        } else {
            false
        }
    }
}
