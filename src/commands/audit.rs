//! `edc-sync audit ...`

use std::io::Write;

use crate::cli::AuditCommand;
use edc_core::audit::{verify_with, Checks, Damage, Finding};
use edc_core::audit::{Anchors, AuditKey, ChainHead, NotIntact};
use edc_core::audit::{KeyError, KEY_ENV};
use edc_core::error::IoContext;
use edc_core::ledger::StateLocation;
use edc_core::Error;

pub fn run(cmd: AuditCommand) -> Result<(), Error> {
    match cmd {
        AuditCommand::Export { state, trail, to } => {
            let url = super::state::db_url(&state)?;
            let exported = super::runtime()?.block_on(async {
                let db = edc_core::state_db::StateDb::connect(&url).await?;
                Ok::<_, Error>(edc_core::state_db::export(&db, &trail, &to).await?)
            })?;
            writeln!(
                std::io::stdout().lock(),
                "{}: {} lines, {} bytes of trail {trail:?} of {url}; chain head {}",
                to.display(),
                exported.lines,
                exported.bytes,
                exported.head_sha256.as_deref().unwrap_or("-"),
            )
            .io(|| "writing to stdout".into())?;
            Ok(())
        }
        AuditCommand::Verify {
            file,
            state,
            trail,
            anchors,
            redis,
            key,
            key_file,
        } => {
            let key = match (key, key_file) {
                (_, Some(path)) => Some(AuditKey::from_file(&path)?),
                (true, None) => Some(
                    AuditKey::from_env()?.ok_or_else(|| KeyError(format!("--key: {KEY_ENV} is not set")))?,
                ),
                (false, None) => None,
            };
            let mut checks = Checks {
                key,
                ..Checks::default()
            };
            // A database's trail is read as the file `audit export` writes
            // (into a private temporary file), and verified by the same
            // verifier; its anchors in the database are checked too.
            let exported;
            // A database's trail is named by the database and its name in
            // the report, never by the temporary file it was read from.
            let mut named = None;
            // What the database says besides the chain (a row's offset that
            // does not add up, a line that no longer matches its anchor in
            // the database): reported once the chain's own verdict (edited,
            // removed, reordered) has had its say.
            let mut db_findings = Vec::new();
            let file = match (file, state) {
                (Some(file), _) => file,
                (None, Some(state)) => {
                    let url = super::state::db_url(&state)?;
                    let dir = tempfile::tempdir().io(|| "creating a temporary directory".into())?;
                    let path = dir.path().join(&trail);
                    db_findings = super::runtime()?.block_on(async {
                        let db = edc_core::state_db::StateDb::connect(&url).await?;
                        let (_, gap) = edc_core::state_db::export_for_verify(&db, &trail, &path).await?;
                        let anchor = edc_core::state_db::anchor_problem(&db, &trail).await?;
                        let gap = gap.map(|detail| (Damage::Edited, detail));
                        let anchor = anchor.map(|detail| (Damage::Diverged, detail));
                        Ok::<_, Error>(gap.into_iter().chain(anchor).collect::<Vec<_>>())
                    })?;
                    exported = dir;
                    named = Some(std::path::PathBuf::from(format!("{url} trail {trail:?}")));
                    exported.path().join(&trail)
                }
                (None, None) => unreachable!("clap requires FILE or --state"),
            };
            if let Some(dir) = anchors {
                checks.anchors.push(anchor_for(&file, &dir)?);
            }
            if let Some(url) = redis {
                checks.anchors.push(redis_anchor_for(&file, &url)?);
            }
            let mut report = verify_with(&file, &checks)?;
            if let Some(named) = named {
                report.path = named;
            }
            if let (true, Some((damage, detail))) = (report.intact(), db_findings.into_iter().next()) {
                report.finding = Some(Finding {
                    line: report.lines,
                    damage,
                    detail: format!("the database: {detail}"),
                });
            }
            if !report.intact() {
                return Err(NotIntact(report).into());
            }
            writeln!(std::io::stdout().lock(), "{report}").io(|| "writing the report to stdout".into())?;
            Ok(())
        }
    }
}

/// `edc-sync verify`: every discrepancy on stdout, one line each, then the
/// summary; exit 65 when there is any.
pub fn reconcile(args: crate::cli::VerifyArgs) -> Result<(), Error> {
    let dirs = &args.dirs;
    let scope = args.scope();
    let state = StateLocation::parse("--state", &dirs.state)?;
    let out = edc_core::store::LandingLocation::parse("--out", &dirs.out)?;
    edc_core::paths::require_local("--audit-log", &dirs.audit_log)
        .map_err(edc_core::config::ConfigError::Identity)?;
    let key = match (args.key, &args.key_file) {
        (_, Some(path)) => Some(AuditKey::from_file(path)?),
        (true, None) => {
            Some(AuditKey::from_env()?.ok_or_else(|| KeyError(format!("--key: {KEY_ENV} is not set")))?)
        }
        (false, None) => None,
    };
    let progress = edc_core::reconcile::Progress::new(super::spinner(
        "{spinner} verify: {msg}, {pos} pages hashed  [{elapsed}]",
    ));
    let verified = super::runtime()?.block_on(edc_core::reconcile::verify(
        &state,
        &out,
        &dirs.audit_log,
        key.as_ref(),
        &scope,
        &progress,
    ));
    progress.finish();
    let summary = verified?;
    let mut stdout = std::io::stdout().lock();
    for d in summary.discrepancies.iter().chain(&summary.behind) {
        writeln!(stdout, "{d}").io(|| "writing the report to stdout".into())?;
    }
    // Each page's retention, where the landing's pages carry one.
    let url = out.shown();
    if let Some(retained) = &summary.retention {
        retained
            .write_lines(url.trim_end_matches('/'), &mut stdout)
            .io(|| "writing the report to stdout".into())?;
    }
    let line = match scope.describe() {
        Some(scope) => format!("{scope}: {summary}"),
        None => summary.to_string(),
    };
    if summary.discrepancies.is_empty() {
        writeln!(stdout, "{line}").io(|| "writing the report to stdout".into())?;
        return Ok(());
    }
    Err(edc_core::reconcile::Discrepancies(line).into())
}

/// The anchor runs left in `state_dir` for the trail at `file`, found by
/// the trail's name (or, as an older version kept it, by its absolute
/// path). None there is an error: `--anchors` asks to prove the trail
/// against one.
fn anchor_for(file: &std::path::Path, state_dir: &std::path::Path) -> Result<(String, ChainHead), Error> {
    let read_error = |error| edc_core::audit::ReadError {
        path: file.to_path_buf(),
        error,
    };
    let canonical = std::fs::canonicalize(file).map_err(read_error)?;
    let first = edc_core::audit::first_line_sha256(file).map_err(read_error)?;
    let anchors = Anchors::of(state_dir, file, &canonical, first);
    let unreadable = |detail: String| {
        Error::AuditUnreadable(edc_core::audit::ReadError {
            path: anchors
                .file()
                .unwrap_or_else(|| state_dir.join(edc_core::audit::ANCHOR_DIR)),
            error: std::io::Error::other(detail),
        })
    };
    match anchors.load_file().map_err(unreadable)? {
        Some(found) => Ok((found.source, found.head)),
        None => Err(unreadable(format!(
            "no anchor for {} in {}: no run with that state directory has finished",
            file.display(),
            state_dir.display()
        ))),
    }
}

/// The anchor runs with `--redis` keep in the Redis at `url` for the trail
/// at `file`: under the trail's identity (the SHA-256 of its first line),
/// or else under this host and the trail's path. None there is an error:
/// `--redis` asks to prove the trail against one.
fn redis_anchor_for(file: &std::path::Path, url: &str) -> Result<(String, ChainHead), Error> {
    let read_error = |error| edc_core::audit::ReadError {
        path: file.to_path_buf(),
        error,
    };
    let canonical = std::fs::canonicalize(file).map_err(read_error)?;
    let first = edc_core::audit::first_line_sha256(file).map_err(read_error)?;
    let dir = canonical.parent().unwrap_or(&canonical).to_path_buf();
    let anchors = Anchors::of(&dir, file, &canonical, first);
    let found = super::runtime()?.block_on(async {
        let redis = Anchors::connect_redis(url).await?;
        Ok::<_, Error>(anchors.load_redis(&redis).await?)
    })?;
    match found {
        Some(found) => Ok((found.source, found.head)),
        None => Err(Error::AuditUnreadable(edc_core::audit::ReadError {
            path: file.to_path_buf(),
            error: std::io::Error::other(format!(
                "no anchor for it in Redis {}: no run with --redis has finished on this trail",
                edc_core::redact::redact_arg(url)
            )),
        })),
    }
}
