//! The pacer, against a real `redis-server` (started per test on a free
//! loopback port) and against the in-process twin, with one shared suite.
//!
//! Assertions are on booked instants (server time) and counts, never on
//! how long something took.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edc_core::store::RunLockName;
use quota_pacer::{
    Answer, Ask, Fence, LeaseAttempt, Limiter, LocalPacer, Pacer, PacerError, Quota, Rate, RedisPacer,
    Reservation, Window, WindowStart,
};
use support::redis::RedisServer;

fn rate(per_sec: f64, burst: u32) -> Rate {
    Rate::new(per_sec, burst).unwrap()
}

fn granted(r: Reservation) -> (Duration, i64) {
    match r {
        Reservation::Granted { wait, at_us } => (wait, at_us),
        Reservation::Refused { wait } => panic!("expected a grant, was refused (wait {wait:?})"),
    }
}

/// The single-process suite every pacer must pass.
mod suite {
    use super::*;

    pub async fn burst_then_sustained<P: Pacer>(p: P) {
        let q = Quota::new("suite:burst", rate(20.0, 5))
            .unwrap()
            .with_horizon(Duration::from_secs(60));
        let mut booked = Vec::new();
        for _ in 0..12 {
            booked.push(granted(p.reserve(&q).await.unwrap()));
        }
        for (k, (wait, _)) in booked.iter().take(5).enumerate() {
            assert_eq!(*wait, Duration::ZERO, "burst grant {k} is immediate");
        }
        assert!(booked[5].0 > Duration::ZERO, "the sixth grant waits");
        // After the burst, booked instants are exactly 1/rate apart.
        let first = booked[0].1;
        for (k, (_, at)) in booked.iter().enumerate().skip(5) {
            let expected = first + (k as i64 - 4) * 50_000;
            assert!(
                (at - expected).abs() <= 2,
                "grant {k} booked at {at}, expected {expected}"
            );
        }
    }

    pub async fn a_refusal_books_nothing<P: Pacer>(p: P) {
        let short = Quota::new("suite:refuse", rate(1.0, 1))
            .unwrap()
            .with_horizon(Duration::from_millis(300));
        let (_, first_at) = granted(p.reserve(&short).await.unwrap());
        for _ in 0..5 {
            match p.reserve(&short).await.unwrap() {
                Reservation::Refused { wait } => assert!(wait > Duration::from_millis(300), "{wait:?}"),
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
        let long = short.clone().with_horizon(Duration::from_secs(5));
        let (_, at) = granted(p.reserve(&long).await.unwrap());
        assert!(
            (at - (first_at + 1_000_000)).abs() <= 2,
            "the refusals booked nothing: {at} vs {first_at}"
        );
    }

    pub async fn the_tighter_gate_governs_and_neither_leaks<P: Pacer>(p: P) {
        let account = rate(100.0, 10);
        let study = rate(2.0, 1);
        let s1 = Quota::new("suite:gates", account)
            .unwrap()
            .with_gate("study:S1", study);
        let s1_short = s1.clone().with_horizon(Duration::from_millis(200));
        let s1_long = s1.clone().with_horizon(Duration::from_secs(10));
        let account_only = Quota::new("suite:gates", account).unwrap();

        // The study gate (2/s) governs: grants 500 ms apart although the
        // account allows 100/s.
        let (_, a0) = granted(p.reserve(&s1_long).await.unwrap());
        let (_, a1) = granted(p.reserve(&s1_long).await.unwrap());
        assert!((a1 - a0 - 500_000).abs() <= 2, "study gate spacing: {}", a1 - a0);

        // Refused by the study gate twenty times: the account is not charged.
        for _ in 0..20 {
            assert!(matches!(
                p.reserve(&s1_short).await.unwrap(),
                Reservation::Refused { .. }
            ));
        }
        // The account gate holds exactly the two granted tokens: the second
        // booked at a1, so its TAT is a1 + 10 ms and the next account-only
        // slot is TAT - (burst - 1) * 10 ms = a1 - 80 ms. Any charge from a
        // refusal would push it later.
        let (_, next) = granted(
            p.reserve(&account_only.clone().with_horizon(Duration::from_secs(10)))
                .await
                .unwrap(),
        );
        assert!(
            (next - (a1 - 80_000)).abs() <= 2,
            "account slot {next}, expected {}",
            a1 - 80_000
        );

        // Refused by the account gate (1/s): the study gate (2/s) is not
        // charged. Ten charges would have pushed its TAT five seconds out.
        let s2 = Quota::new("suite:gates2", rate(1.0, 1))
            .unwrap()
            .with_gate("study:S2", rate(2.0, 1));
        let s2_short = s2.clone().with_horizon(Duration::from_millis(100));
        let (_, g0) = granted(p.reserve(&s2_short).await.unwrap());
        for _ in 0..10 {
            assert!(matches!(
                p.reserve(&s2_short).await.unwrap(),
                Reservation::Refused { .. }
            ));
        }
        let (_, g1) = granted(
            p.reserve(&s2.with_horizon(Duration::from_secs(10)))
                .await
                .unwrap(),
        );
        assert!(
            (g1 - (g0 + 1_000_000)).abs() <= 2,
            "next slot {} µs after the first, expected 1 s",
            g1 - g0
        );
    }

    pub async fn a_pause_is_a_floor_for_every_acquire<P: Pacer>(p: P) {
        let q = Quota::new("suite:pause", rate(100.0, 10))
            .unwrap()
            .with_horizon(Duration::from_secs(10));
        p.pause(&q, Duration::from_millis(1500)).await.unwrap();
        p.pause(&q, Duration::from_millis(100)).await.unwrap(); // a shorter pause does not shorten it
        let (wait, _) = granted(p.reserve(&q).await.unwrap());
        assert!(wait >= Duration::from_millis(1300), "waited only {wait:?}");
        let beyond = q.clone().with_horizon(Duration::from_millis(500));
        assert!(matches!(
            p.reserve(&beyond).await.unwrap(),
            Reservation::Refused { .. }
        ));
    }

    pub async fn the_lease_cap_holds_and_frees<P: Pacer>(p: P) {
        let q = Quota::new("suite:lease", rate(1000.0, 100))
            .unwrap()
            .with_concurrency(2, Duration::from_secs(60));
        let a = match p.try_lease(&q).await.unwrap() {
            LeaseAttempt::Acquired(id) => id,
            other => panic!("{other:?}"),
        };
        let b = match p.try_lease(&q).await.unwrap() {
            LeaseAttempt::Acquired(id) => id,
            other => panic!("{other:?}"),
        };
        assert!(b > a, "lease ids are fencing tokens and only grow");
        assert!(matches!(
            p.try_lease(&q).await.unwrap(),
            LeaseAttempt::Full { .. }
        ));
        assert!(p.renew(&q, a).await.unwrap());
        assert!(p.release(&q, a).await.unwrap());
        assert!(!p.release(&q, a).await.unwrap(), "a second release finds nothing");
        assert!(matches!(
            p.try_lease(&q).await.unwrap(),
            LeaseAttempt::Acquired(_)
        ));
    }

    pub async fn an_unreleased_lease_expires<P: Pacer>(p: P) {
        let q = Quota::new("suite:expire", rate(1000.0, 100))
            .unwrap()
            .with_concurrency(1, Duration::from_millis(300));
        assert!(matches!(
            p.try_lease(&q).await.unwrap(),
            LeaseAttempt::Acquired(_)
        ));
        assert!(matches!(
            p.try_lease(&q).await.unwrap(),
            LeaseAttempt::Full { .. }
        ));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let LeaseAttempt::Acquired(_) = p.try_lease(&q).await.unwrap() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the expired lease never freed its slot"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn a_cancelled_holder_releases_its_lease<P: Pacer>(p: P) {
        let q = Quota::new("suite:cancel", rate(1000.0, 100))
            .unwrap()
            .with_concurrency(1, Duration::from_secs(600)); // far beyond the test: only a release frees it
        let limiter = std::sync::Arc::new(Limiter::new(p.clone(), q.clone()));
        let (held_tx, held_rx) = tokio::sync::oneshot::channel();
        let holder = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let _permit = limiter.acquire().await.unwrap();
                let _ = held_tx.send(());
                std::future::pending::<()>().await;
            })
        };
        held_rx.await.unwrap();
        assert!(matches!(
            p.try_lease(&q).await.unwrap(),
            LeaseAttempt::Full { .. }
        ));
        holder.abort();
        let _ = holder.await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let LeaseAttempt::Acquired(id) = p.try_lease(&q).await.unwrap() {
                p.release(&q, id).await.unwrap();
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cancelled task's lease was never released"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // And the limiter itself hands out permits again.
        let permit = tokio::time::timeout(Duration::from_secs(10), limiter.acquire())
            .await
            .unwrap()
            .unwrap();
        permit.release();
        limiter.flush().await.unwrap();
        assert!(matches!(
            p.try_lease(&q).await.unwrap(),
            LeaseAttempt::Acquired(_)
        ));
    }

    /// Two processes' limiters of one quota (each process its own
    /// in-process queue): one keeps four tasks asking, each slot going
    /// from task to task inside it; another asks once meanwhile and gets a
    /// slot while the first still asks, not after it ran dry.
    fn windowed(name: &str, calls: u32, length: Duration, starts: WindowStart) -> Quota {
        // A bucket far looser than the window: only the window can bind.
        Quota::new(name, rate(10_000.0, 1_000))
            .unwrap()
            .with_concurrency(64, Duration::from_secs(60))
            .with_horizon(Duration::from_secs(10))
            .with_window(Window {
                name: "calls".into(),
                calls,
                length,
                starts,
            })
    }

    pub async fn a_fixed_window_books_its_calls_then_waits_for_the_next<P: Pacer>(p: P) {
        let q = windowed("suite:window", 5, Duration::from_secs(2), WindowStart::FirstCall);
        let mut at = Vec::new();
        for _ in 0..6 {
            at.push(granted(p.reserve(&q).await.unwrap()).1);
        }
        // The same window through the one call a request costs.
        for _ in 0..6 {
            match p.acquire(&q, Ask::book(&[], None)).await.unwrap() {
                Answer::Granted { at_us, .. } => at.push(at_us),
                other => panic!("{other:?}"),
            }
        }
        assert!(at[4] - at[0] < 100_000, "the first five go at once: {at:?}");
        // The window began at the first call: the sixth waits for its end,
        // the eleventh for the end of the one the sixth began.
        assert!((at[5] - at[0] - 2_000_000).abs() <= 2, "{at:?}");
        assert!(at[9] - at[5] < 100_000, "{at:?}");
        assert!((at[10] - at[5] - 2_000_000).abs() <= 2, "{at:?}");
        // Past the horizon the answer is a refusal that books nothing.
        let short = q.clone().with_horizon(Duration::from_millis(500));
        for _ in 0..3 {
            match p.reserve(&short).await.unwrap() {
                Reservation::Refused { wait } => assert!(wait > Duration::from_secs(1), "{wait:?}"),
                other => panic!("the window is full: {other:?}"),
            }
        }
        let (_, next) = granted(p.reserve(&q).await.unwrap());
        assert!(
            next - at[10] < 100_000,
            "the refusals booked nothing: {next} vs {at:?}"
        );
    }

    pub async fn a_spent_window_holds_every_caller_until_its_end<P: Pacer>(p: P) {
        let q = windowed("suite:spent", 100, Duration::from_secs(2), WindowStart::FirstCall);
        let (_, first) = granted(p.reserve(&q).await.unwrap());
        // The vendor says the window's calls are used up (a 429): nothing
        // goes before the window that began at the first call ends.
        p.spend_windows(&q).await.unwrap();
        let (_, next) = granted(p.reserve(&q).await.unwrap());
        assert!((next - first - 2_000_000).abs() <= 2, "{first} then {next}");
        // A quota with no window on record is held a whole window from now.
        let fresh = windowed(
            "suite:spent-fresh",
            100,
            Duration::from_secs(2),
            WindowStart::FirstCall,
        );
        p.spend_windows(&fresh).await.unwrap();
        match p
            .reserve(&fresh.clone().with_horizon(Duration::from_secs(1)))
            .await
            .unwrap()
        {
            Reservation::Refused { wait } => assert!(wait > Duration::from_millis(1900), "{wait:?}"),
            other => panic!("{other:?}"),
        }
    }

    /// Many callers at once, each booking as fast as it is let: no window
    /// of the vendor's (from the first arrival, or on the clock) holds more
    /// than its calls, and each window's calls are used.
    pub async fn concurrent_callers_never_overfill_a_window<P: Pacer>(pacers: Vec<P>) {
        for starts in [WindowStart::FirstCall, WindowStart::Clock] {
            let name = format!("suite:window-race:{starts:?}");
            let q = windowed(&name, 8, Duration::from_millis(500), starts);
            let mut tasks = tokio::task::JoinSet::new();
            for p in pacers.iter().cycle().take(8) {
                let (p, q) = (p.clone(), q.clone());
                tasks.spawn(async move {
                    let mut at = Vec::new();
                    for _ in 0..6 {
                        at.push(granted(p.reserve(&q).await.unwrap()).1);
                    }
                    at
                });
            }
            let mut at: Vec<i64> = Vec::new();
            while let Some(done) = tasks.join_next().await {
                at.extend(done.unwrap());
            }
            at.sort_unstable();
            assert_eq!(at.len(), 48);
            let windows: Vec<usize> = match starts {
                WindowStart::FirstCall => {
                    let (mut counts, mut start) = (vec![0usize], at[0]);
                    for a in &at {
                        if *a >= start + 500_000 {
                            start = *a;
                            counts.push(0);
                        }
                        *counts.last_mut().unwrap() += 1;
                    }
                    counts
                }
                WindowStart::Clock => {
                    let mut per = std::collections::BTreeMap::new();
                    for a in &at {
                        *per.entry(a.div_euclid(500_000)).or_insert(0usize) += 1;
                    }
                    per.into_values().collect()
                }
            };
            assert!(windows.iter().all(|n| *n <= 8), "{starts:?}: {windows:?}");
            assert_eq!(
                windows.len(),
                6,
                "{starts:?}: each window's calls used: {windows:?}"
            );
        }
    }

    pub async fn a_waiting_process_is_not_starved_by_a_busy_one<P: Pacer>(p: P) {
        use std::sync::{Arc, Mutex};
        let q = Quota::new("suite:line", rate(1_000_000.0, 1_000_000))
            .unwrap()
            .with_concurrency(2, Duration::from_secs(60))
            .with_horizon(Duration::from_secs(10));
        let busy = quota_pacer::CapQueue::new(2);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let limiter = Limiter::in_queue(p.clone(), q.clone(), busy.clone());
            let order = order.clone();
            tasks.spawn(async move {
                for _ in 0..30 {
                    let permit = limiter.acquire().await.unwrap();
                    order.lock().unwrap().push("busy");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    permit.release();
                }
                limiter.flush().await.unwrap();
            });
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        let other = Limiter::new(p.clone(), q.clone());
        let asked = order.lock().unwrap().len();
        let permit = other.acquire().await.unwrap();
        let at = {
            let mut order = order.lock().unwrap();
            order.push("other");
            order.len()
        };
        permit.release();
        other.flush().await.unwrap();
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
        // It waits for a slot to free and is woken by the give-back (the
        // busy process may use a slot the line leaves it meanwhile: its
        // own give-back lingers); before, only after the busy process ran
        // dry (121).
        assert!(
            at < 100,
            "the other process asked after {asked} of the busy one's 120 requests and got its slot only after {at}"
        );
    }

    /// A process waiting for the cap (a queue of its own, as another
    /// process has) asks again when a slot frees, not every few
    /// milliseconds: while another process holds the only slot for 600 ms
    /// it is turned away once, woken by the give-back, and granted; a
    /// keep-alive of its place in line at most besides. Before, it asked
    /// every 5 to 50 ms: a dozen calls or more.
    pub async fn a_process_waiting_for_the_cap_is_woken_when_a_slot_frees<P: Pacer>(p: P) {
        let q = Quota::new("suite:wake", rate(1_000_000.0, 1_000_000))
            .unwrap()
            .with_concurrency(1, Duration::from_secs(600))
            .with_horizon(Duration::from_secs(10));
        let holder = Limiter::new(p.clone(), q.clone());
        let held = holder.acquire().await.unwrap();
        let counting = support::counting::Counting::new(p.clone());
        let other = Limiter::new(counting.clone(), q.clone());
        let waiting = tokio::spawn(async move {
            let permit = other.acquire().await.unwrap();
            permit.release();
            other.flush().await.unwrap();
        });
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!waiting.is_finished(), "the only slot is held");
        held.release();
        waiting.await.unwrap();
        let calls = counting.calls();
        assert!(
            calls <= 4,
            "{calls} calls to wait 600 ms for a slot (turned away, woken, granted, given back)"
        );
    }

    /// A caller behind others in line, when no slot is held (the slot
    /// freed, the first in line woken and not yet asking), is told to wait
    /// for its own wake-up, not to ask again at once: before, the answer
    /// said 0 ms and such a caller asked every 5 ms.
    pub async fn a_caller_behind_a_woken_one_waits_for_its_wake<P: Pacer>(p: P) {
        let q = Quota::new("suite:behind", rate(1_000_000.0, 1_000_000))
            .unwrap()
            .with_concurrency(1, Duration::from_secs(600))
            .with_horizon(Duration::from_secs(10));
        let held = match p.acquire(&q, Ask::book(&[], None)).await.unwrap() {
            Answer::Granted { lease, .. } => lease,
            other => panic!("{other:?}"),
        };
        for name in ["p/1", "p/2"] {
            let answer = p.acquire(&q, Ask::book(&[], None).waiting(name)).await.unwrap();
            assert!(matches!(answer, Answer::Full { .. }), "{name}: {answer:?}");
        }
        p.acquire(&q, Ask::check(&[held], None)).await.unwrap();
        match p.acquire(&q, Ask::book(&[], None).waiting("p/2")).await.unwrap() {
            Answer::Full { retry_in } => assert!(
                retry_in >= Duration::from_secs(1),
                "the second in line was told to ask again in {retry_in:?}"
            ),
            other => panic!("p/1 is first in line: {other:?}"),
        }
        match p.acquire(&q, Ask::book(&[], None).waiting("p/1")).await.unwrap() {
            Answer::Granted { .. } => {}
            other => panic!("the first in line takes the freed slot: {other:?}"),
        }
    }

    /// A released permit costs no call of its own, yet its slot is free
    /// for every other process within the linger, with no further acquire.
    pub async fn a_released_slot_is_given_back_within_the_linger<P: Pacer>(p: P) {
        let q = Quota::new("suite:linger", rate(1000.0, 100))
            .unwrap()
            .with_concurrency(1, Duration::from_secs(600));
        let limiter = Limiter::new(p.clone(), q.clone());
        let permit = limiter.acquire().await.unwrap();
        permit.release();
        assert!(
            matches!(p.try_lease(&q).await.unwrap(), LeaseAttempt::Full { .. }),
            "the give-back waits for the next call"
        );
        tokio::time::sleep(quota_pacer::LINGER * 4).await;
        assert!(
            matches!(p.try_lease(&q).await.unwrap(), LeaseAttempt::Acquired(_)),
            "the given-back slot was not told to the pacer within the linger"
        );
    }

    /// One call books a slot and a token, all or none: a full cap books no
    /// token, and leases given back in a call are freed before it counts.
    pub async fn a_full_cap_books_no_token<P: Pacer>(p: P) {
        let q = Quota::new("suite:allornone", rate(1.0, 1))
            .unwrap()
            .with_concurrency(1, Duration::from_secs(600))
            .with_horizon(Duration::from_secs(10));
        let first = match p.acquire(&q, Ask::book(&[], None)).await.unwrap() {
            Answer::Granted { lease, wait, .. } => {
                assert_eq!(wait, Duration::ZERO);
                lease
            }
            other => panic!("{other:?}"),
        };
        for _ in 0..3 {
            assert!(
                matches!(
                    p.acquire(&q, Ask::book(&[], None)).await.unwrap(),
                    Answer::Full { .. }
                ),
                "the only slot is held"
            );
        }
        // Giving the slot back in the same call frees it first; the token
        // is the second ever booked (burst 1, 1/s): about a second away, not
        // four, so the three refusals above booked none.
        match p.acquire(&q, Ask::book(&[first], None)).await.unwrap() {
            Answer::Granted { wait, lease, .. } => {
                assert!(wait <= Duration::from_millis(1000), "{wait:?}");
                assert!(lease > first, "lease ids only grow");
            }
            other => panic!("{other:?}"),
        }
    }
}

macro_rules! pacer_suite {
    ($name:ident, $make:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn burst_then_sustained() {
                let (p, _server) = $make.await;
                suite::burst_then_sustained(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_refusal_books_nothing() {
                let (p, _server) = $make.await;
                suite::a_refusal_books_nothing(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn the_tighter_gate_governs_and_neither_leaks() {
                let (p, _server) = $make.await;
                suite::the_tighter_gate_governs_and_neither_leaks(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_pause_is_a_floor_for_every_acquire() {
                let (p, _server) = $make.await;
                suite::a_pause_is_a_floor_for_every_acquire(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn the_lease_cap_holds_and_frees() {
                let (p, _server) = $make.await;
                suite::the_lease_cap_holds_and_frees(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_unreleased_lease_expires() {
                let (p, _server) = $make.await;
                suite::an_unreleased_lease_expires(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_released_slot_is_given_back_within_the_linger() {
                let (p, _server) = $make.await;
                suite::a_released_slot_is_given_back_within_the_linger(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_process_waiting_for_the_cap_is_woken_when_a_slot_frees() {
                let (p, _server) = $make.await;
                suite::a_process_waiting_for_the_cap_is_woken_when_a_slot_frees(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_caller_behind_a_woken_one_waits_for_its_wake() {
                let (p, _server) = $make.await;
                suite::a_caller_behind_a_woken_one_waits_for_its_wake(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_full_cap_books_no_token() {
                let (p, _server) = $make.await;
                suite::a_full_cap_books_no_token(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_cancelled_holder_releases_its_lease() {
                let (p, _server) = $make.await;
                suite::a_cancelled_holder_releases_its_lease(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_fixed_window_books_its_calls_then_waits_for_the_next() {
                let (p, _server) = $make.await;
                suite::a_fixed_window_books_its_calls_then_waits_for_the_next(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_spent_window_holds_every_caller_until_its_end() {
                let (p, _server) = $make.await;
                suite::a_spent_window_holds_every_caller_until_its_end(p).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_waiting_process_is_not_starved_by_a_busy_one() {
                let (p, _server) = $make.await;
                suite::a_waiting_process_is_not_starved_by_a_busy_one(p).await;
            }
        }
    };
}

async fn redis_pacer() -> (RedisPacer, RedisServer) {
    let server = support::redis::start();
    let pacer = RedisPacer::connect(&server.url(), edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    (pacer, server)
}

async fn cluster_pacer() -> (RedisPacer, support::redis::RedisCluster) {
    let cluster = support::redis::start_cluster();
    let pacer = RedisPacer::connect(&cluster.url(), edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    (pacer, cluster)
}

async fn local_pacer() -> (LocalPacer, ()) {
    (LocalPacer::new(), ())
}

pacer_suite!(with_redis, redis_pacer());
pacer_suite!(with_local, local_pacer());
pacer_suite!(with_cluster, cluster_pacer());

/// Four connections to one Redis are four processes to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_window_is_shared_by_every_process() {
    let server = support::redis::start();
    let mut pacers = Vec::new();
    for _ in 0..4 {
        pacers.push(
            RedisPacer::connect(&server.url(), edc_core::REDIS_KEY_PREFIX)
                .await
                .unwrap(),
        );
    }
    suite::concurrent_callers_never_overfill_a_window(pacers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_window_is_shared_by_every_task_in_process() {
    suite::concurrent_callers_never_overfill_a_window(vec![LocalPacer::new()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_window_is_shared_in_a_cluster() {
    let (pacer, _cluster) = cluster_pacer().await;
    suite::concurrent_callers_never_overfill_a_window(vec![pacer]).await;
}

// ---- Redis only: several processes, server failures ----------------------

/// Re-runs this test binary as a child process executing `helper` (named
/// with its module path: the suite is one binary).
fn child(helper: &str, envs: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    let name = format!("{}::{helper}", module_path!().trim_start_matches("integration::"));
    cmd.args([
        "--ignored",
        "--exact",
        &name,
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set by the parent test"))
}

#[tokio::test]
#[ignore = "helper: run as a child process by a_pause_set_by_one_process_delays_another"]
async fn child_pauses_the_quota() {
    let pacer = RedisPacer::connect(&env("EDC_SYNC_TEST_REDIS"), edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    let q = Quota::new("cross:pause", rate(100.0, 10)).unwrap();
    pacer.pause(&q, Duration::from_millis(3000)).await.unwrap();
}

/// The run lock proved in the request's own call: while it is ours the
/// call books and extends it; once another run holds it, the call books
/// nothing (no slot, no token) but still gives back the leases it carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_under_a_lost_run_lock_books_nothing() {
    let server = support::redis::start();
    a_lost_run_lock_books_nothing(&server.url()).await;
}

/// The same against a three-master Redis Cluster: the run lock and the
/// quota share a hash tag, so the one script reads both in one slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_under_a_lost_run_lock_books_nothing_in_a_cluster() {
    let cluster = support::redis::start_cluster();
    a_lost_run_lock_books_nothing(&cluster.url()).await;
}

async fn a_lost_run_lock_books_nothing(url: &str) {
    let pacer = RedisPacer::connect(url, edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    let q = Quota::new("fence:q", rate(1000.0, 100))
        .unwrap()
        .with_concurrency(2, Duration::from_secs(600));
    let name = RunLockName::new(q.key(), "s1");
    let fence = name
        .acquire(&pacer, "host a, pid 1, run r1", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let ours = Fence {
        lock_key: name.lock_key().to_string(),
        fence,
        ttl: Duration::from_secs(60),
    };
    let held = match pacer.acquire(&q, Ask::book(&[], Some(&ours))).await.unwrap() {
        Answer::Granted { lease, .. } => lease,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        pacer.acquire(&q, Ask::check(&[], Some(&ours))).await.unwrap(),
        Answer::Checked
    );
    // Another run takes the stream (the lock expired, say).
    let _: () = redis::cmd("DEL")
        .arg(name.lock_key())
        .query_async(&mut pacer.connection())
        .await
        .unwrap();
    assert!(name
        .acquire(&pacer, "host b, pid 2, run r2", Duration::from_secs(60))
        .await
        .unwrap()
        .is_ok());
    for ask in [Ask::book(&[held], Some(&ours)), Ask::check(&[], Some(&ours))] {
        assert_eq!(pacer.acquire(&q, ask).await.unwrap(), Answer::FenceLost);
    }
    // Both slots are free: the lost call gave `held` back and took none.
    for _ in 0..2 {
        assert!(matches!(
            pacer.try_lease(&q).await.unwrap(),
            LeaseAttempt::Acquired(_)
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_set_by_one_process_delays_another() {
    let (pacer, server) = redis_pacer().await;
    let status = child("child_pauses_the_quota", &[("EDC_SYNC_TEST_REDIS", server.url())])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let q = Quota::new("cross:pause", rate(100.0, 10))
        .unwrap()
        .with_horizon(Duration::from_secs(10));
    let now = pacer.server_time_us().await.unwrap();
    let (wait, at) = granted(pacer.reserve(&q).await.unwrap());
    assert!(
        at > now + 1_000_000,
        "booked at {at}, only {} µs after now",
        at - now
    );
    assert!(wait >= Duration::from_secs(1), "{wait:?}");
}

#[tokio::test]
#[ignore = "helper: run as a child process by a_sigkilled_lease_holder_frees_the_cap_when_its_lease_expires"]
async fn child_holds_a_lease_forever() {
    let pacer = RedisPacer::connect(&env("EDC_SYNC_TEST_REDIS"), edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    let q = Quota::new("cross:lease", rate(100.0, 10))
        .unwrap()
        .with_concurrency(1, Duration::from_millis(1500));
    let limiter = Limiter::new(pacer, q);
    let _permit = limiter.acquire().await.unwrap();
    println!("HELD");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_lease_holder_frees_the_cap_when_its_lease_expires() {
    let (pacer, server) = redis_pacer().await;
    let mut holder = child(
        "child_holds_a_lease_forever",
        &[("EDC_SYNC_TEST_REDIS", server.url())],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.map(|l| l.contains("HELD")).unwrap_or(false)),
        "the child took its lease"
    );
    let q = Quota::new("cross:lease", rate(100.0, 10))
        .unwrap()
        .with_concurrency(1, Duration::from_millis(1500));
    assert!(
        matches!(pacer.try_lease(&q).await.unwrap(), LeaseAttempt::Full { .. }),
        "the child holds the only slot"
    );
    // SIGKILL: no destructor, no release; only the TTL can free the slot.
    holder.kill().unwrap();
    holder.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let LeaseAttempt::Acquired(_) = pacer.try_lease(&q).await.unwrap() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the killed holder's lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noscript_after_script_flush_is_recovered() {
    let (pacer, server) = redis_pacer().await;
    let q = Quota::new("noscript", rate(100.0, 10)).unwrap();
    granted(pacer.reserve(&q).await.unwrap());
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(pacer.load_scripts().await.unwrap()[0].clone())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, vec![true], "load_scripts reloads");
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    granted(pacer.reserve(&q).await.unwrap());
    assert!(matches!(
        pacer.try_lease(&q).await.unwrap(),
        LeaseAttempt::Acquired(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_mid_run_fails_closed_with_a_clear_error() {
    let (pacer, mut server) = redis_pacer().await;
    let q = Quota::new("down", rate(100.0, 10)).unwrap();
    granted(pacer.reserve(&q).await.unwrap());
    server.kill();
    let err = pacer.reserve(&q).await.unwrap_err();
    let PacerError::Unavailable {
        endpoint, attempts, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(endpoint, &server.url());
    assert_eq!(*attempts, 3);
    assert!(
        err.to_string().contains("is unavailable after 3 attempt(s)"),
        "{err}"
    );
    // And through the limiter: no permit, so no request.
    let limiter = Limiter::new(pacer, q);
    assert!(limiter.acquire().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_no_redis_fails_closed() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = RedisPacer::connect(
        &format!("redis://:hunter2@127.0.0.1:{port}/"),
        edc_core::REDIS_KEY_PREFIX,
    )
    .await
    .err()
    .expect("no server");
    let text = err.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{port}")) && !text.contains("hunter2"),
        "{text}"
    );
}

#[test]
fn eight_processes_of_four_tasks_never_exceed_the_envelope() {
    let server = support::redis::start();
    let dir = tempfile::tempdir().unwrap();
    let grants_file = dir.path().join("grants.txt");
    let (rate_per_sec, burst, seconds) = (40.0, 10u32, 3.0);
    let out = support::bench(&[
        "pacer",
        "--redis",
        &server.url(),
        "--procs",
        "8",
        "--tasks",
        "4",
        "--rate",
        &rate_per_sec.to_string(),
        "--burst",
        &burst.to_string(),
        "--seconds",
        &seconds.to_string(),
        "--grants-out",
        grants_file.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let grants: Vec<i64> = std::fs::read_to_string(&grants_file)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let check = edc_qualify::envelope::check(&grants, rate_per_sec, burst);
    assert_eq!(check.violations, 0, "grants above burst + rate * t: {check:?}");
    // No grant lost: the window's capacity was used (allowing for the
    // start-up of 32 tasks and the last interval).
    let capacity = f64::from(burst) + rate_per_sec * seconds;
    assert!(
        grants.len() as f64 >= capacity - 4.0,
        "{} grants of a capacity of {capacity}",
        grants.len()
    );
    let figures: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(figures["grants"].as_u64().unwrap() as usize, grants.len());
    let rtt = figures["round_trips_per_grant"].as_f64().unwrap();
    assert!(rtt <= 1.1, "one Redis round trip per granted token, got {rtt}");
}

/// The connect error tells the truth about how often it tried: the
/// connection manager retries the first connection too (docs/pacer.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_refuses_connections_is_reported_after_three_attempts() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = match quota_pacer::RedisPacer::connect(
        &format!("redis://127.0.0.1:{port}/"),
        edc_core::REDIS_KEY_PREFIX,
    )
    .await
    {
        Ok(_) => panic!("connected to a closed port"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("is unavailable after 3 attempt(s)"), "{err}");

    // And it really tries three times: a listener that hangs up on every
    // connection counts them.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counter = {
        let done = done.clone();
        std::thread::spawn(move || {
            listener.set_nonblocking(true).unwrap();
            let mut seen = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        seen += 1;
                        drop(conn);
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
            seen
        })
    };
    let err = match quota_pacer::RedisPacer::connect(
        &format!("redis://127.0.0.1:{port}/"),
        edc_core::REDIS_KEY_PREFIX,
    )
    .await
    {
        Ok(_) => panic!("connected to a listener that hangs up"),
        Err(e) => e.to_string(),
    };
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(err.contains("after 3 attempt(s)"), "{err}");
    assert_eq!(counter.join().unwrap(), 3, "connections the listener saw");
}

/// A Redis URL the pacer does not take is a configuration mistake, one
/// exit code (78) wherever it is given: a sync and `bench pacer` alike.
#[test]
fn a_bad_redis_url_exits_78_wherever_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let bad = "redis://127.0.0.1:notaport/";
    let bench = support::bench(&["pacer", "--redis", bad, "--seconds", "1"]);
    assert_eq!(bench.code, 78, "{}", bench.stderr);
    assert!(bench.stderr.contains("not a valid Redis URL"), "{}", bench.stderr);
    let repo = support::small_page_policy_repo();
    let sync = support::run_cmd(
        support::edc_sync()
            .args(["sync", "--config"])
            .arg(repo.path().join("policies.yaml"))
            .args([
                "--vendor",
                "vault_json",
                "--study",
                "S-1",
                "--redis",
                bad,
                "--out",
            ])
            .arg(dir.path().join("landing"))
            .arg("--state")
            .arg(dir.path().join("state"))
            .arg("--audit-log")
            .arg(dir.path().join("audit.jsonl")),
    );
    assert_eq!(sync.code, 78, "{}", sync.stderr);
    assert!(sync.stderr.contains("not a valid Redis URL"), "{}", sync.stderr);
}

/// `bench pacer` takes a cluster's seeds as `sync` does, and counts the
/// script calls over every primary.
#[test]
fn bench_pacer_runs_on_a_redis_cluster() {
    let cluster = support::redis::start_cluster();
    let out = support::bench(&[
        "pacer",
        "--redis",
        &cluster.url(),
        "--procs",
        "2",
        "--tasks",
        "2",
        "--rate",
        "40",
        "--burst",
        "10",
        "--seconds",
        "1",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let figures: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert!(figures["grants"].as_u64().unwrap() > 0, "{figures}");
    let rtt = figures["round_trips_per_grant"].as_f64().unwrap();
    assert!(
        (0.9..=1.1).contains(&rtt),
        "Redis counted one script call a grant over the cluster: {rtt}"
    );
    assert_eq!(figures["envelope_violations"], 0);
}

/// TLS to Redis is verified or refused, never quietly weaker: a URL that
/// turns verification off (`#insecure`), a CA file that holds no
/// certificate, and a TLS parameter edc-sync does not take (Python's
/// `ssl_cert_reqs`, say) are configuration mistakes (78) naming what is
/// wrong, found before anything connects.
#[test]
fn redis_tls_that_would_be_weaker_than_asked_is_refused_78() {
    let dir = tempfile::tempdir().unwrap();
    let empty_ca = dir.path().join("empty-ca.pem");
    std::fs::write(&empty_ca, "not a certificate\n").unwrap();
    let repo = support::small_page_policy_repo();
    for (url, named) in [
        ("rediss://127.0.0.1:6380/0#insecure".to_string(), "#insecure"),
        (
            format!("rediss://127.0.0.1:6380/0?ssl_ca_certs={}", empty_ca.display()),
            "ssl_ca_certs",
        ),
        (
            "rediss://127.0.0.1:6380/0?ssl_cert_reqs=none".to_string(),
            "ssl_cert_reqs",
        ),
        (
            "rediss+cluster://127.0.0.1:7000,127.0.0.1:7001#insecure".to_string(),
            "#insecure",
        ),
    ] {
        let sync = support::run_cmd(
            support::edc_sync()
                .args(["sync", "--config"])
                .arg(repo.path().join("policies.yaml"))
                .args([
                    "--vendor",
                    "vault_json",
                    "--study",
                    "S-1",
                    "--redis",
                    &url,
                    "--out",
                ])
                .arg(dir.path().join("landing"))
                .arg("--state")
                .arg(dir.path().join("state"))
                .arg("--audit-log")
                .arg(dir.path().join("audit.jsonl")),
        );
        assert_eq!(sync.code, 78, "{url}: {}", sync.stderr);
        assert!(sync.stderr.contains(named), "{url}: {}", sync.stderr);
        assert!(!dir.path().join("audit.jsonl").exists(), "{url}: no line written");
    }
}
