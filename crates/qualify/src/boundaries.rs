//! Boundaries (OQ-009, OQ-016, OQ-017): read-only toward the EDC, no secret or
//! record content in any output, and one origin only.

use super::context::{Ctx, OQ_PASSWORD, OQ_TOKEN};
use super::scenario::{exit_of, json_lines, scenario, stream_dir, Scenario};
use edc_core::run::{self};
use edc_sim::Simulator;

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-009",
            "Read-only: the EDC receives only GET and HEAD",
            ["URS-001"],
            false,
            oq_009
        ),
        scenario!(
            "OQ-016",
            "The token, password, session ids and record content never appear in any output",
            ["URS-015", "URS-016"],
            false,
            oq_016
        ),
        scenario!(
            "OQ-017",
            "A next link to another origin is refused and that origin never sees the token",
            ["URS-002"],
            false,
            oq_017
        ),
    ]
}

async fn oq_009(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(60, &["3=500", "5=429:seconds:0"], None).await?;
    run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    run::execute(ctx.spec(&config, "oq_rave", &sim)).await?;
    let reqs = sim.requests();
    let methods: std::collections::BTreeSet<String> = reqs.iter().map(|r| r.method.clone()).collect();
    let methods = methods.into_iter().collect::<Vec<_>>().join(", ");
    let only_reads = reqs.iter().all(|r| r.method == "GET" || r.method == "HEAD");
    ctx.check(
        "HTTP methods the simulator received",
        "GET (or HEAD) only",
        format!("{methods} in {} requests", reqs.len()),
        only_reads && !reqs.is_empty(),
    );
    let raw = reqwest::Client::new();
    let url = format!("{}/api/v24.1/query/audit_trail", sim.base_url());
    let post = raw
        .post(&url)
        .bearer_auth(OQ_TOKEN)
        .body("{}")
        .send()
        .await?
        .status()
        .as_u16();
    ctx.check_eq(
        "a POST (sent by a plain client, as edc-sync cannot) is refused",
        405,
        post,
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_016(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(40, &["2=429:seconds:0", "3=500", "4=401"], None).await?;
    let mut outputs = Vec::new();
    for _ in 0..2 {
        let out = ctx.sync_command(&config, &sim, &["-v"]).output()?;
        outputs.push(out);
    }
    let codes: Vec<Option<i32>> = outputs.iter().map(|o| o.status.code()).collect();
    ctx.check(
        "exit codes (a 401 on request 4 ends the first run; the second completes)",
        "77, 0",
        super::context::listed(
            &codes
                .iter()
                .map(|c| edc_core::exit::status_text(*c))
                .collect::<Vec<_>>(),
        ),
        codes == [Some(77), Some(0)],
    );
    // A Vault session run whose session expires every 3 requests: the
    // password and every session id the server issued are secrets too.
    let vault = ctx
        .sim_with(40, &[], |c| {
            c.profile = edc_sim::Profile::Vault;
            c.session_ttl_requests = Some(3);
        })
        .await?;
    let out = ctx
        .vendor_command(&config, &vault, "oq_vault_session", OQ_PASSWORD, &["-v"])
        .output()?;
    ctx.check_eq(
        "exit code of the Vault session run",
        0,
        out.status.code().unwrap_or(-1),
    );
    outputs.push(out);
    let logins = vault.requests().iter().filter(|r| r.method == "POST").count();
    let issued = edc_sim::vendor::Sessions::default();
    let session_ids: Vec<String> = (0..logins)
        .map(|_| issued.issue(super::context::dataset(0).seed))
        .collect();
    ctx.check(
        "Vault sessions issued (a login and renewals)",
        "more than one",
        logins,
        logins > 1,
    );
    let console = ctx.dir.join("console.txt");
    let mut text = String::new();
    for o in &outputs {
        text.push_str(&String::from_utf8_lossy(&o.stdout));
        text.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    edc_core::no_follow::write(&console, &text)?;
    ctx.attach(&console);
    ctx.attach_run_outputs();
    let files = crate::files::under(&ctx.dir);
    let mut token_hits = Vec::new();
    let mut password_hits = Vec::new();
    let mut session_hits = Vec::new();
    let mut record_hits = Vec::new();
    for f in &files {
        if f.extension()
            .is_some_and(|e| e == "json" && f.parent().is_some_and(|p| p.ends_with("pages")))
        {
            continue; // landed pages are the data itself
        }
        let content = String::from_utf8_lossy(&edc_core::no_follow::read_bytes(f)?).into_owned();
        if content.contains(OQ_TOKEN) {
            token_hits.push(f.display().to_string());
        }
        if content.contains(OQ_PASSWORD) {
            password_hits.push(f.display().to_string());
        }
        if session_ids.iter().any(|id| content.contains(id.as_str())) {
            session_hits.push(f.display().to_string());
        }
        if content.contains("SUBJ-0") {
            record_hits.push(f.display().to_string());
        }
    }
    ctx.check(
        "files and console output holding the token",
        "none",
        format!(
            "{} files searched; hits: {}",
            files.len(),
            super::context::listed(&token_hits)
        ),
        token_hits.is_empty(),
    );
    ctx.check(
        "files and console output holding the password",
        "none",
        format!("hits: {}", super::context::listed(&password_hits)),
        password_hits.is_empty(),
    );
    ctx.check(
        "files and console output holding a Vault session id",
        "none",
        format!(
            "{} session ids searched; hits: {}",
            session_ids.len(),
            super::context::listed(&session_hits)
        ),
        session_hits.is_empty(),
    );
    ctx.check(
        "outputs holding record content (subject identifiers), landed pages aside",
        "none",
        format!("hits: {}", super::context::listed(&record_hits)),
        record_hits.is_empty(),
    );
    Ok(())
}

async fn oq_017(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let other = Simulator::start(
        edc_sim::SimConfig {
            token: OQ_TOKEN.into(),
            ..Default::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let evil = format!(
        "1=cross-origin-next:{}/api/v24.1/query/audit_trail?offset=25",
        other.base_url()
    );
    let redirect = format!("3=redirect:{}/api/v24.1/query/audit_trail", other.base_url());
    let sim = ctx.sim(60, &[&evil, &redirect], None).await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code with a cross-origin next link", 65, exit_of(&result));
    let again = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code with a cross-origin redirect", 65, exit_of(&again));
    ctx.check_eq("requests the other origin received", 0, other.requests().len());
    let manifest = json_lines(&stream_dir(ctx, "oq_vault", "default").join("manifest.jsonl"));
    let keys: Vec<String> = manifest
        .iter()
        .map(|m| m["page_key"].as_str().unwrap_or("?").to_string())
        .collect();
    ctx.check(
        "pages committed",
        "only the first page of the second run (its next link was same-origin; the page after it redirected away)",
        super::context::listed(&keys),
        keys.len() == 1 && !keys[0].contains("offset="),
    );
    ctx.attach_run_outputs();
    Ok(())
}
