//! `edc-sync cursor ...`

use std::io::Write;

use crate::cli::CursorCommand;
use edc_core::error::IoContext;
use edc_core::store::CursorFile;
use edc_core::stream::StreamIdentity;
use edc_core::Error;

pub fn run(cmd: CursorCommand) -> Result<(), Error> {
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
            let mut out = std::io::stdout().lock();
            let text = state.to_string_lossy();
            if edc_core::state_db::is_db_url(&text) {
                let url = super::state::db_url(&text)?;
                let cursor = super::runtime()?.block_on(async {
                    let db = edc_core::state_db::StateDb::connect(&url).await?;
                    Ok::<_, Error>(edc_core::state_db::cursor_of(&db, &id).await?)
                })?;
                let Some(cursor) = cursor else {
                    writeln!(
                        out,
                        "no cursor for {} in {url} yet: the next sync starts from the beginning",
                        edc_core::store::stream_dir_name(&id)
                    )
                    .io(|| "writing to stdout".into())?;
                    return Ok(());
                };
                let text = serde_json::to_string_pretty(&cursor.to_file_json())
                    .map_err(|e| Error::io("rendering the cursor", e.into()))?;
                writeln!(out, "{text}").io(|| "writing to stdout".into())?;
                return Ok(());
            }
            let store = CursorFile::new(&state, &id);
            if !store.path().exists() {
                writeln!(
                    out,
                    "no cursor at {} yet: the next sync starts from the beginning",
                    store.path().display()
                )
                .io(|| "writing to stdout".into())?;
                return Ok(());
            }
            let cursor = store.load()?;
            let text = serde_json::to_string_pretty(&cursor.to_file_json())
                .map_err(|e| Error::io("rendering the cursor", e.into()))?;
            writeln!(out, "{text}").io(|| "writing to stdout".into())?;
            Ok(())
        }
    }
}
