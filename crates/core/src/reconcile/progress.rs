//! What `verify` shows while it works, at a terminal only: the phase it is
//! in and the pages hashed so far (a bar of the pages listed, once the
//! manifests are read), so a reviewer watching a verification of a year
//! of pages sees it move and how long it has left. Under cron, a pipe or a test nothing is
//! drawn; stdout (the report) is never touched.

/// A spinner on stderr (a bar once the pages to hash are known), or
/// nothing.
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

    /// `pages` more pages to hash (a landing directory's listed pages, known
    /// once its manifest is read): the spinner becomes a bar.
    pub(super) fn pages_ahead(&self, pages: u64) {
        let Some(bar) = &self.0 else { return };
        match bar.length() {
            Some(length) => bar.set_length(length + pages),
            None => {
                let style = indicatif::ProgressStyle::with_template(
                    "{spinner} verify: {msg} [{bar:30}] {pos} of {len} pages hashed  [{elapsed}, about {eta} left]",
                );
                if let Ok(style) = style {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_length(pages);
            }
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
