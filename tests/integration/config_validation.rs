//! Every class of invalid policy file exits 78 (EX_CONFIG) and names the
//! key (and line) that is wrong; the shipped example validates.

use crate::support;

use support::{example_config, run};

/// Writes `text` to a temp file and validates it with the real binary.
fn validate(text: &str) -> support::Outcome {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rate_limits.yaml");
    std::fs::write(&path, text).unwrap();
    run(&["config", "validate", "--config", path.to_str().unwrap()])
}

/// Where `needle` first occurs in the shipped example, as the `:LINE:` an
/// error about that line shows (lines counted from 1).
fn example_line_of(needle: &str) -> String {
    let text = example_config();
    let at = text.find(needle).expect("the example holds the needle");
    format!(":{}:", text[..at].matches('\n').count() + 1)
}

/// The example with `from` replaced by `to` (which must occur).
fn example_with(from: &str, to: &str) -> String {
    let text = example_config();
    assert!(text.contains(from), "the example config contains {from:?}");
    text.replacen(from, to, 1)
}

#[track_caller]
fn assert_rejected(text: &str, needles: &[&str]) {
    let out = validate(text);
    assert_eq!(out.code, 78, "exit code; stderr: {}", out.stderr);
    for needle in needles {
        assert!(
            out.stderr.contains(needle),
            "stderr should contain {needle:?}:\n{}",
            out.stderr
        );
    }
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout for an invalid file: {}",
        out.stdout
    );
}

#[test]
fn the_shipped_example_is_valid() {
    let out = run(&[
        "config",
        "validate",
        "--config",
        concat!(env!("CARGO_MANIFEST_DIR"), "/config/rate_limits.yaml"),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(
            "valid: 6 vendor(s): veeva_vault, veeva_vault_vql, medidata_rave, medidata_rave_dataset, castor, redcap"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn the_users_schema_works_exactly_as_written() {
    let text = "\
veeva_vault:
  base_url_env: VAULT_API_BASE_URL
  token_env: VAULT_API_TOKEN
  sustained_rate_per_sec: 5
  burst_capacity: 20
  max_retry_attempts: 5
  default_retry_after_s: 60
  bucket_key: \"rl:veeva:{study}:{protocol_version}\"
  delta:
    path: /api/v24.1/query
    format: json
    paging: json_next
    records_pointer: /data
    cursor_param: modified_since
    cursor_field: modified_date__v
    page_size_param: limit
    page_size: 200
";
    let out = validate(text);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// The user's own example, the seven keys exactly as written: it is a
/// rate-limit policy first, and validates without a delta endpoint; a
/// sync on it is what fails, naming `delta`, before any audit line.
#[test]
fn the_users_seven_key_example_validates_and_a_sync_on_it_names_delta() {
    let text = "\
veeva_vault:
  base_url_env: VAULT_API_BASE_URL   # env var holding the base URL
  token_env: VAULT_API_TOKEN         # env var holding the bearer token
  sustained_rate_per_sec: 5
  burst_capacity: 20
  max_retry_attempts: 5
  default_retry_after_s: 60
  bucket_key: \"rl:veeva:{study}:{protocol_version}\"
";
    let out = validate(text);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let dir = tempfile::tempdir().unwrap();
    let repo = support::git_init(dir.path());
    std::fs::write(dir.path().join("rate_limits.yaml"), text).unwrap();
    support::git_commit_all(&repo, "the user's policy");
    let audit = dir.path().join("audit.jsonl");
    let out = support::run_cmd(
        support::edc_sync()
            .args([
                "sync",
                "--vendor",
                "veeva_vault",
                "--study",
                "S",
                "--protocol-version",
                "1",
            ])
            .args(["--pacer", "local", "--config"])
            .arg(dir.path().join("rate_limits.yaml"))
            .arg("--out")
            .arg(dir.path().join("out"))
            .arg("--state")
            .arg(dir.path().join("state"))
            .arg("--audit-log")
            .arg(&audit)
            .env("VAULT_API_BASE_URL", "http://127.0.0.1:9")
            .env("VAULT_API_TOKEN", "t0k3n-never-used"),
    );
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("veeva_vault.delta"), "{}", out.stderr);
    assert!(!audit.exists(), "a configuration error writes no audit line");
}

#[test]
fn unknown_keys_are_rejected_at_every_level() {
    assert_rejected("veeva_vaultx: 1\n", &["veeva_vaultx: must be a map"]);
    assert_rejected(
        &example_with(
            "  burst_capacity: 20 ",
            "  burst_capacty: 20\n  burst_capacity: 20 ",
        ),
        &[
            "veeva_vault.burst_capacty: unknown key (did you mean burst_capacity?)",
            &example_line_of("  burst_capacity: 20 "),
        ],
    );
    assert_rejected(
        &example_with(
            "    connect_timeout_s: 10",
            "    connect_timeout: 10\n    connect_timeout_s: 10",
        ),
        &["veeva_vault.http.connect_timeout: unknown key"],
    );
    assert_rejected(
        &example_with("    format: json", "    format: json\n    paginate: yes"),
        &["veeva_vault.delta.paginate: unknown key"],
    );
    assert_rejected(
        &example_with(
            "        burst_capacity: 5\n",
            "        burst_capacity: 5\n      cursor: x\n",
        ),
        &["veeva_vault.streams.document_audit_trail.cursor: unknown key"],
    );
    assert_rejected(
        &example_with(
            "    burst_capacity: 10\n",
            "    burst_capacity: 10\n    window_s: 300\n",
        ),
        &["veeva_vault.study_limit.window_s: unknown key"],
    );
}

#[test]
fn zero_negative_nan_and_infinite_rates_are_rejected() {
    for (value, shown) in [
        ("0", "got 0"),
        ("-1", "got -1"),
        (".nan", "got NaN"),
        (".inf", "got inf"),
        ("-0.5", "got -0.5"),
    ] {
        assert_rejected(
            &example_with(
                "sustained_rate_per_sec: 5 ",
                &format!("sustained_rate_per_sec: {value} "),
            ),
            &[
                "veeva_vault.sustained_rate_per_sec: must be > 0",
                shown,
                &example_line_of("sustained_rate_per_sec: 5 "),
            ],
        );
    }
}

#[test]
fn fractional_or_zero_burst_is_rejected() {
    assert_rejected(
        &example_with("burst_capacity: 20 ", "burst_capacity: 20.5 "),
        &["veeva_vault.burst_capacity: must be an integer >= 1, got 20.5"],
    );
    assert_rejected(
        &example_with("burst_capacity: 20 ", "burst_capacity: 0 "),
        &["veeva_vault.burst_capacity"],
    );
}

#[test]
fn a_client_id_vault_would_not_take_is_refused_naming_the_key() {
    for bad in [
        "\"has space\"",
        "\"é-accent\"",
        &format!("\"{}\"", "x".repeat(101)),
    ] {
        assert_rejected(
            &example_with(
                "client_id: edcsync-site-datamanagement-server-edcsync",
                &format!("client_id: {bad}"),
            ),
            &["veeva_vault.client_id", "invalid_client_id"],
        );
    }
}

#[test]
fn a_vault_dns_that_is_not_a_host_name_is_refused_naming_the_key() {
    for bad in [
        "https://myvault.veevavault.com",
        "myvault.veevavault.com/api",
        "my vault",
        "a..b",
    ] {
        assert_rejected(
            &example_with(
                "    # vault_dns: myvault.veevavault.com",
                &format!("    vault_dns: {bad:?}"),
            ),
            &["veeva_vault.auth.vault_dns: must be a host name"],
        );
    }
}

#[test]
fn a_lookback_is_checked_and_only_taken_where_a_cursor_is_a_time() {
    assert_rejected(
        &example_with("      seconds: 3600 ", "      seconds: -1 "),
        &["veeva_vault.delta.lookback.seconds: must be an integer in 0..=2592000"],
    );
    assert_rejected(
        &example_with("      max_records: 20000 ", "      max_records: 0 "),
        &["veeva_vault.delta.lookback.max_records"],
    );
    assert_rejected(
        &example_with(
            "      record_id: id                  # the field",
            "      recordid: id                  # the field",
        ),
        &["veeva_vault.delta.lookback.recordid"],
    );
    assert_rejected(
        &example_with(
            "    paging: rave_startid ",
            "    lookback:\n      seconds: 60\n    paging: rave_startid ",
        ),
        &["medidata_rave.delta.lookback: only used with format: json and cursor_kind: timestamp"],
    );
    assert_rejected(
        &example_with(
            "# default mode applies. Uncomment on 2022.3 or later.",
            "# default mode applies. Uncomment on 2022.3 or later.\n  streams:\n    s1:\n      lookback:\n        seconds: 60",
        ),
        &["medidata_rave.streams.s1.lookback: only used with format: json and cursor_kind: timestamp"],
    );
    assert_rejected(
        &example_with("        seconds: 7200 ", "        seconds: 1.5 "),
        &["veeva_vault.streams.document_audit_trail.lookback.seconds"],
    );
}

#[test]
fn other_ranges_are_checked() {
    assert_rejected(
        &example_with("max_retry_attempts: 5 ", "max_retry_attempts: 0 "),
        &["veeva_vault.max_retry_attempts"],
    );
    assert_rejected(
        &example_with("default_retry_after_s: 60 ", "default_retry_after_s: -1 "),
        &["veeva_vault.default_retry_after_s: must be >= 0, got -1"],
    );
    assert_rejected(
        &example_with("max_wait_s: 900", "max_wait_s: 30"),
        &["veeva_vault.max_wait_s: must be >= default_retry_after_s"],
    );
    assert_rejected(
        &example_with("connect_timeout_s: 10 ", "connect_timeout_s: 400 "),
        &["veeva_vault.http.connect_timeout_s: must not exceed request_timeout_s"],
    );
    assert_rejected(
        &example_with(
            "page_size: 1000                  # records",
            "page_size: 0 # records",
        ),
        &["veeva_vault.delta.page_size"],
    );
}

#[test]
fn bad_placeholders_are_rejected() {
    assert_rejected(
        &example_with(
            "rl:veeva:{study}:{protocol_version}",
            "rl:veeva:{site}:{protocol_version}",
        ),
        &[
            "veeva_vault.bucket_key: unknown placeholder {site}",
            "{protocol_version}",
        ],
    );
    assert_rejected(
        &example_with("rl:veeva:{study}", "rl:veeva:{study"),
        &["veeva_vault.bucket_key: unclosed"],
    );
    assert_rejected(
        &example_with("studyoid: \"{study}\"", "studyoid: \"{studdy}\""),
        &["medidata_rave.delta.query.studyoid"],
    );
    // {host} is the base URL's host: a quota key's (one quota for every
    // project on a server), never a path's or a query's.
    let out = validate(&example_with(
        "rl:veeva:{study}:{protocol_version}",
        "rl:veeva:{host}",
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_rejected(
        &example_with("studyoid: \"{study}\"", "studyoid: \"{host}\""),
        &["medidata_rave.delta.query.studyoid: {host} is only taken in bucket_key"],
    );
}

#[test]
fn wrong_types_are_rejected() {
    assert_rejected(
        &example_with("sustained_rate_per_sec: 5 ", "sustained_rate_per_sec: \"5\" "),
        &["veeva_vault.sustained_rate_per_sec: must be a number, got a string"],
    );
    assert_rejected(
        &example_with("  http:\n", "  http: 5\n  httpx:\n"),
        &["veeva_vault.http: must be a map"],
    );
    assert_rejected(
        &user_schema_with("token_env: VAULT_API_TOKEN", "token_env: [VAULT_API_TOKEN]"),
        &["veeva_vault.token_env: must be a string"],
    );
    assert_rejected(
        &user_schema_with("token_env: VAULT_API_TOKEN", "token_env: \"vault token\""),
        &["veeva_vault.token_env: must be an environment variable name"],
    );
    assert_rejected(
        &example_with("format: json", "format: csv"),
        &["veeva_vault.delta.format: must be one of json, odm"],
    );
    assert_rejected(
        "- a\n- b\n",
        &["expected a map of vendor name to policy, got a list"],
    );
}

/// A bearer vendor in the user's own schema, for the auth tests.
const USER_SCHEMA: &str = "\
veeva_vault:
  base_url_env: VAULT_API_BASE_URL
  token_env: VAULT_API_TOKEN
  sustained_rate_per_sec: 5
  burst_capacity: 20
  bucket_key: \"rl:veeva:{study}\"
  delta:
    path: /api/v24.1/query
    format: json
    paging: json_next
    records_pointer: /data
    cursor_param: modified_since
    cursor_field: modified_date__v
    page_size_param: limit
    page_size: 200
";

/// [`USER_SCHEMA`] with `from` replaced by `to` (which must occur).
fn user_schema_with(from: &str, to: &str) -> String {
    assert!(USER_SCHEMA.contains(from), "{from:?}");
    USER_SCHEMA.replacen(from, to, 1)
}

#[test]
fn missing_required_keys_are_named() {
    assert_rejected(
        &user_schema_with("  token_env: VAULT_API_TOKEN\n", ""),
        &["veeva_vault.token_env: required key is missing (the default auth scheme, bearer, reads the token from it)"],
    );
    assert_rejected(
        &example_with("    records_pointer: /data", ""),
        &["veeva_vault.delta.records_pointer: required key is missing (format: json)"],
    );
}

/// A policy saved with a UTF-8 byte order mark (as editors on Windows
/// save one), before a `---` or before its first key, is the same policy:
/// YAML allows the mark at the start of a stream.
#[test]
fn a_policy_saved_with_a_byte_order_mark_validates() {
    let example = example_config();
    for text in [format!("\u{feff}---\n{example}"), format!("\u{feff}{example}")] {
        let out = validate(&text);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains("valid: 6 vendor(s)"), "{}", out.stdout);
    }
}

#[test]
fn empty_file_and_not_yaml_are_rejected() {
    assert_rejected("", &["the file is empty"]);
    assert_rejected("# only a comment\n", &["the file is empty"]);
    assert_rejected("a: [1, 2\n", &["not valid YAML"]);
    assert_rejected("a: b: c\n", &["not valid YAML"]);
    assert_rejected("\u{0}\u{1}binary", &["not valid YAML"]);
}

#[test]
fn duplicate_keys_are_rejected_with_their_line() {
    assert_rejected(
        &example_with("burst_capacity: 20 ", "burst_capacity: 20\n  burst_capacity: 30 "),
        // The second of the two, on the line after the first.
        &["burst_capacity: duplicate key", &{
            let first = example_line_of("burst_capacity: 20 ");
            let n: usize = first.trim_matches(':').parse().unwrap();
            format!(":{}:", n + 1)
        }],
    );
}

#[test]
fn every_problem_is_reported_in_one_run() {
    let text = example_with("sustained_rate_per_sec: 5 ", "sustained_rate_per_sec: 0 ")
        .replacen("burst_capacity: 20 ", "burst_capacity: 1.5 ", 1)
        .replacen("{study}:{protocol_version}", "{nope}", 1);
    let out = validate(&text);
    assert_eq!(out.code, 78);
    assert!(out.stderr.contains("has 3 problems"), "{}", out.stderr);
    for key in ["sustained_rate_per_sec", "burst_capacity", "bucket_key"] {
        assert!(
            out.stderr.contains(&format!("veeva_vault.{key}:")),
            "{key} missing from:\n{}",
            out.stderr
        );
    }
}

/// README: 66 for an input file named on the command line that cannot be
/// read (it used to be 78, which says the policy is invalid).
#[test]
fn a_missing_file_is_an_unreadable_input() {
    let out = run(&["config", "validate", "--config", "/nonexistent/rate_limits.yaml"]);
    assert_eq!(out.code, 66);
    assert!(
        out.stderr
            .contains("cannot read config file /nonexistent/rate_limits.yaml"),
        "{}",
        out.stderr
    );
}

#[test]
fn auth_schemes_name_their_keys_and_refuse_the_ones_they_do_not_read() {
    let with_auth = |auth: &str| user_schema_with("  token_env: VAULT_API_TOKEN\n", auth);
    let ok = [
        "  token_env: VAULT_API_TOKEN\n  auth:\n    scheme: bearer\n",
        "  auth:\n    scheme: basic\n    username_env: U\n    password_env: P\n",
        "  auth:\n    scheme: vault_session\n    username_env: U\n    password_env: P\n    login_path: /api/v24.1/auth\n",
        "  auth:\n    scheme: command\n    command: [/usr/local/bin/token-helper, --audience, edc]\n",
    ];
    for auth in ok {
        let out = validate(&with_auth(auth));
        assert_eq!(out.code, 0, "{auth}: {}", out.stderr);
    }
    let cases: [(&str, &[&str]); 10] = [
        (
            "  auth:\n    scheme: oauth\n",
            &["veeva_vault.auth.scheme: must be one of bearer, basic, vault_session, command, oauth2_client_credentials, redcap_token; got \"oauth\""],
        ),
        (
            "  auth:\n    scheme: basic\n    username_env: U\n",
            &["veeva_vault.auth.password_env: required key is missing"],
        ),
        (
            "  auth:\n    scheme: basic\n    username_env: U\n    password_env: P\n    login_path: /auth\n",
            &["veeva_vault.auth.login_path: not used by auth.scheme basic (it reads: auth.username_env, auth.password_env)"],
        ),
        (
            "  token_env: VAULT_API_TOKEN\n  auth:\n    scheme: basic\n    username_env: U\n    password_env: P\n",
            &["veeva_vault.token_env: not used by auth.scheme basic"],
        ),
        (
            "  auth:\n    scheme: bearer\n",
            &["veeva_vault.token_env: required key is missing (auth.scheme bearer reads the token from it)"],
        ),
        (
            "  auth:\n    scheme: vault_session\n    username_env: U\n    password_env: P\n    login_path: //evil.example/auth\n",
            &["veeva_vault.auth.login_path: must not start with '//'"],
        ),
        (
            "  auth:\n    scheme: vault_session\n    username_env: U\n    password_env: P\n    login_path: api/auth\n",
            &["veeva_vault.auth.login_path: must start with '/'"],
        ),
        (
            "  auth:\n    scheme: command\n    command: []\n",
            &["veeva_vault.auth.command: must name at least the program to run"],
        ),
        (
            "  auth:\n    scheme: basic\n    username_env: U\n    pasword_env: P\n",
            &["veeva_vault.auth.pasword_env: unknown key (did you mean password_env?)"],
        ),
        (
            "  auth:\n    scheme: basic\n    username_env: 1BAD\n    password_env: P\n",
            &["veeva_vault.auth.username_env: must be an environment variable name"],
        ),
    ];
    for (auth, needles) in cases {
        assert_rejected(&with_auth(auth), needles);
    }
}

#[test]
fn a_vql_delta_takes_only_a_single_select_with_its_cursor_unquoted() {
    let vql = |select: &str| {
        user_schema_with(
            "    cursor_param: modified_since\n    cursor_field: modified_date__v\n    page_size_param: limit\n",
            &format!("    cursor_field: modified_date__v\n    vql:\n      select: \"{select}\"\n      initial_cursor: \"2000-01-01T00:00:00Z\"\n"),
        )
    };
    let ok = validate(&vql(
        "SELECT id FROM subject__v WHERE modified_date__v > {cursor}",
    ));
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_rejected(
        &vql("DELETE FROM subject__v WHERE modified_date__v > {cursor}"),
        &["veeva_vault.delta.vql.select: must be a single VQL SELECT statement"],
    );
    assert_rejected(
        &vql("SELECT id FROM subject__v WHERE modified_date__v > '{cursor}'"),
        &["veeva_vault.delta.vql.select: {cursor} must stand outside quotes"],
    );
    assert_rejected(
        &user_schema_with(
            "    page_size_param: limit\n",
            "    page_size_param: limit\n    vql:\n      select: \"SELECT id FROM s WHERE m > {cursor}\"\n      initial_cursor: x\n",
        ),
        &["veeva_vault.delta.cursor_param: not used with delta.vql"],
    );
}

/// Smaller defects found once: a rate so small it is a division by ~zero,
/// a delta path that names another host.
#[test]
fn a_vanishing_rate_and_a_host_in_the_delta_path_are_named() {
    assert_rejected(
        &user_schema_with(
            "  sustained_rate_per_sec: 5\n",
            "  sustained_rate_per_sec: 1e-300\n",
        ),
        &["veeva_vault.sustained_rate_per_sec: must be at least one token a day"],
    );
    assert_rejected(
        &user_schema_with("    path: /api/v24.1/query\n", "    path: //other-host/x\n"),
        &["veeva_vault.delta.path: must not start with '//'"],
    );
}

#[test]
fn a_dialect_must_fit_the_payload_format() {
    assert_rejected(
        &example_with("  dialect: rave\n", "  dialect: vault\n"),
        &["medidata_rave.dialect: this dialect reads delta.format: json only"],
    );
    assert_rejected(
        &example_with("  dialect: vault\n", "  dialect: veeva\n"),
        &["veeva_vault.dialect: must be one of generic, vault, rave, castor, redcap; got \"veeva\""],
    );
    assert_rejected(
        &example_with("  clock_skew_warn_s: 30\n", "  clock_skew_warn_s: -1\n"),
        &["veeva_vault.clock_skew_warn_s: must be >= 0"],
    );
}

/// The bound on a server's clock is a positive number of seconds, no
/// smaller than the warning threshold.
#[test]
fn clock_skew_max_is_bounded_and_above_the_warning() {
    assert_rejected(
        &example_with("  clock_skew_max_s: 3600\n", "  clock_skew_max_s: 10\n"),
        &["veeva_vault.clock_skew_max_s: must be >= clock_skew_warn_s (30); got 10"],
    );
    assert_rejected(
        &example_with("  clock_skew_max_s: 3600\n", "  clock_skew_max_s: 0\n"),
        &["veeva_vault.clock_skew_max_s: must be > 0"],
    );
}

#[test]
fn check_env_names_the_missing_variable_never_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rate_limits.yaml");
    std::fs::write(&path, example_config()).unwrap();
    let path = path.to_str().unwrap();
    let secret = "tok-3f9a-never-print-me";
    let out = support::run_cmd(
        support::edc_sync()
            .args(["config", "validate", "--check-env", "--config", path])
            .env("CASTOR_BASE_URL", "http://127.0.0.1:9")
            .env("CASTOR_CLIENT_ID", "castor-client")
            .env("CASTOR_CLIENT_SECRET", secret)
            .env("VAULT_API_BASE_URL", "http://127.0.0.1:9")
            .env("VAULT_USERNAME", "svc-edc")
            .env("VAULT_PASSWORD", secret)
            .env("REDCAP_API_URL", "http://127.0.0.1:9/api/")
            .env("REDCAP_API_TOKEN", secret)
            .env_remove("RAVE_API_BASE_URL")
            .env_remove("RAVE_USERNAME")
            .env_remove("RAVE_PASSWORD"),
    );
    assert_eq!(out.code, 78, "{}", out.stderr);
    // Every missing variable at once, each once, with every key naming it.
    for expected in [
        "3 environment variables a run needs are not usable: ",
        "RAVE_API_BASE_URL (not set; named by medidata_rave.base_url_env, medidata_rave_dataset.base_url_env)",
        "RAVE_USERNAME (not set; named by medidata_rave.auth.username_env",
        "RAVE_PASSWORD (not set; named by medidata_rave.auth.password_env",
    ] {
        assert!(out.stderr.contains(expected), "{expected:?} in {}", out.stderr);
    }
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    assert!(!out.stderr.contains(secret) && !out.stdout.contains(secret));

    // The scheme's own variables are checked: Basic needs a password too.
    let out = support::run_cmd(
        support::edc_sync()
            .args(["config", "validate", "--check-env", "--config", path])
            .env("CASTOR_BASE_URL", "http://127.0.0.1:9")
            .env("CASTOR_CLIENT_ID", "castor-client")
            .env("CASTOR_CLIENT_SECRET", secret)
            .env("REDCAP_API_URL", "http://127.0.0.1:9/api/")
            .env("REDCAP_API_TOKEN", secret)
            .env("VAULT_API_BASE_URL", "http://127.0.0.1:9")
            .env("VAULT_USERNAME", "svc-edc")
            .env("VAULT_PASSWORD", secret)
            .env("RAVE_API_BASE_URL", "http://127.0.0.1:9")
            .env("RAVE_USERNAME", "svc-rave")
            .env_remove("RAVE_PASSWORD"),
    );
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "an environment variable a run needs is not usable: RAVE_PASSWORD (not set; named by medidata_rave.auth.password_env"
        ),
        "{}",
        out.stderr
    );

    let shown = support::run_cmd(
        support::edc_sync()
            .args(["config", "show", "--config", path])
            .env("VAULT_PASSWORD", secret),
    );
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("\"VAULT_PASSWORD\": \"set\""),
        "{}",
        shown.stdout
    );
    assert!(
        !shown.stdout.contains(secret),
        "config show must never print a secret"
    );
}

/// A policy whose secret variable is also its URL variable would print the
/// secret wherever the URL goes: --check-env refuses it, naming both keys.
#[test]
fn check_env_refuses_a_secret_variable_reused_for_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rate_limits.yaml");
    std::fs::write(
        &path,
        user_schema_with(
            "  base_url_env: VAULT_API_BASE_URL\n",
            "  base_url_env: VAULT_API_TOKEN\n",
        ),
    )
    .unwrap();
    let out = support::run_cmd(
        support::edc_sync()
            .args([
                "config",
                "validate",
                "--check-env",
                "--config",
                path.to_str().unwrap(),
            ])
            .env("VAULT_API_TOKEN", "https://tok-5e1f-never-print-me"),
    );
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("veeva_vault.base_url_env") && out.stderr.contains("token_env"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("tok-5e1f"), "{}", out.stderr);
}

#[test]
fn show_prints_the_effective_policy_with_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rate_limits.yaml");
    std::fs::write(&path, example_config()).unwrap();
    let out = run(&[
        "config",
        "show",
        "--vendor",
        "medidata_rave",
        "--config",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let policy = &v["vendors"][0]["policy"];
    assert_eq!(policy["sustained_rate_per_sec"], 2.0);
    assert_eq!(policy["http"]["connect_timeout_s"], 10.0, "default filled in");
    assert_eq!(policy["streams"][0]["name"], "default");
    assert_eq!(v["provenance"]["config_dirty"], true);
    let unknown = run(&[
        "config",
        "show",
        "--vendor",
        "nope",
        "--config",
        path.to_str().unwrap(),
    ]);
    assert_eq!(unknown.code, 78);
    assert!(
        unknown.stderr.contains("vendor \"nope\" is not defined"),
        "{}",
        unknown.stderr
    );
}

/// One variable for two credentials (the password is also the user name)
/// would show the password wherever the user is shown.
#[test]
fn one_variable_for_two_credentials_is_refused_naming_both_keys() {
    let text = example_with("password_env: VAULT_PASSWORD", "password_env: VAULT_USERNAME");
    assert_rejected(
        &text,
        &["auth.username_env and auth.password_env both name VAULT_USERNAME"],
    );
}

/// One vendor's secret variable used by another vendor as its URL variable
/// would print the secret wherever that vendor's URL goes.
#[test]
fn a_secret_variable_of_one_vendor_is_no_other_vendors_url() {
    let text = example_with(
        "medidata_rave:\n  base_url_env: RAVE_API_BASE_URL",
        "medidata_rave:\n  base_url_env: VAULT_PASSWORD",
    );
    assert_rejected(
        &text,
        &[
            "medidata_rave.base_url_env",
            "VAULT_PASSWORD",
            "veeva_vault.auth.password_env",
        ],
    );
}

/// A variable that is set but not valid UTF-8 is named as such, not as
/// missing (the operator would look for a variable that is there).
#[test]
fn a_variable_that_is_not_utf8_is_named_as_such() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rate_limits.yaml");
    std::fs::write(&path, example_config()).unwrap();
    let out = support::run_cmd(
        support::edc_sync()
            .args([
                "config",
                "validate",
                "--check-env",
                "--config",
                path.to_str().unwrap(),
            ])
            .env(
                "VAULT_API_BASE_URL",
                std::ffi::OsStr::from_bytes(b"http://127.0.0.1:9/\xff"),
            )
            .env("VAULT_USERNAME", "svc-edc")
            .env("VAULT_PASSWORD", "pw"),
    );
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("VAULT_API_BASE_URL (not valid UTF-8; named by veeva_vault.base_url_env"),
        "{}",
        out.stderr
    );
}

/// A UTF-8 byte-order mark at the start of the policy (what some Windows
/// editors write) is the start of the stream, not a second document.
#[test]
fn a_policy_that_starts_with_a_byte_order_mark_validates() {
    let out = validate(&format!("\u{feff}{}", example_config()));
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// REDCap's records name their id field; its batch keys mean nothing to
/// other pagings, and a record carries no cursor.
#[test]
fn redcap_records_name_their_id_field() {
    assert_rejected(
        &example_with(
            "        record_id_field: record_id     # the project's first field\n",
            "",
        ),
        &["redcap.streams.records.delta.record_id_field: required key is missing (paging: redcap_records"],
    );
    assert_rejected(
        &example_with("        batch_size: 100\n", "        batch_size: 5000\n"),
        &["redcap.streams.records.delta.batch_size"],
    );
    assert_rejected(
        &example_with(
            "        record_id_field: record_id     # the project's first field\n",
            "        record_id_field: record_id\n        cursor_field: record_id\n",
        ),
        &["redcap.streams.records.delta.cursor_field: not used with paging: redcap_records"],
    );
    assert_rejected(
        &example_with(
            "    paging: whole_window\n",
            "    paging: whole_window\n    batch_size: 10\n",
        ),
        &["redcap.delta.batch_size: only used with paging: redcap_records"],
    );
}

/// `delta.cursor_kind` is one of three kinds, and means something only for
/// JSON (an ODM cursor is the SourceID).
#[test]
fn the_cursor_kind_is_one_of_three_and_json_only() {
    assert_rejected(
        &example_with("    cursor_kind: timestamp ", "    cursor_kind: date "),
        &["delta.cursor_kind: must be one of timestamp, number, text, php_datetime, server_local; got \"date\""],
    );
    assert_rejected(
        &example_with("    format: odm\n", "    format: odm\n    cursor_kind: number\n"),
        &["medidata_rave.delta.cursor_kind: only used with format: json"],
    );
}

/// A control character in a template (a bucket key becomes a Redis key, a
/// path a request line) and a `.` or `..` segment in the delta's path (a
/// request off the path the policy names, on the same origin) are refused
/// naming the key.
#[test]
fn control_characters_in_templates_and_dot_segments_in_the_delta_path_are_refused() {
    let example = example_config();
    let key_line = example
        .lines()
        .find(|l| l.trim_start().starts_with("bucket_key: "))
        .unwrap()
        .to_string();
    let with_tab = key_line.replacen("rl:", "rl:\\t", 1);
    assert_ne!(with_tab, key_line);
    assert_rejected(
        &example.replacen(&key_line, &with_tab, 1),
        &["bucket_key", "control character"],
    );
    let path = "path: \"/api/v24.1/query\"";
    assert!(example.contains(path));
    for dots in ["/../../etc", "/./x/.."] {
        let bad = format!("path: \"/api/v24.1/query{dots}\"");
        assert_rejected(&example.replacen(path, &bad, 1), &["delta.path", "segment"]);
    }
}

/// A fixed window is checked as any other key, and the bucket must fit in
/// it on its own: a bucket of 1/s and burst 600 admits 1,200 calls in a
/// 10-minute window of 600.
#[test]
fn a_window_quota_is_checked_and_the_bucket_must_fit_in_it() {
    let with_window = |window: &str| {
        example_with(
            "  max_retry_attempts: 5 ",
            &format!("  window_quota: {window}\n  max_retry_attempts: 5 "),
        )
    };
    // The example's bucket: 5/s, burst 20 -> 20 + 5 x 600 = 3,020 calls.
    assert_rejected(
        &with_window("{calls: 600, window_s: 600, starts: first_call}"),
        &[
            "veeva_vault.window_quota",
            "admits 3020 calls in 600 s",
            "more than the window's 600 calls",
        ],
    );
    assert_rejected(
        &with_window("{calls: 5000, window_s: 600, starts: midnight}"),
        &["veeva_vault.window_quota.starts", "first_call", "clock"],
    );
    assert_rejected(
        &with_window("{calls: 0, window_s: 0, starts: clock}"),
        &[
            "veeva_vault.window_quota.calls",
            "veeva_vault.window_quota.window_s",
        ],
    );
    assert_rejected(
        &with_window("{calls: 5000, window_s: 600, starts: clock, reset: 1}"),
        &["veeva_vault.window_quota.reset"],
    );
    assert_rejected(
        &with_window("{calls: 5000, window_s: 600}"),
        &["veeva_vault.window_quota.starts"],
    );
    let fits = validate(&with_window("{calls: 3020, window_s: 600, starts: clock}"));
    assert_eq!(fits.code, 0, "{}", fits.stderr);
}

/// The keys Castor's audit trail takes are checked as any other: a page
/// number needs JSON, a PHP DateTime cursor is a kind of its own, and a
/// window of dates needs a real time zone.
#[test]
fn page_numbers_php_datetimes_and_day_windows_are_checked() {
    let castor = |delta_tail: &str| {
        format!(
            "castor:\n  base_url_env: CASTOR_BASE_URL\n  token_env: CASTOR_TOKEN\n  sustained_rate_per_sec: 1\n  \
             burst_capacity: 1\n  bucket_key: \"rl:castor:{{study}}\"\n  delta:\n    path: /api/study/{{study}}/audit-trail\n    \
             format: json\n    records_pointer: /items\n    cursor_param: date_from\n    cursor_field: datetime\n    \
             page_size_param: page_size\n    page_size: 1000\n{delta_tail}"
        )
    };
    let good = castor(
        "    paging: page_number\n    cursor_kind: php_datetime\n    window:\n      end_param: date_to\n      format: date\n      zone: Europe/Amsterdam\n",
    );
    let out = validate(&good);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_rejected(
        &castor("    paging: page_number\n    cursor_kind: php_datetime\n    window:\n      end_param: date_to\n      format: date\n      zone: Europe/Amsterdm\n"),
        &["castor.delta.window.zone", "not an IANA time zone"],
    );
    assert_rejected(
        &castor("    paging: page_number\n    window:\n      end_param: date_to\n      format: date\n"),
        &["castor.delta.window.zone: required key is missing"],
    );
    assert_rejected(
        &castor("    paging: page_number\n    window:\n      end_param: date_to\n      format: days\n"),
        &["castor.delta.window.format", "rfc3339", "date"],
    );
    assert_rejected(
        &castor("    paging: json_next\n    page_param: page\n    cursor_kind: datetime\n"),
        &[
            "castor.delta.page_param: only used with paging: page_number",
            "castor.delta.cursor_kind",
            "php_datetime",
        ],
    );
    assert_rejected(
        &castor(
            "    paging: link_header\n    window:\n      end_param: date_to\n      zone: Europe/Amsterdam\n",
        ),
        &["castor.delta.window.zone: only used with format: date"],
    );
}

/// A collection read whole (Castor's study data) has no since-filter: it
/// takes numbered pages and refuses the cursor, window and lookback keys
/// it would never use; a stream may bring its own delta (not with a
/// lookback of its own beside it).
#[test]
fn a_collection_takes_page_numbers_and_no_cursor_and_a_stream_may_have_its_own_delta() {
    let castor = |delta: &str, stream: &str| {
        format!(
            "castor:\n  base_url_env: CASTOR_BASE_URL\n  token_env: CASTOR_TOKEN\n  sustained_rate_per_sec: 1\n  \
             burst_capacity: 1\n  bucket_key: \"rl:castor:{{study}}\"\n  delta:\n    path: /api/study/{{study}}/audit-trail\n    \
             format: json\n    paging: page_number\n    records_pointer: /items\n    cursor_param: date_from\n    \
             cursor_field: datetime\n    page_size_param: page_size\n    page_size: 1000\n  streams:\n    audit_trail: {{}}\n    \
             study_data:\n{stream}      delta:\n        path: /api/study/{{study}}/data-points/study\n        format: json\n        \
             records_pointer: /_embedded/items\n        page_size_param: page_size\n        page_size: 1000\n{delta}"
        )
    };
    let out = validate(&castor(
        "        paging: page_number\n        collection: {}\n",
        "",
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_rejected(
        &castor("        paging: link_header\n        collection: {}\n", ""),
        &["castor.streams.study_data.delta.collection: needs paging: page_number"],
    );
    assert_rejected(
        &castor(
            "        paging: page_number\n        cursor_param: since\n        cursor_field: updated_on\n        collection: {}\n",
            "",
        ),
        &[
            "castor.streams.study_data.delta.cursor_param: not used with delta.collection",
            "castor.streams.study_data.delta.cursor_field: not used with delta.collection",
        ],
    );
    assert_rejected(
        &castor(
            "        paging: page_number\n        lookback:\n          seconds: 60\n        collection: {}\n",
            "",
        ),
        &["castor.streams.study_data.delta.lookback: not used with delta.collection"],
    );
    assert_rejected(
        &castor(
            "        paging: page_number\n        collection:\n          max_passes: 0\n          total_items_pointer: total\n",
            "",
        ),
        &[
            "castor.streams.study_data.delta.collection.max_passes",
            "castor.streams.study_data.delta.collection.total_items_pointer: must be a JSON pointer",
        ],
    );
    assert_rejected(
        &castor(
            "        paging: page_number\n        collection: {}\n",
            "      lookback:\n        seconds: 60\n",
        ),
        &["castor.streams.study_data.lookback: not used with the stream's own delta"],
    );
}
