//! `edc-sync cursor ...`

use std::io::Write;

use anyhow::Context;

use crate::cli::CursorCommand;
use edc_core::store::CursorFile;
use edc_core::stream::StreamIdentity;

pub fn run(cmd: CursorCommand) -> anyhow::Result<()> {
    match cmd {
        CursorCommand::Show {
            stream,
            stream_name,
            state,
        } => {
            let id = StreamIdentity {
                vendor: stream.vendor,
                tenant: stream.tenant,
                study: Some(stream.study),
                protocol_version: stream.protocol_version,
                stream: Some(stream_name),
            };
            let store = CursorFile::new(&state, &id);
            let mut out = std::io::stdout().lock();
            if !store.path().exists() {
                writeln!(
                    out,
                    "no cursor at {} yet: the next sync starts from the beginning",
                    store.path().display()
                )?;
                return Ok(());
            }
            let cursor = store.load()?;
            let text =
                serde_json::to_string_pretty(&cursor.to_file_json()).context("rendering the cursor")?;
            writeln!(out, "{text}").context("writing to stdout")?;
            Ok(())
        }
    }
}
