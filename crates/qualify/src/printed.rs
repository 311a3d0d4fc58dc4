//! The report on paper: the evidence package carries `<kind>-report.pdf`,
//! printed from the HTML by headless Chromium exactly as a reviewer's
//! browser would print it (the copy that gets signed), and
//! `<kind>-report.png`, a screenshot of its first screenful, so a reader of
//! the package sees what the report looked like without opening anything.
//!
//! Chromium is optional: without one (named by `EDC_SYNC_CHROMIUM`, or
//! `chromium`, `chromium-browser`, `google-chrome` on the PATH) the package
//! has the HTML only and the command says so; the HTML prints the same from
//! any browser.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Longest a print may take: a stuck browser must not hold the OQ.
const TIMEOUT: Duration = Duration::from_secs(90);

/// The browser to print with, if this machine has one.
pub fn chromium() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os("EDC_SYNC_CHROMIUM").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(named));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
    .find(|candidate| candidate.is_file())
}

/// What was printed.
pub struct Printed {
    pub pdf: PathBuf,
    pub screenshot: PathBuf,
}

/// Prints `<dir>/<kind>-report.html` to PDF and takes its screenshot, both
/// beside it. `Ok(None)` when there is no Chromium.
pub fn print(dir: &Path, kind: &str) -> anyhow::Result<Option<Printed>> {
    let Some(browser) = chromium() else {
        return Ok(None);
    };
    let html = std::fs::canonicalize(dir.join(format!("{kind}-report.html")))
        .with_context(|| format!("finding {kind}-report.html in {}", dir.display()))?;
    let url = format!("file://{}", html.display());
    let pdf = dir.join(format!("{kind}-report.pdf"));
    let screenshot = dir.join(format!("{kind}-report.png"));
    run(
        &browser,
        &[
            "--no-pdf-header-footer".to_string(),
            format!("--print-to-pdf={}", pdf.display()),
            url.clone(),
        ],
    )?;
    run(
        &browser,
        &[
            "--hide-scrollbars".to_string(),
            "--window-size=1400,2400".to_string(),
            format!("--screenshot={}", screenshot.display()),
            url,
        ],
    )?;
    for made in [&pdf, &screenshot] {
        if !made.is_file() {
            bail!("{} printed nothing to {}", browser.display(), made.display());
        }
    }
    Ok(Some(Printed { pdf, screenshot }))
}

/// One headless Chromium run, in a profile of its own (the user's browser
/// profile is never touched) and without the sandbox: it loads only this
/// report, a local page with no script, and the sandbox cannot start as
/// root or in many containers.
fn run(browser: &Path, args: &[String]) -> anyhow::Result<()> {
    let profile = tempfile::tempdir().context("making a scratch browser profile")?;
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", browser.display()))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().context("waiting for the browser")? {
            if !status.success() {
                bail!("{} failed printing the report ({status})", browser.display());
            }
            return Ok(());
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{} did not finish printing within {} s",
                browser.display(),
                TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
