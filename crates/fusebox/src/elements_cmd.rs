//! `fusebox elements [NAME]`: the element classes FuseBox builds and their documentation,
//! from the element registry (`elements::registry`), as Click's `click-elem2man` gives
//! Click's.

use crate::error::CliError;
use clap::Args;
use elements::registry::{all, class};
use std::process::ExitCode;

/// Arguments of `fusebox elements`.
#[derive(Args, Debug)]
pub struct ElementsArgs {
    /// A class to describe in full (`DecIPTTL`); without it, every class in one line.
    pub name: Option<String>,
}

/// `fusebox elements`.
pub fn run(a: &ElementsArgs) -> Result<ExitCode, CliError> {
    match &a.name {
        None => {
            for c in all() {
                outln!("{}", c.summary());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(name) => {
            let c = class(name).ok_or_else(|| {
                CliError::Invalid(format!(
                    "no element class `{name}` (`fusebox elements` lists them)"
                ))
            })?;
            outln!("{}", c.describe().trim_end());
            Ok(ExitCode::SUCCESS)
        }
    }
}
