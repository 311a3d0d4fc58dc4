//! The reviewer's copies of the evidence: Markdown and a self-contained
//! HTML page (inline CSS and SVG, no scripts, nothing fetched).

use std::fmt::Write;

use super::chart::chart;
use super::evidence::{Evidence, ScenarioResult, Status};

fn status_text(s: Status) -> &'static str {
    match s {
        Status::Passed => "PASS",
        Status::Failed => "FAIL",
        Status::NotExecuted => "NOT EXECUTED",
    }
}

fn title(e: &Evidence) -> String {
    format!("edc-sync {} evidence", e.kind.to_uppercase())
}

fn environment_rows(e: &Evidence) -> Vec<(&'static str, String)> {
    let env = &e.environment;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "n/a".into());
    vec![
        ("Tool", format!("{} {}", env.tool, env.version)),
        ("Executable", env.executable.clone()),
        ("Executable SHA-256", env.executable_sha256.clone()),
        (
            "OS / host / user",
            format!("{} / {} / {}", env.os, env.host, env.user),
        ),
        (
            "Redis",
            match (&env.redis_url, &env.redis_version) {
                (Some(u), Some(v)) => format!("{u} (version {v})"),
                _ => "not used".into(),
            },
        ),
        ("Policy file", env.config_path.clone()),
        ("Policy SHA-256", opt(&env.config_sha256)),
        (
            "Policy git commit / blob",
            format!("{} / {}", opt(&env.config_git_commit), opt(&env.config_git_blob)),
        ),
        (
            "Policy uncommitted changes",
            env.config_dirty.map_or("n/a".into(), |d| d.to_string()),
        ),
        (
            "Started / finished (UTC)",
            format!("{} / {}", e.started, e.finished),
        ),
    ]
}

fn deviations(e: &Evidence) -> Vec<&ScenarioResult> {
    e.scenarios
        .iter()
        .filter(|s| s.status != Status::Passed)
        .collect()
}

pub fn markdown(e: &Evidence) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# {}\n", title(e));
    let _ = writeln!(m, "| | |\n|---|---|");
    for (k, v) in environment_rows(e) {
        let _ = writeln!(m, "| {k} | {} |", v.replace('|', "\\|"));
    }
    let s = &e.summary;
    let _ = writeln!(
        m,
        "\n**Result: {} of {} passed, {} failed, {} not executed.**\n",
        s.passed, s.total, s.failed, s.not_executed
    );
    let _ = writeln!(
        m,
        "## Summary\n\n| ID | Title | Requirements | Result |\n|---|---|---|---|"
    );
    for r in &e.scenarios {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} |",
            r.id,
            r.title,
            r.requirements.join(", "),
            status_text(r.status)
        );
    }
    for r in &e.scenarios {
        let _ = writeln!(m, "\n## {} — {}\n", r.id, r.title);
        let _ = writeln!(
            m,
            "Requirements: {}. Result: **{}**. Started {}, finished {}.\n",
            r.requirements.join(", "),
            status_text(r.status),
            r.started,
            r.finished
        );
        if let Some(note) = &r.note {
            let _ = writeln!(m, "> {note}\n");
        }
        if !r.steps.is_empty() {
            let _ = writeln!(
                m,
                "| # | Step | Expected | Actual | Result |\n|---|---|---|---|---|"
            );
            for (i, st) in r.steps.iter().enumerate() {
                let esc = |t: &str| t.replace('|', "\\|").replace('\n', " ");
                let _ = writeln!(
                    m,
                    "| {} | {} | {} | {} | {} |",
                    i + 1,
                    esc(&st.description),
                    esc(&st.expected),
                    esc(&st.actual),
                    if st.pass { "pass" } else { "FAIL" }
                );
            }
        }
        if r.pacing.is_some() {
            let _ = writeln!(m, "\nPacing chart: see {}-report.html.", e.kind);
        }
        if !r.artifacts.is_empty() {
            let _ = writeln!(
                m,
                "\nArtifacts: {}",
                r.artifacts
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let _ = writeln!(m, "\n## Deviations\n");
    let devs = deviations(e);
    if devs.is_empty() {
        let _ = writeln!(m, "None: every executed scenario passed.");
    }
    for r in devs {
        let _ = writeln!(
            m,
            "- {} {}: {}",
            r.id,
            status_text(r.status),
            r.note.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(m, "\n## Signatures\n");
    for role in ["Executed by", "Reviewed by", "Approved by"] {
        let _ = writeln!(m, "{role}: ______________________  Date: ____________\n");
    }
    let _ = writeln!(
        m,
        "Every file of this package is listed with its SHA-256 in `SHA256SUMS`."
    );
    m
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Why an OQ scenario's policy is not the one in the header.
const FIXTURE_NOTE: &str =
    "The policy file above is the site's: validated and identified here, not used by the \
     scenarios. Each scenario runs under its own fixture policy, committed in a git repository the scenario \
     creates, so the OQ never changes site data; it is listed among the scenario's artifacts as \
     OQ-nnn/policy/rate_limits.yaml (fixture policy).";

/// The page's style: tables that fit the page (fixed layout, long values
/// wrapped), charts scaled to the column, and a print style that keeps
/// every column, the signature blocks and each step row whole on paper.
const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.35}\
table{border-collapse:collapse;margin:.5em 0 1em;width:100%}\
td,th{border:1px solid #999;padding:4px 6px;vertical-align:top;font-size:13px;text-align:left;overflow-wrap:break-word}\
th{background:#eee}table.steps{table-layout:fixed}\
table.summary{table-layout:fixed}col.id{width:5.5em}col.reqs{width:9.5em}col.res{width:8.5em}.nowrap{white-space:nowrap}\
col.n{width:2.5em}col.step{width:26%}col.expected{width:24%}col.actual{width:auto}col.result{width:4.5em}\
code{font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word}\
.PASS{color:#1e7e34;font-weight:bold}.FAIL{color:#b21f2d;font-weight:bold}.NOT{color:#8a6d3b;font-weight:bold}\
.note{background:#f4f4f4;border-left:4px solid #888;padding:.5em .8em;font-size:14px}\
.chart svg{width:100%;height:auto;max-width:900px;display:block}\
.legend{font-size:14px;color:#222}.legend>span{white-space:nowrap}.key{display:inline-block;width:28px;margin:0 .4em 0 1em;vertical-align:middle}\
.waits{font-size:13px;margin-top:0}figure{margin:1em 0}figcaption{font-size:14px;color:#333}\
.artifacts{font-size:13px;overflow-wrap:anywhere}.sig{margin:2.5em 0;break-inside:avoid}\
@page{size:A4;margin:14mm}\
@media print{body{max-width:none;margin:0;padding:0;font-size:12px}td,th{font-size:11px}code{font-size:10px}\
a{color:inherit;text-decoration:none}tr,figure,.sig{break-inside:avoid}thead{display:table-header-group}\
h2{break-after:avoid}.chart svg{max-width:100%}}";

pub fn html(e: &Evidence) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>",
        esc(&title(e))
    );
    let _ = write!(h, "<h1>{}</h1><table>", esc(&title(e)));
    for (k, v) in environment_rows(e) {
        let _ = write!(h, "<tr><th>{k}</th><td><code>{}</code></td></tr>", esc(&v));
    }
    let s = &e.summary;
    h.push_str("</table>");
    if e.kind == "oq" {
        let _ = write!(h, "<p class=\"note\">{}</p>", esc(FIXTURE_NOTE));
    }
    let _ = write!(
        h,
        "<p><strong>Result: {} of {} passed, {} failed, {} not executed.</strong></p>",
        s.passed, s.total, s.failed, s.not_executed
    );
    let _ = write!(
        h,
        "<h2>Summary</h2><table class=\"summary\"><colgroup><col class=\"id\"><col class=\"title\"><col class=\"reqs\">\
         <col class=\"res\"></colgroup><tr><th>ID</th><th>Title</th><th>Requirements</th><th>Result</th></tr>"
    );
    let class = |st: Status| match st {
        Status::Passed => "PASS",
        Status::Failed => "FAIL",
        Status::NotExecuted => "NOT",
    };
    for r in &e.scenarios {
        let _ = write!(
            h,
            "<tr><td class=\"nowrap\"><a href=\"#{0}\">{0}</a></td><td>{1}</td><td>{2}</td><td class=\"{3} nowrap\">{4}</td></tr>",
            r.id,
            esc(&r.title),
            r.requirements
                .iter()
                .map(|q| format!("<span class=\"nowrap\">{}</span>", esc(q)))
                .collect::<Vec<_>>()
                .join(", "),
            class(r.status),
            status_text(r.status)
        );
    }
    h.push_str("</table>");
    for r in &e.scenarios {
        let _ = write!(h, "<h2 id=\"{}\">{} — {}</h2>", r.id, r.id, esc(&r.title));
        let _ = write!(
            h,
            "<p>Requirements: {}. Result: <span class=\"{}\">{}</span>. Started {}, finished {}.</p>",
            r.requirements.join(", "),
            class(r.status),
            status_text(r.status),
            r.started,
            r.finished
        );
        if let Some(note) = &r.note {
            let _ = write!(h, "<blockquote>{}</blockquote>", esc(note));
        }
        if !r.steps.is_empty() {
            h.push_str(
                "<table class=\"steps\"><colgroup><col class=\"n\"><col class=\"step\"><col class=\"expected\">\
                 <col class=\"actual\"><col class=\"result\"></colgroup><thead><tr><th>#</th><th>Step</th>\
                 <th>Expected</th><th>Actual</th><th>Result</th></tr></thead><tbody>",
            );
            for (i, st) in r.steps.iter().enumerate() {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td class=\"{}\">{}</td></tr>",
                    i + 1,
                    esc(&st.description),
                    esc(&st.expected),
                    esc(&st.actual),
                    if st.pass { "PASS" } else { "FAIL" },
                    if st.pass { "pass" } else { "FAIL" }
                );
            }
            h.push_str("</tbody></table>");
        }
        if let Some(p) = &r.pacing {
            let _ = write!(
                h,
                "<figure>{}<figcaption>{}: requests the simulator received over time, against the most the \
                 scenario's fixture policy allows, and the waits with their reasons.</figcaption></figure>",
                chart(p),
                r.id
            );
        }
        if !r.artifacts.is_empty() {
            let _ = write!(
                h,
                "<p class=\"artifacts\">Artifacts (relative to this report): {}</p>",
                r.artifacts
                    .iter()
                    .map(|a| {
                        let what = if a.ends_with("policy/rate_limits.yaml") {
                            " (fixture policy)"
                        } else {
                            ""
                        };
                        format!("<a href=\"{0}\"><code>{0}</code></a>{what}", esc(a))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    h.push_str("<h2>Deviations</h2>");
    let devs = deviations(e);
    if devs.is_empty() {
        h.push_str("<p>None: every executed scenario passed.</p>");
    } else {
        h.push_str("<ul>");
        for r in devs {
            let _ = write!(
                h,
                "<li>{} {}: {}</li>",
                r.id,
                status_text(r.status),
                esc(r.note.as_deref().unwrap_or(""))
            );
        }
        h.push_str("</ul>");
    }
    h.push_str("<h2>Signatures</h2>");
    for role in ["Executed by", "Reviewed by", "Approved by"] {
        let _ = write!(
            h,
            "<p class=\"sig\">{role}: ______________________________ &nbsp; Date: ______________</p>"
        );
    }
    h.push_str("<p>Every file of this package is listed with its SHA-256 in <code>SHA256SUMS</code>.</p></body></html>\n");
    h
}
