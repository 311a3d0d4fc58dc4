//! `edc-sync cursor ...`

use std::io::Write;

use crate::cli::CursorCommand;
use edc_core::error::IoContext;
use edc_core::ledger::StateLocation;
use edc_core::store::CursorFile;
use edc_core::stream::StreamIdentity;
use edc_core::Error;

pub fn run(cmd: CursorCommand) -> Result<(), Error> {
    match cmd {
        CursorCommand::Show {
            stream,
            stream_name,
            state,
            full,
        } => {
            let id = StreamIdentity {
                vendor: stream.vendor,
                tenant: stream.tenant,
                study: Some(stream.study),
                protocol_version: stream.protocol_version,
                stream: Some(stream_name),
            };
            let state = StateLocation::parse("--state", &state)?;
            let cursor = super::runtime()?.block_on(edc_core::ledger::cursor_of(&state, &id))?;
            let mut out = std::io::stdout().lock();
            let Some(cursor) = cursor else {
                let place = match &state {
                    StateLocation::Dir(dir) => CursorFile::new(dir, &id).path().display().to_string(),
                    StateLocation::Db(url) => format!("{} in {url}", edc_core::store::stream_dir_name(&id)),
                };
                writeln!(
                    out,
                    "no cursor at {place} yet: the next sync starts from the beginning"
                )
                .io(|| "writing to stdout".into())?;
                return Ok(());
            };
            let mut shown = cursor.to_file_json();
            if !full {
                summarise_lookback(&mut shown);
            }
            let text = serde_json::to_string_pretty(&shown)
                .map_err(|e| Error::io("rendering the cursor", e.into()))?;
            writeln!(out, "{text}").io(|| "writing to stdout".into())?;
            Ok(())
        }
    }
}

/// The lookback's record ids (one per record in the window it keeps,
/// hundreds of lines) replaced by how many there are.
fn summarise_lookback(cursor: &mut serde_json::Value) {
    let Some(lookback) = cursor.get_mut("lookback").and_then(|l| l.as_object_mut()) else {
        return;
    };
    let Some(seen) = lookback.remove("seen") else {
        return;
    };
    let seen = seen.as_array().cloned().unwrap_or_default();
    let records: usize = seen
        .iter()
        .map(|instant| instant.get(1).and_then(|ids| ids.as_array()).map_or(0, Vec::len))
        .sum();
    lookback.insert("seen_instants".into(), seen.len().into());
    lookback.insert("seen_records".into(), records.into());
    lookback.insert("seen".into(), "(the ids: --full)".into());
}
