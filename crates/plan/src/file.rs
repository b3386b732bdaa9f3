//! PLAN files: a placement the executor runs (`fusebox run --plan PLAN`), saved as JSON with
//! the chain it was made for and what the planner predicted.
//!
//! ```json
//! {
//!   "format": 1,
//!   "chain": { "path": "examples/isp/chain.toml", "fingerprint": "fnv1a64:…",
//!              "nfs": ["fw", "router", "napt"] },
//!   "made_by": "hand",
//!   "placement": { "stages": [ { "nfs": [0, 1], "processor": 0 },
//!                              { "nfs": [2], "processor": 1 } ],
//!                  "replicas": 1 },
//!   "parallel": null,
//!   "predicted": { "stages": [2100000.0, 3900000.0], "overall": 2100000.0 }
//! }
//! ```
//!
//! NF indices are positions in the chain file's NF order (`chain.nfs`, the order of
//! [`chain::Executor::nfs`]). The fingerprint covers what the plan depends on: every NF's
//! name, its Click configuration's text (or operator class and arguments) and defines, the
//! links and the entries; a plan whose chain changed since is refused
//! ([`PlanError::Stale`]). The path is informative only: a plan still loads when the chain
//! was moved. `parallel` and `predicted` may be left out; so may `replicas` (1) and `note`
//! (what the planner changed in the partition it found: NFs moved so the executor runs it).

use chain::layout::{Parallel, Placement, Stage};
use chain::ChainFile;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The format version this crate writes and reads.
pub const FORMAT: u32 = 1;

/// A plan file's contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// The format version ([`FORMAT`]).
    pub format: u32,
    /// The chain it was made for.
    pub chain: ChainRef,
    /// What made it: `hand` (`fusebox plan --pipeline`), or the partitioner's name.
    pub made_by: String,
    /// The stages, their processors and the replicas.
    pub placement: Placement,
    /// NFs run side by side on copies of each packet, if any.
    #[serde(default)]
    pub parallel: Option<Parallel>,
    /// What the planner predicted for the placement.
    #[serde(default)]
    pub predicted: Option<Prediction>,
    /// What the planner says about the placement: how it was changed from what the
    /// partitioner found (NFs moved so the executor accepts it), if at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The chain a plan was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainRef {
    /// Where the chain file was (informative).
    pub path: String,
    /// [`fingerprint`] of the chain when the plan was made.
    pub fingerprint: String,
    /// The NFs' names in chain order (what the placement's indices name).
    pub nfs: Vec<String>,
}

/// Predicted rates, in packets per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prediction {
    /// Per stage, in the placement's stage order (one replica).
    pub stages: Vec<f64>,
    /// The whole placement (all replicas).
    pub overall: f64,
}

/// Why a plan could not be made, read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The file could not be read.
    #[error("{path}: cannot read the plan: {source}")]
    Read {
        /// The plan file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a plan.
    #[error(
        "{path}: not a FuseBox plan (expected JSON with format, chain {{path, fingerprint, nfs}}, \
         made_by, placement {{stages [{{nfs, processor}}], replicas}}, optional parallel and \
         predicted): {source}"
    )]
    Parse {
        /// The plan file.
        path: PathBuf,
        /// What the parser said.
        source: serde_json::Error,
    },
    /// A format version this build does not read.
    #[error("{path}: plan format {found}, this fusebox reads format {FORMAT}")]
    Format {
        /// The plan file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
    /// The placement (or parallel groups) do not fit the plan's chain.
    #[error("{path}: {why}")]
    Invalid {
        /// The plan file (or `--pipeline`).
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The chain changed since the plan was made.
    #[error("{0}")]
    Stale(Box<Stale>),
    /// A file the fingerprint covers could not be read.
    #[error("{chain}: cannot read NF {nf}'s configuration {file}: {source}")]
    Fingerprint {
        /// The chain file.
        chain: String,
        /// The NF.
        nf: String,
        /// Its configuration file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file could not be written.
    #[error("{path}: cannot write the plan: {source}")]
    Write {
        /// The plan file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What a stale plan was made for and what the chain is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    /// The plan file.
    pub path: String,
    /// The chain path the plan names.
    pub made_for: String,
    /// The NFs it names.
    pub made_nfs: String,
    /// Its fingerprint.
    pub made: String,
    /// The chain given now.
    pub chain: String,
    /// Its NFs.
    pub now_nfs: String,
    /// Its fingerprint.
    pub now: String,
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: the plan was made for {} (NFs {}, fingerprint {}); {} is now NFs {}, \
             fingerprint {}: make the plan again (fusebox plan)",
            self.path, self.made_for, self.made_nfs, self.made, self.chain, self.now_nfs, self.now
        )
    }
}

/// 64-bit FNV-1a, folded over the pieces a fingerprint covers (each followed by a 0xff
/// separator so that `ab`+`c` and `a`+`bc` differ).
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes.iter().chain(std::iter::once(&0xff)) {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The fingerprint of `chain`: NF names, configurations (the Click file's text, or the
/// operator class and arguments), defines, links and entries, in file order.
pub fn fingerprint(chain: &ChainFile) -> Result<String, PlanError> {
    let mut h = Fnv::new();
    for nf in &chain.nfs {
        h.add(nf.name.as_bytes());
        match &nf.rust {
            Some(r) => {
                h.add(r.class.as_bytes());
                h.add(r.args.as_bytes());
                h.add(&[r.inputs as u8, r.outputs as u8]);
            }
            None => {
                let text = std::fs::read(&nf.click).map_err(|source| PlanError::Fingerprint {
                    chain: chain.path.display().to_string(),
                    nf: nf.name.clone(),
                    file: nf.click.clone(),
                    source,
                })?;
                h.add(&text);
            }
        }
        for (k, v) in &nf.defines {
            h.add(k.as_bytes());
            h.add(v.as_bytes());
        }
    }
    for (a, b, _) in &chain.links {
        h.add(a.to_string().as_bytes());
        h.add(b.to_string().as_bytes());
    }
    for (e, _) in &chain.entries {
        h.add(e.to_string().as_bytes());
    }
    Ok(format!("fnv1a64:{:016x}", h.0))
}

/// Checks `placement` (and `parallel`) against a chain of `nfs` NFs: at least one stage,
/// none empty, every NF in exactly one stage, indices in range, at least one replica;
/// parallel groups of at least two NFs, each NF in at most one group.
pub fn validate(
    placement: &Placement,
    parallel: Option<&Parallel>,
    nfs: usize,
) -> Result<(), String> {
    if placement.stages.is_empty() {
        return Err("the placement has no stage".into());
    }
    if placement.replicas == 0 {
        return Err("replicas must be at least 1".into());
    }
    let mut stage_of = vec![None; nfs];
    for (s, st) in placement.stages.iter().enumerate() {
        if st.nfs.is_empty() {
            return Err(format!("stage {s} has no NF"));
        }
        for &n in &st.nfs {
            let slot = stage_of.get_mut(n).ok_or_else(|| {
                format!("stage {s} names NF {n}, but the chain has {nfs} NFs (0..{nfs})")
            })?;
            if let Some(t) = *slot {
                return Err(format!("NF {n} is in stage {t} and in stage {s}"));
            }
            *slot = Some(s);
        }
    }
    if let Some(n) = stage_of.iter().position(Option::is_none) {
        return Err(format!("NF {n} is in no stage"));
    }
    if let Some(p) = parallel {
        let mut seen = vec![false; nfs];
        for (g, grp) in p.groups.iter().enumerate() {
            if grp.nfs.len() < 2 {
                return Err(format!("parallel group {g} has fewer than two NFs"));
            }
            for &n in &grp.nfs {
                match seen.get_mut(n) {
                    None => return Err(format!("parallel group {g} names NF {n}, out of range")),
                    Some(true) => return Err(format!("NF {n} is in two parallel groups")),
                    Some(s) => *s = true,
                }
            }
        }
    }
    Ok(())
}

/// A placement written by hand: stages separated by `|`, NFs of a stage by `,`, by name
/// (`fw,router|napt`); stage `s` runs on processor `s`. Every NF of `chain` must appear once.
pub fn pipeline(chain: &ChainFile, spec: &str, replicas: usize) -> Result<Placement, PlanError> {
    let invalid = |why: String| PlanError::Invalid {
        path: format!("--pipeline '{spec}'"),
        why,
    };
    let mut stages = Vec::new();
    for (s, part) in spec.split('|').enumerate() {
        let mut nfs = Vec::new();
        for name in part.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let i = chain
                .nfs
                .iter()
                .position(|n| n.name == name)
                .ok_or_else(|| {
                    invalid(format!(
                        "no NF {name} in {} (NFs: {})",
                        chain.path.display(),
                        names(chain).join(", ")
                    ))
                })?;
            nfs.push(i);
        }
        stages.push(Stage { nfs, processor: s });
    }
    let placement = Placement { stages, replicas };
    validate(&placement, None, chain.nfs.len()).map_err(|why| {
        invalid(format!(
            "{why} (NFs of {}: {})",
            chain.path.display(),
            names(chain).join(", ")
        ))
    })?;
    Ok(placement)
}

fn names(chain: &ChainFile) -> Vec<String> {
    chain.nfs.iter().map(|n| n.name.clone()).collect()
}

impl PlanFile {
    /// A plan of `placement` for `chain`, made by `made_by` (checked: see [`validate`]).
    pub fn new(
        chain: &ChainFile,
        placement: Placement,
        made_by: &str,
    ) -> Result<PlanFile, PlanError> {
        validate(&placement, None, chain.nfs.len()).map_err(|why| PlanError::Invalid {
            path: chain.path.display().to_string(),
            why,
        })?;
        Ok(PlanFile {
            format: FORMAT,
            chain: ChainRef {
                path: chain.path.display().to_string(),
                fingerprint: fingerprint(chain)?,
                nfs: names(chain),
            },
            made_by: made_by.to_string(),
            placement,
            parallel: None,
            predicted: None,
            note: None,
        })
    }

    /// Reads a plan file: JSON of the right format whose placement is consistent with the
    /// NFs it names (not yet checked against a chain: [`PlanFile::check`]).
    pub fn load(path: &Path) -> Result<PlanFile, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PlanFile::parse(&text, path)
    }

    /// [`PlanFile::load`] from text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<PlanFile, PlanError> {
        // The version first, so a future format is named as such rather than as bad JSON.
        #[derive(Deserialize)]
        struct Version {
            format: u32,
        }
        if let Ok(v) = serde_json::from_str::<Version>(text) {
            if v.format != FORMAT {
                return Err(PlanError::Format {
                    path: path.to_path_buf(),
                    found: v.format,
                });
            }
        }
        let plan: PlanFile = serde_json::from_str(text).map_err(|source| PlanError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |why: String| PlanError::Invalid {
            path: path.display().to_string(),
            why,
        };
        validate(
            &plan.placement,
            plan.parallel.as_ref(),
            plan.chain.nfs.len(),
        )
        .map_err(invalid)?;
        if let Some(p) = &plan.predicted {
            if p.stages.len() != plan.placement.stages.len() {
                return Err(invalid(format!(
                    "predicted has {} stage rates for {} stages",
                    p.stages.len(),
                    plan.placement.stages.len()
                )));
            }
        }
        Ok(plan)
    }

    /// Checks that the plan was made for `chain` as it is now (same NFs in the same order,
    /// same fingerprint); `path` names the plan in the error.
    pub fn check(&self, chain: &ChainFile, path: &Path) -> Result<(), PlanError> {
        let now = fingerprint(chain)?;
        let now_nfs = names(chain);
        if now != self.chain.fingerprint || now_nfs != self.chain.nfs {
            return Err(PlanError::Stale(Box::new(Stale {
                path: path.display().to_string(),
                made_for: self.chain.path.clone(),
                made_nfs: self.chain.nfs.join(","),
                made: self.chain.fingerprint.clone(),
                chain: chain.path.display().to_string(),
                now_nfs: now_nfs.join(","),
                now,
            })));
        }
        Ok(())
    }

    /// The plan as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // A plan is plain data (strings, integers, finite floats): it always serializes.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Writes the plan to `path` as JSON.
    pub fn save(&self, path: &Path) -> Result<(), PlanError> {
        let mut text = self.to_json();
        text.push('\n');
        std::fs::write(path, text).map_err(|source| PlanError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The NFs of stage `s` by name (for messages), `?` for an index out of range.
    pub fn stage_names(&self, s: usize) -> Vec<String> {
        self.placement
            .stages
            .get(s)
            .map(|st| {
                st.nfs
                    .iter()
                    .map(|&n| self.chain.nfs.get(n).cloned().unwrap_or_else(|| "?".into()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chain::layout::Group;

    fn isp() -> ChainFile {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/isp/chain.toml");
        ChainFile::load(&root).expect("examples/isp")
    }

    #[test]
    fn a_plan_round_trips_and_fits_its_chain() {
        let chain = isp();
        let placement = pipeline(&chain, "fw,router|napt", 2).unwrap();
        assert_eq!(
            placement,
            Placement {
                stages: vec![
                    Stage {
                        nfs: vec![0, 1],
                        processor: 0
                    },
                    Stage {
                        nfs: vec![2],
                        processor: 1
                    }
                ],
                replicas: 2
            }
        );
        let mut plan = PlanFile::new(&chain, placement, "hand").unwrap();
        plan.predicted = Some(Prediction {
            stages: vec![1.0e6, 2.5e6],
            overall: 2.0e6,
        });
        let back = PlanFile::parse(&plan.to_json(), Path::new("p.json")).unwrap();
        assert_eq!(back, plan);
        back.check(&chain, Path::new("p.json")).unwrap();
        // Replicas may be left out of a hand-written file.
        let text = plan.to_json().replace("\"replicas\": 2", "\"replicas\": 1");
        let short = text.replace(",\n    \"replicas\": 1", "");
        assert_ne!(short, text);
        let p = PlanFile::parse(&short, Path::new("p.json")).unwrap();
        assert_eq!(p.placement.replicas, 1);
    }

    #[test]
    fn a_stale_plan_is_refused() {
        let chain = isp();
        let plan = PlanFile::new(
            &chain,
            pipeline(&chain, "fw|router|napt", 1).unwrap(),
            "hand",
        )
        .unwrap();
        let mut changed = chain.clone();
        changed.nfs[1]
            .defines
            .push(("MAC0".into(), "02:00:00:00:00:01".into()));
        let e = plan.check(&changed, Path::new("p.json")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("make the plan again"), "{msg}");
        assert!(msg.contains("fw,router,napt"), "{msg}");
        let mut swapped = chain.clone();
        swapped.nfs.swap(0, 1);
        assert!(matches!(
            plan.check(&swapped, Path::new("p.json")),
            Err(PlanError::Stale(_))
        ));
    }

    #[test]
    fn bad_placements_are_named() {
        let chain = isp();
        for (spec, want) in [
            ("fw|router", "NF 2 is in no stage"),
            ("fw,router|napt,fw", "NF 0 is in stage 0 and in stage 1"),
            ("fw|ids|napt", "no NF ids"),
            ("fw,router,napt|", "stage 1 has no NF"),
        ] {
            let e = pipeline(&chain, spec, 1).unwrap_err().to_string();
            assert!(e.contains(want), "{spec}: {e}");
        }
        let one = |nfs: Vec<usize>| Stage { nfs, processor: 0 };
        let p = Placement {
            stages: vec![one(vec![0, 1, 2])],
            replicas: 0,
        };
        assert!(validate(&p, None, 3).unwrap_err().contains("replicas"));
        let p = Placement {
            stages: vec![one(vec![0, 1, 7])],
            replicas: 1,
        };
        assert!(validate(&p, None, 3).unwrap_err().contains("NF 7"));
        let p = Placement {
            stages: vec![one(vec![0, 1, 2])],
            replicas: 1,
        };
        let groups = |g: Vec<Vec<usize>>| Parallel {
            groups: g.into_iter().map(|nfs| Group { nfs }).collect(),
        };
        assert!(validate(&p, Some(&groups(vec![vec![0, 1]])), 3).is_ok());
        assert!(validate(&p, Some(&groups(vec![vec![0]])), 3).is_err());
        assert!(validate(&p, Some(&groups(vec![vec![0, 1], vec![1, 2]])), 3).is_err());
    }

    #[test]
    fn load_errors_name_the_file_and_what_was_expected() {
        let tmp = tempfile::Builder::new()
            .prefix("fusebox-planfile-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        let f = dir.join("bad.json");
        std::fs::write(&f, "{\"format\": 1, \"placement\": 3}").unwrap();
        let e = PlanFile::load(&f).unwrap_err().to_string();
        assert!(
            e.contains("bad.json") && e.contains("not a FuseBox plan"),
            "{e}"
        );
        std::fs::write(&f, "{\"format\": 9}").unwrap();
        let e = PlanFile::load(&f).unwrap_err().to_string();
        assert!(e.contains("plan format 9"), "{e}");
        let e = PlanFile::load(&dir.join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing.json") && e.contains("cannot read"),
            "{e}"
        );
        // Out of range for the NFs the plan names.
        let chain = isp();
        let plan = PlanFile::new(
            &chain,
            pipeline(&chain, "fw,router,napt", 1).unwrap(),
            "hand",
        )
        .unwrap();
        let text = plan
            .to_json()
            .replace("\"nfs\": [\n          0,", "\"nfs\": [\n          5,");
        assert_ne!(text, plan.to_json());
        std::fs::write(&f, text).unwrap();
        let e = PlanFile::load(&f).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("NF 5"), "{e}");
    }
}
