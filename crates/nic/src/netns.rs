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
            // SAFETY: setns(2) takes a descriptor we own (alive until `file` drops after
            // the call) and a flag; it changes only this thread's network namespace, and
            // this thread ends when `f` returns.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
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
            drop(file);
            Ok(f())
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
