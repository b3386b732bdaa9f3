//! What an agent drives: a data plane holding a host's entries (the keys under the host's
//! plan prefix, [`crate::keys`], with their JSON values), and its counters.
//!
//! [`reconcile`] makes a data plane match a set of desired entries with the fewest
//! operations: a restarted agent whose data plane kept its state (pinned maps) does nothing.
//! [`MemoryDataplane`] is the fake for tests (its state outlives an agent, like pinned maps);
//! [`FileDataplane`] keeps the same state in a JSON file (for running agents without a kernel
//! data plane, e.g. trying the control plane out).

use std::collections::BTreeMap;

use crate::keys::Kv;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Counters of one stage: name → value (packets, drops by reason...).
pub type Counters = BTreeMap<String, u64>;

/// Errors of a data plane.
#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    /// An entry could not be installed or removed.
    #[error("entry {key}: {why}")]
    Entry {
        /// The entry's key.
        key: String,
        /// Why.
        why: String,
    },
    /// Reading or writing the data plane's state failed.
    #[error("{0}")]
    State(String),
}

/// A data plane an agent reconciles.
pub trait Dataplane {
    /// The entries installed now (plan key → value).
    fn installed(&self) -> Result<Kv, DataplaneError>;
    /// Installs (or replaces) `puts` and removes `deletes`.
    fn apply(&mut self, puts: &Kv, deletes: &[String]) -> Result<(), DataplaneError>;
    /// The counters of each stage (`<instance>/<stage>`, as [`crate::status::group_of`]
    /// names them → counters).
    fn counters(&self) -> Result<BTreeMap<String, Counters>, DataplaneError>;
}

/// What one reconciliation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Entries installed or replaced.
    pub put: usize,
    /// Entries removed.
    pub deleted: usize,
}

/// Makes `dp` hold exactly `desired`: installs what is missing or different, removes what is
/// not desired, and touches nothing else.
pub fn reconcile<D: Dataplane + ?Sized>(
    dp: &mut D,
    desired: &Kv,
) -> Result<Reconciled, DataplaneError> {
    let installed = dp.installed()?;
    let (puts, deletes) = crate::keys::diff(&installed, desired);
    if !puts.is_empty() || !deletes.is_empty() {
        dp.apply(&puts, &deletes)?;
    }
    Ok(Reconciled {
        put: puts.len(),
        deleted: deletes.len(),
    })
}

/// The state of the fake data planes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeState {
    /// The installed entries.
    pub entries: Kv,
    /// Entries installed or replaced since the state was made (work done).
    pub puts: u64,
    /// Entries removed since the state was made.
    pub deletes: u64,
}

impl FakeState {
    fn apply(&mut self, puts: &Kv, deletes: &[String]) {
        for k in deletes {
            if self.entries.remove(k).is_some() {
                self.deletes += 1;
            }
        }
        for (k, v) in puts {
            self.entries.insert(k.clone(), v.clone());
            self.puts += 1;
        }
    }

    /// Fake counters: per stage, its entry count.
    fn counters(&self) -> BTreeMap<String, Counters> {
        let mut out: BTreeMap<String, Counters> = BTreeMap::new();
        for k in self.entries.keys() {
            let group = crate::status::group_of(k);
            *out.entry(group)
                .or_default()
                .entry("entries".into())
                .or_default() += 1;
        }
        out
    }
}

/// An in-memory data plane; clones share one state, which outlives any agent using it (as
/// pinned maps outlive an agent process).
#[derive(Debug, Clone, Default)]
pub struct MemoryDataplane {
    state: Arc<Mutex<FakeState>>,
}

impl MemoryDataplane {
    /// An empty data plane.
    pub fn new() -> MemoryDataplane {
        MemoryDataplane::default()
    }

    /// A copy of the state now.
    pub fn state(&self) -> FakeState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, FakeState>, DataplaneError> {
        self.state
            .lock()
            .map_err(|_| DataplaneError::State("the fake data plane's lock is poisoned".into()))
    }
}

impl Dataplane for MemoryDataplane {
    fn installed(&self) -> Result<Kv, DataplaneError> {
        Ok(self.lock()?.entries.clone())
    }

    fn apply(&mut self, puts: &Kv, deletes: &[String]) -> Result<(), DataplaneError> {
        self.lock()?.apply(puts, deletes);
        Ok(())
    }

    fn counters(&self) -> Result<BTreeMap<String, Counters>, DataplaneError> {
        Ok(self.lock()?.counters())
    }
}

/// A data plane kept in a JSON file (written atomically on every change): the state survives
/// the agent process, as pinned maps do.
#[derive(Debug, Clone)]
pub struct FileDataplane {
    path: PathBuf,
}

impl FileDataplane {
    /// A data plane in `path` (created on the first change).
    pub fn new(path: &Path) -> FileDataplane {
        FileDataplane {
            path: path.to_path_buf(),
        }
    }

    /// The state in the file (empty if there is no file yet).
    pub fn load(&self) -> Result<FakeState, DataplaneError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| DataplaneError::State(format!("{}: {e}", self.path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FakeState::default()),
            Err(e) => Err(DataplaneError::State(format!(
                "{}: {e}",
                self.path.display()
            ))),
        }
    }

    fn save(&self, state: &FakeState) -> Result<(), DataplaneError> {
        let err =
            |e: std::io::Error| DataplaneError::State(format!("{}: {e}", self.path.display()));
        let tmp = self.path.with_extension("tmp");
        let text = serde_json::to_string_pretty(state)
            .map_err(|e| DataplaneError::State(e.to_string()))?;
        std::fs::write(&tmp, text).map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)
    }
}

impl Dataplane for FileDataplane {
    fn installed(&self) -> Result<Kv, DataplaneError> {
        Ok(self.load()?.entries)
    }

    fn apply(&mut self, puts: &Kv, deletes: &[String]) -> Result<(), DataplaneError> {
        let mut state = self.load()?;
        state.apply(puts, deletes);
        self.save(&state)
    }

    fn counters(&self) -> Result<BTreeMap<String, Counters>, DataplaneError> {
        Ok(self.load()?.counters())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/fusebox/sfc/v1/plan/h/";

    fn map(kv: &[(&str, &str)]) -> Kv {
        kv.iter()
            .map(|(k, v)| (format!("{P}{k}"), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn reconcile_does_only_the_difference() {
        let mut dp = MemoryDataplane::new();
        let want = map(&[("i/sf1/fwd/100/254", "a"), ("i/sf1/fwd/200/254", "b")]);
        assert_eq!(
            reconcile(&mut dp, &want).unwrap(),
            Reconciled { put: 2, deleted: 0 }
        );
        assert_eq!(reconcile(&mut dp, &want).unwrap(), Reconciled::default());
        let want2 = map(&[("i/sf1/fwd/100/254", "c"), ("i/@cls/cls/1/a/b/6/1/2", "x")]);
        assert_eq!(
            reconcile(&mut dp, &want2).unwrap(),
            Reconciled { put: 2, deleted: 1 }
        );
        let s = dp.state();
        assert_eq!(s.entries, want2);
        assert_eq!((s.puts, s.deletes), (4, 1));
        assert_eq!(dp.counters().unwrap()["sf1/fwd"]["entries"], 1);
    }

    #[test]
    fn file_dataplane_keeps_its_state_across_instances() {
        let dir = tempfile::Builder::new()
            .prefix("fusebox-dp-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("dataplane.json");
        let mut dp = FileDataplane::new(&path);
        reconcile(&mut dp, &map(&[("i/sf1/fwd/1/255", "v")])).unwrap();
        let mut again = FileDataplane::new(&path);
        assert_eq!(
            reconcile(&mut again, &map(&[("i/sf1/fwd/1/255", "v")])).unwrap(),
            Reconciled::default()
        );
        assert_eq!(again.load().unwrap().puts, 1);
        std::fs::write(&path, "not json").unwrap();
        assert!(FileDataplane::new(&path).installed().is_err());
    }
}
