//! Opening a stream: its ledger (run locks, cursor and manifest, proven
//! against the trail: `crate::ledger`) and its landing, then what the page
//! loop starts from.

use super::commit::PageCommit;
use super::slots::Slots;
use super::stream::Stream;
use super::window::Window;
use super::{Loop, StreamJob, StreamReport, SyncError};
use crate::config::PayloadFormat;
use crate::ledger::OpenStream;
use quota_pacer::Pacer;

/// Takes the stream's locks, opens and proves its state and landing.
pub(super) async fn start<P: Pacer>(job: &StreamJob<P>, name: String) -> Result<Loop<'_, P>, SyncError> {
    let ext = match job.delta.format {
        PayloadFormat::Json => "json",
        PayloadFormat::Odm => "xml",
    };
    let quota_key = job.limiter.quota().key();
    let opened = crate::ledger::open_stream(
        &job.ledger,
        OpenStream {
            name: &name,
            identity: &job.identity,
            trail: &job.audit,
            out_dir: &job.out_dir,
            object: job.object.clone(),
            ext,
            since: job.options.since.clone(),
            dry_run: job.options.dry_run,
            repair_state: job.options.repair_state,
            accept_rollback: job.options.accept_rollback,
            namespace: job.options.state_namespace.as_deref(),
            redis: job.redis.as_ref().map(|r| (r, quota_key)),
        },
    )
    .await?;
    let report = StreamReport {
        stream: name.clone(),
        landing_dir: opened.landing.dir().to_path_buf(),
        cursor_file: opened.ledger.cursor_place(),
        ..StreamReport::default()
    };
    let mut stream = Stream::new(job, name, report);
    if let Some(root) = &job.options.missing_from {
        if opened.ledger.is_db() {
            // The manifests it would compare with are rows here, not files.
            opened.ledger.release().await;
            return Err(stream.rejected(
                "backfill --missing-only compares with manifest files: it needs a state directory, not a state \
                 database"
                    .into(),
            ));
        }
        if opened.landing.remote().is_some() {
            return Err(stream.rejected(
                "backfill --missing-only compares with a landing directory; an object-store landing is not \
                 supported"
                    .into(),
            ));
        }
        if job.delta.format != crate::config::PayloadFormat::Json {
            return Err(stream.rejected(
                "backfill --missing-only tells records apart in JSON pages; this delta is ODM".into(),
            ));
        }
        let dir = crate::ledger::stream_dir_name(&job.identity);
        stream.landed_before = Some(super::completeness::landed_identities(
            root,
            &dir,
            &stream.name,
            &job.delta,
        )?);
    }
    Ok(Loop {
        stream,
        slots: Slots::new(opened.fenced),
        window: Window::default(),
        commit: PageCommit::new(opened.ledger, opened.landing),
    })
}
