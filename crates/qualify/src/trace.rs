//! Traceability: every user requirement (validation/URS.md) is traced to
//! functional-spec sections and to OQ scenarios (validation/traceability.yaml),
//! and every traced scenario exists in the code.

use std::collections::{BTreeMap, BTreeSet};

use edc_core::config::yaml::{self, Node};

/// One requirement's trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub urs: String,
    pub fs: Vec<String>,
    pub oq: Vec<String>,
}

/// `URS-nnn` ids defined in URS.md (as `| URS-001 |` table rows).
pub fn urs_ids(urs_md: &str) -> BTreeMap<String, String> {
    urs_md
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells.len() > 2 && cells[1].starts_with("URS-"))
                .then(|| (cells[1].to_string(), cells[2].to_string()))
        })
        .collect()
}

fn strings(node: Option<&Node>) -> Vec<String> {
    match node {
        Some(Node::Seq(items)) => items
            .iter()
            .filter_map(|n| {
                if let Node::Str(s) = n {
                    Some(s.clone())
                } else {
                    None
                }
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Parses traceability.yaml: `URS-001: {fs: [...], oq: [...]}`.
pub fn parse(text: &str) -> Result<Vec<Trace>, String> {
    let node = yaml::parse(text).map_err(|e| format!("traceability.yaml: {}", e.message))?;
    let Node::Map(entries) = node else {
        return Err("traceability.yaml: expected a map of URS id to trace".into());
    };
    let mut out = Vec::new();
    for (urs, body) in entries {
        let Node::Map(fields) = &body else {
            return Err(format!("{urs}: expected fs and oq lists"));
        };
        let get = |k: &str| fields.iter().find(|(key, _)| key == k).map(|(_, v)| v);
        out.push(Trace {
            urs,
            fs: strings(get("fs")),
            oq: strings(get("oq")),
        });
    }
    Ok(out)
}

/// Every inconsistency between URS.md, traceability.yaml and the scenarios.
pub fn problems(urs_md: &str, traces: &[Trace], scenarios: &[(&str, &[&str])]) -> Vec<String> {
    let defined = urs_ids(urs_md);
    let scenario_ids: BTreeSet<&str> = scenarios.iter().map(|(id, _)| *id).collect();
    let mut out = Vec::new();
    for urs in defined.keys() {
        match traces.iter().find(|t| &t.urs == urs) {
            None => out.push(format!("{urs} has no trace in traceability.yaml")),
            Some(t) if t.oq.is_empty() => out.push(format!("{urs} has no OQ test")),
            Some(t) if t.fs.is_empty() => out.push(format!("{urs} has no functional-spec section")),
            _ => {}
        }
    }
    for t in traces {
        if !defined.contains_key(&t.urs) {
            out.push(format!(
                "traceability.yaml traces {}, which URS.md does not define",
                t.urs
            ));
        }
        for oq in &t.oq {
            if !scenario_ids.contains(oq.as_str()) {
                out.push(format!(
                    "traceability.yaml names {oq} for {}, but no such scenario exists",
                    t.urs
                ));
            }
        }
    }
    for (id, reqs) in scenarios {
        for r in *reqs {
            if !defined.contains_key(*r) {
                out.push(format!("scenario {id} names {r}, which URS.md does not define"));
            }
            if !traces.iter().any(|t| t.urs == *r && t.oq.iter().any(|o| o == id)) {
                out.push(format!(
                    "scenario {id} covers {r} but traceability.yaml does not say so"
                ));
            }
        }
    }
    out
}

/// traceability.md, rendered from the YAML and URS.md.
pub fn render(urs_md: &str, traces: &[Trace], scenarios: &[(&str, &str)]) -> String {
    let defined = urs_ids(urs_md);
    let mut s = String::from(
        "# Traceability matrix\n\n\
         Generated from `traceability.yaml`, `URS.md` and the OQ scenarios in the code;\n\
         `cargo test --test integration traceability` fails if this file is out of date\n\
         (regenerate with `EDC_SYNC_WRITE_TRACEABILITY=1 cargo test --test integration traceability`).\n\n\
         | Requirement | Statement | Functional spec | OQ tests |\n|---|---|---|---|\n",
    );
    for t in traces {
        let text = defined
            .get(&t.urs)
            .map(String::as_str)
            .unwrap_or("(not in URS.md)");
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            t.urs,
            text,
            t.fs.join(", "),
            t.oq.join(", ")
        ));
    }
    s.push_str("\n## OQ scenarios\n\n| OQ test | Title |\n|---|---|\n");
    for (id, title) in scenarios {
        s.push_str(&format!("| {id} | {title} |\n"));
    }
    s
}
