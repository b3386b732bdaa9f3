//! The stop flag: SIGINT or SIGTERM asks a run to stop cleanly.
//!
//! A run loop checks [`Flag::is_set`] once per batch (one relaxed atomic load), never per
//! packet. When it is set the loop stops reading input, finishes every packet in flight,
//! flushes its outputs and prints its summary. A second signal, while the first is being
//! honoured, ends the process at once with status 130 (the shell's code for an interrupt),
//! for a run that does not stop quickly enough.

use signal_hook::consts::{SIGINT, SIGTERM};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Exit status of a second SIGINT/SIGTERM (128 + SIGINT).
pub const FORCED_EXIT: i32 = 130;

/// A shared "please stop" flag; clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct Flag(Arc<AtomicBool>);

impl Flag {
    /// A flag that only [`Flag::set`] sets.
    pub fn new() -> Self {
        Self::default()
    }

    /// A flag set by SIGINT and SIGTERM; a second such signal exits at once with
    /// [`FORCED_EXIT`]. The handlers stay installed for the life of the process.
    pub fn on_signals() -> io::Result<Self> {
        let f = Self::new();
        for sig in [SIGINT, SIGTERM] {
            // Registered first, so it sees the flag as it was before this signal: it exits
            // only on the second one.
            signal_hook::flag::register_conditional_shutdown(sig, FORCED_EXIT, f.0.clone())?;
            signal_hook::flag::register(sig, f.0.clone())?;
        }
        Ok(f)
    }

    /// Whether a stop was asked for.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Asks for a stop.
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let f = Flag::new();
        let g = f.clone();
        assert!(!g.is_set());
        f.set();
        assert!(g.is_set());
    }
}
