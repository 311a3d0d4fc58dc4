//! The EDC simulator: a real HTTP server on loopback serving a
//! deterministic dataset as Vault-style JSON and Rave-style ODM, with
//! injectable faults. Used by the tests, `demo` and `qualify oq`, and
//! runnable on its own as `edc-sync simulate`.

pub mod audit_trail;
mod body;
pub mod dataset;
pub mod fault;
mod log;
mod quota;
mod render;
mod server;
pub mod study_dataset;
pub mod vendor;
pub mod vql;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use dataset::Dataset;
pub use fault::{Fault, FaultSchedule, RetryAfterForm};
pub use log::{LogEntry, RequestLog};
pub use quota::{ServerBucket, ServerWindow};
pub use vendor::Profile;

/// Everything the simulator is told.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub dataset: Dataset,
    /// Which vendor's authentication and error bodies to imitate.
    pub profile: Profile,
    /// The bearer token requests must carry (generic profile).
    pub token: String,
    /// The user the rave (Basic) and vault (login) profiles accept.
    pub username: String,
    pub password: String,
    /// Vault profile: where the login form is accepted.
    pub login_path: String,
    /// Vault profile: where VQL queries are POSTed (`{vql_path}/{id}` for
    /// next pages).
    pub vql_path: String,
    /// Vault profile: a session serves this many data requests, then
    /// answers INVALID_SESSION_ID.
    pub session_ttl_requests: Option<u64>,
    /// Castor profile: how long an access token lasts (its `expires_in`).
    pub token_lifetime: Duration,
    /// Vault profile: serve `GET {audit_trail_path}{type}` (see
    /// `audit_trail.rs`) with records arriving at these instants.
    pub audit_trail: Option<audit_trail::Arrivals>,
    pub audit_trail_path: String,
    /// Serve the JSON window newest first (as Vault's audit trail does)
    /// instead of oldest first.
    pub newest_first: bool,
    /// Seconds added to the simulator's clock in `Date` and in
    /// HTTP-date `Retry-After` values (a server whose clock differs).
    pub clock_skew_s: i64,
    pub faults: FaultSchedule,
    /// Server-side quota: (rate per second, burst).
    pub quota: Option<(f64, u32)>,
    /// Server-side fixed window: (calls, window length), the window opening
    /// at the first request after the last one ended (Castor's quota).
    pub window_quota: Option<(u32, Duration)>,
    /// How much later than the client granted it a request may arrive and
    /// still conform to `quota` (a gateway that allows for transit): the
    /// quota then admits `burst + rate × (t + this)` in any window of t.
    pub quota_arrival_tolerance: Duration,
    /// Added to every response.
    pub latency: Duration,
    /// Vault's burst limit per 5-minute window: when set, every page carries
    /// X-VaultAPI-BurstLimit and X-VaultAPI-BurstLimitRemaining.
    pub vault_burst: Option<u64>,
    /// Vault's daily limit (API v20.3 and earlier): every page carries
    /// X-VaultAPI-DailyLimit and X-VaultAPI-DailyLimitRemaining, and once
    /// this many pages were served every request gets 200 FAILURE
    /// API_LIMIT_EXCEEDED (the simulator's day never ends).
    pub vault_daily: Option<u64>,
    pub json_path: String,
    pub odm_path: String,
    pub request_log: Option<PathBuf>,
    /// Vault profile: the DNS names of the vaults the login user may use,
    /// the first being the user's default (empty: only the host the
    /// request named). A login whose `vaultDNS` is not among them gets a
    /// session for the default vault, as Vault does.
    pub vaults: Vec<String>,
    /// Vault profile: Client ID Filtering on, admitting these client IDs
    /// only (`None`: off).
    pub client_id_filter: Option<Vec<String>>,
    /// Castor profile: study data points held out of the collection at
    /// first, one joining it at each `grow` fault (a live collection).
    pub study_data_held: u32,
    /// Castor profile: the most items a collection page serves, whatever
    /// `page_size` asks (Castor documents 5000; a server may serve fewer).
    pub max_page_size: usize,
    /// Castor profile: how many participants, the last of the dataset's,
    /// are archived (listed by `GET /record` with `archived: true`, their
    /// data points still in the study data).
    pub archived_records: u32,
    /// Redcap profile: the version `content=version` answers.
    pub redcap_version: String,
    /// Redcap profile: the zone of the server's clock, which every time it
    /// states is shown in (IANA name).
    pub server_zone: String,
    /// Redcap profile: `beginTime`/`endTime` are strict ("after",
    /// "before"); inclusive otherwise.
    pub redcap_exclusive_bounds: bool,
    /// Redcap profile: this record is deleted once an id list (an export
    /// of `fields[]`) has been answered: deleted between the list and its
    /// batch.
    pub redcap_delete_after_list: Option<u32>,
    /// Redcap profile: the export rights of the token.
    pub redcap_rights: RedcapRights,
}

/// The export rights a REDCap token may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedcapRights {
    /// Full data set, no data access group.
    #[default]
    Full,
    /// De-identified: identifier fields removed from exports.
    DeIdentified,
    /// A user in the data access group `site_a`: its records only, and no
    /// group column.
    OneGroup,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            dataset: Dataset {
                subjects: 20,
                records: 300,
                seed: 42,
                padding: 0,
            },
            profile: Profile::Generic,
            token: "sim-token".into(),
            username: "sim-user".into(),
            password: "sim-password".into(),
            login_path: "/api/v24.1/auth".into(),
            vql_path: "/api/v24.1/query".into(),
            session_ttl_requests: None,
            token_lifetime: vendor::castor::TOKEN_LIFETIME,
            clock_skew_s: 0,
            newest_first: false,
            audit_trail: None,
            audit_trail_path: "/api/v24.1/audittrail/".into(),
            faults: FaultSchedule::default(),
            quota: None,
            window_quota: None,
            quota_arrival_tolerance: Duration::ZERO,
            latency: Duration::ZERO,
            vault_burst: None,
            vault_daily: None,
            json_path: "/api/v24.1/query/audit_trail".into(),
            odm_path: "/RaveWebServices/datasets/ClinicalAuditRecords.odm".into(),
            request_log: None,
            vaults: Vec::new(),
            client_id_filter: None,
            study_data_held: 0,
            max_page_size: vendor::castor::MAX_PAGE_SIZE,
            archived_records: 0,
            redcap_version: vendor::redcap::VERSION.into(),
            server_zone: "America/Chicago".into(),
            redcap_exclusive_bounds: false,
            redcap_delete_after_list: None,
            redcap_rights: RedcapRights::Full,
        }
    }
}

/// A running simulator; stopped on [`Simulator::stop`] or drop.
pub struct Simulator {
    addr: SocketAddr,
    log: RequestLog,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Simulator {
    /// Binds `bind` (use port 0 for a free port) and starts serving.
    pub async fn start(config: SimConfig, bind: SocketAddr) -> std::io::Result<Simulator> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let log = match &config.request_log {
            Some(path) => RequestLog::with_file(path)?,
            None => RequestLog::default(),
        };
        let bucket = config
            .quota
            .map(|(rate, burst)| ServerBucket::new(rate, burst, config.quota_arrival_tolerance));
        let window = config
            .window_quota
            .map(|(calls, length)| ServerWindow::new(calls, length));
        let state = Arc::new(server::State {
            config,
            counter: AtomicU64::new(0),
            bucket: Mutex::new(bucket),
            window: Mutex::new(window),
            burst_window: Mutex::new((std::time::Instant::now(), 0)),
            daily_served: AtomicU64::new(0),
            endless: Default::default(),
            grown: Default::default(),
            sessions: Default::default(),
            tokens: Default::default(),
            queries: Default::default(),
            redcap_exports: Default::default(),
            redcap_deleted: Default::default(),
            log: log.clone(),
        });
        let (tx, mut rx) = oneshot::channel();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut rx => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        // Headers and body go out in separate writes; without
                        // this, Nagle and delayed ACKs add 40 ms to each page.
                        let _ = stream.set_nodelay(true);
                        let state = state.clone();
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(move |req| server::handle(state.clone(), req));
                            // A client that hangs up mid-body is not the simulator's problem.
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                }
            }
        });
        Ok(Simulator {
            addr,
            log,
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request seen so far, in arrival order.
    pub fn requests(&self) -> Vec<LogEntry> {
        self.log.entries()
    }

    /// Stops accepting connections.
    pub async fn stop(mut self) {
        self.shutdown_now();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}
