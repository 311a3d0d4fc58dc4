//! The validated policy: what `config/rate_limits.yaml` means once loaded.
//!
//! Every value here has passed validation, and the types keep it that way:
//! a [`Rate`] cannot be zero, an [`EnvVarName`] cannot be empty, a template
//! cannot hold an unknown placeholder. Code downstream never re-checks.
//!
//! One concept: the loaded policy as types, one per block of the file (a
//! vendor's auth, delta, window, lookback, limits), kept together because
//! together they are the one `Policy` a run is given.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::template::Template;
pub(super) use quota_pacer::Rate;

/// The name of an environment variable that supplies a URL or a secret.
///
/// Only the name is ever stored or printed; the value is read at the moment
/// a run needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct EnvVarName(String);

/// The variable a run needs is not set (or is empty), or not valid UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {name} (named by {key}) {}", if *.not_unicode { "is not valid UTF-8" } else { "is not set" })]
pub struct MissingEnv {
    pub name: String,
    pub key: String,
    /// Set, but not valid UTF-8 (its value is never shown).
    pub not_unicode: bool,
}

impl EnvVarName {
    /// Accepts POSIX-style names: a letter or `_`, then letters, digits, `_`.
    pub fn parse(name: &str) -> Result<Self, String> {
        let mut chars = name.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            Ok(EnvVarName(name.to_string()))
        } else {
            Err(format!(
                "must be an environment variable name like VAULT_API_TOKEN, got {name:?}"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads the variable. `key` is the config key that named it, for the
    /// error message; the value never appears in an error.
    pub fn read(&self, key: &str) -> Result<String, MissingEnv> {
        match std::env::var(&self.0) {
            Ok(v) if !v.is_empty() => Ok(v),
            other => Err(MissingEnv {
                name: self.0.clone(),
                key: key.to_string(),
                not_unicode: matches!(other, Err(std::env::VarError::NotUnicode(_))),
            }),
        }
    }
}

impl fmt::Display for EnvVarName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How the tool proves who it is to the EDC. Chosen per vendor with the
/// policy's `auth` block; without one, the user's original schema applies:
/// a bearer token from `token_env`.
///
/// Every variant names environment variables or a program, never a value:
/// credentials are read at run time and never stored in the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "scheme")]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer { token_env: EnvVarName },
    /// HTTP Basic, as Rave Web Services expects (mdsol/rwslib
    /// `RWSConnection` sends `auth=(username, password)`).
    Basic {
        username_env: EnvVarName,
        password_env: EnvVarName,
    },
    /// Vault: `POST {login_path}` with the form fields `username` and
    /// `password` returns a `sessionId`, sent as `Authorization` on every
    /// request and renewed once when Vault says it is invalid (Vault REST
    /// API reference, "Authentication" / "User Name and Password").
    VaultSession {
        username_env: EnvVarName,
        password_env: EnvVarName,
        /// Path of the login endpoint on the data origin, e.g. `/api/v24.1/auth`.
        login_path: String,
        /// The vault the session must be for (`vaultDNS` at login, and the
        /// vault Vault answers with is checked against it); `None`: the
        /// base URL's host. Set it when the base URL is a gateway.
        vault_dns: Option<String>,
    },
    /// A credential helper (the convention of git credential helpers and
    /// AWS `credential_process`): runs `command`, whose stdout is the
    /// bearer token. Covers OAuth2/OIDC without a second origin here. It
    /// sees only `pass_env` (and PATH, HOME, LANG, LC_ALL, TZ) of the
    /// environment: never the audit key or another vendor's secret.
    Command {
        command: Vec<String>,
        pass_env: Vec<EnvVarName>,
    },
    /// OAuth2 client credentials (RFC 6749, section 4.4), as Castor EDC
    /// takes them: `POST {token_path}` on the data origin with the form
    /// fields `grant_type=client_credentials`, `client_id` and
    /// `client_secret` (castoredc_api `CastorClient.request_auth_token`);
    /// the answer's `access_token` goes as a Bearer token on every request,
    /// renewed before its `expires_in` runs out and once on a 401.
    #[serde(rename = "oauth2_client_credentials")]
    OAuth2ClientCredentials {
        client_id_env: EnvVarName,
        client_secret_env: EnvVarName,
        /// Path of the token endpoint on the data origin (`/oauth/token`).
        token_path: String,
    },
    /// REDCap's API token from `token_env`: a form field `token` of every
    /// export POST, never a header or a URL parameter (REDCap's API help;
    /// PyCap `redcap/request.py` puts it in the payload).
    RedcapToken { token_env: EnvVarName },
}

impl Auth {
    /// Whether every data request is an export form with the token in it
    /// (REDCap's), rather than a request with a credential header.
    pub(crate) fn exports_by_form(&self) -> bool {
        matches!(self, Auth::RedcapToken { .. })
    }

    /// The scheme's name as the policy spells it.
    pub fn scheme(&self) -> &'static str {
        match self {
            Auth::Bearer { .. } => "bearer",
            Auth::Basic { .. } => "basic",
            Auth::VaultSession { .. } => "vault_session",
            Auth::Command { .. } => "command",
            Auth::OAuth2ClientCredentials { .. } => "oauth2_client_credentials",
            Auth::RedcapToken { .. } => "redcap_token",
        }
    }

    /// Every environment variable the scheme reads, with the key that
    /// names it (for `config validate --check-env` and error messages).
    pub fn env_vars(&self) -> Vec<(&'static str, &EnvVarName)> {
        match self {
            Auth::Bearer { token_env } | Auth::RedcapToken { token_env } => vec![("token_env", token_env)],
            Auth::Basic {
                username_env,
                password_env,
            }
            | Auth::VaultSession {
                username_env,
                password_env,
                ..
            } => vec![
                ("auth.username_env", username_env),
                ("auth.password_env", password_env),
            ],
            Auth::OAuth2ClientCredentials {
                client_id_env,
                client_secret_env,
                ..
            } => vec![
                ("auth.client_id_env", client_id_env),
                ("auth.client_secret_env", client_secret_env),
            ],
            Auth::Command { .. } => Vec::new(),
        }
    }

    /// The variables that hold secrets (a password, a token, a client
    /// secret), with their keys: never shown anywhere.
    pub fn secret_env_vars(&self) -> Vec<(&'static str, &EnvVarName)> {
        self.env_vars()
            .into_iter()
            .filter(|(key, _)| !Self::SHOWN_KEYS.contains(key))
            .collect()
    }

    /// The variables that name who the tool is (a user name, a client id):
    /// not secrets, so they may appear in messages.
    pub fn shown_env_vars(&self) -> Vec<(&'static str, &EnvVarName)> {
        self.env_vars()
            .into_iter()
            .filter(|(key, _)| Self::SHOWN_KEYS.contains(key))
            .collect()
    }

    const SHOWN_KEYS: [&'static str; 2] = ["auth.username_env", "auth.client_id_env"];

    /// What an operator should check when the EDC refuses the credential:
    /// the variables (or program) of the scheme in use, never a value.
    pub fn hint(&self) -> String {
        match self {
            Auth::Command { command, .. } => format!(
                "check the credential helper {:?} (auth.command)",
                command.first().map(String::as_str).unwrap_or_default()
            ),
            other => {
                let names: Vec<&str> = other.env_vars().iter().map(|(_, n)| n.as_str()).collect();
                let keys: Vec<&str> = other.env_vars().iter().map(|(k, _)| *k).collect();
                format!("check {} ({})", names.join(" / "), keys.join(", "))
            }
        }
    }
}

/// How a vendor reports errors, chosen with the policy's `dialect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// HTTP status only (the behaviour before vendor dialects existed).
    Generic,
    /// Veeva Vault: `responseStatus` SUCCESS | WARNING | FAILURE |
    /// EXCEPTION and `errors[{type, message}]`, mostly at HTTP 200.
    Vault,
    /// Medidata Rave Web Services: `<Response ReasonCode=...>` or an ODM
    /// carrying `mdsol:ErrorDescription`, at 4xx and sometimes at 200.
    Rave,
    /// Castor EDC: JSON `{type, title, status, detail}` at the status it
    /// names; a 404 "There are no ..." is an empty collection.
    Castor,
    /// REDCap: `{"error": ...}`, `<hash><error>`, `ERROR: ...` at any
    /// status; a 429 saying the address is banned stops the run (76).
    Redcap,
}

/// How a delta response body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadFormat {
    /// Vault-style JSON with a records array.
    Json,
    /// CDISC ODM 1.3 XML (Rave Web Services).
    Odm,
}

/// How the next page of a delta is found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "style")]
pub enum Paging {
    /// A JSON pointer into the body holds the next page's path
    /// (Vault: `/responseDetails/next_page`).
    JsonNext { next_pointer: String },
    /// RFC 8288 `Link: <...>; rel="next"`.
    LinkHeader,
    /// Pages numbered from 1 in a query parameter (`page_param`, with
    /// `page_size_param`), as Castor pages its collections (castoredc_api
    /// `retrieve_multiple_pages`; Airbyte's source-castor-edc, "audit
    /// trail": `PageIncrement` from 1): the next page is the next number,
    /// until a page holds fewer records than `page_size`.
    PageNumber { page_param: String },
    /// Rave ODM audit records: `startid` / `per_page`, next page in a Link
    /// header, cursor = largest `AuditRecord/SourceID` + 1.
    RaveStartid,
    /// A Rave study dataset (`studies/{study}/datasets/regular|raw`, rwslib
    /// `StudyDatasetRequest`): one ODM document a run, incremental with
    /// `start=` (whole seconds); cursor = the document's `CreationDateTime`.
    RaveDataset,
    /// A JSON window answered in one document, with no paging and no page
    /// size (REDCap's Export Logging: the whole `beginTime`..`endTime`
    /// log, REDCap's API help, "Export Logging"; redcapAPI
    /// `exportLogging` sends no paging parameter). Needs `delta.window`.
    WholeWindow,
    /// REDCap's records (REDCap's API help, "Export Records"; REDCapR
    /// `redcap_read`, which reads the ids first and then the records in
    /// batches): a window's first page lists the ids of the records
    /// changed in it (`fields[0]` = `id_field` with the window's date
    /// range), each next page is a batch of up to `batch_size` whole
    /// records by `records[N]`. A window left part-way is read again from
    /// its id list. Needs `delta.window`.
    RedcapRecords {
        id_field: String,
        batch_size: u32,
        /// What the token may not export, declared (`restricted_scope`).
        declared: RestrictedScope,
    },
}

/// What a REDCap token may not export, declared by the policy
/// (`delta.restricted_scope`): a batch lacking only this is landed, and the
/// policy, stamped in every run's audit header by its hash and git ids,
/// records that the landing is a subset.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct RestrictedScope {
    /// Fields the token's rights remove (its de-identified export).
    pub fields: Vec<String>,
    /// The token's user is in one data access group: its records only.
    pub one_group: bool,
}

/// What a JSON delta's cursor field holds (`delta.cursor_kind`). Every
/// record's value is checked against it before its page commits: a value
/// of another kind (text that is no timestamp, say) would otherwise become
/// the high-water mark, outrank every later timestamp and stop the stream's
/// progress for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CursorKind {
    /// An RFC 3339 instant (Vault's `modified_date__v`, `timestamp`).
    #[default]
    Timestamp,
    /// A JSON number.
    Number,
    /// A string compared as text.
    Text,
    /// A PHP `DateTime` object, `{"date": "YYYY-MM-DD HH:MM:SS.ffffff",
    /// "timezone_type": 3, "timezone": "Europe/Amsterdam"}` (Castor's audit
    /// trail), compared as the instant its zone makes it.
    PhpDatetime,
    /// The server's wall-clock time without an offset, `YYYY-MM-DD HH:MM`
    /// or `YYYY-MM-DD HH:MM:SS` (REDCap's log `timestamp`), compared as
    /// the instant it is in the vendor's `server_timezone` (the later one
    /// in a repeated hour: `Zone::instant_of_wall`).
    ServerLocal,
}

impl CursorKind {
    /// Whether its values are instants (a lookback can re-read a span of
    /// them).
    pub fn is_instant(self) -> bool {
        matches!(
            self,
            CursorKind::Timestamp | CursorKind::PhpDatetime | CursorKind::ServerLocal
        )
    }

    /// The policy's spelling of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            CursorKind::Timestamp => "timestamp",
            CursorKind::Number => "number",
            CursorKind::Text => "text",
            CursorKind::PhpDatetime => "php_datetime",
            CursorKind::ServerLocal => "server_local",
        }
    }
}

/// In what order the endpoint returns a window's records. Only an
/// ascending endpoint lets a backfill stop before the window's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordOrder {
    /// Oldest first, within and across pages.
    Ascending,
    /// Newest first (Vault's audit trail).
    NewestFirst,
    /// No order promised.
    Unordered,
}

/// A delta served as closed date windows (Vault's audit trail): each run
/// fixes the window's end when it starts, pages through `[start, end]`,
/// and only then moves the start to the second after `end`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DateWindow {
    /// Query parameter that carries the window's end (Vault: `end_date`).
    pub end_param: String,
    /// How far back the endpoint serves (Vault: 30 days); a cursor older
    /// than this stops the run (65) naming the interval it cannot serve.
    #[serde(rename = "max_age_days", serialize_with = "opt_days")]
    pub max_age: Option<Duration>,
    /// The window's end stays this far behind the server's clock.
    #[serde(rename = "settle_lag_s", serialize_with = "secs")]
    pub settle_lag: Duration,
    /// How the window's two ends are written in the request.
    pub format: WindowFormat,
}

/// How a date window's ends are written in the request.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WindowFormat {
    /// `YYYY-MM-DDTHH:MM:SSZ` (Vault's audit trail).
    #[default]
    Rfc3339,
    /// The calendar date in `zone`, `YYYY-MM-DD`, both ends inclusive
    /// (Castor's audit trail, `date_from` and `date_to`): each window asks
    /// for whole days, a superset of its instants, and its lookback
    /// recognises the records of a day read again.
    Date { zone: crate::zone::Zone },
    /// The server's wall-clock time in `zone` at `precision`, without an
    /// offset (REDCap: `beginTime`/`endTime` `YYYY-MM-DD HH:MM`,
    /// `dateRangeBegin`/`dateRangeEnd` `YYYY-MM-DD HH:MM:SS`; the API help
    /// states every time in the server's local time). A window across a
    /// DST fall-back is asked for by its widest wall times
    /// (`Zone::wall_bounds`), and its start aligned a unit back, so either
    /// reading of a bound (inclusive or not) misses nothing.
    Local {
        zone: crate::zone::Zone,
        precision: crate::zone::Precision,
    },
}

impl WindowFormat {
    /// Where a window whose cursor is `start` begins in what the request
    /// asks for: the first instant of its day (`date`), of the wall-clock
    /// unit before it (`local_*`), or `start` itself. The next window's
    /// cursor is aligned so, so the lookback's memory covers everything
    /// the request brings back.
    pub fn aligned_start(&self, start: &str) -> Result<String, String> {
        match self {
            WindowFormat::Rfc3339 => Ok(start.to_string()),
            WindowFormat::Date { zone } => zone.start_of_day(start),
            WindowFormat::Local { zone, precision } => zone.wall_start(start, *precision),
        }
    }

    /// Whether a window reads records from before its cursor again (whole
    /// days, wall-clock units): nothing may be forgotten early.
    pub fn reads_before_start(&self) -> bool {
        !matches!(self, WindowFormat::Rfc3339)
    }
}

fn opt_days<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_secs() / 86_400),
        None => s.serialize_none(),
    }
}

/// A Vault VQL delta: the first page is `POST path` with the form field
/// `q`, next pages are POSTs of their `next_page` URL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vql {
    /// One SELECT with `{cursor}` where the window start goes (validated).
    pub select: String,
    /// The window start of a stream never synced (e.g. a date before the study).
    pub initial_cursor: String,
}

/// The delta endpoint of a vendor and the shape of its pages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delta {
    /// Path relative to the base URL; placeholders allowed.
    pub path: Template,
    pub format: PayloadFormat,
    pub paging: Paging,
    /// JSON pointer to the records array (JSON only).
    pub records_pointer: Option<String>,
    /// Query parameter that carries the window start (the cursor).
    pub cursor_param: String,
    /// Record field whose largest value is the window's high-water mark
    /// (JSON only; ODM uses `AuditRecord/SourceID`).
    pub cursor_field: Option<String>,
    /// What `cursor_field` holds (JSON only; default timestamp).
    pub cursor_kind: CursorKind,
    pub page_size_param: String,
    pub page_size: u32,
    /// A window longer than this is treated as a runaway next link (65).
    pub max_pages_per_window: u64,
    /// The order of records within and across pages.
    pub order: RecordOrder,
    /// Present for date-window endpoints (the cursor is a window start).
    pub window: Option<DateWindow>,
    /// Present for VQL deltas (POST of a query instead of a GET).
    pub vql: Option<Vql>,
    /// Re-reading the end of every window (JSON timestamp cursors only;
    /// `None`: `seconds: 0`, or a cursor that is not a time).
    pub lookback: Option<Lookback>,
    /// Fixed query parameters added to every first-page request.
    pub query: Vec<(String, Template)>,
    /// A live collection read whole on every run (Castor's study data):
    /// no since-filter, pages `1..page_count`, a snapshot a run.
    pub collection: Option<Collection>,
    /// The zone of `cursor_kind: server_local` values: the vendor's
    /// `server_timezone`.
    #[serde(skip)]
    pub server_zone: Option<crate::zone::Zone>,
}

/// `delta.collection`: an endpoint with no delta filter, numbered pages
/// whose count and size the server states on every page (Castor's HAL
/// collections: `page_count`, `total_items`), and whose items may change
/// while it is read. Each run reads pages `1..page_count` as one pass; the
/// pass is consistent only if `total_items` on its last page is what its
/// first page said, else it is read again (at most `max_passes` times).
/// What it read is the snapshot: the cursor records its hash, and a page
/// whose bytes were landed before is not landed again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Collection {
    /// JSON pointer to the number of pages (`/page_count`).
    pub page_count_pointer: String,
    /// JSON pointer to the number of items (`/total_items`).
    pub total_items_pointer: String,
    /// Passes a run makes before it stops (75) on a collection that kept
    /// changing while it was read.
    pub max_passes: u32,
}

/// `delta.lookback`: every window starts this much before where the last
/// one ended, and the records of that span already landed are recognised
/// by their identity and not landed again.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lookback {
    #[serde(rename = "seconds", serialize_with = "secs")]
    pub span: Duration,
    /// The record field that, with the cursor value, identifies a record;
    /// `None`: the record's whole content (its canonical JSON).
    pub record_id: Option<String>,
    /// Identities kept at most; past it the oldest are dropped and the
    /// next window starts no earlier than the oldest kept.
    pub max_records: u32,
    /// Whether records of identical content in one window are one record
    /// read twice (`same`, the default) or distinct events (`distinct`:
    /// an audit log's rows without ids, two identical rows in one second
    /// being two events).
    #[serde(rename = "identical_records")]
    pub identical: IdenticalRecords,
}

/// What two records of identical content in one window are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum IdenticalRecords {
    /// One record, listed twice: landed once.
    #[default]
    Same,
    /// Two events: each landed once, told apart by their order among
    /// their twins in the window (a window with twins is always read from
    /// its first page, so the count is whole).
    Distinct,
}

/// Per-request HTTP limits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HttpLimits {
    #[serde(rename = "connect_timeout_s", serialize_with = "secs")]
    pub connect_timeout: Duration,
    #[serde(rename = "request_timeout_s", serialize_with = "secs")]
    pub request_timeout: Duration,
    pub max_body_bytes: u64,
}

/// One cursor's worth of data within a vendor (a site, form or dataset).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamSpec {
    pub name: String,
    /// Query parameters that select this stream, added to the delta's.
    pub query: Vec<(String, Template)>,
    /// An extra gate on top of the vendor quota, for this stream alone.
    pub sub_limit: Option<Rate>,
    /// This stream's own lookback over its delta's (`Some(None)`: none
    /// for this stream); `None`: the delta's.
    pub lookback: Option<Option<Lookback>>,
    /// This stream's own endpoint, in place of the vendor's `delta` (a
    /// vendor whose streams are shaped differently: Castor's audit trail
    /// by day, its study data a collection read whole).
    pub delta: Option<Box<Delta>>,
}

/// The client ID a `vault`-dialect policy sends without `client_id`: in the
/// form Vault recommends, `{company}-{organization}-{team}-{server|client}-{program}`,
/// naming edc-sync; a site sets its own (and its vault's Client ID Filtering
/// must list it).
pub const DEFAULT_VAULT_CLIENT_ID: &str = "edcsync-site-datamanagement-server-edcsync";

/// S3 Object Lock's two retention modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LockMode {
    /// Users with `s3:BypassGovernanceRetention` may still shorten it.
    Governance,
    /// Nobody, the account's root user included, can shorten or remove it.
    Compliance,
}

impl LockMode {
    /// As S3 spells it (`GOVERNANCE`, `COMPLIANCE`).
    pub(crate) fn s3(self) -> &'static str {
        match self {
            LockMode::Governance => "GOVERNANCE",
            LockMode::Compliance => "COMPLIANCE",
        }
    }
}

/// The retention a vendor's landed pages must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ObjectLock {
    pub mode: LockMode,
    pub days: u32,
}

/// A declared fixed-window quota.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowQuota {
    /// Calls allowed in one window.
    pub calls: u32,
    /// The window's length.
    pub window: Duration,
    /// Where each window starts.
    pub starts: quota_pacer::WindowStart,
}

impl serde::Serialize for WindowQuota {
    /// As the policy file writes it, for `config show`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("calls", &self.calls)?;
        map.serialize_entry("window_s", &self.window.as_secs_f64())?;
        let starts = match self.starts {
            quota_pacer::WindowStart::FirstCall => "first_call",
            quota_pacer::WindowStart::Clock => "clock",
        };
        map.serialize_entry("starts", starts)?;
        map.end()
    }
}

impl WindowQuota {
    /// The pacer's window of this quota.
    pub fn pacer_window(&self) -> quota_pacer::Window {
        quota_pacer::Window {
            name: "vendor".into(),
            calls: self.calls,
            length: self.window,
            starts: self.starts,
        }
    }

    /// The most calls `rate` alone admits in one window: its burst plus
    /// what it refills over the window.
    pub fn bucket_admits(&self, rate: Rate) -> f64 {
        f64::from(rate.burst()) + rate.per_sec() * self.window.as_secs_f64()
    }
}

/// Everything the tool knows about one vendor's quota and delta API.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    pub vendor: String,
    pub base_url_env: EnvVarName,
    /// How requests are authenticated (`token_env` alone means bearer).
    pub auth: Auth,
    /// How the vendor reports errors inside responses.
    pub dialect: Dialect,
    /// `X-VaultAPI-ClientID` on every request (Vault REST API reference,
    /// "Client ID"): `client_id`, or for the `vault` dialect
    /// [`DEFAULT_VAULT_CLIENT_ID`]; none for other dialects unless given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(flatten)]
    pub rate: Rate,
    pub max_retry_attempts: u32,
    #[serde(rename = "default_retry_after_s", serialize_with = "secs")]
    pub default_retry_after: Duration,
    /// Ceiling on any single wait; a longer one ends the run with exit 75.
    #[serde(rename = "max_wait_s", serialize_with = "secs")]
    pub max_wait: Duration,
    pub bucket_key: Template,
    /// Requests in flight at once on this quota, across every process.
    pub max_concurrency: u32,
    /// Slack the pacer keeps against the vendor's own bucket, so requests
    /// arriving up to this much later than booked never exceed the quota.
    #[serde(rename = "pacing_margin_ms", serialize_with = "millis")]
    pub pacing_margin: Duration,
    /// When the vendor reports its remaining burst at or below this, the
    /// whole quota is slowed until its window can refill.
    pub vendor_burst_floor: Option<u64>,
    pub http: HttpLimits,
    /// The delta endpoint; `None` in a rate-limit-only policy (the user's
    /// seven keys), which validates but cannot be synced.
    pub delta: Option<Delta>,
    pub streams: Vec<StreamSpec>,
    /// An extra gate per study on top of the vendor quota.
    pub study_limit: Option<Rate>,
    /// A fixed-window quota the vendor counts beside the bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_quota: Option<WindowQuota>,
    /// Query parameters whose values identify a subject: masked in logs
    /// and audit lines.
    pub masked_query_params: Vec<String>,
    /// The retention the vendor's landed pages must have (S3 Object Lock);
    /// `None`: no retention asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_lock: Option<ObjectLock>,
    /// A server `Date` this far from the local clock is warned about (log
    /// and metric): a pacer on a drifting clock trips the remote limit.
    #[serde(rename = "clock_skew_warn_s", serialize_with = "secs")]
    pub clock_skew_warn: Duration,
    /// A server `Date` further than this from the local clock is not
    /// evidence: the stream stops (75) before a window end or cursor is
    /// derived from it.
    #[serde(rename = "clock_skew_max_s", serialize_with = "secs")]
    pub clock_skew_max: Duration,
    /// The zone the server's clock shows (`server_timezone`; REDCap's):
    /// every time it states is a wall-clock time there.
    pub server_timezone: Option<crate::zone::Zone>,
}

impl Policy {
    pub fn stream(&self, name: &str) -> Option<&StreamSpec> {
        self.streams.iter().find(|s| s.name == name)
    }
}

/// Every vendor policy of one file, in file order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub vendors: Vec<Policy>,
}

impl Config {
    pub fn vendor(&self, name: &str) -> Option<&Policy> {
        self.vendors.iter().find(|p| p.vendor == name)
    }

    pub fn vendor_names(&self) -> Vec<&str> {
        self.vendors.iter().map(|p| p.vendor.as_str()).collect()
    }
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_refuses_zero_nan_and_infinite() {
        assert!(Rate::new(0.0, 1).is_none());
        assert!(Rate::new(-1.0, 1).is_none());
        assert!(Rate::new(f64::NAN, 1).is_none());
        assert!(Rate::new(f64::INFINITY, 1).is_none());
        assert!(Rate::new(1.0, 0).is_none());
        assert_eq!(Rate::new(4.0, 2).unwrap().interval(), Duration::from_millis(250));
    }

    #[test]
    fn env_var_names_are_checked_and_values_never_leak() {
        assert!(EnvVarName::parse("VAULT_API_TOKEN").is_ok());
        assert!(EnvVarName::parse("1BAD").is_err());
        assert!(EnvVarName::parse("has space").is_err());
        let name = EnvVarName::parse("EDC_SYNC_TEST_SURELY_UNSET_VAR").unwrap();
        let err = name.read("veeva_vault.token_env").unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable EDC_SYNC_TEST_SURELY_UNSET_VAR (named by veeva_vault.token_env) is not set"
        );
    }
}
