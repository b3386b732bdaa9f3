//! Elements of this family (being written).

use crate::{Args, BuildCtx, ConfigError, Element};

/// Builds an element of this family, or `None` if `class` is not one of them.
pub fn build(class: &str, args: &Args, bcx: &BuildCtx) -> Option<Result<Box<dyn Element>, ConfigError>> {
    let _ = (class, args, bcx);
    None
}
