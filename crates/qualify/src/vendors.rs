//! OQ scenarios for speaking to the real vendors (OQ-019..OQ-023): HTTP
//! Basic for Rave, the Vault session and its renewal, vendor errors in
//! response bodies, and Retry-After against the server's clock.
//!
//! Each runs the installed executable against the simulator's rave or
//! vault profile, which imitate the vendors' documents (see
//! `crates/sim/src/profile.rs` for the source of each behaviour).

use std::process::Output;

use serde_json::Value;

use super::context::{Ctx, OQ_PASSWORD};
use super::scenario::{
    cursor, cursor_digest, events, first_str, landed_and_distinct, scenario, stream_dir, Scenario,
};
use edc_sim::{LogEntry, Profile, Simulator};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-019",
            "HTTP Basic authentication reads a Rave-profile server; a wrong password exits 77 naming the variables",
            ["URS-020", "URS-019"],
            false,
            oq_019
        ),
        scenario!(
            "OQ-020",
            "A Vault session is obtained by login, renewed once per expiry, and a second refusal exits 77",
            ["URS-021", "URS-001"],
            false,
            oq_020
        ),
        scenario!(
            "OQ-021",
            "A Vault 200 FAILURE is never committed and never ends a window; API_LIMIT_EXCEEDED waits and retries",
            ["URS-022", "URS-009"],
            false,
            oq_021
        ),
        scenario!(
            "OQ-022",
            "Rave error documents at HTTP 200 and 4xx are errors naming the reason code, never pages",
            ["URS-023", "URS-010"],
            false,
            oq_022
        ),
        scenario!(
            "OQ-023",
            "A server clock 300 s ahead or behind does not change the wait of a Retry-After date",
            ["URS-024", "URS-005"],
            false,
            oq_023
        ),
    ]
}

/// Runs `vendor` as a separate process of the installed executable.
async fn run(
    ctx: &Ctx,
    config: &std::path::Path,
    sim: &Simulator,
    vendor: &str,
    password: &str,
) -> anyhow::Result<Output> {
    let mut cmd = ctx.vendor_command(config, sim, vendor, password, &[]);
    Ok(tokio::task::spawn_blocking(move || cmd.output()).await??)
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The distinct `METHOD path` pairs the simulator received.
fn methods(requests: &[LogEntry]) -> String {
    let mut seen: Vec<String> = requests
        .iter()
        .map(|r| format!("{} {}", r.method, r.path.split('?').next().unwrap_or("")))
        .collect();
    seen.sort();
    seen.dedup();
    seen.join(", ")
}

async fn oq_019(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim_with(60, &[], |c| c.profile = Profile::Rave).await?;
    let wrong = run(ctx, &config, &sim, "oq_rave_basic", "not-the-oq-password").await?;
    ctx.check_eq("exit code with a wrong password", 77, code(&wrong));
    let err = stderr(&wrong);
    ctx.check(
        "the message names the scheme's variables and Rave's reason code",
        "EDC_SYNC_OQ_USERNAME / EDC_SYNC_OQ_PASSWORD and RWS00008",
        err.trim(),
        err.contains("EDC_SYNC_OQ_USERNAME / EDC_SYNC_OQ_PASSWORD") && err.contains("RWS00008"),
    );
    ctx.check_eq(
        "cursor after the refusal",
        Value::Null,
        cursor(ctx, "oq_rave_basic", "default"),
    );
    let ok = run(ctx, &config, &sim, "oq_rave_basic", OQ_PASSWORD).await?;
    ctx.check_eq("exit code with the right password", 0, code(&ok));
    let ids = crate::landed::landed_odm_source_ids(&stream_dir(ctx, "oq_rave_basic", "default"))?;
    ctx.check_eq(
        "audit records landed / distinct",
        "60 / 60".to_string(),
        landed_and_distinct(&ids),
    );
    let requests = sim.requests();
    let accepted = requests.iter().filter(|r| r.auth == "ok").count();
    ctx.check(
        "requests the server accepted (HTTP Basic), of all",
        "all but the refused first one",
        format!("{accepted} of {}", requests.len()),
        accepted + 1 == requests.len(),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_020(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // 100 records in pages of 5: 20 pages; a session serves 6 requests.
    let sim = ctx
        .sim_with(100, &[], |c| {
            c.profile = Profile::Vault;
            c.session_ttl_requests = Some(6);
        })
        .await?;
    let out = run(ctx, &config, &sim, "oq_vault_session", OQ_PASSWORD).await?;
    ctx.check_eq("exit code", 0, code(&out));
    let ids = crate::landed::landed_json_record_ids(&stream_dir(ctx, "oq_vault_session", "default"))?;
    ctx.check_eq(
        "records landed / distinct",
        "100 / 100".to_string(),
        landed_and_distinct(&ids),
    );
    ctx.check_eq("session_started lines", 1, events(ctx, "session_started").len());
    // 20 pages at 6 per session: sessions serve pages 1-6, 7-12, 13-18, 19-20.
    ctx.check_eq(
        "session_renewed lines (one per expiry)",
        3,
        events(ctx, "session_renewed").len(),
    );
    let requests = sim.requests();
    ctx.check(
        "methods and paths the EDC received",
        "GET of the delta and POST of the login form only",
        methods(&requests),
        requests
            .iter()
            .all(|r| r.method == "GET" || (r.method == "POST" && r.path == "/api/v24.1/auth")),
    );

    // A session refused again right after its renewal: exit 77, cursor kept.
    let before = cursor_digest(ctx, "oq_vault_session", "default");
    let refusing = ctx
        .sim_with(
            100,
            &[
                "2=vault-failure:INVALID_SESSION_ID",
                "4=vault-failure:INVALID_SESSION_ID",
            ],
            |c| c.profile = Profile::Vault,
        )
        .await?;
    let out = run(ctx, &config, &refusing, "oq_vault_session", OQ_PASSWORD).await?;
    ctx.check_eq(
        "exit code when the renewed session is refused too",
        77,
        code(&out),
    );
    ctx.check_eq(
        "cursor file unchanged by the refused run",
        before,
        cursor_digest(ctx, "oq_vault_session", "default"),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_021(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // 1 = login, 2-3 = pages 1-2, 4 = 200 FAILURE INVALID_DATA with no data.
    let sim = ctx
        .sim_with(40, &["4=vault-failure:INVALID_DATA"], |c| {
            c.profile = Profile::Vault
        })
        .await?;
    let out = run(ctx, &config, &sim, "oq_vault_session", OQ_PASSWORD).await?;
    ctx.check_eq("exit code of a 200 FAILURE mid-window", 65, code(&out));
    let err = stderr(&out);
    ctx.check(
        "the message names the Vault error type",
        "INVALID_DATA",
        err.trim(),
        err.contains("INVALID_DATA"),
    );
    let failed = events(ctx, "request_failed");
    ctx.check_eq(
        "X-VaultAPI-ExecutionId in the audit line",
        "sim-exec-00000004".to_string(),
        first_str(&failed, "vendor_execution_id"),
    );
    let finished = events(ctx, "stream_finished");
    ctx.check_eq(
        "window_complete of the stream",
        Value::Bool(false),
        finished
            .first()
            .map_or(Value::Null, |l| l["window_complete"].clone()),
    );
    ctx.check_eq(
        "cursor high-water mark: the last good page (record 10)",
        Value::String("2026-01-01T00:00:10Z".into()),
        cursor(ctx, "oq_vault_session", "default")["high_water"].clone(),
    );

    // API_LIMIT_EXCEEDED in a body: audited, waited like a 429, retried.
    let limited = ctx
        .sim_with(40, &["3=vault-failure:API_LIMIT_EXCEEDED"], |c| {
            c.profile = Profile::Vault
        })
        .await?;
    let out = run(ctx, &config, &limited, "oq_vault_session", OQ_PASSWORD).await?;
    ctx.check_eq("exit code after API_LIMIT_EXCEEDED", 0, code(&out));
    let lines = events(ctx, "rate_limited");
    ctx.check_eq(
        "source of the wait",
        "vendor_body".to_string(),
        first_str(&lines, "retry_after_source"),
    );
    let requests = limited.requests();
    let gap = requests
        .get(3)
        .zip(requests.get(2))
        .map_or(0, |(b, a)| b.t_us - a.t_us);
    ctx.check(
        "the same page again, not before default_retry_after_s (1 s)",
        ">= 1.000 s, same path",
        format!("{:.3} s", gap as f64 / 1e6),
        gap >= 1_000_000 && requests.get(3).map(|r| &r.path) == requests.get(2).map(|r| &r.path),
    );
    let ids = crate::landed::landed_json_record_ids(&stream_dir(ctx, "oq_vault_session", "default"))?;
    ctx.check_eq("records landed over both runs", 40, ids.len());
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_022(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let position = |c: &Value| format!("high_water {} next_page {}", c["high_water"], c["next_page"]);
    for (fault, what) in [
        (
            "2=rave-odm-error:200:RWS00092",
            "an ODM with mdsol:ErrorDescription at HTTP 200",
        ),
        ("3=rave-error:200:RWS00092", "a <Response ReasonCode> at HTTP 200"),
        ("4=rave-error:404:RWS00092", "a <Response ReasonCode> at HTTP 404"),
    ] {
        let sim = ctx.sim_with(200, &[fault], |c| c.profile = Profile::Rave).await?;
        let out = run(ctx, &config, &sim, "oq_rave_basic", OQ_PASSWORD).await?;
        ctx.check_eq(&format!("exit code for {what}"), 65, code(&out));
        let err = stderr(&out);
        ctx.check(
            &format!("the message for {what} names the reason code"),
            "RWS00092",
            err.trim(),
            err.contains("RWS00092"),
        );
        let committed = events(ctx, "page_committed");
        let last = committed
            .last()
            .map_or(Value::Null, |l| l["cursor_after"].clone());
        ctx.check_eq(
            &format!("cursor after {what}: that of the last committed page, not past the error"),
            position(&last),
            position(&cursor(ctx, "oq_rave_basic", "default")),
        );
    }
    let failed = events(ctx, "request_failed");
    let codes: Vec<&str> = failed
        .iter()
        .map(|l| l["vendor_error"]["code"].as_str().unwrap_or("none"))
        .collect();
    ctx.check_eq(
        "reason codes in the audit trail",
        "RWS00092, RWS00092, RWS00092".to_string(),
        codes.join(", "),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_023(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    for skew in [300i64, -300] {
        let sim = ctx
            .sim_with(30, &["2=429:date:2"], |c| {
                c.profile = Profile::Rave;
                c.clock_skew_s = skew;
            })
            .await?;
        let out = run(ctx, &config, &sim, "oq_rave_basic", OQ_PASSWORD).await?;
        ctx.check_eq(&format!("exit code, server clock {skew:+} s"), 0, code(&out));
        let lines = events(ctx, "rate_limited");
        let line = lines.last().cloned().unwrap_or(Value::Null);
        let wait = line["retry_after_s"].as_f64().unwrap_or(-1.0);
        ctx.check(
            &format!("wait for Retry-After = server time + 2 s, server clock {skew:+} s"),
            "2 s (HTTP dates have whole seconds: 1 to 3 s)",
            format!("{wait} s"),
            (1.0..=3.0).contains(&wait),
        );
        let measured = line["clock_skew_s"].as_f64().unwrap_or(f64::NAN);
        ctx.check(
            &format!("clock skew recorded in the audit line, server clock {skew:+} s"),
            format!("{skew} s (+-2)"),
            format!("{measured} s"),
            (measured - skew as f64).abs() <= 2.0,
        );
        let requests = sim.requests();
        let gap = requests
            .get(2)
            .zip(requests.get(1))
            .map_or(0, |(b, a)| b.t_us - a.t_us);
        ctx.check(
            &format!("time until the retry was sent, server clock {skew:+} s"),
            "1 s to 4 s (never the 300 s skew)",
            format!("{:.3} s", gap as f64 / 1e6),
            (1_000_000..=4_000_000).contains(&gap),
        );
        // The next clock starts from an empty state: kept aside, not lost.
        // The trail goes on, and so does its anchor.
        for dir in ["state", "landing"] {
            let from = ctx.dir.join(dir);
            if from.exists() {
                let aside = ctx.dir.join(format!("{dir}-server-clock{skew:+}s"));
                std::fs::rename(&from, &aside)?;
                let anchors = aside.join(edc_core::audit::ANCHOR_DIR);
                if anchors.is_dir() {
                    let keep = from.join(edc_core::audit::ANCHOR_DIR);
                    std::fs::create_dir_all(&keep)?;
                    for entry in edc_core::no_follow::read_dir(&anchors)? {
                        let entry = entry?;
                        std::fs::copy(entry.path(), keep.join(entry.file_name()))?;
                    }
                }
            }
        }
    }
    ctx.attach_run_outputs();
    Ok(())
}
