//! The validation documents and the code agree: every requirement has an
//! OQ test, every traced OQ id is a scenario, every scenario's requirement
//! exists, and traceability.md is the rendering of traceability.yaml.

use edc_qualify::{scenarios, trace};

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
    let expected: Vec<String> = edc_core::exit::Exit::ALL
        .iter()
        .map(|d| format!("| {} | {} | {} |", d.code, d.meaning, d.what_to_do))
        .collect();
    assert_eq!(table, expected);
    let help = edc_core::exit::Exit::help_footer();
    for d in edc_core::exit::Exit::ALL {
        assert!(help.contains(&format!("{} {}", d.code, d.label)), "{help}");
    }
}

/// clap's own consistency checks of every command and flag definition.
#[test]
fn the_cli_definitions_are_consistent() {
    use clap::CommandFactory;
    edc_sync::cli::Cli::command().debug_assert();
}

/// validation/IQ.md's table of checks is the rendering of what
/// `qualify iq` checks: one source, so the protocol a reviewer approves is
/// what the tool does.
#[test]
fn the_iq_protocol_table_is_what_qualify_iq_checks() {
    const IQ_MD: &str = include_str!("../../validation/IQ.md");
    let table = edc_qualify::iq::protocol_table();
    let marker = "TABLE\n";
    if std::env::var_os("EDC_SYNC_WRITE_TRACEABILITY").is_some() {
        let start = IQ_MD
            .find("| ID | Check |")
            .or_else(|| IQ_MD.find(marker))
            .unwrap();
        let rest = &IQ_MD[start..];
        let end = rest.find("\n\n").map_or(rest.len(), |e| e + 1);
        let end = if rest.starts_with(marker) {
            marker.len()
        } else {
            end
        };
        let written = format!("{}{table}{}", &IQ_MD[..start], &rest[end..]);
        std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/validation/IQ.md"), written).unwrap();
        return;
    }
    assert!(
        IQ_MD.contains(&table),
        "validation/IQ.md's table is stale; it should read:\n{table}\n(EDC_SYNC_WRITE_TRACEABILITY=1 cargo test --test integration traceability)"
    );
    for check in edc_qualify::iq::protocol() {
        assert_eq!(
            IQ_MD.matches(&format!("| {} |", check.id)).count(),
            1,
            "{}",
            check.id
        );
    }
}
