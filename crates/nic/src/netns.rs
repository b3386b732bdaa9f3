//! Running code inside a named network namespace (`ip netns add NAME`), for tests and tools
//! that open ports on devices of another namespace.
//!
//! A socket keeps the namespace it was created in: a port opened inside [`run_in`] keeps
//! working on that namespace's device after the call returns, from any thread.

use std::fs::File;
use std::os::fd::AsRawFd;

use ports::port::{Capability, PortError};

/// Runs `f` on a new thread that first joins the network namespace `name` (a file under
/// `/var/run/netns`, as `ip netns add` makes), and returns what `f` returned. The calling
/// thread's namespace is untouched. Joining needs `CAP_SYS_ADMIN`.
pub fn run_in<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> Result<T, PortError> {
    let path = std::path::Path::new("/var/run/netns").join(name);
    let file = File::open(&path).map_err(|e| PortError::Io {
        dev: format!("netns {name}"),
        what: "opening the namespace",
        source: e,
    })?;
    std::thread::scope(|s| {
        s.spawn(move || {
            setns(&file, name)?;
            drop(file);
            Ok(f())
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// The calling thread, moved into another network namespace until this guard drops (then
/// it returns to the namespace it was in). For work that must happen inside a namespace on
/// the current thread — attaching eBPF programs by interface index through netlink, which
/// libraries do in the calling thread's namespace — where [`run_in`]'s new thread cannot
/// take the state along. Sockets opened before stay in their own namespace.
#[derive(Debug)]
pub struct Entered {
    home: File,
}

/// Moves the calling thread into namespace `name` (a file under `/var/run/netns`) until
/// the returned guard drops. Needs `CAP_SYS_ADMIN`.
pub fn enter(name: &str) -> Result<Entered, PortError> {
    let home = File::open("/proc/thread-self/ns/net").map_err(|e| PortError::Io {
        dev: "netns (current)".into(),
        what: "opening the current namespace",
        source: e,
    })?;
    let path = std::path::Path::new("/var/run/netns").join(name);
    let target = File::open(&path).map_err(|e| PortError::Io {
        dev: format!("netns {name}"),
        what: "opening the namespace",
        source: e,
    })?;
    setns(&target, name)?;
    Ok(Entered { home })
}

/// setns(2) on the calling thread.
fn setns(ns: &File, name: &str) -> Result<(), PortError> {
    // SAFETY: setns(2) takes a descriptor that `ns` owns for the whole call and a flag; it
    // changes only the calling thread's network namespace.
    let r = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) => PortError::Privilege {
                dev: format!("netns {name}"),
                what: "joining a network namespace",
                cap: Capability::SysAdmin,
            },
            _ => PortError::Io {
                dev: format!("netns {name}"),
                what: "joining the namespace",
                source: e,
            },
        });
    }
    Ok(())
}

impl Drop for Entered {
    fn drop(&mut self) {
        // Returning home cannot fail for a namespace this thread was in a moment ago
        // (the descriptor keeps it alive); if it did, the thread must not go on elsewhere.
        if let Err(e) = setns(&self.home, "(the thread's own)") {
            panic!("could not return to the thread's network namespace: {e}");
        }
    }
}
