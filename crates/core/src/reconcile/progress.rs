//! What `verify` shows while it works, on a terminal only: the phase it is
//! in and the pages hashed so far, so a reviewer watching a verification of
//! a year of pages sees it move. Under cron, a pipe or a test nothing is
//! drawn; stdout (the report) is never touched.

use std::time::Duration;

/// A spinner on stderr, or nothing.
#[derive(Clone, Default)]
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    /// A spinner when stderr is a terminal (a person is watching), else
    /// nothing.
    pub fn on_terminal() -> Progress {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new_spinner();
        let style = indicatif::ProgressStyle::with_template(
            "{spinner} verify: {msg}, {pos} pages hashed  [{elapsed}]",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_message("hashing the landed pages");
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress(Some(bar))
    }

    /// The phase now.
    pub(super) fn phase(&self, what: &'static str) {
        if let Some(bar) = &self.0 {
            bar.set_message(what);
        }
    }

    /// One more page hashed.
    pub(super) fn page(&self) {
        if let Some(bar) = &self.0 {
            bar.inc(1);
        }
    }

    /// Takes the spinner off the screen before the report is printed.
    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
