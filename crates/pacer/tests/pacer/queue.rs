//! The in-process queue for a quota's cap: tasks of one quota wait for a
//! slot without asking the pacer, a request costs one pacer call however
//! many wait, and a task that keeps asking goes behind the ones waiting.
//! Counted, not timed: the pacer here counts the calls it answers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quota_pacer::{
    Answer, Ask, CapQueue, Fence, HandOver, LeaseAttempt, Limiter, LocalPacer, Pacer, PacerError, Quota,
    Rate, Reservation,
};

/// The in-process pacer, counting the calls a request makes.
#[derive(Clone, Default)]
struct Counting {
    inner: LocalPacer,
    calls: Arc<AtomicU64>,
}

impl Pacer for Counting {
    async fn acquire(&self, quota: &Quota, ask: Ask<'_>) -> Result<Answer, PacerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.acquire(quota, ask).await
    }
    async fn reserve(&self, quota: &Quota) -> Result<Reservation, PacerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.reserve(quota).await
    }
    async fn pause(&self, quota: &Quota, pause: Duration) -> Result<(), PacerError> {
        self.inner.pause(quota, pause).await
    }
    async fn spend_windows(&self, quota: &Quota) -> Result<(), PacerError> {
        self.inner.spend_windows(quota).await
    }

    async fn try_lease(&self, quota: &Quota) -> Result<LeaseAttempt, PacerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.try_lease(quota).await
    }
    async fn renew(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        self.inner.renew(quota, id).await
    }
    async fn release(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.release(quota, id).await
    }
    async fn wait_turn(&self, quota: &Quota, waiter: &str, retry_in: Duration) {
        self.inner.wait_turn(quota, waiter, retry_in).await
    }
}

const TASKS: usize = 40;
const REQUESTS: usize = 5;
const CAP: u32 = 4;

fn quota() -> Quota {
    Quota::new("q", Rate::new(1_000_000.0, 1_000_000).unwrap())
        .unwrap()
        .with_concurrency(CAP, Duration::from_secs(60))
        .with_horizon(Duration::from_secs(30))
}

/// `TASKS` limiters of one quota (a stream each), sharing one queue.
fn limiters(pacer: &Counting) -> Vec<Limiter<Counting>> {
    let queue: CapQueue<Counting> = CapQueue::new(CAP);
    (0..TASKS)
        .map(|_| Limiter::in_queue(pacer.clone(), quota(), queue.clone()))
        .collect()
}

/// Every task's first request came before any task's second: none is
/// starved while another keeps its slot.
fn round_robin(order: &[usize]) {
    let firsts: Vec<usize> = order.iter().take(TASKS).copied().collect();
    let mut sorted = firsts.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        TASKS,
        "a task asked twice before every task asked once: {order:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn tasks_beyond_the_cap_queue_and_each_request_is_one_call() {
    let pacer = Counting::default();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = tokio::task::JoinSet::new();
    for (n, limiter) in limiters(&pacer).into_iter().enumerate() {
        let order = order.clone();
        tasks.spawn(async move {
            for _ in 0..REQUESTS {
                let permit = limiter.acquire().await.unwrap();
                order.lock().unwrap().push(n);
                // The request in flight.
                tokio::time::sleep(Duration::from_millis(1)).await;
                permit.release();
            }
            limiter.flush().await.unwrap();
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let requests = (TASKS * REQUESTS) as u64;
    let calls = pacer.calls.load(Ordering::SeqCst);
    let order = order.lock().unwrap();
    assert_eq!(order.len() as u64, requests);
    assert!(
        calls as f64 <= requests as f64 * 1.1,
        "{calls} pacer calls for {requests} requests"
    );
    round_robin(&order);
}

#[tokio::test(flavor = "current_thread")]
async fn a_paging_task_hands_its_booking_to_the_first_waiter() {
    let pacer = Counting::default();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = tokio::task::JoinSet::new();
    for (n, limiter) in limiters(&pacer).into_iter().enumerate() {
        let took = Duration::from_millis(1);
        tasks.spawn(page(limiter, fence(), REQUESTS, took, order.clone(), n));
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let requests = (TASKS * REQUESTS) as u64;
    let calls = pacer.calls.load(Ordering::SeqCst);
    let order = order.lock().unwrap();
    assert_eq!(order.len() as u64, requests);
    assert!(
        calls as f64 <= requests as f64 * 1.1,
        "{calls} pacer calls for {requests} requests"
    );
    round_robin(&order);
}

/// Two processes' worth of limiters of one quota (each its own queue, as
/// two processes have): one keeps its tasks paging, handing its slots from
/// task to task, and another asks once meanwhile. The other gets a slot
/// while the first still pages: a process does not keep the cap to itself
/// because it always has a task of its own waiting.
#[tokio::test(flavor = "current_thread")]
async fn a_process_with_tasks_waiting_yields_the_cap_to_another_that_waits() {
    let pacer = Counting::default();
    let quota = Quota::new("q", Rate::new(1_000_000.0, 1_000_000).unwrap())
        .unwrap()
        .with_concurrency(2, Duration::from_secs(60))
        .with_horizon(Duration::from_secs(5));
    let order = Arc::new(Mutex::new(Vec::new()));
    let busy: CapQueue<Counting> = CapQueue::new(2);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let limiter = Limiter::in_queue(pacer.clone(), quota.clone(), busy.clone());
        let took = Duration::from_millis(2);
        tasks.spawn(page(limiter, fence(), 30, took, order.clone(), "busy"));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let other = Limiter::new(pacer.clone(), quota.clone());
    let permit = other
        .acquire()
        .await
        .expect("the other process got a slot within its horizon");
    let at = {
        let mut order = order.lock().unwrap();
        order.push("other");
        order.len()
    };
    permit.release();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert!(
        at < 4 * 30 / 2,
        "the other process got its slot only after {at} of the busy one's 120 pages"
    );
}

/// Two processes' worth of paging tasks (each process its own queue)
/// under one cap: a page whose commit frees a slot that another process
/// waits for puts its own process's next waiter in the pacer's line in
/// that same call, and the waiter is woken when a slot frees for it. So a
/// request costs the commit's call and the woken waiter's, not a third to
/// be turned away first (nor one every few milliseconds while it waits).
#[tokio::test(flavor = "current_thread")]
async fn paging_processes_sharing_a_cap_cost_two_calls_a_request() {
    let pacer = Counting::default();
    let quota = Quota::new("q", Rate::new(1_000_000.0, 1_000_000).unwrap())
        .unwrap()
        .with_concurrency(2, Duration::from_secs(60))
        .with_horizon(Duration::from_secs(30));
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = tokio::task::JoinSet::new();
    const PAGES: usize = 10;
    for process in 0..2 {
        let queue: CapQueue<Counting> = CapQueue::new(2);
        for _ in 0..4 {
            let limiter = Limiter::in_queue(pacer.clone(), quota.clone(), queue.clone());
            let took = Duration::from_millis(1);
            tasks.spawn(page(limiter, fence(), PAGES, took, order.clone(), process));
        }
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let requests = (2 * 4 * PAGES) as u64;
    let calls = pacer.calls.load(Ordering::SeqCst);
    assert_eq!(order.lock().unwrap().len() as u64, requests);
    assert!(
        calls as f64 <= requests as f64 * 2.2,
        "{calls} pacer calls for {requests} requests"
    );
}

/// A paging task: `pages` requests, each `took` in flight, each slot
/// handed on by the commit's call that books the next (as a run does),
/// `mark` recording each request in `order`.
async fn page<T: Copy>(
    limiter: Limiter<Counting>,
    fence: Fence,
    pages: usize,
    took: Duration,
    order: Arc<Mutex<Vec<T>>>,
    mark: T,
) {
    let mut booked = None;
    for page in 0..pages {
        let permit = match booked.take() {
            Some(booking) => quota_pacer::Booking::ready(booking).await,
            None => limiter.acquire().await.unwrap(),
        };
        order.lock().unwrap().push(mark);
        tokio::time::sleep(took).await;
        match limiter
            .hand_over(Some(permit), &fence, page + 1 < pages)
            .await
            .unwrap()
        {
            HandOver::Held(next) => booked = next,
            HandOver::Lost => panic!("the fence of one process is always held"),
        }
    }
}

fn fence() -> Fence {
    Fence {
        lock_key: "lock".into(),
        fence: 1,
        ttl: Duration::from_secs(60),
    }
}
