//! A wait past the horizon (`max_wait_s`) says what waited: the
//! concurrency cap, or the rate.

use std::time::Duration;

use quota_pacer::{AcquireError, Limiter, LocalPacer, Quota, Rate};

/// A wait past the horizon for a free slot of the concurrency cap (two
/// limiters of one quota, as two streams have, the cap 1) is said to
/// be the cap's, not the rate's.
#[tokio::test(flavor = "current_thread")]
async fn a_wait_for_the_concurrency_cap_names_the_cap() {
    let rate = Rate::new(1000.0, 1000).unwrap();
    let quota = Quota::new("q", rate)
        .unwrap()
        .with_concurrency(1, Duration::from_secs(60))
        .with_horizon(Duration::from_millis(100));
    let pacer = LocalPacer::new();
    let (a, b) = (
        Limiter::new(pacer.clone(), quota.clone()),
        Limiter::new(pacer, quota),
    );
    let held = a.acquire().await.unwrap();
    match b.acquire().await {
        Err(AcquireError::WaitTooLong { cap, .. }) => assert_eq!(cap, Some(1)),
        other => panic!("expected a wait too long, got {:?}", other.map(|_| ())),
    }
    held.release();
}

/// A wait past the horizon for the rate is the rate's.
#[tokio::test(flavor = "current_thread")]
async fn a_wait_for_the_rate_names_no_cap() {
    let rate = Rate::new(1.0, 1).unwrap();
    let quota = Quota::new("q", rate)
        .unwrap()
        .with_concurrency(8, Duration::from_secs(60))
        .with_horizon(Duration::from_millis(100));
    let limiter = Limiter::new(LocalPacer::new(), quota);
    limiter.acquire().await.unwrap().release();
    match limiter.acquire().await {
        Err(AcquireError::WaitTooLong { cap, .. }) => assert_eq!(cap, None),
        other => panic!("expected a wait too long, got {:?}", other.map(|_| ())),
    }
}
