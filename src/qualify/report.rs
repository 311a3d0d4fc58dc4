//! The reviewer's copies of the evidence: Markdown and a self-contained
//! HTML page (inline CSS and SVG, no scripts, nothing fetched).

use std::fmt::Write;

use super::evidence::{Evidence, Pacing, ScenarioResult, Status};

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

/// Requests over time against the allowed envelope `burst + rate * t`,
/// and the waits with their reasons underneath.
pub fn chart(p: &Pacing) -> String {
    let (w, h, left, top, plot_h) = (680.0, 300.0, 50.0, 20.0, 200.0);
    let plot_w = w - left - 20.0;
    let t_max = p
        .arrivals_s
        .iter()
        .copied()
        .chain(p.waits.iter().map(|(at, len, _)| at + len))
        .fold(1.0f64, f64::max)
        * 1.05;
    let n = p.arrivals_s.len().max(1) as f64;
    let y_max = n.max(f64::from(p.burst) + 1.0) * 1.1;
    let x = |t: f64| left + t / t_max * plot_w;
    let y = |c: f64| top + plot_h - c / y_max * plot_h;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="requests over time against the allowed envelope">"#
    );
    let _ = write!(
        svg,
        r##"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#999"/>"##
    );
    // Envelope: burst + rate * t, clipped at the top.
    let t_top = ((y_max - f64::from(p.burst)) / p.rate_per_sec).min(t_max);
    let _ = write!(
        svg,
        r##"<polyline fill="none" stroke="#c0392b" stroke-width="2" stroke-dasharray="6 3" points="{:.1},{:.1} {:.1},{:.1}"/>"##,
        x(0.0),
        y(f64::from(p.burst)),
        x(t_top),
        y(f64::from(p.burst) + p.rate_per_sec * t_top)
    );
    // Cumulative requests as a step line.
    let mut pts = format!("{:.1},{:.1}", x(0.0), y(0.0));
    for (i, t) in p.arrivals_s.iter().enumerate() {
        let _ = write!(
            pts,
            " {:.1},{:.1} {:.1},{:.1}",
            x(*t),
            y(i as f64),
            x(*t),
            y(i as f64 + 1.0)
        );
    }
    let _ = write!(
        svg,
        r##"<polyline fill="none" stroke="#2c3e50" stroke-width="1.5" points="{pts}"/>"##
    );
    // Axes labels.
    let _ = write!(
        svg,
        r##"<text x="{left}" y="{}" font-size="11">0</text><text x="{:.1}" y="{}" font-size="11" text-anchor="end">{t_max:.1} s</text>"##,
        top + plot_h + 14.0,
        left + plot_w,
        top + plot_h + 14.0
    );
    let _ = write!(
        svg,
        r##"<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>"##,
        left - 4.0,
        top + 10.0,
        y_max.round()
    );
    // Waits: bars under the plot.
    let bar_y = top + plot_h + 26.0;
    for (at, len, reason) in &p.waits {
        let _ = write!(
            svg,
            r##"<rect x="{:.1}" y="{bar_y}" width="{:.1}" height="12" fill="#f39c12"><title>{} s wait: {}</title></rect>"##,
            x(*at),
            (len / t_max * plot_w).max(2.0),
            len,
            esc(reason)
        );
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{}" font-size="10">{}</text>"##,
            x(*at),
            bar_y + 24.0,
            esc(reason)
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{left}" y="{}" font-size="11"><tspan fill="#2c3e50">— requests received (cumulative)</tspan>  <tspan fill="#c0392b">- - allowed: {} + {} × t</tspan>  <tspan fill="#f39c12">■ waits</tspan></text>"##,
        h - 4.0,
        p.burst,
        p.rate_per_sec
    );
    svg.push_str("</svg>");
    svg
}

pub fn html(e: &Evidence) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;margin:.5em 0 1em}}td,th{{border:1px solid #bbb;padding:4px 8px;vertical-align:top;font-size:13px}}\
         th{{background:#eee}}.PASS{{color:#1e7e34;font-weight:bold}}.FAIL{{color:#b21f2d;font-weight:bold}}\
         .NOT{{color:#8a6d3b;font-weight:bold}}.sig{{margin:2em 0}}code{{font-size:12px}}</style></head><body>",
        esc(&title(e))
    );
    let _ = write!(h, "<h1>{}</h1><table>", esc(&title(e)));
    for (k, v) in environment_rows(e) {
        let _ = write!(h, "<tr><th>{k}</th><td><code>{}</code></td></tr>", esc(&v));
    }
    let s = &e.summary;
    let _ = write!(
        h,
        "</table><p><strong>Result: {} of {} passed, {} failed, {} not executed.</strong></p>",
        s.passed, s.total, s.failed, s.not_executed
    );
    let _ = write!(
        h,
        "<h2>Summary</h2><table><tr><th>ID</th><th>Title</th><th>Requirements</th><th>Result</th></tr>"
    );
    let class = |st: Status| match st {
        Status::Passed => "PASS",
        Status::Failed => "FAIL",
        Status::NotExecuted => "NOT",
    };
    for r in &e.scenarios {
        let _ = write!(
            h,
            "<tr><td><a href=\"#{0}\">{0}</a></td><td>{1}</td><td>{2}</td><td class=\"{3}\">{4}</td></tr>",
            r.id,
            esc(&r.title),
            r.requirements.join(", "),
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
                "<table><tr><th>#</th><th>Step</th><th>Expected</th><th>Actual</th><th>Result</th></tr>",
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
            h.push_str("</table>");
        }
        if let Some(p) = &r.pacing {
            let _ = write!(h, "<figure>{}<figcaption>Requests received by the simulator over time, against the allowed envelope, and the waits with their reasons.</figcaption></figure>", chart(p));
        }
        if !r.artifacts.is_empty() {
            let _ = write!(
                h,
                "<p>Artifacts: {}</p>",
                r.artifacts
                    .iter()
                    .map(|a| format!("<code>{}</code>", esc(a)))
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
