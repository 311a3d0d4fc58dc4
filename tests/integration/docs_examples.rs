//! The copy-paste examples of docs/operations.md are checked as the tools
//! that read them would: a cron.d entry is one line of five schedule
//! fields, a user and a command; a systemd unit has no comment after a
//! value (systemd reads it as part of the value).

/// The bodies of the ```LANG blocks of `text`.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    text.split(&fence)
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(body, _)| body))
        .collect()
}

const OPERATIONS: &str = include_str!("../../docs/operations.md");

#[test]
fn the_cron_example_is_a_cron_d_entry_as_cron_reads_it() {
    let crons = blocks(OPERATIONS, "cron");
    assert!(!crons.is_empty(), "docs/operations.md has a cron example");
    for body in crons {
        for line in body
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        {
            assert!(
                !line.trim_end().ends_with('\\'),
                "cron has no line continuation: {line}"
            );
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert!(
                fields.len() >= 7,
                "five schedule fields, a user, a command: {line}"
            );
            for (field, max) in fields[..5].iter().zip([59u32, 23, 31, 12, 7]) {
                let ok = field.split(',').all(|part| {
                    let (range, step) = part.split_once('/').unwrap_or((part, "1"));
                    step.parse::<u32>().is_ok_and(|s| s >= 1)
                        && (range == "*"
                            || range.split('-').all(|n| n.parse::<u32>().is_ok_and(|n| n <= max)))
                });
                assert!(ok, "schedule field {field:?} of {line}");
            }
            assert!(
                fields[5]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "the sixth field is the user: {line}"
            );
        }
    }
}

#[test]
fn the_systemd_examples_have_no_comment_after_a_value() {
    let units = blocks(OPERATIONS, "ini");
    assert!(!units.is_empty(), "docs/operations.md has systemd units");
    for body in units {
        for line in body.lines() {
            if let Some((key, value)) = line.split_once('=') {
                if !key.trim_start().starts_with('#') && !key.contains(' ') {
                    assert!(
                        !value.contains(" #") && !value.contains("\t#"),
                        "systemd would read the comment as part of {key}: {line}"
                    );
                }
            }
        }
    }
}

/// Where the OS has `systemd-analyze`, the service unit passes `verify`
/// with its paths pointed at this build and a scratch directory.
#[test]
fn the_systemd_service_passes_systemd_analyze_verify_where_available() {
    if std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        // Not every machine has systemd; the comment check above still runs.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = blocks(OPERATIONS, "ini")
        .into_iter()
        .find(|b| b.contains("[Service]"))
        .expect("a service unit")
        .replace("/usr/local/bin/edc-sync", env!("CARGO_BIN_EXE_edc-sync"))
        .replace(
            "/etc/edc-sync/s001.env",
            &dir.path().join("s001.env").display().to_string(),
        )
        .replace("/srv/edc/policy", &dir.path().display().to_string());
    std::fs::write(
        dir.path().join("s001.env"),
        "VAULT_API_BASE_URL=https://vault.example\n",
    )
    .unwrap();
    let path = dir.path().join("edc-sync-s001.service");
    std::fs::write(&path, unit).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
