//! The XDP program that sends a device's frames to AF_XDP sockets, and the `bpf(2)` calls
//! that create its socket map, load it and attach it.
//!
//! The program is six instructions, assembled here rather than compiled from C: it needs no
//! C compiler, libbpf or object file at build or run time, and it cannot drift from the map
//! it is loaded with (the map's descriptor is patched into the load instruction):
//!
//! ```text
//! r2 = *(u32 *)(r1 + 16)          ; ctx->rx_queue_index
//! r1 = map_fd ll                  ; the XSKMAP (BPF_PSEUDO_MAP_FD)
//! r3 = XDP_PASS                   ; what to do when no socket serves the queue
//! call bpf_redirect_map           ; to the socket at index rx_queue_index
//! exit
//! ```
//!
//! It is attached through a BPF link (`BPF_LINK_CREATE`), detached when the link is dropped
//! (with the ports, and on every error path while opening), and detached by the kernel
//! when the process dies and its descriptors close.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_LINK_DETACH: libc::c_long = 34;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const XDP_PASS: i32 = 2;
/// Attach in generic (skb) mode: any device, frames copied into socket buffers first.
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// Attach in the driver (native) mode: needs driver support.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `union bpf_attr`, as raw bytes (the fields each command uses are written at their
/// offsets in the kernel's layout).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, name: &[u8]) -> &mut Attr {
        let n = name.len().min(15);
        self.0[off..off + n].copy_from_slice(&name[..n]);
        self
    }
}

/// Calls `bpf(cmd, attr)`. Every pointer written into `attr` must point to memory that is
/// alive and large enough for the command during the call (each caller's SAFETY comment).
fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live 128-byte buffer; the kernel reads at most 128 bytes of it and
    // follows only the pointers the caller put in it, which the caller keeps alive.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut Attr,
            std::mem::size_of::<Attr>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd(r: libc::c_long) -> OwnedFd {
    // SAFETY: the bpf commands that return a value return a new descriptor owned by us.
    unsafe { OwnedFd::from_raw_fd(r as i32) }
}

/// Creates an XSKMAP with `entries` slots (one per receive queue).
pub(crate) fn xsk_map(entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_XSKMAP)
        .u32(4, 4)
        .u32(8, 4)
        .u32(12, entries.max(1))
        .name(28, b"fusebox_xsks");
    bpf(BPF_MAP_CREATE, &mut a).map(fd)
}

/// Puts the socket `xsk` at index `queue` of `map`.
pub(crate) fn set_socket(map: &OwnedFd, queue: u32, xsk: &OwnedFd) -> io::Result<()> {
    let key = queue;
    let value = xsk.as_raw_fd() as u32;
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, &value as *const u32 as u64)
        .u64(24, 0);
    // `key` and `value` live until the end of this function, past the call.
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// One eBPF instruction.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    code as u64
        | ((dst as u64 & 0xf) | ((src as u64 & 0xf) << 4)) << 8
        | (off as u16 as u64) << 16
        | (imm as u32 as u64) << 32
}

/// The program's instructions for the map `map_fd`.
fn program(map_fd: i32) -> [u64; 6] {
    [
        insn(0x61, 2, 1, 16, 0),                     // ldxw r2, [r1 + 16]
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), // lddw r1, map
        insn(0, 0, 0, 0, 0),                         //   (upper half)
        insn(0xb7, 3, 0, 0, XDP_PASS),               // mov64 r3, XDP_PASS
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),  // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),                      // exit
    ]
}

/// Loads the redirect program for `map`. On failure the error carries the verifier's log.
pub(crate) fn load_redirect(map: &OwnedFd) -> Result<OwnedFd, (io::Error, String)> {
    let insns = program(map.as_raw_fd());
    let license = b"Apache-2.0\0";
    let mut log = vec![0u8; 16 * 1024];
    let mut a = Attr::new();
    a.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, insns.len() as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1)
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64)
        .name(48, b"fusebox_xsk")
        .u32(68, BPF_XDP);
    // `insns`, `license` and `log` live until the end of this function, past the call.
    bpf(BPF_PROG_LOAD, &mut a).map(fd).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        (e, String::from_utf8_lossy(&log[..end]).trim().to_string())
    })
}

/// An attached XDP program. Dropping it detaches the program at once (`BPF_LINK_DETACH`);
/// closing the descriptor alone would also detach it, but later, from a kernel work queue.
/// If the process dies, the kernel closes the descriptor and the program goes all the same.
pub(crate) struct XdpLink(OwnedFd);

impl Drop for XdpLink {
    fn drop(&mut self) {
        let mut a = Attr::new();
        a.u32(0, self.0.as_raw_fd() as u32);
        // Failing only leaves the detaching to the close that follows.
        let _ = bpf(BPF_LINK_DETACH, &mut a);
    }
}

/// Attaches `prog` to the device `ifindex` with `flags` (a mode); the program stays
/// attached while the returned link lives.
pub(crate) fn attach(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<XdpLink> {
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, flags);
    bpf(BPF_LINK_CREATE, &mut a).map(fd).map(XdpLink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        let p = program(7);
        // ldxw r2, [r1+16]: opcode 0x61, dst 2 / src 1 -> regs byte 0x12, offset 16.
        assert_eq!(p[0].to_le_bytes(), [0x61, 0x12, 16, 0, 0, 0, 0, 0]);
        // lddw r1, map fd 7 (src = BPF_PSEUDO_MAP_FD).
        assert_eq!(p[1].to_le_bytes(), [0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(p[2], 0);
        assert_eq!(p[3].to_le_bytes(), [0xb7, 0x03, 0, 0, 2, 0, 0, 0]);
        assert_eq!(p[4].to_le_bytes(), [0x85, 0, 0, 0, 51, 0, 0, 0]);
        assert_eq!(p[5].to_le_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
    }
}
