//! `edc-sync config ...`

use std::io::Write;

use serde_json::json;

use crate::cli::ConfigCommand;
use edc_core::config::{self, ConfigError, LoadedConfig, MissingEnv, Policy};
use edc_core::error::IoContext;
use edc_core::Error;

pub fn run(cmd: ConfigCommand) -> Result<(), Error> {
    match cmd {
        ConfigCommand::Validate {
            path,
            require_committed,
            check_env,
        } => {
            let loaded = config::load(&path.config)?;
            if require_committed {
                loaded.require_committed(false)?;
            }
            if check_env {
                let missing: Vec<MissingEnv> =
                    loaded.config.vendors.iter().flat_map(missing_env_vars).collect();
                if !missing.is_empty() {
                    return Err(ConfigError::MissingEnvs(missing).into());
                }
            }
            let p = &loaded.provenance;
            let git = match (p.why_uncontrolled(), p.stamp()) {
                (None, Some(stamp)) => format!(
                    "stamped at commit {} (blob {}) by {stamp}; no repository here",
                    p.config_git_commit.as_deref().unwrap_or("?"),
                    p.config_git_blob.as_deref().unwrap_or("?")
                ),
                (None, None) => format!(
                    "committed at {} (blob {})",
                    p.config_git_commit.as_deref().unwrap_or("?"),
                    p.config_git_blob.as_deref().unwrap_or("?")
                ),
                (Some(why), _) => format!(
                    "NOT under change control: {why}; a run refuses it ({})",
                    p.remedy()
                ),
            };
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{}: valid: {} vendor(s): {}\nsha256 {}\ngit: {git}",
                path.config.display(),
                loaded.config.vendors.len(),
                loaded.config.vendor_names().join(", "),
                p.config_sha256,
            )
            .io(|| "writing to stdout".into())?;
            Ok(())
        }
        ConfigCommand::Stamp { path, audit_key_file } => {
            let key = match &audit_key_file {
                Some(file) => Some(edc_core::audit::AuditKey::from_file(file)?),
                None => edc_core::audit::AuditKey::from_env()?,
            };
            let loaded = config::load(&path.config)?;
            loaded.require_committed(false)?;
            let stamp =
                loaded
                    .provenance
                    .stamp_to_write()
                    .ok_or_else(|| ConfigError::NotUnderChangeControl {
                        reason: format!("{} is not committed at HEAD", path.config.display()),
                        remedy: loaded.provenance.remedy(),
                    })?;
            let stamp = match &key {
                Some(key) => stamp.sealed(|content| key.stamp_mac(content)),
                None => stamp,
            };
            let to = config::stamp_path(&path.config);
            let text = serde_json::to_string_pretty(&stamp).unwrap_or_default() + "\n";
            // Replaced whole (a new release re-stamps), never through a link.
            let _ = std::fs::remove_file(&to);
            edc_core::no_follow::write(&to, text).io(|| format!("writing the stamp {}", to.display()))?;
            writeln!(
                std::io::stdout().lock(),
                "{}: stamped {} at commit {} (blob {}, sha256 {}){}",
                to.display(),
                stamp.path,
                stamp.commit,
                stamp.blob,
                stamp.sha256,
                match &key {
                    Some(key) => format!(", MAC with audit key {}", key.id()),
                    None => "; no audit key: a run cannot tell this stamp from one written by hand".into(),
                }
            )
            .io(|| "writing to stdout".into())?;
            Ok(())
        }
        ConfigCommand::CheckStamp { repo, trail } => {
            let report = edc_core::audit::check_stamps(&repo, &trail)?;
            if report.failed > 0 {
                return Err(edc_core::audit::StampNotHeld {
                    failed: report.failed,
                    lines: report.lines,
                }
                .into());
            }
            let mut out = std::io::stdout().lock();
            for line in &report.lines {
                writeln!(out, "{line}").io(|| "writing to stdout".into())?;
            }
            writeln!(
                out,
                "{} recorded policy commit(s) checked: every one holds its blob",
                report.lines.len()
            )
            .io(|| "writing to stdout".into())?;
            Ok(())
        }
        ConfigCommand::Show { path, vendor } => {
            let loaded = config::load(&path.config)?;
            let vendors: Vec<&Policy> = match &vendor {
                Some(v) => vec![loaded.vendor(v)?],
                None => loaded.config.vendors.iter().collect(),
            };
            let shown = show(&loaded, &vendors);
            let text = serde_json::to_string_pretty(&shown)
                .map_err(|e| Error::io("rendering the policy", e.into()))?;
            writeln!(std::io::stdout().lock(), "{text}").io(|| "writing to stdout".into())?;
            Ok(())
        }
    }
}

/// Every variable a run of `policy` would miss.
fn missing_env_vars(policy: &Policy) -> Vec<MissingEnv> {
    let vendor = &policy.vendor;
    std::iter::once(("base_url_env", &policy.base_url_env))
        .chain(policy.auth.env_vars())
        .filter_map(|(key, name)| name.read(&format!("{vendor}.{key}")).err())
        .collect()
}

/// The effective policy as JSON: every default filled in, each `*_env`
/// variable named with whether it is set, never with its value.
fn show(loaded: &LoadedConfig, vendors: &[&Policy]) -> serde_json::Value {
    let env_status = |name: &str| {
        if std::env::var_os(name).is_some_and(|v| !v.is_empty()) {
            "set"
        } else {
            "not set"
        }
    };
    let vendors: Vec<serde_json::Value> = vendors
        .iter()
        .map(|p| {
            let mut environment = serde_json::Map::new();
            let names = std::iter::once(&p.base_url_env).chain(p.auth.env_vars().into_iter().map(|(_, n)| n));
            for name in names {
                environment.insert(name.as_str().into(), env_status(name.as_str()).into());
            }
            json!({
                "policy": p,
                "environment": environment,
            })
        })
        .collect();
    json!({
        "provenance": {
            "config_path": loaded.provenance.config_path,
            "config_sha256": loaded.provenance.config_sha256,
            "config_git_commit": loaded.provenance.config_git_commit,
            "config_git_blob": loaded.provenance.config_git_blob,
            "config_dirty": loaded.provenance.dirty(),
            "config_dirty_reason": loaded.provenance.why_uncontrolled(),
        },
        "vendors": vendors,
    })
}
