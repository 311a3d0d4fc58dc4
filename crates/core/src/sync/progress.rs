//! The progress line a person at a terminal watches (never drawn under
//! cron or systemd): pages and records as they commit, and while a stream
//! waits, why (a Retry-After, a backoff, the vendor's burst floor, the
//! quota's next slot) and how long is left, counted down.

use std::convert::Infallible;
use std::time::Duration;

use indicatif::ProgressBar;
use tokio::time::Instant;

/// Waits shorter than this are pacing at work, not worth a line.
const SHOWN_FROM: Duration = Duration::from_secs(1);

/// How often the time left is redrawn.
const TICK: Duration = Duration::from_millis(250);

/// A page committed: the stream's records so far.
pub(super) fn committed(bar: Option<&ProgressBar>, stream: &str, records: u64) {
    if let Some(bar) = bar {
        bar.inc(1);
        show_records(bar, stream, records);
    }
}

fn show_records(bar: &ProgressBar, stream: &str, records: u64) {
    bar.set_message(format!("{stream}: {records} records"));
}

/// Runs `wait`, which ends by `until`. A wait long enough to read is shown
/// meanwhile (why, and the time left, counted down), and the stream's
/// records again once it is over; a shorter one leaves the line alone.
pub(super) async fn showing_wait<F: std::future::Future>(
    bar: Option<&ProgressBar>,
    stream: &str,
    records: u64,
    why: &str,
    until: Instant,
    wait: F,
) -> F::Output {
    let Some(bar) = bar.filter(|_| until.saturating_duration_since(Instant::now()) >= SHOWN_FROM) else {
        return wait.await;
    };
    let out = tokio::select! {
        out = wait => out,
        never = count_down(bar, stream, why, until) => match never {},
    };
    show_records(bar, stream, records);
    out
}

/// Shows `stream` waiting until `until` because of `why`; never returns.
async fn count_down(bar: &ProgressBar, stream: &str, why: &str, until: Instant) -> Infallible {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        bar.set_message(format!("{stream}: waiting {}: {why}", left_text(left)));
        tokio::time::sleep(TICK).await;
    }
}

/// `12 s`, `2 min 05 s`: whole seconds, rounded up (a wait never shows 0
/// while it lasts).
fn left_text(left: Duration) -> String {
    let s = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    match s {
        0..=59 => format!("{s} s"),
        _ => format!("{} min {:02} s", s / 60, s % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_reads_as_a_person_says_it() {
        assert_eq!(left_text(Duration::from_millis(1)), "1 s");
        assert_eq!(left_text(Duration::from_secs(12)), "12 s");
        assert_eq!(left_text(Duration::from_millis(59_001)), "1 min 00 s");
        assert_eq!(left_text(Duration::from_secs(125)), "2 min 05 s");
    }

    #[tokio::test]
    async fn a_wait_is_shown_with_its_reason_and_counted_down() {
        let bar = ProgressBar::hidden();
        let why = "429, Retry-After in seconds";
        let until = Instant::now() + Duration::from_millis(4_500);
        let _ = tokio::time::timeout(
            Duration::from_millis(50),
            count_down(&bar, "subjects", why, until),
        )
        .await;
        assert_eq!(bar.message(), format!("subjects: waiting 5 s: {why}"));
        let _ = tokio::time::timeout(
            Duration::from_millis(1_300),
            count_down(&bar, "subjects", why, until),
        )
        .await;
        // Counted down (by how much depends on how busy the machine is).
        let later = bar.message();
        assert!(
            ["4 s", "3 s", "2 s"]
                .iter()
                .any(|s| later == format!("subjects: waiting {s}: {why}")),
            "{later}"
        );
    }

    #[tokio::test]
    async fn after_a_wait_the_line_shows_the_records_again() {
        let bar = ProgressBar::hidden();
        let until = Instant::now() + Duration::from_millis(1_100);
        let seen = showing_wait(Some(&bar), "s", 7, "slot", until, async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            bar.message()
        })
        .await;
        assert_eq!(seen, "s: waiting 1 s: slot");
        assert_eq!(bar.message(), "s: 7 records");
    }

    #[tokio::test]
    async fn a_short_wait_leaves_the_line_alone() {
        let bar = ProgressBar::hidden();
        bar.set_message("subjects: 10 records");
        let until = Instant::now() + Duration::from_millis(300);
        let waited = tokio::time::sleep_until(until);
        showing_wait(Some(&bar), "s", 99, "slot", until, waited).await;
        assert_eq!(bar.message(), "subjects: 10 records");
    }
}
