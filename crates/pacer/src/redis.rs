//! The production pacer: every quota's state in Redis, changed only by the
//! Lua scripts in `lua/`, timed only by `redis.call('TIME')`.
//!
//! Keys of one quota share a hash tag, `<prefix>{<bucket key>}:...`, so
//! they sit in one Redis Cluster slot and each script stays atomic there.
//! A caller's own lock kept under the same tag (a [`super::Fence`]) can be
//! proved by the one call a request costs (`acquire.lua`).
//!
//! Fail closed: each call has a timeout and a bounded number of attempts
//! (logged); after that the caller gets [`PacerError::Unavailable`] and no
//! request is sent. A retried `reserve` whose first reply was lost may book
//! a second slot: that only ever makes pacing slower, never faster.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{FromRedisValue, Script, ScriptInvocation};

use super::redis_conn::without_userinfo;
pub use super::redis_conn::Conn;
use super::redis_conn::{OpenError, Target};
use super::redis_wake::{self, Listeners};
use super::{ceil_ms, Answer, Ask, LeaseAttempt, Pacer, PacerError, Quota, Reservation};

const ATTEMPTS: u32 = 3;
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

struct Inner {
    conn: Conn,
    endpoint: String,
    prefix: String,
    reserve: Script,
    acquire: Script,
    pause: Script,
    lease: Script,
    spend: Script,
    calls: AtomicU64,
    /// Where this process's callers the cap turned away are woken.
    listeners: Arc<Listeners>,
}

/// Pacer whose state is shared by every process that talks to one Redis.
#[derive(Clone)]
pub struct RedisPacer {
    inner: Arc<Inner>,
}

/// A script from `lua/`, with the shared GCRA and window functions
/// before it.
fn with_gcra(body: &str) -> Script {
    Script::new(&format!(
        "{}\n{}\n{body}",
        include_str!("lua/gcra.lua"),
        include_str!("lua/window.lua")
    ))
}

impl RedisPacer {
    /// The Redis key of one part of a quota: the caller's prefix, then the
    /// quota's hash tag.
    pub fn key(&self, quota: &Quota, part: &str) -> String {
        format!("{}{{{}}}:{part}", self.inner.prefix, quota.key())
    }

    /// Checks that `url` is a Redis URL, without connecting: a malformed
    /// `--redis` is a configuration mistake, found before a run starts.
    pub fn check_url(url: &str) -> Result<(), PacerError> {
        Target::parse(url)
            .map(drop)
            .map_err(|detail| PacerError::InvalidUrl {
                url: without_userinfo(url),
                detail,
            })
    }

    /// Connects to `url` (`redis://host:port/db`, or a cluster's seeds as
    /// `redis+cluster://host:port,host:port`); fails closed. Every key this
    /// pacer writes starts with `prefix` (for example `"myapp:"`), so
    /// several programs can share one Redis without sharing quotas.
    pub async fn connect(url: &str, prefix: &str) -> Result<RedisPacer, PacerError> {
        let endpoint = without_userinfo(url);
        let unavailable = |attempts: u32, detail: String| PacerError::Unavailable {
            endpoint: endpoint.clone(),
            attempts,
            detail,
        };
        Self::check_url(url)?;
        let target = Target::parse(url).map_err(|e| unavailable(0, e))?;
        // The client retries the first connection too: ATTEMPTS in all,
        // the same bound as every call (docs/pacer.md, "Fail closed").
        let conn = Conn::open(&target, ATTEMPTS, CONNECT_TIMEOUT, CALL_TIMEOUT)
            .await
            .map_err(|e| match e {
                OpenError::Refused(detail) => PacerError::Refused {
                    endpoint: endpoint.clone(),
                    detail,
                },
                OpenError::Failed(detail) => unavailable(ATTEMPTS, detail),
            })?;
        Ok(RedisPacer {
            inner: Arc::new(Inner {
                conn,
                listeners: Arc::new(Listeners::new(target, endpoint.clone(), CONNECT_TIMEOUT)),
                endpoint,
                prefix: prefix.to_string(),
                reserve: with_gcra(include_str!("lua/reserve.lua")),
                acquire: with_gcra(include_str!("lua/acquire.lua")),
                pause: Script::new(include_str!("lua/pause.lua")),
                lease: Script::new(include_str!("lua/lease.lua")),
                spend: with_gcra(include_str!("lua/spend.lua")),
                calls: AtomicU64::new(0),
            }),
        })
    }

    /// The bare `EVALSHA` of the call [`Pacer::acquire`] makes for `ask`:
    /// the floor `bench pacer` compares a whole acquire with.
    pub fn raw_acquire_cmd(&self, quota: &Quota, ask: Ask<'_>) -> redis::Cmd {
        let (keys, args) = self.acquire_call(quota, ask);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.inner.acquire.get_hash())
            .arg(keys.len())
            .arg(keys)
            .arg(args);
        cmd
    }

    /// Script calls made so far by this pacer (each normally one round trip).
    pub fn calls(&self) -> u64 {
        self.inner.calls.load(Ordering::Relaxed)
    }

    /// The endpoint, with any password redacted.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// The scripts in `lua/` that run on the server (gcra.lua and
    /// window.lua are part of reserve.lua, acquire.lua and spend.lua), in
    /// the order [`Self::load_scripts`] answers.
    pub const SCRIPTS: [&'static str; 5] = [
        "reserve.lua",
        "acquire.lua",
        "pause.lua",
        "lease.lua",
        "spend.lua",
    ];

    /// Loads every script now (EVALSHA would also load on first use); the
    /// IQ uses this to prove the scripts are accepted by this server.
    pub async fn load_scripts(&self) -> Result<Vec<String>, PacerError> {
        let mut hashes = Vec::new();
        let inner = &self.inner;
        let scripts = [
            &inner.reserve,
            &inner.acquire,
            &inner.pause,
            &inner.lease,
            &inner.spend,
        ];
        for (name, script) in Self::SCRIPTS.into_iter().zip(scripts) {
            let mut conn = self.inner.conn.clone();
            let hash: String = script
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .map_err(|e| self.protocol(name, e.to_string()))?;
            hashes.push(hash);
        }
        Ok(hashes)
    }

    /// The server's clock (`TIME`) in microseconds since the epoch.
    pub async fn server_time_us(&self) -> Result<i64, PacerError> {
        let mut conn = self.inner.conn.clone();
        let (secs, micros): (i64, i64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(|e| self.unavailable(1, e.to_string()))?;
        Ok(secs * 1_000_000 + micros)
    }

    /// `redis_version` from `INFO server`; a cluster answers per node, and
    /// the distinct versions are listed.
    pub async fn server_version(&self) -> Result<String, PacerError> {
        let mut conn = self.inner.conn.clone();
        let info: redis::Value = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await
            .map_err(|e| self.unavailable(1, e.to_string()))?;
        let texts: Vec<String> = match info {
            redis::Value::Map(nodes) => nodes
                .into_iter()
                .filter_map(|(_, v)| String::from_redis_value(v).ok())
                .collect(),
            other => String::from_redis_value(other).into_iter().collect(),
        };
        let mut versions: Vec<&str> = texts
            .iter()
            .filter_map(|t| t.lines().find_map(|l| l.strip_prefix("redis_version:")))
            .map(str::trim)
            .collect();
        versions.sort_unstable();
        versions.dedup();
        Ok(if versions.is_empty() {
            "unknown".into()
        } else {
            versions.join(", ")
        })
    }

    /// A connection for the caller's own state kept beside the pacing keys:
    /// same server; the caller bounds its own calls (or uses [`Self::call`]).
    pub fn connection(&self) -> Conn {
        self.inner.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.conn.clone()
    }

    fn unavailable(&self, attempts: u32, detail: String) -> PacerError {
        PacerError::Unavailable {
            endpoint: self.inner.endpoint.clone(),
            attempts,
            detail,
        }
    }

    /// A [`PacerError::Protocol`] about `script` on this pacer's server.
    pub fn protocol(&self, script: &'static str, detail: String) -> PacerError {
        PacerError::Protocol {
            endpoint: self.inner.endpoint.clone(),
            script,
            detail,
        }
    }

    /// Runs one script invocation with the pacer's timeout and bounded,
    /// logged retries: for a caller's own script on this server (a lock
    /// that a [`super::Fence`] proves, say), failing closed as the pacer does.
    pub async fn call<T: FromRedisValue>(
        &self,
        script: &'static str,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T, PacerError> {
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            self.inner.calls.fetch_add(1, Ordering::Relaxed);
            let mut conn = self.inner.conn.clone();
            match tokio::time::timeout(CALL_TIMEOUT, invocation.invoke_async::<T>(&mut conn)).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e))
                    if e.kind() == redis::ErrorKind::Parse
                        || e.kind() == redis::ErrorKind::UnexpectedReturnType =>
                {
                    return Err(self.protocol(script, e.to_string()))
                }
                Ok(Err(e)) if crate::redis_conn::refused(&e) => {
                    return Err(PacerError::Refused {
                        endpoint: self.inner.endpoint.clone(),
                        detail: e.to_string(),
                    })
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = format!("no answer within {CALL_TIMEOUT:?}"),
            }
            tracing::warn!(endpoint = %self.inner.endpoint, script, attempt, error = %last, "Redis call failed");
            if attempt < ATTEMPTS {
                tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
            }
        }
        Err(self.unavailable(ATTEMPTS, last))
    }

    /// The keys and arguments of one `acquire.lua` call (see its header).
    fn acquire_call(&self, quota: &Quota, ask: Ask<'_>) -> (Vec<String>, Vec<String>) {
        let sets = quota.lease_sets();
        let lock = ask
            .fence
            .map_or_else(|| self.key(quota, "pause"), |f| f.lock_key.clone());
        let mut keys = vec![self.key(quota, "pause"), self.key(quota, "fence"), lock];
        let mut args = vec![
            if ask.book { "book" } else { "check" }.to_string(),
            micros(quota.horizon()).to_string(),
            millis(quota.lease_ttl()).to_string(),
            ask.fence.map_or(0, |f| f.fence).to_string(),
            ask.fence.map_or(0, |f| millis(f.ttl)).to_string(),
        ];
        let (booked_sets, gates) = if ask.book {
            (sets.as_slice(), quota.gates())
        } else {
            (&[][..], &[][..])
        };
        args.push(booked_sets.len().to_string());
        for set in booked_sets {
            keys.push(self.key(quota, &set.part));
            args.push(set.cap.to_string());
        }
        args.push(gates.len().to_string());
        for (gate, shape) in gates.iter().zip(quota.shapes()) {
            keys.push(self.key(quota, &format!("gate:{}", gate.name)));
            args.push(format!("{:.3}", shape.interval_us));
            args.push(format!("{:.3}", shape.tolerance_us));
        }
        // A lease holds a slot in every set of its quota: give each back.
        args.push((ask.release.len() * sets.len()).to_string());
        for id in ask.release {
            for set in &sets {
                keys.push(self.key(quota, &set.part));
                args.push(id.to_string());
            }
        }
        // The line of callers the cap turned away, and when each must ask
        // again by.
        keys.push(self.key(quota, "waiting"));
        keys.push(self.key(quota, "waiting:until"));
        // The slots the line waits for, and where its callers are woken.
        let account = &sets[0];
        keys.push(self.key(quota, &account.part));
        args.push(ask.waiter.unwrap_or_default().to_string());
        args.push(millis(super::WAITER_TTL).to_string());
        args.push(account.cap.to_string());
        args.push(self.key(quota, redis_wake::LIST));
        let windows = if ask.book { quota.windows() } else { &[] };
        self.push_windows(quota, windows, &mut keys, &mut args);
        (keys, args)
    }

    /// The keys and shape arguments of `windows` (see `lua/window.lua`).
    fn push_windows(
        &self,
        quota: &Quota,
        windows: &[super::Window],
        keys: &mut Vec<String>,
        args: &mut Vec<String>,
    ) {
        args.push(windows.len().to_string());
        for (window, shape) in windows.iter().zip(quota.window_shapes()) {
            keys.push(self.key(quota, &format!("window:{}", window.name)));
            args.push(shape.calls.to_string());
            args.push(shape.length_us.to_string());
            args.push(if shape.aligned { "1" } else { "0" }.to_string());
            args.push(shape.margin_us.to_string());
        }
    }
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Milliseconds, saturating, as the scripts take TTLs.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Pacer for RedisPacer {
    async fn acquire(&self, quota: &Quota, ask: Ask<'_>) -> Result<Answer, PacerError> {
        let (keys, args) = self.acquire_call(quota, ask);
        let mut inv = self.inner.acquire.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        for a in &args {
            inv.arg(a);
        }
        let (status, value, at_us, lease, _fence): (i64, i64, String, u64, i64) =
            self.call("acquire.lua", &inv).await?;
        let ms = Duration::from_millis(u64::try_from(value.max(0)).unwrap_or(0));
        Ok(match status {
            1 => Answer::Granted {
                wait: ms,
                at_us: at_us
                    .parse()
                    .map_err(|_| self.protocol("acquire.lua", format!("bad time {at_us:?}")))?,
                lease,
            },
            0 => Answer::Refused { wait: ms },
            2 => Answer::Full { retry_in: ms },
            3 => Answer::Checked,
            4 => Answer::FenceLost,
            other => return Err(self.protocol("acquire.lua", format!("unknown status {other}"))),
        })
    }

    async fn reserve(&self, quota: &Quota) -> Result<Reservation, PacerError> {
        let mut keys = vec![self.key(quota, "pause")];
        let mut args = vec![
            micros(quota.horizon()).to_string(),
            quota.gates().len().to_string(),
        ];
        for (gate, shape) in quota.gates().iter().zip(quota.shapes()) {
            keys.push(self.key(quota, &format!("gate:{}", gate.name)));
            args.push(format!("{:.3}", shape.interval_us));
            args.push(format!("{:.3}", shape.tolerance_us));
        }
        self.push_windows(quota, quota.windows(), &mut keys, &mut args);
        let mut inv = self.inner.reserve.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        for a in &args {
            inv.arg(a);
        }
        let (granted, wait_ms, at_us, _now): (i64, i64, String, String) =
            self.call("reserve.lua", &inv).await?;
        let wait = Duration::from_millis(u64::try_from(wait_ms.max(0)).unwrap_or(0));
        if granted == 1 {
            let at_us = at_us
                .parse()
                .map_err(|_| self.protocol("reserve.lua", format!("bad time {at_us:?}")))?;
            Ok(Reservation::Granted { wait, at_us })
        } else {
            Ok(Reservation::Refused { wait })
        }
    }

    async fn pause(&self, quota: &Quota, pause: Duration) -> Result<(), PacerError> {
        let mut inv = self.inner.pause.prepare_invoke();
        inv.key(self.key(quota, "pause")).arg(millis(pause));
        let _: (String, String) = self.call("pause.lua", &inv).await?;
        Ok(())
    }

    async fn spend_windows(&self, quota: &Quota) -> Result<(), PacerError> {
        if quota.windows().is_empty() {
            return Ok(());
        }
        let (mut keys, mut args) = (Vec::new(), Vec::new());
        self.push_windows(quota, quota.windows(), &mut keys, &mut args);
        let mut inv = self.inner.spend.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        for a in &args {
            inv.arg(a);
        }
        let _: String = self.call("spend.lua", &inv).await?;
        Ok(())
    }

    async fn try_lease(&self, quota: &Quota) -> Result<LeaseAttempt, PacerError> {
        let mut inv = self.inner.lease.prepare_invoke();
        inv.key(self.key(quota, "leases"))
            .key(self.key(quota, "fence"))
            .arg("acquire")
            .arg(quota.max_concurrency())
            .arg(millis(quota.lease_ttl()));
        let (ok, value): (i64, i64) = self.call("lease.lua", &inv).await?;
        Ok(if ok == 1 {
            LeaseAttempt::Acquired(u64::try_from(value).unwrap_or_default())
        } else {
            LeaseAttempt::Full {
                retry_in: ceil_ms(value * 1000),
            }
        })
    }

    /// Renews the lease in every set of the quota (a rare call: every
    /// third of the lease TTL a permit is held).
    async fn renew(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        let mut all = true;
        for set in quota.lease_sets() {
            let mut inv = self.inner.lease.prepare_invoke();
            inv.key(self.key(quota, &set.part))
                .key(self.key(quota, "fence"))
                .arg("renew")
                .arg(id)
                .arg(millis(quota.lease_ttl()));
            let (ok, _): (i64, i64) = self.call("lease.lua", &inv).await?;
            all &= ok == 1;
        }
        Ok(all)
    }

    async fn release(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        let mut held = false;
        for set in quota.lease_sets() {
            let mut inv = self.inner.lease.prepare_invoke();
            inv.key(self.key(quota, &set.part))
                .key(self.key(quota, "fence"))
                .arg("release")
                .arg(id);
            let (ok, _): (i64, i64) = self.call("lease.lua", &inv).await?;
            held |= ok == 1;
        }
        Ok(held)
    }

    /// Woken through the wake-up list of the waiter's process
    /// (`redis_wake.rs`), which a task of this process pops while it waits.
    async fn wait_turn(&self, quota: &Quota, waiter: &str, retry_in: Duration) {
        let listeners = &self.inner.listeners;
        let entered = listeners.wakeups.enter(waiter);
        if let Some((process, _)) = waiter.rsplit_once('/') {
            listeners.ensure(self.key(quota, &format!("{}{process}", redis_wake::LIST)));
        }
        entered.wait(retry_in).await;
    }
}
