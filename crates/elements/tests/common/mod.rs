//! What the integration tests share.

use std::path::{Path, PathBuf};

/// `../shared/data/<rel>` beside the repository, if it is there. When it is not, the test
/// skips with a message, except under `CI=true`, where the data must be there and its
/// absence is a failure.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{} is missing (CI=true: not skipping)", dir.display());
    }
    println!("SKIP: {} not found", dir.display());
    None
}
