//! OQ scenario for state kept in PostgreSQL (OQ-033): two hosts take turns
//! on a stream through one database, the trail exported from it verifies
//! as a file, the database refuses to let a run rewrite evidence, and a
//! cursor changed outside edc-sync stops the next run.

use super::context::{code, output, text, Ctx, Roots, OQ_PASSWORD, OQ_STUDY};
use super::scenario::{scenario, Scenario};
use edc_testkit::postgres_server::PrivatePostgres;

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![scenario!(
        "OQ-033",
        "Two hosts take turns on a stream through a PostgreSQL state; its exported trail verifies; evidence cannot be rewritten",
        ["URS-034"],
        false,
        oq_033
    )]
}

async fn oq_033(ctx: &mut Ctx) -> anyhow::Result<()> {
    let pg = PrivatePostgres::start().map_err(|e| {
        anyhow::anyhow!("{e}; OQ-033 needs PostgreSQL 15 installed (initdb, pg_ctl, psql), as validation/OQ.md's prerequisites say")
    })?;
    let exe = ctx.exe.clone();
    let migrated = output({
        let mut cmd = std::process::Command::new(&exe);
        cmd.args([
            "state",
            "migrate",
            "--state",
            &pg.owner_url(),
            "--grant-to",
            "edc_run",
        ]);
        cmd
    })
    .await?;
    // Each version applied, by its number, and the last line (the
    // version the database is at): the whole output outgrows a check's
    // value.
    let said = text(&migrated);
    let applied: Vec<&str> = said
        .lines()
        .filter_map(|l| l.strip_prefix("applied schema version ")?.split(':').next())
        .collect();
    let at = said.lines().last().unwrap_or_default();
    ctx.check(
        "edc-sync state migrate --grant-to edc_run, as the schema's owner",
        "exit 0, schema version 6",
        format!("applied versions {}; {at}", applied.join(", ")),
        code(&migrated) == 0 && said.contains("schema version 6 (current)"),
    );
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(100, &[], None).await?;
    let state = pg.run_url();
    let trail = std::path::Path::new("audit.jsonl");
    let landing = ctx.dir.join("landing");
    let roots = Roots {
        out: &landing,
        state: std::path::Path::new(&state),
        audit_log: trail,
    };
    for (host, extra) in [("host-a", &["--max-pages", "2"][..]), ("host-b", &[][..])] {
        let dir = ctx.dir.join(host);
        std::fs::create_dir_all(&dir)?;
        let mut cmd = ctx.command_over("sync", &config, &sim, "oq_vault", OQ_PASSWORD, extra, roots);
        cmd.current_dir(&dir);
        let out = output(cmd).await?;
        ctx.check_eq(&format!("exit code of the sync on {host}"), 0, code(&out));
    }
    let rows = pg
        .psql("edc", "SELECT line FROM edc_sync_audit_line ORDER BY n")
        .map_err(anyhow::Error::msg)?;
    let lines: Vec<serde_json::Value> = rows.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    let commits: Vec<&serde_json::Value> = lines.iter().filter(|l| l["event"] == "page_committed").collect();
    let runs: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["event"] == "stream_lock_taken")
        .collect();
    let handed_over = commits.windows(2).find(|w| w[0]["run_id"] != w[1]["run_id"]);
    ctx.check(
        "host-b's first page starts where host-a's last committed page ended",
        "cursor_before of host-b's first commit = cursor_after of host-a's last",
        handed_over.map_or("no hand-over".into(), |w| {
            format!("{} / {}", w[1]["cursor_before"], w[0]["cursor_after"])
        }),
        handed_over.is_some_and(|w| w[1]["cursor_before"] == w[0]["cursor_after"]),
    );
    ctx.check(
        "each run took the stream's lock with a higher fence",
        "fences 1, 2",
        runs.iter()
            .map(|r| r["fence"].to_string())
            .collect::<Vec<_>>()
            .join(", "),
        runs.iter().map(|r| r["fence"].as_i64()).collect::<Vec<_>>() == [Some(1), Some(2)],
    );
    let manifest = pg
        .psql("edc", "SELECT line FROM edc_sync_manifest ORDER BY n")
        .map_err(anyhow::Error::msg)?;
    let stream = landing.join(format!("oq_vault/-/{OQ_STUDY}/-/default"));
    let ids = crate::landed::listed_json_record_ids(&stream, &manifest)?;
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    ctx.check(
        "records the database's manifest lists, read with psql and an independent reader",
        "100, each once",
        format!("{} records, {} distinct", ids.len(), distinct.len()),
        ids.len() == 100 && distinct.len() == 100,
    );
    let exported = ctx.dir.join("audit-exported.jsonl");
    let export = output({
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["audit", "export", "--state", &state, "--to"])
            .arg(&exported);
        cmd
    })
    .await?;
    ctx.check_eq("exit code of audit export", 0, code(&export));
    ctx.attach(&exported);
    let file = edc_core::no_follow::read_string(&exported).unwrap_or_default();
    ctx.check(
        "the exported file holds the database's lines, byte for byte",
        format!("{} lines equal to the rows", lines.len()),
        format!("{} lines", file.lines().count()),
        file.lines().eq(rows.lines()),
    );
    let verified = output({
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["audit", "verify"]).arg(&exported);
        cmd
    })
    .await?;
    ctx.check(
        "edc-sync audit verify of the exported file",
        "exit 0, intact",
        text(&verified),
        code(&verified) == 0,
    );
    let reconciled = output({
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("verify").arg("--out").arg(&landing);
        cmd.args(["--state", &state, "--audit-log", "audit.jsonl"]);
        cmd
    })
    .await?;
    ctx.check(
        "edc-sync verify against the database",
        "exit 0, no discrepancy",
        text(&reconciled),
        code(&reconciled) == 0 && text(&reconciled).contains("no discrepancy"),
    );
    let rewrite = pg.psql_as("edc_run", "edc", "DELETE FROM edc_sync_audit_line");
    ctx.check(
        "the run role deletes from the trail",
        "refused: permission denied",
        refused_text(&rewrite),
        rewrite.as_ref().is_err_and(|e| e.contains("permission denied")),
    );
    let relist = pg.psql_as(
        "edc_run",
        "edc",
        "INSERT INTO edc_sync_manifest SELECT stream, n + 1000, line, page_key || '&again=1', sha256, trail, audit_n \
         FROM edc_sync_manifest WHERE n = 1",
    );
    ctx.check(
        "the run role lists a landed page again under another page key, by INSERT",
        "refused: permission denied (a manifest row comes only with its page_committed line)",
        refused_text(&relist),
        relist.as_ref().is_err_and(|e| e.contains("permission denied")),
    );
    let owner = pg.psql("edc", "UPDATE edc_sync_audit_line SET line = line");
    ctx.check(
        "the schema's owner updates the trail",
        "refused: append-only",
        refused_text(&owner),
        owner.as_ref().is_err_and(|e| e.contains("append-only")),
    );
    let moved = "UPDATE edc_sync_cursor SET state = jsonb_set(state::jsonb, '{window_start}', '\"1999-01-01T00:00:00Z\"')::text;";
    let run_role = pg.psql_as("edc_run", "edc", moved);
    ctx.check(
        "the run role moves the cursor row without a page_committed line",
        "refused: the row moves only with its page_committed line",
        refused_text(&run_role),
        run_role
            .as_ref()
            .is_err_and(|e| e.contains("moves only with its page_committed line")),
    );
    // The shadow move: a temporary trail of the session's own, searched
    // before the schema, naming the moved cursor as its commit.
    let shadow = format!(
        "BEGIN; CREATE TEMP TABLE edc_sync_audit_line (trail text, n bigint, byte_offset bigint, line text, \
         sha256 text, event text, stream text); INSERT INTO edc_sync_audit_line SELECT trail, audit_n, 0, \
         json_build_object('cursor_state', jsonb_set(state::jsonb - 'receipt', '{{window_start}}', \
         '\"1999-01-01T00:00:00Z\"'))::text, '', 'page_committed', stream FROM edc_sync_cursor; {moved} COMMIT;"
    );
    let no_temp = pg.psql_as("edc_run", "edc", &shadow);
    ctx.check(
        "the run role shadows the trail with a temporary table to move the cursor row",
        "refused: permission denied to create temporary tables",
        refused_text(&no_temp),
        no_temp.as_ref().is_err_and(|e| e.contains("permission denied")),
    );
    pg.psql("edc", "GRANT TEMPORARY ON DATABASE edc TO edc_run")
        .map_err(anyhow::Error::msg)?;
    let shadowed = pg.psql_as("edc_run", "edc", &shadow);
    pg.psql("edc", "REVOKE TEMPORARY ON DATABASE edc FROM edc_run")
        .map_err(anyhow::Error::msg)?;
    ctx.check(
        "the same, with TEMP granted back to the run role by hand",
        "refused by the cursor trigger: the row moves only with its page_committed line",
        refused_text(&shadowed),
        shadowed
            .as_ref()
            .is_err_and(|e| e.contains("moves only with its page_committed line")),
    );
    // The schema's owner, who can turn the triggers off: the start-up
    // proof is what is left.
    pg.psql(
        "edc",
        &format!("BEGIN; SET LOCAL session_replication_role = replica; {moved} COMMIT;"),
    )
    .map_err(anyhow::Error::msg)?;
    let mut cmd = ctx.command_over("sync", &config, &sim, "oq_vault", OQ_PASSWORD, &[], roots);
    cmd.current_dir(ctx.dir.join("host-a"));
    let refused = output(cmd).await?;
    let report = ctx.dir.join("sync-after-the-cursor-row-was-changed.txt");
    edc_core::no_follow::write(&report, text(&refused))?;
    ctx.attach(&report);
    let said = text(&refused);
    let error = said
        .lines()
        .find(|l| l.contains("error:"))
        .unwrap_or("no error line");
    ctx.check(
        "a sync after the cursor row was changed outside edc-sync (its whole output is an artifact)",
        "exit 65 naming the edc_sync_cursor row",
        format!("exit {}: {error}", code(&refused)),
        code(&refused) == 65 && error.contains("edc_sync_cursor row"),
    );
    Ok(())
}

/// What a statement the OQ expects PostgreSQL to refuse did, in words.
fn refused_text(result: &Result<String, String>) -> String {
    match result {
        Ok(out) => format!("succeeded: {}", out.trim()),
        // psql's own words, without the statement it echoes before them.
        Err(e) => {
            let said = e.find("ERROR:").map_or(e.as_str(), |at| &e[at..]);
            format!("refused: {}", said.trim())
        }
    }
}
