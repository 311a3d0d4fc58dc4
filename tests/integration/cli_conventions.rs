//! The command line behaves as cargo and ripgrep users expect: help text on
//! every option, man pages with EXIT STATUS and EXAMPLES, completion past
//! the subcommand in bash, zsh and fish (each tested in the shell itself),
//! `--color` and NO_COLOR, and JSON logs down to the final error.

use std::path::Path;
use std::process::Command;

use crate::support;

/// Every visible subcommand of `cmd`, with its path (`"config validate"`).
fn subcommands(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    // clap's own `help` subcommand tree is not ours to document.
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let p = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        out.push((p.clone(), sub.clone()));
        subcommands(sub, &p, out);
    }
}

fn all_subcommands() -> Vec<(String, clap::Command)> {
    let mut root = edc_sync::cli::command();
    root.build();
    let mut out = vec![(String::new(), root.clone())];
    subcommands(&root, "", &mut out);
    out
}

#[test]
fn every_option_and_argument_has_help_text() {
    let mut missing = Vec::new();
    for (path, cmd) in all_subcommands() {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("edc-sync {path} --{id}"));
            }
        }
        if !path.is_empty() && cmd.get_about().is_none() {
            missing.push(format!("edc-sync {path} (the subcommand itself)"));
        }
    }
    assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
}

/// Each leaf subcommand has at least one example, and each example names
/// a subcommand that exists and parses as the definitions say.
#[test]
fn every_subcommand_has_an_example_that_parses() {
    let subs = all_subcommands();
    for (path, cmd) in &subs {
        if !path.is_empty() && !cmd.has_subcommands() {
            assert!(
                edc_sync::cli::examples::of(path).next().is_some(),
                "`edc-sync {path}` has no example"
            );
        }
    }
    for e in edc_sync::cli::examples::EXAMPLES {
        assert!(
            subs.iter().any(|(p, _)| p == e.command),
            "{}: no such subcommand",
            e.command
        );
        let words = support::shell_words(e.line);
        assert!(
            words[1..].join(" ").starts_with(e.command),
            "{} is not under {}",
            e.line,
            e.command
        );
        edc_sync::cli::command()
            .try_get_matches_from(&words)
            .unwrap_or_else(|err| panic!("{}: {err}", e.line));
    }
}

#[test]
fn man_pages_have_exit_status_and_examples() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("share/man/man1");
    let out = support::run(&["man", "--out-dir", into.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for page in [
        "edc-sync.1",
        "edc-sync-sync.1",
        "edc-sync-config-validate.1",
        "edc-sync-cursor-show.1",
    ] {
        let text = std::fs::read_to_string(into.join(page)).unwrap();
        assert!(text.contains(".SH \"EXIT STATUS\""), "{page}: {text}");
        assert!(text.contains("75 (try later)"), "{page}");
        assert!(text.contains(".SH EXAMPLES"), "{page}");
    }
    let sync = std::fs::read_to_string(into.join("edc-sync-sync.1")).unwrap();
    assert!(
        sync.contains("edc\\-sync sync \\-\\-vendor medidata_rave"),
        "{sync}"
    );
    // Rendered as man renders it, where the OS has man.
    if Command::new("man").arg("--version").output().is_ok() {
        let shown = Command::new("man")
            .arg("-l")
            .arg(into.join("edc-sync-sync.1"))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(
            text.contains("EXIT STATUS") && text.contains("EXAMPLES"),
            "{text}"
        );
        assert!(text.contains("edc-sync sync --vendor veeva_vault"), "{text}");
    }
}

/// Where the OS provides the shell, or the test command installed it.
fn shell(name: &str) -> bool {
    let found = Command::new(name)
        .arg("-c")
        .arg("exit 0")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "{name} is missing; scripts/test installs it (apt-get install -y {name})"
    );
    found
}

fn completion_script(dir: &Path, shell: &str) -> std::path::PathBuf {
    let out = support::run(&["completions", shell]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let file = dir.join(match shell {
        "zsh" => "_edc-sync".to_string(),
        s => format!("edc-sync.{s}"),
    });
    std::fs::write(&file, out.stdout).unwrap();
    file
}

/// bash: what the completion function registered for `edc-sync` offers at
/// `edc-sync sync --ve<TAB>`, called as bash's programmable completion
/// calls it.
#[test]
fn bash_completes_options_past_the_subcommand() {
    if !shell("bash") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = completion_script(dir.path(), "bash");
    let probe = format!(
        r#"source '{}'
f=$(complete -p edc-sync | sed -E 's/.*-F ([^ ]+).*/\1/')
complete_at() {{ COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}};
  COMPREPLY=(); "$f" edc-sync "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"; echo "${{COMPREPLY[*]}}"; }}
complete_at edc-sync sync --ve
complete_at edc-sync config validate --che
complete_at edc-sync sy
"#,
        script.display()
    );
    let out = Command::new("bash").arg("-c").arg(probe).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(lines[0].split(' ').any(|w| w == "--vendor"), "sync --ve: {text}");
    assert!(
        lines[1].split(' ').any(|w| w == "--check-env"),
        "config validate --che: {text}"
    );
    assert!(lines[2].split(' ').any(|w| w == "sync"), "sy: {text}");
}

/// fish: `complete -C` is fish's own completion of a command line.
#[test]
fn fish_completes_options_past_the_subcommand() {
    if !shell("fish") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = completion_script(dir.path(), "fish");
    let out = Command::new("fish")
        .arg("--no-config")
        .arg("-c")
        .arg(format!(
            "source '{}'; complete -C 'edc-sync sync --ve'; echo ---; complete -C 'edc-sync config validate --che'",
            script.display()
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (sync, validate) = text.split_once("---").unwrap();
    assert!(sync.lines().any(|l| l.starts_with("--vendor")), "{text}");
    assert!(validate.lines().any(|l| l.starts_with("--check-env")), "{text}");
}

/// zsh: an interactive zsh on a pseudo-terminal (zsh/zpty), the script on
/// its fpath and compinit run, types `edc-sync sync --ve<TAB>` and the
/// line it redraws is read back, as a person would see it.
#[test]
fn zsh_completes_options_past_the_subcommand() {
    if !shell("zsh") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    completion_script(dir.path(), "zsh");
    let probe = format!(
        r#"zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z "PS1='> '; fpath=('{dir}' \$fpath); autoload -Uz compinit; compinit -u -d '{dir}/zcompdump'"
zpty -w z "print ready1"
complete_line() {{
  zpty -w -n z "$1"$'\t'
  sleep 1
  zpty -w z $'\x05 #end'
  local out line
  out=""
  while zpty -r -t z line; do out+="$line"; done
  sleep 0.5
  while zpty -r -t z line; do out+="$line"; done
  print -r -- "$out"
  zpty -w z $'\x03'
}}
sleep 1
complete_line 'edc-sync sync --vend' > '{dir}/sync.out'
complete_line 'edc-sync config validate --che' > '{dir}/validate.out'
zpty -d z
"#,
        dir = dir.path().display()
    );
    let out = Command::new("zsh")
        .arg("-f")
        .arg("-c")
        .arg(probe)
        .output()
        .unwrap();
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let (sync, validate) = (read("sync.out"), read("validate.out"));
    let clean = |s: &str| s.replace(|c: char| c.is_control(), " ");
    assert!(
        clean(&sync).contains("edc-sync sync --vendor"),
        "sync --vend<TAB> drew: {:?}\nstderr: {}",
        clean(&sync),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        clean(&validate).contains("edc-sync config validate --check-env"),
        "config validate --che<TAB> drew: {:?}",
        clean(&validate)
    );
}

/// Logs in colour only where asked: `--color never` and NO_COLOR (auto)
/// keep escape codes out; `--color always` puts them in even into a pipe.
#[test]
fn color_follows_the_flag_and_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml");
    let run = |extra: &[&str], no_color: Option<&str>| {
        let mut cmd = support::edc_sync();
        cmd.args(["config", "show", "--config"])
            .arg(&missing)
            .args(extra)
            .arg("-v");
        match no_color {
            Some(v) => cmd.env("NO_COLOR", v),
            None => cmd.env_remove("NO_COLOR"),
        };
        support::run_cmd(&mut cmd)
    };
    let help_always = support::run_cmd(support::edc_sync().args(["--color", "always", "sync", "--help"]));
    assert!(
        help_always.stdout.contains('\u{1b}'),
        "help in colour when always"
    );
    let help_never = support::run_cmd(support::edc_sync().args(["--color=never", "sync", "--help"]));
    assert!(!help_never.stdout.contains('\u{1b}'));
    // clap's errors follow the flag too.
    let err = support::run_cmd(support::edc_sync().args(["--color", "always", "sync", "--bogus"]));
    assert_eq!(err.code, 2);
    assert!(err.stderr.contains('\u{1b}'), "{}", err.stderr);
    assert!(ColorChoice::Auto.colours(true, None));
    assert!(!ColorChoice::Auto.colours(true, Some(std::ffi::OsStr::new("1"))));
    assert!(
        ColorChoice::Auto.colours(true, Some(std::ffi::OsStr::new(""))),
        "an empty NO_COLOR is unset"
    );
    assert!(!ColorChoice::Auto.colours(false, None), "a pipe");
    assert!(ColorChoice::Always.colours(false, Some(std::ffi::OsStr::new("1"))));
    assert!(!ColorChoice::Never.colours(true, None));
    for out in [
        run(&["--color", "never"], None),
        run(&[], Some("1")),
        run(&[], None),
    ] {
        assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
    }
}

use edc_sync::cli::ColorChoice;

/// With `--log-format json` every stderr line is a JSON object, the final
/// error included, with its exit code.
#[test]
fn json_logs_end_with_the_error_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml");
    let out = support::run_cmd(
        support::edc_sync()
            .args(["--log-format", "json", "config", "validate", "--config"])
            .arg(&missing),
    );
    assert_eq!(out.code, 66, "{}", out.stderr);
    let lines: Vec<serde_json::Value> = out
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let last = lines.last().expect("an error line");
    assert_eq!(last["level"], "ERROR");
    assert_eq!(last["exit_code"], 66);
    assert_eq!(last["exit"], "no input");
    assert!(last["message"].as_str().unwrap().contains("nope.yaml"), "{last}");
    // The text form is unchanged.
    let text = support::run_cmd(
        support::edc_sync()
            .args(["config", "validate", "--config"])
            .arg(&missing),
    );
    assert!(
        text.stderr
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("edc-sync: error: "),
        "{}",
        text.stderr
    );
}

/// At a terminal (a pseudo-terminal made by `script`), a throttled sync's
/// progress line says it is waiting, why, and the time left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_progress_line_shows_a_wait_its_reason_and_the_time_left() {
    use edc_sim::{Dataset, FaultSchedule, SimConfig, Simulator};
    let dir = support::small_page_policy_repo();
    let mut faults = FaultSchedule::default();
    let (n, fault) = FaultSchedule::parse_entry("2=429:seconds:3").unwrap();
    faults.insert(n, fault);
    let config = SimConfig {
        dataset: Dataset {
            subjects: 2,
            records: 20,
            seed: 3,
            padding: 0,
        },
        token: "tty-token".into(),
        faults,
        ..SimConfig::default()
    };
    let sim = Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let d = dir.path();
    let line = format!(
        "'{}' --color never sync --config '{}' --vendor vault_json --study S-1 --out '{}' --state '{}' --audit-log '{}' --pacer local",
        env!("CARGO_BIN_EXE_edc-sync"),
        d.join("policies.yaml").display(),
        d.join("landing").display(),
        d.join("state").display(),
        d.join("audit.jsonl").display()
    );
    let mut cmd = Command::new("script");
    cmd.args(["-qfec", &line, "/dev/null"])
        .env("EDC_SYNC_TEST_BASE_URL", sim.base_url())
        .env("EDC_SYNC_TEST_TOKEN", "tty-token")
        .env("TERM", "xterm");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    assert!(
        screen.contains("default: waiting 3 s: 429, Retry-After in seconds"),
        "the wait and its reason: {screen}"
    );
    assert!(
        screen.contains("default: waiting 1 s: 429,"),
        "counted down: {screen}"
    );
}

/// A usage error is a JSON line too under `--log-format json` (exit 2);
/// help is still help.
#[test]
fn a_usage_error_under_json_logs_is_one_json_line() {
    let out = support::run(&["--log-format", "json", "sync", "--vendor", "v", "--bogus"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {}", lines[0]));
    assert_eq!(
        (v["level"].as_str(), v["exit_code"].as_u64()),
        (Some("ERROR"), Some(2))
    );
    assert!(v["message"].as_str().unwrap().contains("--bogus"), "{v}");
    let help = support::run(&["--log-format=json", "sync", "--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Usage:"));
    let text = support::run(&["sync", "--bogus"]);
    assert!(text.stderr.starts_with("error:"), "{}", text.stderr);
}

/// `--help` (and `-h`) never shows the value of an environment variable an
/// option reads: `EDC_SYNC_STATE` may hold a PostgreSQL password and
/// `EDC_SYNC_REDIS_URL` a Redis one. Every subcommand, every form, and the
/// man pages, with every such variable set.
#[test]
fn help_never_shows_an_environment_variables_value() {
    let secrets = [
        ("EDC_SYNC_STATE", "postgres://edc:pw-state-7f3a@db.example/edc"),
        ("EDC_SYNC_REDIS_URL", "redis://:pw-redis-7f3a@redis.example/"),
        ("EDC_SYNC_CONFIG", "/srv/pw-config-7f3a/rate_limits.yaml"),
        ("EDC_SYNC_SIM_TOKEN", "pw-token-7f3a"),
        ("EDC_SYNC_SIM_PASSWORD", "pw-password-7f3a"),
    ];
    let mut paths: Vec<String> = all_subcommands().into_iter().map(|(p, _)| p).collect();
    paths.push(String::new());
    for path in paths {
        for flag in ["--help", "-h"] {
            let mut args: Vec<&str> = path.split_whitespace().collect();
            args.push(flag);
            let mut cmd = support::edc_sync();
            cmd.args(&args);
            for (name, value) in secrets {
                cmd.env(name, value);
            }
            let out = support::run_cmd(&mut cmd);
            for (name, _) in secrets {
                let leaked = format!("{}{}", out.stdout, out.stderr);
                assert!(
                    !leaked.contains("7f3a"),
                    "`{}` shows {name}'s value:\n{leaked}",
                    args.join(" ")
                );
            }
        }
    }
}

/// A missing argument under `--log-format json`: the one JSON line names
/// every argument that is missing (clap puts them on the lines after the
/// first, which the JSON line once dropped).
#[test]
fn a_missing_argument_under_json_logs_is_named_in_the_json_line() {
    let out = support::run(&[
        "--log-format",
        "json",
        "sync",
        "--config",
        "x.yaml",
        "--vendor",
        "v",
        "--study",
        "S",
        "--out",
        "o",
        "--state",
        "s",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(out.stderr.trim()).unwrap();
    let message = v["message"].as_str().unwrap();
    for named in ["--audit-log", "--redis", "--pacer"] {
        assert!(message.contains(named), "{named} missing from: {message}");
    }
}
