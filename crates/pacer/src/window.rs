//! Fixed-window quotas: at most `calls` requests in each window of a given
//! length, the way a vendor that counts calls "per 10 minutes from the
//! first request" or "per 5-minute period" counts them. A token bucket
//! cannot express this shape on its own: a bucket of rate `calls / length`
//! and burst `calls` admits twice `calls` across one window's end.
//!
//! This is the twin of `lua/window.lua`, as [`super::gcra`] is of
//! `lua/gcra.lua`: the [`super::LocalPacer`] runs it under its mutex, the
//! Redis pacer runs the Lua on the server's clock. Times are integer
//! microseconds.
//!
//! A window is kept as its start and the calls booked in it. Arrivals lag
//! booked instants by up to the quota's margin `m` (network and host
//! jitter), so a window books calls only before `end - m` (every arrival
//! lands inside it), and a window that starts at the first call opens the
//! next one no earlier than `end + m` (no later call arrives in the
//! vendor's previous window, which started up to `m` after ours).

use std::time::Duration;

/// Where a window starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowStart {
    /// At the first call after the previous window ended ("if the first
    /// request happens at 09:00, then the rate is set until 09:10").
    FirstCall,
    /// At whole multiples of the window's length since the Unix epoch on
    /// the pacer's clock (a 5-minute period at :00, :05, ...; a day at
    /// midnight UTC).
    Clock,
}

/// A fixed-window quota of a [`super::Quota`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Part of the Redis key (`window:<name>`).
    pub name: String,
    /// Calls allowed in one window; at least 1.
    pub calls: u32,
    /// The window's length.
    pub length: Duration,
    /// Where each window starts.
    pub starts: WindowStart,
}

/// One window quota's shape in microseconds, as both pacers use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowShape {
    /// Calls allowed in one window.
    pub calls: u32,
    /// The window's length.
    pub length_us: i64,
    /// Windows start on the clock's multiples of the length.
    pub aligned: bool,
    /// Arrival jitter kept clear of the window's ends (at most a quarter
    /// of the window, so a window always has room to book in).
    pub margin_us: i64,
}

impl WindowShape {
    /// The shape of `window` under a quota whose margin is `margin`.
    pub fn new(window: &Window, margin: Duration) -> WindowShape {
        let length_us = i64::try_from(window.length.as_micros())
            .unwrap_or(i64::MAX / 4)
            .max(1);
        let margin_us = i64::try_from(margin.as_micros()).unwrap_or(i64::MAX);
        WindowShape {
            calls: window.calls.max(1),
            length_us,
            aligned: window.starts == WindowStart::Clock,
            margin_us: margin_us.min(length_us / 4),
        }
    }

    /// The first instant a new window may book at, at or after `at`.
    fn opening(&self, at: i64) -> i64 {
        if !self.aligned {
            return at;
        }
        let start = at.div_euclid(self.length_us) * self.length_us;
        if at < start + self.length_us - self.margin_us {
            at
        } else {
            start + self.length_us
        }
    }

    /// The start of the window a booking at `at` opens.
    fn start_of(&self, at: i64) -> i64 {
        if self.aligned {
            at.div_euclid(self.length_us) * self.length_us
        } else {
            at
        }
    }
}

/// A window as stored: when it started and the calls booked in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    /// The window's start, in the pacer's clock.
    pub start_us: i64,
    /// Calls booked in it.
    pub count: u32,
}

impl WindowState {
    /// The last instant (exclusive) a call may be booked in this window.
    fn booking_end(&self, shape: &WindowShape) -> i64 {
        self.start_us + shape.length_us - shape.margin_us
    }

    /// The first instant the next window may book at.
    pub fn next_open(&self, shape: &WindowShape) -> i64 {
        let end = self.start_us + shape.length_us;
        if shape.aligned {
            end
        } else {
            end + shape.margin_us
        }
    }
}

/// The earliest instant at or after `at` this window lets a call go.
pub fn earliest(at: i64, shape: &WindowShape, state: Option<WindowState>) -> i64 {
    let Some(state) = state else {
        return shape.opening(at);
    };
    // A window that opened later than `at` (booked ahead): nothing may go
    // before it, or it would land in the full window before.
    let at = at.max(state.start_us);
    if at < state.booking_end(shape) && state.count < shape.calls {
        return at;
    }
    if at < state.next_open(shape) {
        return shape.opening(state.next_open(shape));
    }
    shape.opening(at)
}

/// The window after a call booked at `at` (which [`earliest`] allowed).
pub fn commit(at: i64, shape: &WindowShape, state: Option<WindowState>) -> WindowState {
    match state {
        Some(s) if at >= s.start_us && at < s.booking_end(shape) => WindowState {
            count: s.count + 1,
            ..s
        },
        _ => WindowState {
            start_us: shape.start_of(at),
            count: 1,
        },
    }
}

/// The window after the vendor said it is spent (a 429): full until its
/// end; a window not on record is taken to have started now, the latest
/// the vendor's can have started.
pub fn spent(now: i64, shape: &WindowShape, state: Option<WindowState>) -> WindowState {
    match state {
        Some(s) if now < s.next_open(shape) => WindowState {
            count: shape.calls,
            ..s
        },
        _ => WindowState {
            start_us: shape.start_of(now),
            count: shape.calls,
        },
    }
}

/// The earliest instant every window lets a call go, at or after `at`:
/// each window can only move it later, so a few rounds settle it.
pub fn settle(mut at: i64, windows: &[(WindowShape, Option<WindowState>)]) -> i64 {
    for _ in 0..=windows.len() {
        let moved = windows
            .iter()
            .map(|(shape, state)| earliest(at, shape, *state))
            .max()
            .unwrap_or(at);
        if moved == at {
            break;
        }
        at = moved;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    fn shape(calls: u32, length_s: u64, starts: WindowStart, margin_ms: u64) -> WindowShape {
        let w = Window {
            name: "w".into(),
            calls,
            length: Duration::from_secs(length_s),
            starts,
        };
        WindowShape::new(&w, Duration::from_millis(margin_ms))
    }

    /// Books `n` calls each asked for at `asked`, the way a pacer does.
    fn book(shape: &WindowShape, asked: i64, n: usize) -> Vec<i64> {
        let mut state = None;
        (0..n)
            .map(|_| {
                let at = earliest(asked, shape, state);
                state = Some(commit(at, shape, state));
                at
            })
            .collect()
    }

    #[test]
    fn a_first_call_window_books_its_calls_then_waits_for_the_next() {
        let s = shape(3, 600, WindowStart::FirstCall, 10);
        let at = book(&s, 100 * S, 7);
        assert_eq!(&at[..3], &[100 * S; 3]);
        // The next window opens at the end plus the margin.
        let next = 100 * S + 600 * S + 10_000;
        assert_eq!(&at[3..6], &[next; 3]);
        assert_eq!(at[6], next + 600 * S + 10_000);
    }

    #[test]
    fn a_clock_window_starts_on_the_clock_and_books_before_its_end_less_the_margin() {
        let s = shape(2, 300, WindowStart::Clock, 10);
        // Asked 1 ms before the period's end: too late to arrive inside it.
        let asked = 600 * S - 1_000;
        let at = book(&s, asked, 3);
        assert_eq!(at, vec![600 * S, 600 * S, 900 * S]);
    }

    #[test]
    fn no_window_of_the_vendor_sees_more_than_its_calls() {
        // Every call asked for as early as possible, arriving up to the
        // margin late: count arrivals in each vendor window (first call
        // starts it) and in every clock period.
        for starts in [WindowStart::FirstCall, WindowStart::Clock] {
            let s = shape(5, 10, starts, 50);
            let booked = book(&s, 3 * S + 123, 40);
            for pattern in [
                [0, 0, 0],
                [50_000, 50_000, 50_000],
                [0, 25_000, 50_000],
                [50_000, 0, 25_000],
            ] {
                let mut arrivals: Vec<i64> = booked
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b + pattern[i % 3])
                    .collect();
                arrivals.sort_unstable();
                // The vendor's first-call windows, from the arrivals.
                let mut start = arrivals[0];
                let mut in_window = 0;
                for a in &arrivals {
                    if *a >= start + 10 * S {
                        start = *a;
                        in_window = 0;
                    }
                    in_window += 1;
                    if starts == WindowStart::FirstCall {
                        assert!(in_window <= 5, "{starts:?} delays {pattern:?}: {arrivals:?}");
                    }
                }
                if starts == WindowStart::Clock {
                    let mut per_period = std::collections::BTreeMap::new();
                    for a in &arrivals {
                        *per_period.entry(a.div_euclid(10 * S)).or_insert(0) += 1;
                    }
                    assert!(per_period.values().all(|n| *n <= 5), "{per_period:?}");
                }
            }
        }
    }

    #[test]
    fn a_spent_window_holds_every_caller_until_its_end() {
        let s = shape(600, 600, WindowStart::FirstCall, 0);
        let state = Some(commit(10 * S, &s, None));
        let full = spent(20 * S, &s, state);
        assert_eq!(full.start_us, 10 * S);
        assert_eq!(earliest(20 * S, &s, Some(full)), 610 * S);
        // Nothing on record: the vendor's window may have started just now.
        let fresh = spent(20 * S, &s, None);
        assert_eq!(earliest(20 * S, &s, Some(fresh)), 620 * S);
    }

    #[test]
    fn a_booking_ahead_of_an_open_window_waits_for_it() {
        let s = shape(2, 10, WindowStart::FirstCall, 0);
        let opened_later = Some(WindowState {
            start_us: 50 * S,
            count: 1,
        });
        assert_eq!(earliest(45 * S, &s, opened_later), 50 * S);
    }

    #[test]
    fn several_windows_settle_on_the_latest() {
        let minute = shape(1, 60, WindowStart::Clock, 0);
        let ten = shape(5, 10, WindowStart::FirstCall, 0);
        let minute_used = Some(commit(61 * S, &minute, None));
        let at = settle(62 * S, &[(ten, None), (minute, minute_used)]);
        assert_eq!(at, 120 * S);
    }
}
