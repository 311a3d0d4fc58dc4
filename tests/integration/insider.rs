//! The tampering property against an insider: not random bytes but the
//! consistent, semantic edits someone with write access to the state
//! directory, the landing and the trail (and without the audit key) would
//! make to move a stream on or hide a run, between keyed runs:
//!
//! - a cursor moved on with its receipt dropped, zeroed or pointed past
//!   the trail's end;
//! - a cursor moved on with its receipt rewritten to name another commit;
//! - chained forged lines appended (a `run_started` and a `page_committed`
//!   of a run that never was), with a cursor to match;
//! - a manifest entry listed again under a new page key;
//! - the state directory and the trail restored from an older copy, the
//!   landing keeping what came since (or restored with them);
//! - the anchors directory replaced by a link to a copy of itself;
//! - the trail replaced wholesale by one without a seal (every line's seal
//!   and checkpoint dropped, the chain recomputed, S1's last commit moved
//!   40 records on), the anchors deleted and the cursors pointed at it;
//! - a commit forged at the trail's end, then a run without the key (which
//!   must stop with 78 before it writes: the trail holds sealed lines).
//!
//! One or two of them a case; the next keyed run and the verifiers then
//! refuse naming a file, or every record is landed exactly once (the
//! judgement of `tampering.rs`). The runs hold the audit key: without it,
//! appended forgeries are undetectable by design (docs/audit-trail.md).
//!
//! 1,000 cases run in the suite; `EDC_SYNC_INSIDER_CASES=100000` runs more
//! by hand, `EDC_SYNC_INSIDER_SEED=n` replays one case and
//! `EDC_SYNC_INSIDER_SHOW=1` prints each ending.
//!
//! The same insider against a state database (one real PostgreSQL, its
//! tables emptied between cases; each run the binary, as users run it):
//! the cursor row moved with its receipt dropped (by the owner) or pointed
//! at another commit (by the run role: the database refuses it), a forged
//! commit inserted with the run role's own INSERT and
//! UPDATE, a manifest row listed again under a new page key, the tables
//! restored from an older copy, the anchor rows deleted by the owner.
//! 1,000 cases in the suite (`EDC_SYNC_DB_INSIDER_CASES`, `_FROM`, `_SEED`,
//! `_SHOW`).

use std::path::Path;

use serde_json::Value;

use crate::tampering::{expected_records, judge, property, run, simulator, stream_dir, Ending, Rng};
use edc_core::digest::{sha256_hex, ZERO_SHA256};
use support::runs::Fixture;

use crate::ledger::{as_owner, Site, RECORDS as DB_RECORDS};
use crate::support;

/// Where S1's cursor is kept.
fn cursor_file(fx: &Fixture) -> std::path::PathBuf {
    fx.path("state/vault_json/-/S1/-/default.cursor.json")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string(value).unwrap() + "\n").unwrap();
}

/// The trail's lines with the byte offset each starts at.
fn trail_lines(fx: &Fixture) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string(fx.trail()).unwrap();
    let mut at = 0;
    text.lines()
        .map(|line| {
            let here = at;
            at += line.len() as u64 + 1;
            (here, line.to_string())
        })
        .collect()
}

/// `text` with every `offset=N` moved `by` records on.
fn moved_offsets(text: &str, by: u64) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("offset=") {
        let (head, tail) = rest.split_at(at + "offset=".len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let n: u64 = tail[..digits].parse().unwrap_or(0);
        out.push_str(&(n + by).to_string());
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// The cursor moved on: its next page `by` records later, or, once its
/// window is complete, its window start past the data.
fn move_cursor(cursor: &mut Value, by: u64) -> String {
    match cursor["next_page"].as_str() {
        Some(next) if next.contains("offset=") => {
            cursor["next_page"] = moved_offsets(next, by).into();
            format!("moved the cursor's next page {by} records on")
        }
        _ => {
            cursor["window_start"] = "2099-01-01T00:00:00Z".into();
            "moved the cursor's window start to 2099".into()
        }
    }
}

/// `line` with its seal dropped and its chain fields set: what someone
/// without the key can write.
fn forged(line: &str, run_id: &str, seq: u64, prev: &str) -> String {
    let mut value: Value = serde_json::from_str(line).unwrap();
    let old_run = value["run_id"].as_str().unwrap().to_string();
    let old_prev = value["prev_sha256"].as_str().unwrap().to_string();
    let old_seq = format!("\"seq\":{},", value["seq"]);
    let mut text = line
        .replacen(&old_seq, &format!("\"seq\":{seq},"), 1)
        .replace(&old_run, run_id)
        .replace(&old_prev, prev);
    if let Some(at) = text.find(",\"line_mac\":") {
        text = format!("{}}}", &text[..at]);
    }
    value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["seq"], seq);
    text
}

/// One insider edit, carried out; its description.
fn edit(rng: &mut Rng, fx: &Fixture, backup: &Path) -> String {
    let cursor_path = cursor_file(fx);
    match rng.below(8) {
        0 | 1 => {
            let mut cursor = read_json(&cursor_path);
            let moved = move_cursor(&mut cursor, 40 * (1 + rng.below(3) as u64));
            let end = std::fs::metadata(fx.trail()).unwrap().len();
            let receipt = match rng.below(3) {
                0 => {
                    cursor.as_object_mut().unwrap().remove("receipt");
                    "dropped its receipt"
                }
                1 => {
                    cursor["receipt"]["offset"] = 0.into();
                    cursor["receipt"]["sha256"] = ZERO_SHA256.into();
                    "zeroed its receipt"
                }
                _ => {
                    cursor["receipt"]["offset"] = (end + 4096).into();
                    "pointed its receipt past the trail's end"
                }
            };
            write_json(&cursor_path, &cursor);
            format!("{moved} and {receipt}")
        }
        2 => {
            let mut cursor = read_json(&cursor_path);
            let moved = move_cursor(&mut cursor, 40 * (1 + rng.below(3) as u64));
            let commits: Vec<(u64, String)> = trail_lines(fx)
                .into_iter()
                .filter(|(_, l)| l.contains("\"event\":\"page_committed\""))
                .collect();
            let (offset, line) = rng.pick(&commits).clone();
            cursor["receipt"]["offset"] = offset.into();
            cursor["receipt"]["sha256"] = sha256_hex(line.as_bytes()).into();
            write_json(&cursor_path, &cursor);
            format!("{moved} and rewrote its receipt to name the commit at byte {offset}")
        }
        3 => {
            let lines = trail_lines(fx);
            let started = &lines
                .iter()
                .rev()
                .find(|(_, l)| l.contains("\"event\":\"run_started\""))
                .unwrap()
                .1;
            let commit = &lines
                .iter()
                .rev()
                .find(|(_, l)| l.contains("\"event\":\"page_committed\"") && l.contains("\"study\":\"S1\""))
                .or_else(|| {
                    lines
                        .iter()
                        .rev()
                        .find(|(_, l)| l.contains("\"event\":\"page_committed\""))
                })
                .unwrap()
                .1;
            let run_id = format!("20260101T000000.000Z-{:08x}", rng.next() as u32);
            let prev = sha256_hex(lines.last().unwrap().1.as_bytes());
            let first = forged(started, &run_id, 1, &prev);
            // A commit that landed nothing: no page file for the start-up
            // checks to look for.
            let commit = moved_offsets(commit, 40).replace("\"landed\":true", "\"landed\":false");
            let second = forged(&commit, &run_id, 2, &sha256_hex(first.as_bytes()));
            let end = std::fs::metadata(fx.trail()).unwrap().len();
            let mut text = std::fs::read_to_string(fx.trail()).unwrap();
            text.push_str(&format!("{first}\n{second}\n"));
            std::fs::write(fx.trail(), text).unwrap();
            let value: Value = serde_json::from_str(&second).unwrap();
            let mut cursor = read_json(&cursor_path);
            if value["cursor_state"]["stream"] == cursor["stream"] {
                for (k, v) in value["cursor_state"].as_object().unwrap() {
                    cursor[k] = v.clone();
                }
            } else {
                move_cursor(&mut cursor, 40);
            }
            cursor["receipt"]["offset"] = (end + first.len() as u64 + 1).into();
            cursor["receipt"]["sha256"] = sha256_hex(second.as_bytes()).into();
            write_json(&cursor_path, &cursor);
            format!("appended a chained run_started and page_committed of run {run_id}, the cursor to match")
        }
        4 => {
            let manifest = stream_dir(fx, "S1").join("manifest.jsonl");
            let text = std::fs::read_to_string(&manifest).unwrap();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let i = rng.below(lines.len());
            let mut again: Value = serde_json::from_str(&lines[i]).unwrap();
            again["page_key"] = format!("{}&again=1", again["page_key"].as_str().unwrap()).into();
            let at = if rng.below(2) == 0 { i + 1 } else { lines.len() };
            lines.insert(at, serde_json::to_string(&again).unwrap());
            std::fs::write(&manifest, lines.join("\n") + "\n").unwrap();
            format!(
                "listed manifest line {} again under a new page key, as line {}",
                i + 1,
                at + 1
            )
        }
        5 => {
            let with_landing = rng.below(3) == 0;
            let mut restored = vec!["state", "audit.jsonl"];
            if with_landing {
                restored.push("landing");
            }
            for name in &restored {
                let place = fx.path(name);
                if place.is_dir() {
                    std::fs::remove_dir_all(&place).unwrap();
                } else {
                    std::fs::remove_file(&place).unwrap();
                }
                copy(&backup.join(name), &place);
            }
            format!(
                "restored {} from the copy taken after the first run",
                restored.join(", ")
            )
        }
        6 => replace_the_trail_unsealed(fx),
        _ => {
            let anchors = fx.path("state/audit-anchors");
            let elsewhere = fx.path("anchors-elsewhere");
            copy(&anchors, &elsewhere);
            std::fs::remove_dir_all(&anchors).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &anchors).unwrap();
            "replaced the anchors directory by a link to a copy of it".into()
        }
    }
}

/// The trail as someone without the key would write it in place of the
/// real one: every seal and checkpoint dropped and the chain recomputed,
/// S1's last commit moved 40 records on without landing them, the anchors
/// deleted, and each cursor's receipt pointed at its commit's new bytes (S1's
/// cursor at the moved commit's state).
fn replace_the_trail_unsealed(fx: &Fixture) -> String {
    let lines = trail_lines(fx);
    let last_s1 = lines
        .iter()
        .rposition(|(_, l)| l.contains("\"event\":\"page_committed\"") && l.contains("\"study\":\"S1\""))
        .unwrap();
    let mut text = String::new();
    let mut prev = String::new();
    // A receipt's old line SHA-256 -> where its line is now.
    let mut moved: std::collections::HashMap<String, (u64, String)> = Default::default();
    for (i, (_, line)) in lines.iter().enumerate() {
        let value: Value = serde_json::from_str(line).unwrap();
        let mut changed = line.clone();
        if i == last_s1 {
            changed = moved_offsets(&changed, 40).replace("\"landed\":true", "\"landed\":false");
        }
        if let Some(at) = changed.find(",\"checkpoint\":{") {
            let end = at + changed[at..].find('}').unwrap() + 1;
            changed.replace_range(at..end, "");
        }
        if i == 0 {
            prev = value["prev_sha256"].as_str().unwrap().to_string();
        }
        let seq = value["seq"].as_u64().unwrap();
        let forged = forged(&changed, value["run_id"].as_str().unwrap(), seq, &prev);
        let offset = text.len() as u64;
        text.push_str(&forged);
        text.push('\n');
        prev = sha256_hex(forged.as_bytes());
        moved.insert(sha256_hex(line.as_bytes()), (offset, prev.clone()));
    }
    std::fs::write(fx.trail(), text).unwrap();
    let anchors = fx.path("state/audit-anchors");
    std::fs::remove_dir_all(&anchors).unwrap();
    std::fs::create_dir(&anchors).unwrap();
    let s1_commit = sha256_hex(lines[last_s1].1.as_bytes());
    for study in ["S1", "S2"] {
        let path = fx.path(&format!("state/vault_json/-/{study}/-/default.cursor.json"));
        let Ok(bytes) = std::fs::read(&path) else { continue };
        let mut cursor: Value = serde_json::from_slice(&bytes).unwrap();
        let Some(old) = cursor["receipt"]["sha256"].as_str().map(str::to_string) else {
            continue;
        };
        let Some((offset, sha)) = moved.get(&old) else {
            continue;
        };
        if old == s1_commit {
            let forged: Value = serde_json::from_str(
                std::fs::read_to_string(fx.trail()).unwrap()[*offset as usize..]
                    .lines()
                    .next()
                    .unwrap(),
            )
            .unwrap();
            for (k, v) in forged["cursor_state"].as_object().unwrap() {
                cursor[k] = v.clone();
            }
        }
        cursor["receipt"]["offset"] = (*offset).into();
        cursor["receipt"]["sha256"] = sha.clone().into();
        write_json(&path, &cursor);
    }
    "replaced the trail by one with no seal (S1's last commit moved 40 records on), deleted the anchors and \
     pointed the cursors at it"
        .into()
}

fn copy(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success(), "cp -a {} {}", from.display(), to.display());
}

async fn one_case(seed: u64, expected: &[String]) -> Result<Ending, String> {
    let mut rng = Rng(seed);
    let fx = Fixture::new();
    let sim = simulator(0).await;
    let (a, m) = run(&fx, &sim, "S1", Some(1 + rng.below(3) as u64), true).await;
    let backup = fx.path("backup");
    std::fs::create_dir(&backup).unwrap();
    for name in ["state", "audit.jsonl", "landing"] {
        copy(&fx.path(name), &backup.join(name));
    }
    let (b, n) = run(&fx, &sim, "S1", Some(1 + rng.below(3) as u64), true).await;
    let (c, o) = run(&fx, &sim, "S2", Some(1 + rng.below(3) as u64), true).await;
    if (a, b, c) != (0, 0, 0) {
        return Err(format!(
            "the runs before any edit failed: {a} {m} / {b} {n} / {c} {o}"
        ));
    }
    let mut done: Vec<String> = (0..1 + rng.below(2))
        .map(|_| edit(&mut rng, &fx, &backup))
        .collect();
    std::fs::remove_dir_all(&backup).unwrap();
    // A run without the key after the edits (a scheduler entry that lost
    // the secret): the trail holds sealed lines, whatever its end looks
    // like, so it must stop (78, or earlier on other damage it finds) and
    // write nothing.
    if rng.below(4) == 0 {
        let sealed = trail_lines(&fx)
            .iter()
            .any(|(_, l)| l.contains(",\"line_mac\":\""));
        let before = std::fs::read(fx.trail()).unwrap();
        let (code, message) = run(&fx, &sim, "S1", None, false).await;
        if sealed && (code == 0 || std::fs::read(fx.trail()).unwrap() != before) {
            return Err(format!(
                "{}; then a run without the key over a trail with sealed lines exited {code}: {message}",
                done.join("; ")
            ));
        }
        done.push(format!("ran without the key (exit {code})"));
    }
    judge(seed, &fx, 0, &done.join("; "), expected, true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_insider_edit_between_keyed_runs_ends_in_exit_0_with_a_record_lost_or_duplicated() {
    let expected = expected_records().await;
    property("insider", "EDC_SYNC_INSIDER", 1000, |seed| {
        one_case(seed, &expected)
    })
    .await;
}

/// The state tables, in the order rows can be put back (lines first).
const TABLES: [&str; 5] = [
    "edc_sync_audit_line",
    "edc_sync_anchor",
    "edc_sync_manifest",
    "edc_sync_cursor",
    "edc_sync_memory",
];

/// One insider edit of a state database, carried out; its description.
fn edit_db(rng: &mut Rng, site: &Site) -> String {
    let pg = site.pg.as_ref().unwrap();
    match rng.below(6) {
        0 => {
            let mut cursor = site.cursor().unwrap();
            let moved = move_cursor(&mut cursor, 40 * (1 + rng.below(2) as u64));
            let receipt = match rng.below(2) {
                0 => {
                    cursor.as_object_mut().unwrap().remove("receipt");
                    "dropped its receipt"
                }
                _ => "kept its receipt",
            };
            site.set_cursor(&cursor);
            format!("{moved} in the cursor row and {receipt}")
        }
        1 => {
            let mut cursor = site.cursor().unwrap();
            let moved = move_cursor(&mut cursor, 40 * (1 + rng.below(2) as u64));
            let commits: Vec<usize> = site
                .trail()
                .iter()
                .enumerate()
                .filter(|(_, l)| l.contains("\"event\":\"page_committed\""))
                .map(|(i, _)| i + 1)
                .collect();
            let n = *rng.pick(&commits);
            let sql = format!(
                "UPDATE edc_sync_cursor SET state = '{}', audit_n = {n}",
                serde_json::to_string(&cursor).unwrap().replace('\'', "''")
            );
            // The database refuses a row that moves without its line
            // (schema version 2 on); the edit is then one that did not happen.
            let refused = match pg.psql_as("edc_run", "edc", &sql) {
                Ok(_) => "",
                Err(_) => ", which the database refused",
            };
            format!("{moved} in the cursor row and pointed it at line {n} (the run role's UPDATE){refused}")
        }
        2 => {
            let at = site.append_forged_commit();
            format!("inserted a forged page_committed at {at}, the cursor row to match (the run role's append function and UPDATE)")
        }
        3 => {
            let rows = site.manifest();
            let lines: Vec<&str> = rows.lines().collect();
            let i = rng.below(lines.len());
            let mut again: Value = serde_json::from_str(lines[i]).unwrap();
            let key = format!("{}&again=1", again["page_key"].as_str().unwrap());
            again["page_key"] = key.clone().into();
            let sql = format!(
                "INSERT INTO edc_sync_manifest (stream, n, line, page_key, sha256, trail, audit_n) \
                 SELECT stream, (SELECT max(n) + 1 FROM edc_sync_manifest), '{}', '{}', sha256, trail, audit_n \
                 FROM edc_sync_manifest WHERE n = {}",
                serde_json::to_string(&again).unwrap().replace('\'', "''"),
                key.replace('\'', "''"),
                i + 1
            );
            // The run role has no INSERT (schema version 4 on): the edit
            // is then one that did not happen.
            let refused = match pg.psql_as("edc_run", "edc", &sql) {
                Ok(_) => "",
                Err(_) => ", which the database refused",
            };
            format!(
                "listed manifest row {} again under a new page key (the run role's INSERT){refused}",
                i + 1
            )
        }
        4 => {
            let mut sql: String = TABLES
                .iter()
                .rev()
                .map(|t| format!("DELETE FROM {t}; "))
                .collect();
            for t in TABLES {
                sql.push_str(&format!("INSERT INTO {t} SELECT * FROM copy_{t}; "));
            }
            as_owner(site.pg.as_ref().unwrap(), &sql);
            "restored the state tables from the copy taken after the first run (the landing kept the rest)"
                .into()
        }
        _ => {
            as_owner(site.pg.as_ref().unwrap(), "DELETE FROM edc_sync_anchor;");
            "deleted every anchor row (the owner, triggers off)".into()
        }
    }
}

async fn one_db_case(seed: u64, pg: &std::sync::Arc<support::postgres::Postgres>) -> Result<Ending, String> {
    let mut rng = Rng(seed);
    let mut empty: String = TABLES
        .iter()
        .map(|t| format!("DROP TABLE IF EXISTS copy_{t}; "))
        .collect();
    empty.push_str(
        "TRUNCATE edc_sync_audit_line, edc_sync_anchor, edc_sync_manifest, edc_sync_cursor, edc_sync_memory, \
         edc_sync_run_lock;",
    );
    as_owner(pg, &empty);
    let site = Site::on(Some(pg.clone())).await;
    let first = site.sync_keyed_with(&["--max-pages", &(1 + rng.below(2)).to_string()]);
    let copy: String = TABLES
        .iter()
        .map(|t| format!("CREATE TABLE copy_{t} AS SELECT * FROM {t}; "))
        .collect();
    pg.psql("edc", &copy).unwrap();
    let second = site.sync_keyed_with(&["--max-pages", "1"]);
    if (first.code, second.code) != (0, 0) {
        return Err(format!(
            "the runs before any edit failed: {} / {}",
            first.stderr, second.stderr
        ));
    }
    let done: Vec<String> = (0..1 + rng.below(2)).map(|_| edit_db(&mut rng, &site)).collect();
    let story = done.join("; ");
    let out = site.sync_keyed_with(&[]);
    let names_it =
        |text: &str| text.contains("edc_sync_") || text.contains("trail") || text.contains(".json");
    match out.code {
        0 => {}
        65 | 74 if names_it(&out.stderr) => return Ok(Ending::RunRefused(out.code as u8)),
        other => return Err(format!("{story}: the run exited {other}: {}", out.stderr)),
    }
    for (what, out) in [
        ("verify", site.verify()),
        ("audit verify --key", site.audit_verify_keyed()),
    ] {
        let said = format!("{}{}", out.stdout, out.stderr);
        match out.code {
            0 => {}
            65 if names_it(&said) => return Ok(Ending::VerifierRefused),
            other => {
                return Err(format!(
                    "{story}: the run exited 0, then `{what}` exited {other}: {said}"
                ))
            }
        }
    }
    let ids = site.landed_ids();
    let mut unique = ids.clone();
    unique.dedup();
    if ids.len() != unique.len() || unique.len() != DB_RECORDS as usize {
        return Err(format!(
            "{story}: everything exited 0 with {} records landed ({} distinct) for {DB_RECORDS}",
            ids.len(),
            unique.len()
        ));
    }
    Ok(Ending::Whole)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_insider_edit_of_a_state_database_ends_in_exit_0_with_a_record_lost_or_duplicated() {
    let mut pg = support::postgres::start_migrated();
    // A dozen statements a case around the binary's runs: through kept
    // connections, not a `psql` started for each.
    pg.keep_sessions();
    let pg = std::sync::Arc::new(pg);
    property("database insider", "EDC_SYNC_DB_INSIDER", 1000, |seed| {
        one_db_case(seed, &pg)
    })
    .await;
}
