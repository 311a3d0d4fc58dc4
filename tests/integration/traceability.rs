//! The validation documents and the code agree: every requirement has an
//! OQ test, every traced OQ id is a scenario, every scenario's requirement
//! exists, and traceability.md is the rendering of traceability.yaml.

use edc_sync::qualify::{scenarios, trace};

const URS: &str = include_str!("../../validation/URS.md");
const YAML: &str = include_str!("../../validation/traceability.yaml");
const RENDERED: &str = include_str!("../../validation/traceability.md");

#[test]
fn every_requirement_is_traced_to_a_scenario_that_exists() {
    let traces = trace::parse(YAML).unwrap();
    let all = scenarios::all();
    let pairs: Vec<(&str, &[&str])> = all.iter().map(|s| (s.id, s.requirements)).collect();
    let problems = trace::problems(URS, &traces, &pairs);
    assert!(
        problems.is_empty(),
        "traceability problems:\n{}",
        problems.join("\n")
    );
    assert!(trace::urs_ids(URS).len() >= 15);
}

#[test]
fn the_checker_catches_each_kind_of_gap() {
    let urs = "| ID | Requirement |\n|---|---|\n| URS-001 | a |\n| URS-002 | b |\n";
    let traces =
        trace::parse("URS-001:\n  fs: [FS-1]\n  oq: [OQ-001]\nURS-003:\n  fs: [FS-2]\n  oq: [OQ-099]\n")
            .unwrap();
    let problems = trace::problems(urs, &traces, &[("OQ-001", &["URS-001", "URS-009"])]).join("\n");
    assert!(problems.contains("URS-002 has no trace"), "{problems}");
    assert!(
        problems.contains("traces URS-003, which URS.md does not define"),
        "{problems}"
    );
    assert!(
        problems.contains("names OQ-099 for URS-003, but no such scenario exists"),
        "{problems}"
    );
    assert!(
        problems.contains("scenario OQ-001 names URS-009, which URS.md does not define"),
        "{problems}"
    );
}

#[test]
fn traceability_md_is_up_to_date() {
    let traces = trace::parse(YAML).unwrap();
    let all = scenarios::all();
    let titles: Vec<(&str, &str)> = all.iter().map(|s| (s.id, s.title)).collect();
    let expected = trace::render(URS, &traces, &titles);
    if std::env::var_os("EDC_SYNC_WRITE_TRACEABILITY").is_some() {
        std::fs::write(
            concat!(env!("CARGO_MANIFEST_DIR"), "/validation/traceability.md"),
            &expected,
        )
        .unwrap();
        return;
    }
    assert_eq!(
        RENDERED, expected,
        "validation/traceability.md is stale: EDC_SYNC_WRITE_TRACEABILITY=1 cargo test --test integration traceability"
    );
}

/// The README's exit-code table is the interface scripts rely on: it says
/// exactly what `Exit::ALL` (which also writes the `--help` footer) says.
#[test]
fn the_readme_exit_code_table_is_exit_all() {
    let readme = include_str!("../../README.md");
    let table: Vec<String> = readme
        .split("## Exit codes")
        .nth(1)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| code"))
        .map(str::to_string)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let expected: Vec<String> = edc_sync::exit::Exit::ALL
        .iter()
        .map(|d| format!("| {} | {} | {} |", d.code, d.meaning, d.what_to_do))
        .collect();
    assert_eq!(table, expected);
    let help = edc_sync::exit::Exit::help_footer();
    for d in edc_sync::exit::Exit::ALL {
        assert!(help.contains(&format!("{} {}", d.code, d.label)), "{help}");
    }
}

/// clap's own consistency checks of every command and flag definition.
#[test]
fn the_cli_definitions_are_consistent() {
    use clap::CommandFactory;
    edc_sync::cli::Cli::command().debug_assert();
}

/// docs/architecture.md's arrows: `config/` uses no floor above it, only
/// `commands/` knows `qualify`, and only the modes know the simulator.
#[test]
fn the_arrows_of_docs_architecture_hold() {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let mut all = Vec::new();
    files(src, &mut all);
    let mut wrong = Vec::new();
    for path in all {
        let rel = path.strip_prefix(src).unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let under = |dir: &str| rel.starts_with(&format!("{dir}/")) || rel == format!("{dir}.rs");
        let mode = ["commands", "qualify", "bench", "sim", "cli"]
            .iter()
            .any(|d| under(d));
        if !mode && text.contains("crate::sim") {
            wrong.push(format!("{rel} uses crate::sim"));
        }
        if !(under("commands") || under("qualify")) && text.contains("crate::qualify") {
            wrong.push(format!("{rel} uses crate::qualify"));
        }
        if under("config") {
            for floor in ["edc", "limiter", "store", "audit", "sync", "run"] {
                if text.contains(&format!("crate::{floor}::")) || text.contains(&format!("crate::{floor};")) {
                    wrong.push(format!("{rel} uses crate::{floor}"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows against docs/architecture.md:\n{}",
        wrong.join("\n")
    );
}

/// A room a newcomer can read: no source file over 500 lines
/// (docs/architecture.md says where each concept lives instead).
#[test]
fn no_source_file_exceeds_500_lines() {
    let long: Vec<String> = source_files()
        .into_iter()
        .filter_map(|(rel, path)| {
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            (lines > 500).then(|| format!("{rel} ({lines} lines)"))
        })
        .collect();
    assert!(long.is_empty(), "split by concept: {long:?}");
}

/// Every `crate::` path points down the floors of docs/architecture.md:
/// no module uses one above it, so there can be no circle.
#[test]
fn every_arrow_points_down_the_floors() {
    let floor = |module: &str| -> Option<u8> {
        Some(match module {
            "config" | "digest" | "durable" | "host" | "interrupt" | "redact" | "mask" | "stream" => 0,
            "edc" => 2,
            "limiter" => 3,
            "store" | "audit" | "reconcile" => 4,
            "sync" => 5,
            "run" | "exit" | "metrics" => 6,
            "commands" | "qualify" | "bench" | "sim" | "cli" | "logging" | "main" | "lib" => 7,
            _ => return None,
        })
    };
    let mut wrong = Vec::new();
    for (rel, path) in source_files() {
        let top = rel.split('/').next().unwrap().trim_end_matches(".rs").to_string();
        let Some(own) = floor(&top) else {
            wrong.push(format!(
                "{rel}: its module {top} is on no floor of docs/architecture.md"
            ));
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, _) in text.match_indices("crate::") {
            let used: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if let Some(theirs) = floor(&used) {
                if theirs > own {
                    wrong.push(format!("{rel} (floor {own}) uses crate::{used} (floor {theirs})"));
                }
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "arrows pointing up:\n{}", wrong.join("\n"));
}

/// Every `.rs` file under `src/`, with its path relative to `src/`.
fn source_files() -> Vec<(String, std::path::PathBuf)> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src.clone()];
    let mut all = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
                all.push((rel, path));
            }
        }
    }
    all.sort();
    all
}
