//! `edc-sync audit ...`

use std::io::Write;

use anyhow::Context;

use crate::audit::{verify, NotIntact};
use crate::cli::AuditCommand;

pub fn run(cmd: AuditCommand) -> anyhow::Result<()> {
    match cmd {
        AuditCommand::Verify { file } => {
            let report = verify(&file)?;
            if !report.intact() {
                return Err(NotIntact(report).into());
            }
            writeln!(std::io::stdout().lock(), "{report}").context("writing the report to stdout")?;
            Ok(())
        }
    }
}
