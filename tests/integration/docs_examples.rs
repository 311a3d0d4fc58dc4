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

/// kubernetes-validate (the Kubernetes API's own schemas, from the Python
/// registry), installed by scripts/test into the tool cache, or named by
/// `EDC_SYNC_KUBERNETES_VALIDATE`.
fn kubernetes_validate() -> std::path::PathBuf {
    let path = std::env::var_os("EDC_SYNC_KUBERNETES_VALIDATE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(&std::env::var("HOME").unwrap())
                .join(".cache/edc-sync-tools/kubernetes-validate-1.37.0/bin/kubernetes-validate")
        });
    assert!(
        path.is_file(),
        "{} is missing: scripts/test installs it (python3 -m venv ~/.cache/edc-sync-tools/kubernetes-validate-1.37.0 \
         && ~/.cache/edc-sync-tools/kubernetes-validate-1.37.0/bin/pip install kubernetes-validate==1.37.0)",
        path.display()
    );
    path
}

/// The documents of a YAML block as JSON, read by the Python beside
/// kubernetes-validate (PyYAML, its own dependency).
fn yaml_documents(validate: &std::path::Path, yaml: &str) -> Vec<serde_json::Value> {
    let python = validate.with_file_name("python3");
    let mut child = std::process::Command::new(python)
        .args([
            "-c",
            "import sys, json, yaml\nprint(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(yaml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The Kubernetes example validates against the Kubernetes schemas
/// (strict: no unknown field), and its CronJob runs unattended as a
/// scheduler should: one run at a time, a deadline, a failure a retry
/// cannot fix ends the Job at once, nothing starts a replacement pod
/// without counting it (no `Ignore`), the quota paced in the shared Redis
/// (never `--pacer local` across pods), credentials from a Secret.
#[test]
fn the_kubernetes_example_validates_and_runs_unattended() {
    let validate = kubernetes_validate();
    let yaml = blocks(OPERATIONS, "yaml")
        .into_iter()
        .find(|b| b.contains("kind: CronJob"))
        .expect("a CronJob example");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("edc-sync.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = std::process::Command::new(&validate)
        .arg("--strict")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubernetes-validate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = yaml_documents(&validate, yaml);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"Secret"),
        "the credentials' Secret is shown: {kinds:?}"
    );
    let cron = docs.iter().find(|d| d["kind"] == "CronJob").unwrap();
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
    let job = &cron["spec"]["jobTemplate"]["spec"];
    assert!(
        job["activeDeadlineSeconds"].as_u64().is_some(),
        "a deadline: {job}"
    );
    let rules = job["podFailurePolicy"]["rules"].as_array().unwrap();
    assert!(
        rules.iter().all(|r| r["action"] != "Ignore"),
        "Ignore starts a replacement pod at once: {rules:?}"
    );
    let fail_job: Vec<u64> = rules
        .iter()
        .filter(|r| r["action"] == "FailJob")
        .flat_map(|r| r["onExitCodes"]["values"].as_array().unwrap())
        .map(|v| v.as_u64().unwrap())
        .collect();
    for code in [65, 77, 78] {
        assert!(fail_job.contains(&code), "FailJob on {code}: {rules:?}");
    }
    assert!(
        !fail_job.contains(&75),
        "75 is progress saved, not a failure to stop on"
    );
    let pod = &job["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        !args.contains(&"--pacer"),
        "pods share the quota in Redis: {args:?}"
    );
    let secret = container["envFrom"][0]["secretRef"]["name"].as_str().unwrap();
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == secret)
        .expect("the Secret the container reads");
    for variable in [
        "EDC_SYNC_STATE",
        "EDC_SYNC_REDIS_URL",
        "VAULT_API_BASE_URL",
        "VAULT_PASSWORD",
    ] {
        assert!(
            secret["stringData"][variable].is_string(),
            "the Secret holds {variable}: {secret}"
        );
    }
}

/// Every documented timer setting does something: systemd applies
/// `Persistent=` only to `OnCalendar=` timers (systemd.timer(5)), so a
/// monotonic timer with it promises a catch-up that never happens.
#[test]
fn the_timer_examples_use_only_settings_that_apply() {
    let timers: Vec<&str> = blocks(OPERATIONS, "ini")
        .into_iter()
        .filter(|b| b.contains("[Timer]"))
        .collect();
    assert!(!timers.is_empty(), "docs/operations.md has a timer example");
    for timer in timers {
        if timer.contains("Persistent=true") {
            assert!(
                timer.contains("OnCalendar="),
                "Persistent= without OnCalendar= does nothing:\n{timer}"
            );
        }
    }
}
