//! One suite of the ledger's guarantees, run on both backends: every test
//! body here runs once with the state in a directory and once in a real
//! PostgreSQL (`--state postgres://…`), through the binary, as users run
//! it. What a run proves at start, what it refuses, and what `verify` and
//! `audit verify` report are the same guarantee on both; a guarantee
//! tested for one backend only lives elsewhere with its reason (the state
//! file's own mechanics: a torn cursor file rebuilt, a cursor file behind
//! the trail rolled forward, a torn manifest line relisted; the database's
//! own: its roles and grants, its append-only triggers, a lost connection
//! mid-transaction).

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{self, postgres, runs};

pub(crate) const RECORDS: u32 = 100;

/// `sql` run as the database's superuser with its triggers and foreign
/// keys off: what the database's owner can do.
pub(crate) fn as_owner(pg: &postgres::Postgres, sql: &str) {
    pg.psql(
        "edc",
        &format!("BEGIN; SET LOCAL session_replication_role = replica; {sql} COMMIT;"),
    )
    .unwrap();
}

/// The two backends of the ledger.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Backend {
    Files,
    Postgres,
}

/// One test's site: a policy repository, a simulator, and the state on
/// one backend.
pub(crate) struct Site {
    backend: Backend,
    pub(crate) fx: runs::Fixture,
    pub(crate) sim: edc_sim::Simulator,
    pub(crate) pg: Option<std::sync::Arc<postgres::Postgres>>,
}

impl Site {
    async fn new(backend: Backend) -> Site {
        let pg = (backend == Backend::Postgres).then(|| std::sync::Arc::new(postgres::start_migrated()));
        Site::on(pg).await
    }

    /// A site whose state is kept in `pg` (a server already migrated, its
    /// tables empty), or in a directory when `None`.
    pub(crate) async fn on(pg: Option<std::sync::Arc<postgres::Postgres>>) -> Site {
        Site {
            backend: if pg.is_some() {
                Backend::Postgres
            } else {
                Backend::Files
            },
            fx: runs::Fixture::new(),
            sim: runs::sim_with(RECORDS).await,
            pg,
        }
    }

    /// `--state`: the directory, or the database's URL for the run role.
    fn state(&self) -> String {
        match &self.pg {
            None => self.fx.path("state").display().to_string(),
            Some(pg) => pg.run_url(),
        }
    }

    fn sync_cmd(&self) -> std::process::Command {
        self.sync_cmd_into(&self.fx.trail())
    }

    /// `sync` appending to the trail `trail` (a file, or the name of the
    /// database's trail).
    fn sync_cmd_into(&self, trail: &std::path::Path) -> std::process::Command {
        let mut cmd = support::edc_sync();
        cmd.args(["sync", "--config"])
            .arg(self.fx.path("policies.yaml"))
            .args(["--vendor", "vault_json", "--study", "S1", "--out"])
            .arg(self.fx.path("landing"))
            .args(["--state", &self.state(), "--audit-log"])
            .arg(trail)
            .args(["--pacer", "local"])
            .env("EDC_SYNC_TEST_BASE_URL", self.sim.base_url())
            .env("EDC_SYNC_TEST_TOKEN", "sim-token")
            .env_remove("EDC_SYNC_AUDIT_KEY")
            .current_dir(self.fx.path(""));
        cmd
    }

    fn sync(&self, extra: &[&str]) -> support::Outcome {
        support::run_cmd(self.sync_cmd().args(extra))
    }

    fn sync_keyed(&self) -> support::Outcome {
        self.sync_keyed_with(&[])
    }

    pub(crate) fn sync_keyed_with(&self, extra: &[&str]) -> support::Outcome {
        support::run_cmd(self.sync_cmd().env("EDC_SYNC_AUDIT_KEY", runs::KEY).args(extra))
    }

    /// `audit verify --key` of the trail (a file, or the database's).
    pub(crate) fn audit_verify_keyed(&self) -> support::Outcome {
        let mut cmd = support::edc_sync();
        cmd.args(["audit", "verify", "--key"])
            .env("EDC_SYNC_AUDIT_KEY", runs::KEY);
        match self.backend {
            Backend::Files => cmd.arg(self.fx.trail()),
            Backend::Postgres => cmd.args(["--state", &self.state(), "--trail", "audit.jsonl"]),
        };
        support::run_cmd(&mut cmd)
    }

    /// As an insider without the audit key, with the run role's own rights
    /// (the files; in the database the append function, where no audit key
    /// is required, and UPDATE on the cursor): a `page_committed` line of a run that never was, chained
    /// to the trail's last line, moving the stream 40 records on without
    /// landing them, and the cursor moved to match it (its receipt naming
    /// the forged line).
    /// Returns where the forged line is (`byte N` or `line N`).
    pub(crate) fn append_forged_commit(&self) -> String {
        let lines = self.trail();
        let last = lines
            .iter()
            .rev()
            .find(|l| l.contains("\"event\":\"page_committed\""))
            .unwrap()
            .clone();
        let prev = edc_core::digest::sha256_hex(lines.last().unwrap().as_bytes());
        let mut value: Value = serde_json::from_str(&last).unwrap();
        let forged = last
            .replacen(&format!("\"seq\":{},", value["seq"]), "\"seq\":1,", 1)
            .replace(value["run_id"].as_str().unwrap(), "forged-run")
            .replace(value["prev_sha256"].as_str().unwrap(), &prev)
            .replace("offset=40", "offset=80")
            .replace("\"landed\":true", "\"landed\":false");
        let forged = match forged.find(",\"line_mac\":") {
            Some(at) => format!("{}}}", &forged[..at]),
            None => forged,
        };
        value = serde_json::from_str(&forged).unwrap();
        let sha = edc_core::digest::sha256_hex(forged.as_bytes());
        let was = self.cursor().unwrap();
        let mut cursor = value["cursor_state"].clone();
        for kept in ["receipt", "manifest_bytes"] {
            if !was[kept].is_null() {
                cursor[kept] = was[kept].clone();
            }
        }
        match &self.pg {
            None => {
                let offset = std::fs::metadata(self.fx.trail()).unwrap().len();
                let mut text = std::fs::read_to_string(self.fx.trail()).unwrap();
                text.push_str(&forged);
                text.push('\n');
                std::fs::write(self.fx.trail(), text).unwrap();
                cursor["receipt"]["offset"] = offset.into();
                cursor["receipt"]["sha256"] = sha.into();
                self.set_cursor(&cursor);
                format!("byte {offset}")
            }
            Some(pg) => {
                let n = lines.len() + 1;
                let sql = format!(
                    "SELECT edc_sync_append_line(trail, {n}, byte_offset + octet_length(line) + 1, '{}', '{sha}', \
                     'page_committed', (SELECT stream FROM edc_sync_cursor), NULL) \
                     FROM edc_sync_audit_line WHERE n = {}; \
                     UPDATE edc_sync_cursor SET state = '{}', audit_n = {n};",
                    forged.replace('\'', "''"),
                    n - 1,
                    serde_json::to_string(&cursor).unwrap().replace('\'', "''"),
                );
                pg.psql_as("edc_run", "edc", &sql).unwrap();
                format!("line {n}")
            }
        }
    }

    /// The trail's lines replaced by `lines`, as its owner could (the
    /// file; in the database, the rows rewritten with the triggers off,
    /// each row's byte offset left as the row had it; the rows are taken
    /// from a copy made the first time, so a removed line can be put back).
    fn replace_trail(&self, lines: &[String]) {
        match &self.pg {
            None => std::fs::write(self.fx.trail(), lines.join("\n") + "\n").unwrap(),
            Some(pg) => {
                let mut sql = String::from(
                    "CREATE TABLE IF NOT EXISTS kept AS SELECT * FROM edc_sync_audit_line; \
                     DELETE FROM edc_sync_audit_line;",
                );
                for (i, line) in lines.iter().enumerate() {
                    let sha = edc_core::digest::sha256_hex(line.as_bytes());
                    sql.push_str(&format!(
                        " INSERT INTO edc_sync_audit_line (trail, n, byte_offset, line, sha256, event, stream) \
                         SELECT trail, {}, byte_offset, line, sha256, event, stream FROM kept WHERE sha256 = '{sha}';",
                        i + 1
                    ));
                }
                as_owner(pg, &sql);
            }
        }
    }

    /// `edc-sync verify` of the landing against the state and trail.
    pub(crate) fn verify(&self) -> support::Outcome {
        support::run_cmd(
            support::edc_sync()
                .args(["verify", "--out"])
                .arg(self.fx.path("landing"))
                .args(["--state", &self.state(), "--audit-log"])
                .arg(self.fx.trail()),
        )
    }

    /// `edc-sync audit verify` of the trail (a file, or the database's).
    fn audit_verify(&self) -> support::Outcome {
        let mut cmd = support::edc_sync();
        cmd.args(["audit", "verify"]);
        match self.backend {
            Backend::Files => cmd.arg(self.fx.trail()),
            Backend::Postgres => cmd.args(["--state", &self.state(), "--trail", "audit.jsonl"]),
        };
        support::run_cmd(&mut cmd)
    }

    fn stream_dir(&self) -> PathBuf {
        self.fx.path("landing/vault_json/-/S1/-/default")
    }

    /// The cursor file, or the row's key: where messages name the cursor.
    fn cursor_place(&self) -> String {
        match self.backend {
            Backend::Files => self
                .fx
                .path("state/vault_json/-/S1/-/default.cursor.json")
                .display()
                .to_string(),
            Backend::Postgres => "edc_sync_cursor row".into(),
        }
    }

    /// The stream's cursor as the state holds it (the file's JSON, or the
    /// row's), `None` when there is none.
    pub(crate) fn cursor(&self) -> Option<Value> {
        match &self.pg {
            None => std::fs::read(self.cursor_place())
                .ok()
                .map(|b| serde_json::from_slice(&b).unwrap()),
            Some(pg) => {
                let text = pg.psql("edc", "SELECT state FROM edc_sync_cursor").unwrap();
                (!text.trim().is_empty()).then(|| serde_json::from_str(text.trim()).unwrap())
            }
        }
    }

    /// Writes the stream's cursor as someone with write access to the
    /// state would: the file, or the row as the database's owner can, its
    /// triggers off (the run role's own UPDATE of the row alone is refused
    /// by the database: `state_db::a_cursor_row_moves_only_with_its_page_committed_line`).
    pub(crate) fn set_cursor(&self, cursor: &Value) {
        let text = serde_json::to_string(cursor).unwrap();
        match &self.pg {
            None => std::fs::write(self.cursor_place(), text + "\n").unwrap(),
            Some(pg) => {
                let sql = format!(
                    "UPDATE edc_sync_cursor SET state = '{}';",
                    text.replace('\'', "''")
                );
                as_owner(pg, &sql);
            }
        }
    }

    /// Points the cursor's receipt (the file's `receipt`, the row's
    /// `audit_n`) away from the commit line it names, as `edit` says.
    fn edit_receipt(&self, edit: ReceiptEdit) {
        match &self.pg {
            None => {
                let mut cursor = self.cursor().unwrap();
                match edit {
                    ReceiptEdit::Drop => {
                        cursor.as_object_mut().unwrap().remove("receipt");
                    }
                    ReceiptEdit::Zero => {
                        cursor["receipt"]["offset"] = 0.into();
                        cursor["receipt"]["sha256"] = "0".repeat(64).into();
                    }
                    ReceiptEdit::PastTheEnd => cursor["receipt"]["offset"] = 1_000_000_000u64.into(),
                }
                self.set_cursor(&cursor);
            }
            // The row's line is a foreign key, and cannot be null: the
            // nearest an insider comes is a line that is not a commit.
            Some(pg) => {
                if edit != ReceiptEdit::Drop {
                    as_owner(pg, "UPDATE edc_sync_cursor SET audit_n = 1;");
                }
            }
        }
    }

    /// The state's cursor as it is, to put back with [`Site::restore_cursor`].
    fn saved_cursor(&self) -> String {
        match &self.pg {
            None => std::fs::read_to_string(self.cursor_place()).unwrap(),
            Some(pg) => pg
                .psql("edc", "SELECT audit_n FROM edc_sync_cursor")
                .unwrap()
                .trim()
                .to_string(),
        }
    }

    fn restore_cursor(&self, saved: &str, cursor: &Value) {
        match &self.pg {
            None => std::fs::write(self.cursor_place(), saved).unwrap(),
            Some(pg) => {
                self.set_cursor(cursor);
                as_owner(pg, &format!("UPDATE edc_sync_cursor SET audit_n = {saved};"));
            }
        }
    }

    fn delete_cursor(&self) {
        match &self.pg {
            None => std::fs::remove_file(self.cursor_place()).unwrap(),
            Some(pg) => {
                // The run role may not delete a cursor row: the schema's
                // owner (a DBA restoring, or recovering) does.
                pg.psql("edc", "DELETE FROM edc_sync_cursor").unwrap();
            }
        }
    }

    /// The manifest's lines (the file's, or the rows'), in order.
    pub(crate) fn manifest(&self) -> String {
        match &self.pg {
            None => std::fs::read_to_string(self.stream_dir().join("manifest.jsonl")).unwrap_or_default(),
            Some(pg) => pg
                .psql("edc", "SELECT line FROM edc_sync_manifest ORDER BY n")
                .unwrap(),
        }
    }

    /// Every record landed, as the OQ's independent reader counts them from
    /// the manifest and the landed files.
    pub(crate) fn landed_ids(&self) -> Vec<String> {
        let mut ids =
            edc_qualify::landed::listed_json_record_ids(&self.stream_dir(), &self.manifest()).unwrap();
        ids.sort();
        ids
    }

    fn assert_every_record_once(&self) {
        let ids = self.landed_ids();
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(ids.len(), unique.len(), "a record landed twice");
        assert_eq!(unique.len(), RECORDS as usize, "every record landed");
    }

    /// The trail's lines (the file's, or the rows' in order).
    pub(crate) fn trail(&self) -> Vec<String> {
        match &self.pg {
            None => std::fs::read_to_string(self.fx.trail())
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect(),
            Some(pg) => pg
                .psql("edc", "SELECT line FROM edc_sync_audit_line ORDER BY n")
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect(),
        }
    }

    fn events(&self, event: &str) -> Vec<Value> {
        self.trail()
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|l| l["event"] == event)
            .collect()
    }

    /// As an insider without the audit key: line `n` (1-based) rewritten,
    /// the whole chain recomputed after it, and the anchors forged to match
    /// (the state directory's anchor file, or `edc_sync_anchor`'s rows,
    /// with the append-only triggers turned off by the schema's owner).
    fn rewrite_and_recompute(&self, n: usize) {
        let mut lines: Vec<Value> = self
            .trail()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        lines[n - 1]["records"] = 999_999.into();
        let mut prev = "0".repeat(64);
        let mut text = Vec::new();
        for line in &mut lines {
            line["prev_sha256"] = prev.clone().into();
            let bytes = serde_json::to_string(line).unwrap();
            prev = edc_core::digest::sha256_hex(bytes.as_bytes());
            text.push(bytes);
        }
        match &self.pg {
            None => {
                let body = text.join("\n") + "\n";
                std::fs::write(self.fx.trail(), &body).unwrap();
                let anchor = std::fs::read_dir(self.fx.path("state/audit-anchors"))
                    .unwrap()
                    .next()
                    .unwrap()
                    .unwrap()
                    .path();
                let mut head: Value =
                    serde_json::from_str(&std::fs::read_to_string(&anchor).unwrap()).unwrap();
                let last = text.last().unwrap();
                head["bytes"] = body.len().into();
                head["last_line_offset"] = (body.len() - last.len() - 1).into();
                head["last_sha256"] = edc_core::digest::sha256_hex(last.as_bytes()).into();
                std::fs::write(&anchor, serde_json::to_string_pretty(&head).unwrap()).unwrap();
            }
            Some(pg) => {
                let mut sql = String::from(
                    "BEGIN; ALTER TABLE edc_sync_audit_line DISABLE TRIGGER USER; \
                     ALTER TABLE edc_sync_anchor DISABLE TRIGGER USER;",
                );
                let mut offset = 0;
                for (i, line) in text.iter().enumerate() {
                    let sha = edc_core::digest::sha256_hex(line.as_bytes());
                    sql.push_str(&format!(
                        "UPDATE edc_sync_audit_line SET line = '{}', sha256 = '{sha}', byte_offset = {offset} \
                         WHERE n = {};",
                        line.replace('\'', "''"),
                        i + 1
                    ));
                    sql.push_str(&format!(
                        "UPDATE edc_sync_anchor SET sha256 = '{sha}' WHERE n = {};",
                        i + 1
                    ));
                    offset += line.len() + 1;
                }
                sql.push_str(
                    "ALTER TABLE edc_sync_audit_line ENABLE TRIGGER USER; \
                     ALTER TABLE edc_sync_anchor ENABLE TRIGGER USER; COMMIT;",
                );
                pg.psql("edc", &sql).unwrap();
            }
        }
    }
}

/// How an insider points a cursor's receipt away from its commit line.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ReceiptEdit {
    Drop,
    Zero,
    PastTheEnd,
}

/// Runs `body` once on each backend, as a test of its own.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn files() {
                    super::$name(super::Site::new(super::Backend::Files).await).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name(super::Site::new(super::Backend::Postgres).await).await
                }
            }
        )*
    };
}

on_both_backends!(
    a_stream_resumes_where_it_stopped_and_proves_itself,
    a_cursor_moved_forward_is_refused_naming_it_and_both_values,
    a_cursor_moved_forward_without_its_receipt_is_refused_too,
    a_removed_cursor_starts_the_stream_over_and_lands_nothing_twice,
    a_missing_last_landed_page_is_refused_before_any_request,
    a_keyed_run_refuses_a_trail_recomputed_without_the_key,
    verify_names_a_landed_page_modified_after_landing,
    audit_verify_names_a_trail_line_edited_in_place,
    verify_counts_a_page_listed_twice_under_another_page_key,
    a_cursor_moved_forward_with_a_receipt_that_names_no_commit_is_refused,
    a_window_start_moved_past_the_data_is_refused,
    start_up_checks_alone_refuse_a_moved_cursor,
    a_cursor_that_no_commit_of_this_trail_proves_is_refused,
    a_keyed_run_refuses_a_forged_line_appended_to_the_trail,
    a_run_without_the_key_does_not_append_to_a_sealed_trail,
    audit_verify_names_trail_lines_removed_or_reordered_in_the_same_words,
    verify_names_trail_lines_removed_or_reordered_by_line_not_by_byte,
    verify_names_a_landing_owned_by_another_state_in_its_backends_words,
    a_keyed_run_takes_a_trail_with_no_sealed_line_only_when_told_to_adopt_it,
    a_run_without_the_key_stops_on_a_sealed_trail_whatever_its_end,
    verify_with_the_key_names_unsealed_lines_and_a_trail_never_sealed,
);

/// Two runs, the first stopped after one page: every record lands once,
/// and `verify` and `audit verify` prove the landing, the state and the
/// trail against each other.
async fn a_stream_resumes_where_it_stopped_and_proves_itself(site: Site) {
    let out = site.sync(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(site.cursor().unwrap()["next_page"].is_string(), "mid-window");
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    site.assert_every_record_once();
    let out = site.verify();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = site.audit_verify();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// Moves the cursor's next page 40 records past where the trail says the
/// stream is; with `drop_receipt`, also removes the receipt that names the
/// commit line it reflects. Returns the offsets before and after.
fn move_cursor_forward(site: &Site, drop_receipt: bool) -> (String, String) {
    let mut cursor = site.cursor().unwrap();
    let next = cursor["next_page"].as_str().unwrap().to_string();
    let (_, tail) = next.split_once("offset=").unwrap();
    let offset: u64 = tail.split('&').next().unwrap().parse().unwrap();
    let (was, now) = (format!("offset={offset}"), format!("offset={}", offset + 40));
    cursor["next_page"] = next.replace(&was, &now).into();
    site.set_cursor(&cursor);
    if drop_receipt {
        site.edit_receipt(ReceiptEdit::Drop);
    }
    (was, now)
}

/// A refusal of the moved cursor: 65, naming the cursor and both values,
/// and nothing fetched.
fn assert_moved_cursor_refused(site: &Site, out: &support::Outcome, was: &str, now: &str, requests: usize) {
    assert_eq!(out.code, 65, "{}", out.stderr);
    for needed in [site.cursor_place().as_str(), was, now, "--repair-state"] {
        assert!(
            out.stderr.contains(needed),
            "{needed:?} missing from: {}",
            out.stderr
        );
    }
    assert_eq!(site.sim.requests().len(), requests, "nothing was fetched");
    // One line naming what differs, not both cursors whole (their lookback
    // memory ran to 13 KB of one line).
    let error = out.stderr.lines().find(|l| l.contains("error:")).unwrap();
    assert!(error.contains(now), "the moved value is named: {error}");
    assert!(error.len() < 1_000, "{} characters: {error}", error.len());
}

/// The trail is the ledger: a cursor that says the stream is further than
/// the trail's last commit of it is refused (65) before any request,
/// naming the cursor and both values; `--repair-state` takes the trail's
/// (audited) and every record lands once.
async fn a_cursor_moved_forward_is_refused_naming_it_and_both_values(site: Site) {
    refused_then_repaired(site, false).await
}

/// The same with the cursor's receipt removed: what the trail says of the
/// stream decides, not whether the cursor names a line.
async fn a_cursor_moved_forward_without_its_receipt_is_refused_too(site: Site) {
    refused_then_repaired(site, true).await
}

async fn refused_then_repaired(site: Site, drop_receipt: bool) {
    let out = site.sync(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (was, now) = move_cursor_forward(&site, drop_receipt);
    let requests = site.sim.requests().len();
    let out = site.sync(&[]);
    assert_moved_cursor_refused(&site, &out, &was, &now, requests);
    // `verify` holds the cursor to the trail as a run does.
    let out = site.verify();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains(&now), "{}", out.stdout);
    let out = site.sync(&["--repair-state"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let repaired = site.events("state_repaired");
    assert_eq!(repaired.len(), 1, "audited once");
    assert!(repaired[0]["file_said"]["next_page"]
        .as_str()
        .unwrap()
        .contains(&now));
    assert!(repaired[0]["trail_says"]["next_page"]
        .as_str()
        .unwrap()
        .contains(&was));
    site.assert_every_record_once();
    let out = site.verify();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// A cursor removed while the trail holds commits of its stream is a
/// discrepancy `verify` names, and starts the stream over: every page is
/// fetched again and recognised as landed, so nothing lands twice, and the
/// landing proves itself again.
async fn a_removed_cursor_starts_the_stream_over_and_lands_nothing_twice(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let manifest = site.manifest();
    site.delete_cursor();
    // Until then `verify` names it: the trail holds commits of a stream
    // whose cursor the state no longer has.
    let out = site.verify();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&site.cursor_place()) && out.stdout.contains("missing"),
        "{}",
        out.stdout
    );
    let requests = site.sim.requests().len();
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        site.sim.requests().len() > requests,
        "the pages were fetched again"
    );
    assert_eq!(site.manifest(), manifest, "no page listed twice");
    site.assert_every_record_once();
    let out = site.verify();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// The last landed page gone: the run would continue after it as if it
/// were there. It stops (65) naming the file and the remedy, before any
/// request.
async fn a_missing_last_landed_page_is_refused_before_any_request(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let last: Value = serde_json::from_str(site.manifest().lines().last().unwrap()).unwrap();
    let page = site.stream_dir().join(last["file"].as_str().unwrap());
    std::fs::remove_file(&page).unwrap();
    let requests = site.sim.requests().len();
    let out = site.sync(&[]);
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(out.stderr.contains(&*page.to_string_lossy()), "{}", out.stderr);
    assert!(out.stderr.contains("it is missing"), "{}", out.stderr);
    assert_eq!(site.sim.requests().len(), requests, "nothing was fetched");
}

/// A run holding the audit key proves the trail's last keyed checkpoint
/// before it appends: a trail rewritten and recomputed without the key,
/// its anchors forged to match, stops the run (65) and nothing is added.
async fn a_keyed_run_refuses_a_trail_recomputed_without_the_key(site: Site) {
    for _ in 0..2 {
        let out = site.sync_keyed();
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    site.rewrite_and_recompute(2);
    let forged = site.trail();
    let requests = site.sim.requests().len();
    let out = site.sync_keyed();
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(out.stderr.contains("checkpoint"), "{}", out.stderr);
    assert_eq!(site.trail(), forged, "nothing appended");
    assert_eq!(site.sim.requests().len(), requests, "no request was sent");
}

/// `verify` re-proves every landed page by its SHA-256: one modified after
/// landing is a discrepancy naming the file (65).
async fn verify_names_a_landed_page_modified_after_landing(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first: Value = serde_json::from_str(site.manifest().lines().next().unwrap()).unwrap();
    let page = site.stream_dir().join(first["file"].as_str().unwrap());
    let mut bytes = std::fs::read(&page).unwrap();
    bytes[3] ^= 1;
    std::fs::write(&page, bytes).unwrap();
    let out = site.verify();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains(&format!("{}: modified after landing", page.display())),
        "{}",
        out.stdout
    );
}

/// `audit verify` proves the trail by its chain: a line edited in place
/// (in the file, or in its row by the schema's owner with the append-only
/// triggers turned off) is named, and the trail is not intact (65).
async fn audit_verify_names_a_trail_line_edited_in_place(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = site.trail();
    let n = lines
        .iter()
        .position(|l| l.contains("\"event\":\"page_committed\""))
        .unwrap()
        + 1;
    let edited = lines[n - 1].replacen("\"records\":40", "\"records\":41", 1);
    assert_ne!(edited, lines[n - 1]);
    match &site.pg {
        None => {
            let mut all = lines.clone();
            all[n - 1] = edited;
            std::fs::write(site.fx.trail(), all.join("\n") + "\n").unwrap();
        }
        Some(pg) => {
            let sql = format!(
                "BEGIN; ALTER TABLE edc_sync_audit_line DISABLE TRIGGER USER; \
                 UPDATE edc_sync_audit_line SET line = '{}' WHERE n = {n}; \
                 ALTER TABLE edc_sync_audit_line ENABLE TRIGGER USER; COMMIT;",
                edited.replace('\'', "''")
            );
            pg.psql("edc", &sql).unwrap();
        }
    }
    let out = site.audit_verify();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    // The trail is named as the user gave it: the file, or the database
    // and the trail's name (never a temporary copy).
    assert!(!said.contains("/tmp/.tmp") || site.pg.is_none(), "{said}");
    if site.pg.is_some() {
        assert!(said.contains("trail \"audit.jsonl\""), "{said}");
    }
    assert!(
        said.contains(&format!(":{}:", n + 1)) || said.contains(&format!("line {}", n + 1)),
        "{said}"
    );
}

/// A manifest reader counts every entry: a landed page listed a second
/// time, under another page key (a line appended to the file; a row added
/// by the database's owner, the run role's INSERT being refused), would have its records
/// counted twice. `verify` names it (65), whatever its page key.
async fn verify_counts_a_page_listed_twice_under_another_page_key(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = site.manifest().lines().next().unwrap().to_string();
    let mut entry: Value = serde_json::from_str(&first).unwrap();
    let other_key = format!("{}&again=1", entry["page_key"].as_str().unwrap());
    entry["page_key"] = other_key.clone().into();
    let line = serde_json::to_string(&entry).unwrap();
    match &site.pg {
        None => {
            let manifest = site.stream_dir().join("manifest.jsonl");
            let mut text = std::fs::read_to_string(&manifest).unwrap();
            text.push_str(&line);
            text.push('\n');
            std::fs::write(&manifest, text).unwrap();
        }
        Some(pg) => {
            let sql = format!(
                "INSERT INTO edc_sync_manifest (stream, n, line, page_key, sha256, trail, audit_n) \
                 SELECT stream, (SELECT max(n) + 1 FROM edc_sync_manifest), '{}', '{}', sha256, trail, audit_n \
                 FROM edc_sync_manifest WHERE n = 1",
                line.replace('\'', "''"),
                other_key.replace('\'', "''")
            );
            // The run role appends a manifest row only with its commit
            // line; the database's owner can still add one.
            let refused = pg.psql_as("edc_run", "edc", &sql).unwrap_err();
            assert!(refused.contains("permission denied"), "{refused}");
            pg.psql("edc", &sql).unwrap();
        }
    }
    let out = site.verify();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let file = entry["file"].as_str().unwrap();
    assert!(
        out.stdout.contains(file) && out.stdout.contains("counted twice"),
        "{}",
        out.stdout
    );
}

/// A manifest line appended past the cursor's point, listing a landed page
/// again under another page key with the run id of a run the trail
/// records, is no line any `page_committed` line stands for: the next run
/// names it (where it started, its SHA-256, what it listed) in a
/// `manifest_lines_removed` line, cuts the manifest back to the cursor's
/// point, and goes on; a reader of the manifest counts every record once.
/// (A state database takes a manifest row only with its commit line.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_line_past_the_cursor_that_no_commit_records_is_removed_naming_it() {
    let site = Site::new(Backend::Files).await;
    let out = site.sync(&["--max-pages", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let manifest = site.stream_dir().join("manifest.jsonl");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    let cut_at = text.len() as u64;
    let mut entry: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    entry["page_key"] = format!("{}&again=1", entry["page_key"].as_str().unwrap()).into();
    let line = serde_json::to_string(&entry).unwrap() + "\n";
    text.push_str(&line);
    std::fs::write(&manifest, &text).unwrap();
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let removed = support::audit_events(&site.fx.trail(), "manifest_lines_removed");
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0]["manifest_bytes"], cut_at);
    let named = &removed[0]["removed"][0];
    assert_eq!(named["at"], cut_at);
    assert_eq!(named["sha256"], edc_core::digest::sha256_hex(line.as_bytes()));
    assert_eq!(named["page_key"], entry["page_key"]);
    assert!(!site.manifest().contains("again=1"), "the line is gone");
    site.assert_every_record_once();
    let out = site.verify();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = site.audit_verify();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// A receipt that names no commit line (zeroed, or past the trail's end;
/// in a database, a row pointed at a line that is no commit) proves
/// nothing: the cursor is held to the trail's last commit of its stream,
/// and a cursor moved forward is refused as when the receipt is intact.
async fn a_cursor_moved_forward_with_a_receipt_that_names_no_commit_is_refused(site: Site) {
    let out = site.sync(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (cursor, saved) = (site.cursor().unwrap(), site.saved_cursor());
    for edit in [ReceiptEdit::Zero, ReceiptEdit::PastTheEnd] {
        let (was, now) = move_cursor_forward(&site, false);
        site.edit_receipt(edit);
        let requests = site.sim.requests().len();
        let out = site.sync(&[]);
        assert_moved_cursor_refused(&site, &out, &was, &now, requests);
        let out = site.verify();
        assert_eq!(out.code, 65, "{edit:?}: {}{}", out.stdout, out.stderr);
        site.restore_cursor(&saved, &cursor);
    }
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    site.assert_every_record_once();
}

/// A date-window stream whose next window is moved to 2099 (its receipt
/// dropped) would send no request again, every run exiting 0: refused
/// (65) naming the cursor and both values, before any request.
async fn a_window_start_moved_past_the_data_is_refused(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut cursor = site.cursor().unwrap();
    let was = cursor["window_start"].as_str().unwrap().to_string();
    let now = "2099-01-01T00:00:00Z";
    cursor["window_start"] = now.into();
    site.set_cursor(&cursor);
    site.edit_receipt(ReceiptEdit::Drop);
    let requests = site.sim.requests().len();
    let out = site.sync(&[]);
    assert_moved_cursor_refused(&site, &out, &was, now, requests);
}

/// `--max-pages 0` runs the start-up checks alone; a cursor moved forward
/// without its receipt fails them (65) as a full run does.
async fn start_up_checks_alone_refuse_a_moved_cursor(site: Site) {
    let out = site.sync(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (was, now) = move_cursor_forward(&site, true);
    let requests = site.sim.requests().len();
    let out = site.sync(&["--max-pages", "0"]);
    assert_moved_cursor_refused(&site, &out, &was, &now, requests);
}

/// A cursor proven by another trail (a run given another `--audit-log`)
/// has nothing in this trail to prove it: refused (65) naming the cursor
/// and the trail, nothing fetched and nothing appended.
async fn a_cursor_that_no_commit_of_this_trail_proves_is_refused(site: Site) {
    let out = site.sync(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let other = site.fx.path("other.jsonl");
    let requests = site.sim.requests().len();
    let out = support::run_cmd(&mut site.sync_cmd_into(&other));
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(out.stderr.contains(&site.cursor_place()), "{}", out.stderr);
    assert!(out.stderr.contains("other.jsonl"), "{}", out.stderr);
    assert!(out.stderr.contains("--audit-log"), "{}", out.stderr);
    assert_eq!(site.sim.requests().len(), requests, "nothing was fetched");
}

/// With the audit key every line carries a MAC under it: a line chained to
/// the trail's end by someone without the key (a run that never was,
/// moving the stream on, with a cursor to match) is refused by the next
/// keyed run (65, naming the line) before it sends anything or signs over
/// it, and by `audit verify --key`.
async fn a_keyed_run_refuses_a_forged_line_appended_to_the_trail(site: Site) {
    let out = site.sync_keyed_with(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let at = site.append_forged_commit();
    let forged = site.trail();
    let requests = site.sim.requests().len();
    let out = site.sync_keyed();
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(
        out.stderr.contains(&at) && out.stderr.contains("MAC"),
        "{at}: {}",
        out.stderr
    );
    assert_eq!(site.trail(), forged, "nothing appended");
    assert_eq!(site.sim.requests().len(), requests, "no request was sent");
    let out = site.audit_verify_keyed();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let n = forged.len();
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains(&format!(":{n}:")) || said.contains(&format!("line {n}")),
        "{said}"
    );
}

/// A trail whose lines are sealed is only appended to by runs holding the
/// key: a run started without it (a scheduler entry that lost the secret)
/// is refused (78, naming the trail and the variable) before it sends
/// anything, instead of writing unsealed lines that the next keyed run
/// would refuse as forged.
async fn a_run_without_the_key_does_not_append_to_a_sealed_trail(site: Site) {
    let out = site.sync_keyed_with(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let sealed = site.trail();
    let requests = site.sim.requests().len();
    let out = site.sync(&[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("EDC_SYNC_AUDIT_KEY") && out.stderr.contains("sealed"),
        "{}",
        out.stderr
    );
    assert_eq!(site.trail(), sealed, "nothing appended");
    assert_eq!(site.sim.requests().len(), requests, "no request was sent");
    let out = site.sync_keyed();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// A line removed from the middle of the trail, or two lines swapped, by
/// someone who can get past the database's triggers (its owner): `audit
/// verify` names the line and the kind of damage in the words it uses for
/// a file (removed, reordered), not as a byte offset that does not add up.
async fn audit_verify_names_trail_lines_removed_or_reordered_in_the_same_words(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = site.trail();
    assert!(lines.len() > 5, "{} lines", lines.len());
    for (word, changed) in trail_lines_removed_or_reordered(&lines) {
        let damage = word;
        site.replace_trail(&changed);
        let out = site.audit_verify();
        let said = format!("{}{}", out.stdout, out.stderr);
        assert_eq!(out.code, 65, "{damage}: {said}");
        assert!(
            said.contains(word) && (said.contains(":4:") || said.contains(":5:")),
            "{damage}: {said}"
        );
        site.replace_trail(&lines);
        let out = site.audit_verify();
        assert_eq!(out.code, 0, "put back: {}{}", out.stdout, out.stderr);
    }
}

/// The trail's fourth line removed, and its fourth and fifth swapped, each
/// with the word a verifier names it by.
fn trail_lines_removed_or_reordered(lines: &[String]) -> [(&'static str, Vec<String>); 2] {
    let mut removed = lines.to_vec();
    removed.remove(3);
    let mut swapped = lines.to_vec();
    swapped.swap(3, 4);
    [("removed", removed), ("reordered", swapped)]
}

/// The same damage seen by `verify`: the trail's place is named by its
/// line (`:N:`), for a database trail as for a file, and never by a byte
/// offset of a file the reader never had (a database keeps rows).
async fn verify_names_trail_lines_removed_or_reordered_by_line_not_by_byte(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = site.trail();
    for (word, changed) in trail_lines_removed_or_reordered(&lines) {
        let damage = word;
        site.replace_trail(&changed);
        let out = site.verify();
        let said = format!("{}{}", out.stdout, out.stderr);
        assert_eq!(out.code, 65, "{damage}: {said}");
        assert!(
            said.contains(word) && (said.contains("line 4:") || said.contains("line 5:")),
            "{damage}: {said}"
        );
        assert!(!said.contains("byte "), "{damage}: {said}");
        site.replace_trail(&lines);
        let out = site.verify();
        assert_eq!(out.code, 0, "put back: {}{}", out.stdout, out.stderr);
    }
}

/// A landing whose `.owner` names another state, or holds no id, is named
/// by `verify` as what the given state is: a state directory or a state
/// database, never a directory where the state is a database.
async fn verify_names_a_landing_owned_by_another_state_in_its_backends_words(site: Site) {
    let out = site.sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let owner = site.stream_dir().join(".owner");
    let given = match site.pg {
        None => "state directory",
        Some(_) => "state database",
    };
    std::fs::write(&owner, "0123456789abcdef\n").unwrap();
    let out = site.verify();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let want = format!("belongs to the state with id 0123456789abcdef, not to the {given} given");
    assert!(out.stdout.contains(&want), "{}", out.stdout);
    std::fs::write(&owner, "not an id\n").unwrap();
    let out = site.verify();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(".owner: it does not hold a state id"),
        "{}",
        out.stdout
    );
    if site.pg.is_some() {
        assert!(!out.stdout.contains("state directory"), "{}", out.stdout);
    }
}

/// With the audit key, a trail that holds lines and not one sealed (one
/// written before the key, or one replaced wholesale by someone without
/// it: they look alike) stops the run (65) before anything is appended or
/// fetched, and `audit verify --key` says nothing proves it. Told to adopt
/// it, a run records `audit_key_adopted` and goes on; from then on the trail
/// is sealed, and verified with the key it says which lines are older.
async fn a_keyed_run_takes_a_trail_with_no_sealed_line_only_when_told_to_adopt_it(site: Site) {
    let out = site.sync(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let unsealed = site.trail();
    let requests = site.sim.requests().len();
    let out = site.sync_keyed();
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(
        out.stderr.contains("not one is sealed") && out.stderr.contains("--adopt-unsealed-trail"),
        "{}",
        out.stderr
    );
    assert_eq!(site.trail(), unsealed, "nothing appended");
    assert_eq!(site.sim.requests().len(), requests, "no request was sent");
    let out = site.audit_verify_keyed();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains("no checkpoint") || said.contains("not one of its"),
        "{said}"
    );
    let out = site.sync_keyed_with(&["--adopt-unsealed-trail"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = site.trail();
    let adopted: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("\"event\":\"audit_key_adopted\""))
        .collect();
    assert_eq!(adopted.len(), 1, "{lines:?}");
    let adopted: Value = serde_json::from_str(adopted[0]).unwrap();
    assert_eq!(adopted["unsealed_lines"], unsealed.len() as u64);
    assert!(adopted["line_mac"].is_string(), "the adoption is itself sealed");
    site.assert_every_record_once();
    let out = site.sync_keyed();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = site.audit_verify_keyed();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "lines 1..{} unsealed (written before the key)",
            unsealed.len()
        )),
        "{}",
        out.stdout
    );
}

/// A run without the key over a sealed trail stops (78) before it writes
/// or fetches, even when someone without the key has chained unsealed
/// lines (a forged commit, the cursor moved to match) to its end: the run
/// looks for any sealed line, not at the last one.
async fn a_run_without_the_key_stops_on_a_sealed_trail_whatever_its_end(site: Site) {
    let out = site.sync_keyed_with(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    site.append_forged_commit();
    let forged = site.trail();
    let requests = site.sim.requests().len();
    let out = site.sync(&[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("EDC_SYNC_AUDIT_KEY") && out.stderr.contains("sealed"),
        "{}",
        out.stderr
    );
    assert_eq!(site.trail(), forged, "nothing appended");
    assert_eq!(site.sim.requests().len(), requests, "no request was sent");
}

/// `verify --key` proves the trail's seals and checkpoints as `audit verify
/// --key` does, beside the landing and the state: a commit chained to a
/// sealed trail by someone without the key, and a trail no line of which is
/// sealed, are discrepancies naming the trail (65); a keyed trail verifies.
async fn verify_with_the_key_names_unsealed_lines_and_a_trail_never_sealed(site: Site) {
    let verify_keyed = || {
        support::run_cmd(
            support::edc_sync()
                .args(["verify", "--key", "--out"])
                .arg(site.fx.path("landing"))
                .args(["--state", &site.state(), "--audit-log"])
                .arg(site.fx.trail())
                .env("EDC_SYNC_AUDIT_KEY", runs::KEY),
        )
    };
    let out = site.sync(&["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = verify_keyed();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("the audit trail cannot vouch"),
        "{}",
        out.stdout
    );
    let out = site.sync_keyed_with(&["--adopt-unsealed-trail"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = verify_keyed();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    site.append_forged_commit();
    let out = verify_keyed();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("line_mac") || out.stdout.contains("line MAC"),
        "{}",
        out.stdout
    );
}
