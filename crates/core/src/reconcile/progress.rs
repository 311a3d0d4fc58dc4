//! What `verify` shows while it works, at a terminal only: the phase it is
//! in and the pages hashed so far, so a reviewer watching a verification of
//! a year of pages sees it move. Under cron, a pipe or a test nothing is
//! drawn; stdout (the report) is never touched.

/// A spinner on stderr, or nothing.
#[derive(Clone, Default)]
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    /// Progress shown on `bar` (its template shows `{msg}`, the phase, and
    /// `{pos}`, the pages hashed), or nowhere: the command that draws it
    /// decides whether a person is watching.
    pub fn new(bar: Option<indicatif::ProgressBar>) -> Progress {
        if let Some(bar) = &bar {
            bar.set_message("hashing the landed pages");
        }
        Progress(bar)
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
