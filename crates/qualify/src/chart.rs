//! The pacing chart of an OQ scenario: requests the simulator received
//! over time against the envelope the policy allows (`burst + rate × t`),
//! with the waits and their reasons, and the fullest window of arrivals
//! against what the policy allows in it (a window in the middle of a run
//! can exceed the envelope while the count from the first request stays
//! under it: the chart shows the window the verdict is about). Inline SVG,
//! no script, readable on paper: axis titles with units, ticks from zero, the time axis scaled to
//! the scenario, and the allowed area shaded across the whole plot even
//! where its boundary runs above the top.

use std::fmt::Write;

use super::envelope::{self, EnvelopeCheck};
use super::evidence::Pacing;

/// Drawing area, in SVG units (the page scales the whole to its width).
const W: f64 = 760.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 30.0;
const PLOT_H: f64 = 240.0;
const PLOT_W: f64 = W - LEFT - RIGHT;
/// Below the plot: tick labels, the axis title, then the lane of waits.
const WAIT_LANE: f64 = TOP + PLOT_H + 52.0;
const H: f64 = WAIT_LANE + 26.0;

const REQUESTS: &str = "#1f3a5f";
const ENVELOPE: &str = "#b03a2e";
const ALLOWED: &str = "#e3f1e4";
const WAIT: &str = "#d68910";
const WINDOW: &str = "#5b7fb0";
const EXCEEDED: &str = "#f4c7c1";
const INK: &str = "#222";
const GRID: &str = "#d5d5d5";

/// A tick step of 1, 2 or 5 times a power of ten that puts closest to
/// `target` intervals between zero and `max`.
fn tick_step(max: f64, target: f64) -> f64 {
    let raw = (max / target).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    let intervals = |step: f64| (max / step).ceil();
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .min_by(|a, b| {
            (intervals(*a) - target)
                .abs()
                .total_cmp(&(intervals(*b) - target).abs())
        })
        .unwrap_or(magnitude)
}

/// The ticks 0, step, 2·step, ... up to the axis end, which is the first
/// tick at or past `max`.
fn ticks(max: f64, target: f64) -> (f64, Vec<f64>) {
    let step = tick_step(max, target);
    let n = (max / step).ceil().max(1.0) as usize;
    let end = step * n as f64;
    (end, (0..=n).map(|i| step * i as f64).collect())
}

/// A tick label with as many decimals as the step needs, and no `-0`.
fn label(value: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    };
    let text = format!("{value:.decimals$}");
    match text.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
        true => text.trim_start_matches('-').to_string(),
        false => text,
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The chart as an SVG element, and the legend and the list of waits as
/// HTML under it (text, so it prints and can be read by a screen reader).
pub fn chart(p: &Pacing) -> String {
    let last_event = p
        .arrivals_s
        .iter()
        .copied()
        .chain(p.waits.iter().map(|(at, len, _)| at + len))
        .fold(0.0f64, f64::max);
    // The scenario's own length; a scenario of a few milliseconds gets a
    // few milliseconds of axis, not a second.
    let (t_end, t_ticks) = ticks((last_event * 1.05).max(0.001), 6.0);
    let n = p.arrivals_s.len() as f64;
    let burst = f64::from(p.burst);
    let (y_end, y_ticks) = ticks(n.max(burst + 1.0) * 1.1, 5.0);
    let x = |t: f64| LEFT + t / t_end * PLOT_W;
    let y = |c: f64| TOP + PLOT_H - c.min(y_end) / y_end * PLOT_H;
    let allowed = |t: f64| burst + p.rate_per_sec * t;
    // Where the envelope's boundary leaves the top of the plot, if it does.
    let t_exit = ((y_end - burst) / p.rate_per_sec).clamp(0.0, t_end);

    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" aria-label="requests received over time against the allowed envelope {} + {} per second" font-family="sans-serif">"#,
        p.burst, p.rate_per_sec
    );
    // The allowed area, under the envelope, across the whole plot.
    let _ = write!(
        svg,
        r#"<polygon fill="{ALLOWED}" points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}"/>"#,
        x(0.0),
        y(0.0),
        x(0.0),
        y(burst),
        x(t_exit),
        y(allowed(t_exit)),
        x(t_end),
        y(allowed(t_end)),
        x(t_end),
        y(0.0)
    );
    // Grid and tick labels, both axes from zero.
    let t_step = t_ticks.get(1).copied().unwrap_or(t_end);
    for t in &t_ticks {
        let _ = write!(
            svg,
            r#"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1}" stroke="{GRID}"/><text x="{0:.1}" y="{2}" font-size="13" fill="{INK}" text-anchor="middle">{3}</text>"#,
            x(*t),
            TOP + PLOT_H,
            TOP + PLOT_H + 18.0,
            label(*t, t_step)
        );
    }
    let y_step = y_ticks.get(1).copied().unwrap_or(y_end);
    for c in &y_ticks {
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="{GRID}"/><text x="{2}" y="{3:.1}" font-size="13" fill="{INK}" text-anchor="end">{4}</text>"#,
            y(*c),
            LEFT + PLOT_W,
            LEFT - 8.0,
            y(*c) + 4.5,
            label(*c, y_step)
        );
    }
    let _ = write!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#777"/>"##
    );
    // Axis titles, with units.
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{}" font-size="13" fill="{INK}" text-anchor="middle">time since the first request (s)</text>"#,
        LEFT + PLOT_W / 2.0,
        TOP + PLOT_H + 38.0
    );
    let _ = write!(
        svg,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" font-size="13" fill="{INK}" text-anchor="middle">requests received (count)</text>"#,
        TOP + PLOT_H / 2.0
    );
    // The envelope's boundary, and where it runs above the plot.
    let _ = write!(
        svg,
        r#"<polyline fill="none" stroke="{ENVELOPE}" stroke-width="2.5" stroke-dasharray="8 4" points="{:.1},{:.1} {:.1},{:.1}"/>"#,
        x(0.0),
        y(burst),
        x(t_exit),
        y(allowed(t_exit))
    );
    if t_exit < t_end {
        // Above the plot's top edge, flush right: never over the data.
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" font-size="13" fill="{ENVELOPE}" text-anchor="end">allowed line above the plot after {} s ({} allowed by {} s)</text>"#,
            LEFT + PLOT_W,
            TOP - 9.0,
            label(t_exit, t_step / 10.0),
            allowed(t_end).floor(),
            label(t_end, t_step)
        );
    }
    // The fullest window, shaded, with the most allowed in it drawn from
    // where it starts: where the steps rise above that line, it exceeded.
    let fullest = fullest_window(p);
    if let Some(w) = fullest {
        let (start, end) = (w.start_s, w.end_s);
        // Filled when it exceeded; outlined otherwise, so that the allowed
        // area stays readable under a window that spans the whole run.
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{TOP}" width="{:.1}" height="{PLOT_H}" {}/>"#,
            x(start),
            ((end - start) / t_end * PLOT_W).max(3.0),
            if w.exceeded {
                format!(r#"fill="{EXCEEDED}" opacity="0.7""#)
            } else {
                format!(r#"fill="none" stroke="{WINDOW}" stroke-width="2" stroke-dasharray="2 3""#)
            }
        );
        let from = w.before as f64 + burst + p.rate_per_sec * p.tolerance_s;
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{ENVELOPE}" stroke-width="2" stroke-dasharray="3 3" points="{:.1},{:.1} {:.1},{:.1}"/>"#,
            x(start),
            y(from),
            x(start) + ((end - start) / t_end * PLOT_W).max(3.0),
            y(from + p.rate_per_sec * (end - start))
        );
    }
    // Requests received, cumulative, as steps.
    let mut pts = format!("{:.1},{:.1}", x(0.0), y(0.0));
    for (i, t) in p.arrivals_s.iter().enumerate() {
        let _ = write!(
            pts,
            " {0:.1},{1:.1} {0:.1},{2:.1}",
            x(*t),
            y(i as f64),
            y(i as f64 + 1.0)
        );
    }
    let _ = write!(pts, " {:.1},{:.1}", x(t_end), y(n));
    let _ = write!(
        svg,
        r#"<polyline fill="none" stroke="{REQUESTS}" stroke-width="2.5" points="{pts}"/>"#
    );
    // The waits, in a lane of their own under the time axis.
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" font-size="13" fill="{INK}" text-anchor="end">waits</text>"#,
        LEFT - 8.0,
        WAIT_LANE + 11.0
    );
    if p.waits.is_empty() {
        let _ = write!(
            svg,
            r#"<text x="{LEFT}" y="{}" font-size="13" fill="{INK}">none</text>"#,
            WAIT_LANE + 11.0
        );
    }
    for (i, (at, len, reason)) in p.waits.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{WAIT_LANE}" width="{:.1}" height="14" fill="{WAIT}"><title>wait {}: {:.3} s, {}</title></rect><text x="{:.1}" y="{}" font-size="11" fill="{INK}">{}</text>"#,
            x(*at),
            (len / t_end * PLOT_W).max(2.0),
            i + 1,
            len,
            esc(reason),
            x(*at) + 3.0,
            WAIT_LANE + 25.0,
            i + 1
        );
    }
    svg.push_str("</svg>");

    let mut html = format!("<div class=\"chart\">{svg}");
    let _ = write!(
        html,
        "<p class=\"legend\"><span><span class=\"key\" style=\"border-top:3px solid {REQUESTS}\"></span>requests \
         received (cumulative)</span> <span><span class=\"key\" style=\"border-top:3px dashed {ENVELOPE}\"></span>most \
         the policy allows: {} + {} × t</span> <span><span class=\"key\" style=\"background:{ALLOWED};height:12px\">\
         </span>allowed area</span> <span><span class=\"key\" style=\"background:{WAIT};height:12px\"></span>waits</span></p>",
        p.burst, p.rate_per_sec
    );
    if let Some(w) = fullest {
        let _ = write!(
            html,
            "<p class=\"window\"><span class=\"key\" style=\"{};height:12px\"></span>fullest window: \
             requests {} to {}, {} in {:.3} s; at most {:.2} allowed ({} + {} × ({:.3} + {:.3}) s, the arrival \
             tolerance); {}</p>",
            if w.exceeded {
                format!("background:{EXCEEDED}")
            } else {
                format!("border:2px dashed {WINDOW};box-sizing:border-box")
            },
            w.before + 1,
            w.before + w.count,
            w.count,
            w.end_s - w.start_s,
            w.allowed,
            p.burst,
            p.rate_per_sec,
            w.end_s - w.start_s,
            p.tolerance_s,
            if w.exceeded { "EXCEEDED" } else { "within" }
        );
    }
    if !p.waits.is_empty() {
        html.push_str("<ol class=\"waits\">");
        for (at, len, reason) in &p.waits {
            let _ = write!(html, "<li>at {at:.3} s, {len:.3} s: {}</li>", esc(reason));
        }
        html.push_str("</ol>");
    }
    html.push_str("</div>");
    html
}

/// The fullest window of arrivals (most above, or closest to, what the
/// policy allows in it), in seconds from the first arrival.
#[derive(Debug, Clone, Copy)]
struct Fullest {
    start_s: f64,
    end_s: f64,
    before: usize,
    count: usize,
    allowed: f64,
    exceeded: bool,
}

fn fullest_window(p: &Pacing) -> Option<Fullest> {
    let us: Vec<i64> = p.arrivals_s.iter().map(|t| (t * 1e6).round() as i64).collect();
    if us.is_empty() {
        return None;
    }
    let EnvelopeCheck {
        violations, worst, ..
    } = envelope::check_within(&us, p.rate_per_sec, p.burst, p.tolerance_s);
    Some(Fullest {
        start_s: worst.start_us as f64 / 1e6,
        end_s: worst.end_us as f64 / 1e6,
        before: worst.before,
        count: worst.count,
        allowed: worst.allowed,
        exceeded: violations > 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_start_at_zero_and_end_past_the_data() {
        let (end, t) = ticks(0.0347, 6.0);
        assert_eq!(t[0], 0.0);
        assert!((0.0347..0.06).contains(&end), "{end}");
        assert_eq!(label(t[1], t[1]), "0.005");
        let (end, t) = ticks(121.0, 5.0);
        assert_eq!((end, t.len()), (140.0, 8));
        assert_eq!(label(-0.0, 1.0), "0");
    }

    #[test]
    fn a_short_scenario_gets_a_short_axis_and_the_envelope_stays_in_view() {
        let p = Pacing {
            rate_per_sec: 50.0,
            burst: 10,
            arrivals_s: vec![0.0, 0.008, 0.016, 0.025, 0.033],
            waits: Vec::new(),
            tolerance_s: 0.05,
        };
        let html = chart(&p);
        assert!(
            html.contains(">0.04<") || html.contains(">0.035<"),
            "scaled to 33 ms: {html}"
        );
        assert!(
            !html.contains("above the plot"),
            "the boundary crosses the whole plot: {html}"
        );
        assert!(
            html.contains("time since the first request (s)") && html.contains("requests received (count)")
        );
    }

    #[test]
    fn an_envelope_above_the_plot_is_said_so_and_its_area_still_shaded() {
        let p = Pacing {
            rate_per_sec: 50.0,
            burst: 10,
            arrivals_s: vec![0.0, 0.01, 2.05],
            waits: vec![(0.01, 2.0, "429, Retry-After in seconds".into())],
            tolerance_s: 0.05,
        };
        let html = chart(&p);
        assert!(html.contains("allowed line above the plot after"), "{html}");
        assert!(
            html.contains("<li>at 0.010 s, 2.000 s: 429, Retry-After in seconds</li>"),
            "{html}"
        );
    }

    #[test]
    fn a_window_that_exceeds_mid_run_is_drawn_and_said() {
        // Under the line counted from the first request (3 + 10 t), but 4
        // arrivals inside 0.01 s mid-run: the fullest window exceeds.
        let p = Pacing {
            rate_per_sec: 10.0,
            burst: 3,
            arrivals_s: vec![0.0, 1.0, 2.0, 3.0, 3.001, 3.002, 3.003, 4.0],
            waits: Vec::new(),
            tolerance_s: 0.05,
        };
        let html = chart(&p);
        assert!(
            html.contains("fullest window: requests 4 to 7, 4 in 0.003 s; at most 3.53 allowed")
                && html.contains("EXCEEDED"),
            "{html}"
        );
        assert!(html.contains(EXCEEDED), "the window is shaded as exceeded");
        let calm = Pacing {
            arrivals_s: vec![0.0, 0.1, 0.2, 0.3],
            ..p
        };
        let html = chart(&calm);
        assert!(html.contains("within") && !html.contains("EXCEEDED"), "{html}");
    }
}
