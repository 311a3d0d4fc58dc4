//! Flags of `edc-sync simulate`, with the fault and profile reference that
//! `--help` prints.

use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::Args;

/// Flags of `edc-sync simulate`.
#[derive(Debug, Args)]
#[command(after_long_help = SIMULATE_HELP)]
pub struct SimulateArgs {
    /// Port on 127.0.0.1 (0 picks a free one; the URL is printed on stdout).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Number of subjects in the dataset.
    #[arg(long, default_value_t = 20)]
    pub subjects: u32,
    /// Number of audit records in the dataset.
    #[arg(long, default_value_t = 300)]
    pub records: u32,
    /// Seed of the dataset's values (same seed, same bytes).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Filler bytes per record, to make large pages.
    #[arg(long, default_value_t = 0)]
    pub padding: usize,
    /// Bearer token requests must carry.
    #[arg(
        long,
        env = "EDC_SYNC_SIM_TOKEN",
        default_value = "sim-token",
        hide_env_values = true
    )]
    pub token: String,
    /// Which vendor to imitate: how requests authenticate and how errors look.
    #[arg(
        long,
        default_value = "generic",
        value_parser = clap::builder::PossibleValuesParser::new(edc_sim::Profile::NAMES)
            .try_map(|name| name.parse::<edc_sim::Profile>())
    )]
    pub profile: edc_sim::Profile,
    /// The user the rave (HTTP Basic) and vault (login form) profiles accept.
    #[arg(long, default_value = "sim-user")]
    pub username: String,
    /// That user's password.
    #[arg(
        long,
        env = "EDC_SYNC_SIM_PASSWORD",
        default_value = "sim-password",
        hide_env_values = true
    )]
    pub password: String,
    /// Vault profile: the path that accepts the login form.
    #[arg(long, default_value = "/api/v24.1/auth")]
    pub login_path: String,
    /// Vault profile: each session serves N data requests, then answers
    /// 200 FAILURE INVALID_SESSION_ID.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub session_ttl_requests: Option<u64>,
    /// Castor profile: an access token lasts S seconds (its expires_in);
    /// default 18000, Castor's five hours.
    #[arg(long, value_name = "S", default_value_t = 18_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub token_lifetime_s: u64,
    /// Castor profile: the last N participants are archived (their
    /// records say so; their data points stay in the study data).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub archived_records: u32,
    /// Seconds added to the simulator's clock in Date and HTTP-date
    /// Retry-After headers (a server whose clock differs from yours).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_name = "S")]
    pub clock_skew_s: i64,
    /// A fault: N=SPEC makes the Nth request fail (see below). Repeatable.
    #[arg(long = "fault", value_name = "N=SPEC", value_parser = edc_sim::FaultSchedule::parse_entry)]
    pub faults: Vec<(u64, edc_sim::Fault)>,
    /// Server-side quota: tokens per second (with --quota-burst).
    #[arg(long, requires = "quota_burst")]
    pub quota_rate: Option<f64>,
    /// Server-side quota: bucket size.
    #[arg(long, requires = "quota_rate")]
    pub quota_burst: Option<u32>,
    /// Server-side fixed window: at most N calls in each window (with
    /// --window-s), the window opening at the first request after the last
    /// one ended, as Castor counts its 600 calls per 10 minutes; past it, 429.
    #[arg(long, value_name = "N", requires = "window_s", value_parser = clap::value_parser!(u32).range(1..))]
    pub window_calls: Option<u32>,
    /// Server-side fixed window: its length in seconds.
    #[arg(long, value_name = "S", requires = "window_calls", value_parser = clap::value_parser!(u64).range(1..))]
    pub window_s: Option<u64>,
    /// Latency added to every response, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Vault burst limit per 5-minute window: pages then carry
    /// X-VaultAPI-BurstLimit and X-VaultAPI-BurstLimitRemaining.
    #[arg(long)]
    pub vault_burst: Option<u64>,
    /// Vault daily limit (API v20.3 and earlier): pages then carry
    /// X-VaultAPI-DailyLimit and X-VaultAPI-DailyLimitRemaining, and after N
    /// pages every request gets 200 FAILURE API_LIMIT_EXCEEDED.
    #[arg(long, value_name = "N")]
    pub vault_daily: Option<u64>,
    /// Append every request (arrival time, method, path, status) as JSON Lines.
    #[arg(long)]
    pub request_log: Option<PathBuf>,
}

const SIMULATE_HELP: &str = "\
Profiles (--profile):
  generic   Authorization: Bearer --token; a bad token gets a bare 401.
  rave      Authorization: Basic (--username, --password), as Rave Web Services
            expects; a bad one gets 401 with an ODM whose mdsol:ErrorDescription
            ends [RWS00008].
  vault     POST --login-path with the form fields username and password answers
            {\"responseStatus\":\"SUCCESS\",\"sessionId\":...} (or 200 FAILURE
            USERNAME_OR_PASSWORD_INCORRECT); data requests send Authorization:
            <sessionId> or Bearer <sessionId>; an unknown or used-up session
            (--session-ttl-requests) gets 200 FAILURE INVALID_SESSION_ID; every
            response carries X-VaultAPI-ExecutionId.
  castor    POST /oauth/token with the form fields grant_type=client_credentials,
            client_id (--username) and client_secret (--password) answers
            {\"access_token\":...,\"token_type\":\"Bearer\",\"expires_in\":S} (or 401
            invalid_client); data requests send Authorization: Bearer <token>; a
            token older than --token-lifetime-s or unknown gets 401 with Castor's
            error body {\"type\",\"title\",\"status\",\"detail\"}.
  redcap    every request is POST /api/ with form fields, the token (--token) the
            field token; a bad one gets 403 {\"error\":\"You do not have
            permissions to use the API\"}. content=version answers 14.0.1;
            content=log the dataset's changes (stamped 250 ms apart, ending three
            minutes before the simulator started) as Export Logging: a JSON array,
            newest first, timestamps YYYY-MM-DD HH:MM in America/Chicago, between
            beginTime and endTime (inclusive) of the logtype asked; every export
            it answers is logged too (logtype export). content=record exports
            the same changes as records (format=json, type=flat): a baseline row
            and a repeating visit row per change, by dateRangeBegin/dateRangeEnd
            (YYYY-MM-DD HH:MM:SS), records[N] and fields[N].
  Every response carries Date from the simulator's clock (--clock-skew-s).

Endpoints:
  GET /api/v24.1/query/audit_trail?modified_since=T&limit=L&offset=O   Vault-style JSON;
      next page in responseDetails.next_page and in a Link header
  GET /api/v24.1/audittrail/TYPE?start_date=T&end_date=T&limit=L   (vault profile) Vault's
      audit trail as the shipped veeva_vault vendor reads it: the dataset's records
      stamped 250 ms apart, ending three minutes before the simulator started
  POST /api/v24.1/query with q=VQL   (vault profile) a VQL query; next pages at
      /api/v24.1/query/ID
  GET /RaveWebServices/datasets/ClinicalAuditRecords.odm?studyoid=S&startid=N&per_page=M
      Rave-style ODM 1.3 audit records; next page in a Link header
  POST /api/ with content=version|log|record   (redcap profile) REDCap's one endpoint
  POST is accepted only at --login-path and the VQL query path (vault profile),
  at /oauth/token (castor profile) and at /api/ (redcap profile, POST only);
  other methods get 405.

Faults (--fault N=SPEC, N = the Nth request received, from 1):
  429:seconds:S | 429:date:S | 429:absent | 429:raw:TEXT     throttled, Retry-After in that form
  503:seconds:S | 503:date:S | 503:absent | 503:raw:TEXT
  429:bad-date:TEXT   throttled without Retry-After, Date: TEXT verbatim
  500 | 502 | 504 | 401 | 403 | 404                          that status
  truncate            full Content-Length, half the body, connection closed
  oversize:BYTES      a 200 body of BYTES bytes
  latency:MS          the page, MS milliseconds late
  garbage             a 200 body that is not valid JSON / ODM
  gzip                the page, labelled Content-Encoding: gzip (never asked for)
  cross-origin-next:URL   the page, its next link pointing at URL
  redirect:URL        302 to URL
  redirect-307:URL    307 to URL (a POST is re-sent with its body)
  vault-failure:TYPE  200 {\"responseStatus\":\"FAILURE\",\"errors\":[{\"type\":TYPE,...}]}
                      (e.g. API_LIMIT_EXCEEDED, INSUFFICIENT_ACCESS, INVALID_DATA)
  rave-error:STATUS:CODE       STATUS with <Response ReasonCode=CODE ...> (e.g. 404:RWS00092)
  rave-odm-error:STATUS:CODE   STATUS with an ODM whose mdsol:ErrorDescription ends [CODE]
  castor-error:STATUS:DETAIL   STATUS with Castor's error body {\"type\",\"title\",\"status\",\"detail\":DETAIL}
                      (e.g. castor-error:404:There are no data points.)
  redcap-error:STATUS:TEXT     STATUS with REDCap's {\"error\":TEXT}, or TEXT as a line of text when
                      it says banned (e.g. redcap-error:429:Your IP address has been banned due
                      to suspected abuse)
";
