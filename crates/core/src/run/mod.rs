//! One run: everything between "load the policy" and "run_finished".
//!
//! Order matters and is the design's: load and validate the policy, refuse
//! it unless committed (or `--allow-dirty`), write the `run_started` header
//! (fsynced) before anything touches the network, then pace, fetch, land
//! and commit each stream, and end with `run_finished` carrying the exit
//! code. Shared by `sync`, `demo` and the OQ scenarios.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::audit::{AuditError, AuditKey, RunId, RunStarted};
use crate::config::{self, ConfigError, LoadedConfig, Policy};
use crate::edc::{Credentials, ReadOnlyClient};
use crate::error::{Error, IoContext};
use crate::exit::Exit;
use crate::ledger::{Ledger, State, StateLocation, Trail, TrailOptions};
use crate::stream::StreamIdentity;
use crate::sync::events::RunFinished;
use crate::sync::{run_stream, StreamJob, StreamReport, SyncOptions};
use quota_pacer::{AnyPacer, CapQueue, Limiter, LocalPacer, Quota, RedisPacer};

/// Where a run's figures go: the textfile and the Pushgateway.
pub use crate::metrics::MetricsOutlets;

/// Which streams of the vendor to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Streams {
    /// One named stream.
    One(String),
    /// Every stream the policy lists, concurrently.
    All,
}

/// Where the pacing state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacerChoice {
    Redis(String),
    Local,
}

/// The base URL and credentials, when they do not come from the
/// environment (the demo and the OQ pass the simulator's).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub base_url: String,
    pub credentials: Credentials,
}

impl Endpoint {
    /// A base URL with a bearer token.
    pub fn bearer(base_url: impl Into<String>, token: &str) -> Endpoint {
        Endpoint {
            base_url: base_url.into(),
            credentials: Credentials::bearer(token),
        }
    }
}

/// Everything a run is told.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub config: PathBuf,
    pub allow_dirty: bool,
    pub vendor: String,
    pub tenant: Option<String>,
    pub study: String,
    pub protocol_version: Option<String>,
    pub streams: Streams,
    /// `--out`: a directory or a bucket, parsed once.
    pub out: crate::store::LandingLocation,
    /// `--state`: a directory or a database, parsed once.
    pub state: StateLocation,
    pub audit_log: PathBuf,
    pub pacer: PacerChoice,
    pub options: SyncOptions,
    pub endpoint: Option<Endpoint>,
    /// Where the run's figures go (`--metrics-file`, `--metrics-push`).
    pub metrics: crate::metrics::MetricsOutlets,
    pub audit: AuditOptions,
}

/// How the run treats its audit trail.
#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// `--repair-audit`: record a damaged end or a diverged anchor instead
    /// of refusing to append.
    pub repair: bool,
    /// Signs every `run_finished` line (docs/audit-trail.md).
    pub key: Option<AuditKey>,
    /// `--adopt-unsealed-trail`: with the key, take a trail no line of
    /// which is sealed (one written before the key), recording it in an
    /// `audit_key_adopted` line; without it such a trail is refused (65).
    pub adopt_unsealed: bool,
    /// The state directory whose `audit-anchors/` anchors the trail, when
    /// it is not the run's own (`backfill` keeps its cursors apart but
    /// appends to the same trail, so it shares the trail's one anchor).
    pub anchor_root: Option<PathBuf>,
}

/// What a run did, whether or not it succeeded.
pub struct RunResult {
    pub run_id: RunId,
    pub audit_log: PathBuf,
    pub reports: Vec<StreamReport>,
    pub outcome: Result<(), Error>,
}

/// A run, planned: everything that can be checked is checked before the
/// runtime starts and before the audit header is written, so a usage or
/// configuration mistake (a policy key, a variable, the base URL, the Redis
/// URL) exits 78 and leaves no audit line.
pub(crate) struct RunPlan {
    loaded: LoadedConfig,
    policy: Arc<Policy>,
    delta: Arc<crate::config::Delta>,
    jobs: Vec<(StreamIdentity, crate::config::StreamSpec, Quota)>,
    endpoint: Endpoint,
    client: ReadOnlyClient,
}

/// Plans `spec`: policy loaded, validated and committed, streams and
/// quotas resolved, environment read, the client built for its origin.
pub(crate) fn plan(spec: &RunSpec) -> Result<RunPlan, ConfigError> {
    if let StateLocation::Dir(dir) = &spec.state {
        crate::paths::require_local("--state", dir).map_err(ConfigError::Identity)?;
    }
    crate::paths::require_local("--audit-log", &spec.audit_log).map_err(ConfigError::Identity)?;
    if let PacerChoice::Redis(url) = &spec.pacer {
        RedisPacer::check_url(url).map_err(|e| ConfigError::Identity(format!("--redis {e}")))?;
    }
    if let Some(url) = &spec.metrics.push {
        crate::metrics_push::Pushgateway::parse(url).map_err(ConfigError::Identity)?;
    }
    let loaded = config::load(&spec.config)?;
    loaded.require_committed(spec.allow_dirty)?;
    // A stamp anyone who can write the policy could have written: with the
    // audit key its MAC must verify, before any line or request.
    if let Some(key) = &spec.audit.key {
        loaded.require_sealed_stamp(&key.id(), |content, mac| key.stamp_verifies(content, mac))?;
    }
    let policy = Arc::new(loaded.vendor(&spec.vendor)?.clone());
    if policy.object_lock.is_some() && !spec.out.is_s3() {
        return Err(ConfigError::Identity(format!(
            "{}.object_lock: the policy asks for landed pages that cannot be changed (S3 Object Lock), and --out {} \
             is no s3:// bucket; land in an S3 bucket with Object Lock, or remove object_lock",
            policy.vendor,
            spec.out.shown()
        )));
    }
    let delta = Arc::new(policy.delta.clone().ok_or_else(|| ConfigError::NoDelta {
        vendor: policy.vendor.clone(),
        path: loaded.provenance.config_path.clone(),
    })?);
    let chosen: Vec<crate::config::StreamSpec> = match &spec.streams {
        Streams::All => policy.streams.clone(),
        Streams::One(name) => {
            vec![policy
                .stream(name)
                .cloned()
                .ok_or_else(|| ConfigError::UnknownStream {
                    vendor: spec.vendor.clone(),
                    stream: name.clone(),
                    known: policy
                        .streams
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?]
        }
    };
    let endpoint = match &spec.endpoint {
        Some(e) => e.clone(),
        None => Endpoint {
            base_url: policy
                .base_url_env
                .read(&format!("{}.base_url_env", policy.vendor))?,
            credentials: Credentials::from_policy(&policy)?,
        },
    };
    // A quota keyed by `{host}` is the server's, whatever the project.
    let base_url = reqwest::Url::parse(&endpoint.base_url).ok();
    let mut jobs = Vec::new();
    for stream in chosen {
        let id = StreamIdentity {
            vendor: spec.vendor.clone(),
            tenant: spec.tenant.clone(),
            study: Some(spec.study.clone()),
            protocol_version: spec.protocol_version.clone(),
            stream: Some(stream.name.clone()),
        };
        let quota = crate::quota::for_stream(&policy, &id, base_url.as_ref())
            .map_err(|e| ConfigError::Identity(format!("{}: {e}", policy.vendor)))?;
        jobs.push((id, stream, quota));
    }
    let client = ReadOnlyClient::new(&endpoint.base_url, endpoint.credentials.clone(), policy.http)
        .map_err(|e| match e {
            crate::edc::FetchError::Credential(detail) => {
                ConfigError::Identity(format!("{}: {detail}; {}", policy.vendor, policy.auth.hint()))
            }
            e => ConfigError::Identity(format!("{}.base_url_env: {e}", policy.vendor)),
        })?
        .with_longest_wait(policy.max_wait)
        .with_client_id(policy.client_id.as_deref())
        .map_err(|e| ConfigError::Identity(format!("{}.{e}", policy.vendor)))?;
    Ok(RunPlan {
        loaded,
        policy,
        delta,
        jobs,
        endpoint,
        client,
    })
}

/// Runs `spec` to the end. Errors before the audit header exist (bad
/// config, unwritable audit file) come back as `Err`; everything after is
/// in [`RunResult::outcome`], and the audit trail says how it ended.
pub async fn execute(spec: RunSpec) -> Result<RunResult, Error> {
    let outlets = spec.metrics.clone();
    let (base, named) = (base_identity(&spec), named_streams(&spec));
    let result = match plan(&spec) {
        Ok(plan) => execute_plan(spec, plan).await,
        Err(e) => Err(e.into()),
    };
    // Refused before it started: monitoring hears of it too.
    if let Err(e) = &result {
        crate::metrics::refused(&outlets, &base, &named, e.exit().code()).await;
    }
    result
}

/// The run's identity without a stream: what its metrics are labelled by.
fn base_identity(spec: &RunSpec) -> StreamIdentity {
    StreamIdentity {
        vendor: spec.vendor.clone(),
        tenant: spec.tenant.clone(),
        study: Some(spec.study.clone()),
        protocol_version: spec.protocol_version.clone(),
        stream: None,
    }
}

/// The streams the command named (none for `--all-streams`: the policy
/// says which).
fn named_streams(spec: &RunSpec) -> Vec<String> {
    match &spec.streams {
        Streams::One(name) => vec![name.clone()],
        Streams::All => Vec::new(),
    }
}

/// The subsets the run's streams declare they land (REDCap's
/// `delta.restricted_scope`), by stream name.
fn declared_scopes(prepared: &RunPlan) -> std::collections::BTreeMap<String, crate::config::RestrictedScope> {
    prepared
        .jobs
        .iter()
        .filter_map(|(_, stream, _)| {
            let delta = stream.delta.as_deref().unwrap_or(&prepared.delta);
            match &delta.paging {
                crate::config::Paging::RedcapRecords { declared, .. } if *declared != Default::default() => {
                    Some((stream.name.clone(), declared.clone()))
                }
                _ => None,
            }
        })
        .collect()
}

/// Runs a planned `spec` to the end.
pub(crate) async fn execute_plan(spec: RunSpec, prepared: RunPlan) -> Result<RunResult, Error> {
    let started = Instant::now();
    if let Some(path) = &spec.metrics.file {
        crate::metrics::check_writable(path).io(|| {
            format!(
                "the metrics file {} cannot be written; nothing was fetched",
                path.display()
            )
        })?;
    }
    let run_id = RunId::new();
    let masker = crate::mask::Masker::for_run(
        &prepared.loaded.provenance.config_sha256,
        &prepared.endpoint.credentials.key_material(),
        &prepared.policy.masked_query_params,
    );
    crate::mask::set_global(masker.clone());
    let header_stream = prepared.jobs.first().map(|(id, _, _)| StreamIdentity {
        stream: (prepared.jobs.len() == 1).then(|| id.stream.clone()).flatten(),
        ..id.clone()
    });
    let mut header = RunStarted::new(&prepared.loaded.provenance, spec.allow_dirty, header_stream);
    // Checked in `plan` when the run holds the key; without it, unproven.
    if prepared.loaded.provenance.stamp_record.is_some() {
        header.config_stamp_verified = Some(spec.audit.key.is_some());
    }
    header.restricted_scope = declared_scopes(&prepared);
    let witnessed = matches!(spec.pacer, PacerChoice::Redis(_)) || prepared.policy.object_lock.is_some();
    if matches!(spec.state, StateLocation::Db(_)) && !witnessed {
        header.rollback_witness = Some(
            "none: a state database and its landing restored together from one older backup would not be seen \
             (the Redis anchor, --redis, or Object-Locked pages would see it)",
        );
    }
    // A database unreachable (69), read-only or of the wrong schema (78):
    // before any line, like a policy mistake.
    let state = State::open(&spec.state).await?;
    let options = TrailOptions {
        audit_log: spec.audit_log.clone(),
        repair: spec.audit.repair,
        key: spec.audit.key.clone(),
        adopt_unsealed: spec.audit.adopt_unsealed,
        anchor_root: spec.audit.anchor_root.clone(),
    };
    let (ledger, audit) = state.open_trail(&options, &run_id, masker, header).await?;
    let (reports, outcome, redis) = run_streams(&spec, &prepared, &audit, &ledger).await;
    let interrupted = matches!(
        outcome.as_ref().map_err(Error::root),
        Err(Error::Sync(crate::sync::SyncError::Interrupted { .. }))
    );
    if interrupted {
        let event = crate::sync::events::RunInterrupted {
            reason: "SIGINT or SIGTERM: stopped at a safe point".into(),
            pages: reports.iter().map(|r| r.pages).sum(),
        };
        audit.record(event).await?;
    }
    let code = match &outcome {
        Ok(()) => Exit::Ok,
        Err(e) => e.exit(),
    };
    let finished = RunFinished {
        exit_code: code.code(),
        outcome: match &outcome {
            Ok(()) => "ok".into(),
            Err(e) => format!("{e:#}"),
        },
        streams: prepared.jobs.len(),
        pages: reports.iter().map(|r| r.pages).sum(),
        records: reports.iter().map(|r| r.records).sum(),
        duration_s: started.elapsed().as_secs_f64(),
        anchored: false,
    };
    // A run stopped because the trail diverges from an anchor writes none:
    // that would bless the divergence for `audit verify --anchors`.
    let diverged = matches!(
        outcome.as_ref().map_err(Error::root),
        Err(Error::Audit(AuditError::Damaged { .. }))
    );
    // Anchored before run_finished too, and the line says whether that
    // worked: a later run that finds no anchor after a line that says it
    // was written knows it was removed (and one that failed to write is no
    // reason to refuse the next run).
    let anchored = !diverged && audit.anchor(None).await;
    let finished = RunFinished { anchored, ..finished };
    audit.record(finished).await?;
    if !diverged {
        audit.anchor(redis.as_ref()).await;
    }
    let base = base_identity(&spec);
    let streams: Vec<String> = prepared
        .jobs
        .iter()
        .filter_map(|(id, _, _)| id.stream.clone())
        .collect();
    let duration = started.elapsed().as_secs_f64();
    // Parsed when the run was planned: it parses again here.
    if let Some(Ok(gateway)) = spec
        .metrics
        .push
        .as_deref()
        .map(crate::metrics_push::Pushgateway::parse)
    {
        crate::metrics::push(&gateway, &base, &reports, &streams, code.code(), duration).await;
    }
    if let Some(path) = &spec.metrics.file {
        crate::metrics::write(path, &base, &reports, &streams, code.code(), duration)
            .io(|| format!("writing the metrics file {}", path.display()))?;
    }
    Ok(RunResult {
        run_id,
        audit_log: spec.audit_log.clone(),
        reports,
        outcome,
    })
}

/// Where a run's landing directories are made: `--out` (or, for an object
/// store, the state directory's index of it), or a scratch directory that
/// lives as long as this value.
enum Index {
    Dir(PathBuf),
    Scratch(tempfile::TempDir),
}

impl Index {
    fn path(&self) -> &std::path::Path {
        match self {
            Index::Dir(p) => p,
            Index::Scratch(t) => t.path(),
        }
    }
}

/// Where pages land: `--out` itself, or, for an object store, the state
/// directory's index of it (`STATE/.landing/`) and the bucket, reached and
/// probed before any request.
async fn landing_target(
    spec: &RunSpec,
    lock: Option<crate::config::ObjectLock>,
    audit: &Trail,
    ledger: &Ledger,
) -> Result<(Index, Option<Arc<crate::store::object::ObjectLanding>>), Error> {
    let bucket = match &spec.out {
        crate::store::LandingLocation::Dir(dir) => return Ok((Index::Dir(dir.clone()), None)),
        crate::store::LandingLocation::Bucket(bucket) => bucket,
    };
    let mut object = crate::store::object::ObjectLanding::open(bucket.as_str())
        .map_err(crate::store::StoreError::Object)?;
    // The retention the policy asks for, proven before anything is written
    // (the probe included: in a locked bucket it could not be removed).
    let object_lock = match lock {
        Some(want) => {
            let found = object
                .require_lock(want)
                .await
                .map_err(crate::store::StoreError::Object)?;
            Some(crate::sync::events::ObjectLockProven {
                policy: want,
                bucket_default: found,
            })
        }
        None => None,
    };
    // A dry run writes nothing, not even the probe: a LIST proves the
    // bucket and the credentials instead.
    let (landing, conditional_writes) = if spec.options.dry_run {
        object
            .reachable()
            .await
            .map_err(crate::store::StoreError::Object)?;
        (object, None)
    } else {
        let landing = object
            .probed(audit.run_id().as_str())
            .await
            .map_err(crate::store::StoreError::Object)?;
        let conditional = landing.creates() == crate::store::object::Creates::Conditional;
        (landing, Some(conditional))
    };
    let ready = crate::sync::events::ObjectLandingReady {
        landing: landing.url().to_string(),
        conditional_writes,
        object_lock,
    };
    audit.record(ready).await?;
    // The manifest index of an object-store landing: in the state
    // directory, or, with a state database (which holds the manifest), a
    // scratch directory for the pages' temp files only, removed at the end.
    let index = match ledger.object_index_dir() {
        Some(dir) => Index::Dir(dir),
        None => Index::Scratch(
            tempfile::Builder::new()
                .prefix("edc-sync-landing-")
                .tempdir()
                .io(|| "creating a scratch directory for the pages in flight".into())?,
        ),
    };
    Ok((index, Some(Arc::new(landing))))
}

async fn run_streams(
    spec: &RunSpec,
    prepared: &RunPlan,
    audit: &Trail,
    ledger: &Ledger,
) -> (Vec<StreamReport>, Result<(), Error>, Option<RedisPacer>) {
    let pacer = match &spec.pacer {
        PacerChoice::Local => AnyPacer::Local(LocalPacer::new()),
        PacerChoice::Redis(url) => match RedisPacer::connect(url, crate::REDIS_KEY_PREFIX).await {
            Ok(p) => {
                if let Err(e) = audit.check_redis_anchor(&p).await {
                    return (Vec::new(), Err(e.into()), Some(p));
                }
                AnyPacer::Redis(p)
            }
            Err(e) => return (Vec::new(), Err(e.into()), None),
        },
    };
    // Anchored at the start too, once the header passed every anchor check
    // (Redis's included): a run aborted before its end (a second SIGINT,
    // kill -9) leaves its trail anchored up to the header, not unanchored.
    audit.anchor(None).await;
    let redis = match &pacer {
        AnyPacer::Redis(p) => Some(p.clone()),
        AnyPacer::Local(_) => None,
    };
    let (index, object) = match landing_target(spec, prepared.policy.object_lock, audit, ledger).await {
        Ok(target) => target,
        Err(e) => return (Vec::new(), Err(e), redis),
    };
    let out_dir = index.path().to_path_buf();
    let client = prepared.client.clone();
    let mut tasks = tokio::task::JoinSet::new();
    // The streams of one quota key wait for its concurrency cap in one
    // in-process FIFO, asking Redis nothing while they wait.
    let mut queues: HashMap<String, CapQueue<AnyPacer>> = HashMap::new();
    for (index, (id, stream, quota)) in prepared.jobs.iter().cloned().enumerate() {
        let queue = queues
            .entry(quota.key().to_string())
            .or_insert_with(|| CapQueue::new(quota.max_concurrency()))
            .clone();
        // A stream's own delta replaces the vendor's; its own lookback is
        // the vendor's delta changed in that one key.
        let delta = match (&stream.delta, &stream.lookback) {
            (Some(own), _) => Arc::new((**own).clone()),
            (None, Some(own)) => Arc::new(crate::config::Delta {
                lookback: own.clone(),
                ..(*prepared.delta).clone()
            }),
            (None, None) => prepared.delta.clone(),
        };
        let kind = crate::edc::vendor::DeltaKind::of(&prepared.policy, &delta);
        let job = StreamJob {
            policy: prepared.policy.clone(),
            delta,
            kind,
            spec: stream,
            identity: id,
            client: client.clone(),
            limiter: Limiter::in_queue(pacer.clone(), quota, queue),
            audit: audit.clone(),
            out_dir: out_dir.clone(),
            object: object.clone(),
            ledger: ledger.clone(),
            options: spec.options.clone(),
            redis: redis.clone(),
        };
        tasks.spawn(async move { (index, run_stream(&job).await) });
    }
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(r) => results.push(r),
            Err(e) => {
                return (
                    Vec::new(),
                    Err(Error::io("a stream task failed", std::io::Error::other(e))),
                    redis,
                )
            }
        }
    }
    results.sort_by_key(|(i, _)| *i);
    let mut reports = Vec::new();
    let mut first_error = None;
    for (_, outcome) in results {
        // Every stream's report counts, finished or not: run_finished and
        // the metrics say what was committed even when the run failed.
        reports.push(outcome.report);
        if let (Err(e), None) = (outcome.result, &first_error) {
            first_error = Some(Error::Sync(e));
        }
    }
    (reports, first_error.map_or(Ok(()), Err), redis)
}

/// Convenience for callers outside a runtime.
pub fn execute_blocking(spec: RunSpec) -> Result<RunResult, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .io(|| "starting the async runtime".into())?;
    rt.block_on(async {
        let mut spec = spec;
        spec.options.interrupt =
            crate::interrupt::Interrupt::install().io(|| "installing the signal handlers".into())?;
        execute(spec).await
    })
}
