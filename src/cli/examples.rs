//! The examples `--help` and the manual pages show: one table, so the help
//! a user reads at 3 a.m. and the page `man edc-sync-sync` prints say the
//! same, and the suite runs every one of them (against the simulator, on
//! scratch paths) so none goes stale.

/// One example: the subcommand it belongs to, the command line as a user
/// types it, and what it does.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    /// The subcommand path: `"sync"`, `"config validate"`.
    pub command: &'static str,
    /// The command line, starting with `edc-sync`.
    pub line: &'static str,
    /// What it does, one line.
    pub what: &'static str,
}

const fn ex(command: &'static str, line: &'static str, what: &'static str) -> Example {
    Example { command, line, what }
}

/// Every example, grouped by subcommand. Paths under /srv/edc follow
/// docs/operations.md; vendors are the shipped policy's.
pub const EXAMPLES: &[Example] = &[
    ex(
        "demo",
        "edc-sync demo --dir /srv/edc/demo",
        "the embedded default (simulator, in-process pacer, throttling, audit verify) in a directory of its own",
    ),
    ex(
        "sync",
        "edc-sync sync --vendor veeva_vault --study S-001 --protocol-version 3 --all-streams --out /srv/edc/landing --state /srv/edc/state --audit-log /srv/edc/audit.jsonl --redis redis://127.0.0.1:6379/",
        "every stream of a study, the vendor's quota shared through Redis with every other process",
    ),
    ex(
        "sync",
        "edc-sync sync --vendor medidata_rave --study S-001 --tenant acme --out /srv/edc/landing --state /srv/edc/state --audit-log /srv/edc/audit.jsonl --pacer local",
        "one process on its own, paced in memory (no Redis)",
    ),
    ex(
        "backfill",
        "edc-sync backfill --vendor veeva_vault_vql --study S-001 --protocol-version 3 --since 2026-01-01T00:00:00Z --until 2026-02-01T00:00:00Z --out /srv/edc/landing --state /srv/edc/state --audit-log /srv/edc/audit.jsonl --pacer local",
        "a past window, landed under OUT/backfill/SINCE..UNTIL/ with a cursor of its own, resumable; the incremental cursor never moves",
    ),
    ex(
        "backfill",
        "edc-sync backfill --vendor veeva_vault_vql --study S-001 --protocol-version 3 --since 2026-01-01T00:00:00Z --out /srv/edc/landing --state /srv/edc/state --audit-log /srv/edc/audit.jsonl --pacer local --missing-only",
        "prove a window complete: land only records missing from the landing and print how many (0 is the proof)",
    ),
    ex(
        "verify",
        "edc-sync verify --out /srv/edc/landing --state /srv/edc/state --audit-log /srv/edc/audit.jsonl",
        "re-prove every landed page, manifest entry, audit line and cursor against the others",
    ),
    ex(
        "cursor show",
        "edc-sync cursor show --state /srv/edc/state --vendor medidata_rave --study S-001 --tenant acme",
        "where a stream's next run starts, and the page that put it there",
    ),
    ex(
        "config validate",
        "edc-sync config validate --config config/rate_limits.yaml --require-committed",
        "every problem of the policy with its key and line, and whether it is committed",
    ),
    ex(
        "config validate",
        "edc-sync config validate --config config/rate_limits.yaml --check-env",
        "also name every environment variable the policy needs that is not set (values never printed)",
    ),
    ex(
        "config stamp",
        "edc-sync config stamp --config config/rate_limits.yaml",
        "at release, in the policy repository: the stamp a ConfigMap or image ships beside the policy",
    ),
    ex(
        "config check-stamp",
        "edc-sync config check-stamp --repo /srv/edc/policy --trail /srv/edc/audit.jsonl",
        "prove from a clone of the policy repository that every recorded commit holds the recorded policy blob",
    ),
    ex(
        "config show",
        "edc-sync config show --config config/rate_limits.yaml --vendor veeva_vault",
        "the effective policy of a vendor, defaults filled in, with its provenance",
    ),
    ex(
        "audit verify",
        "edc-sync audit verify /srv/edc/audit.jsonl --anchors /srv/edc/state",
        "prove the trail intact and neither cut short nor replaced",
    ),
    ex(
        "audit export",
        "edc-sync audit export --state postgres://edc_run@db.example:5432/edc --to audit-2026-12.jsonl",
        "a trail kept in PostgreSQL, written as its JSON Lines file byte for byte",
    ),
    ex(
        "state migrate",
        "edc-sync state migrate --state postgres://edc_owner@db.example:5432/edc --grant-to edc_run",
        "create or upgrade the state database's schema as its owner, granting runs what they need",
    ),
    ex(
        "qualify iq",
        "edc-sync qualify iq --evidence /srv/validation/iq --config config/rate_limits.yaml --dir /srv/edc/state --dir /srv/edc/landing --redis redis://127.0.0.1:6379/ --release-record /srv/edc/release/edc-sync.sha256",
        "installation qualification, with its evidence package",
    ),
    ex(
        "qualify oq",
        "edc-sync qualify oq --evidence /srv/validation/oq --config config/rate_limits.yaml --redis redis://127.0.0.1:6379/ --only OQ-001,OQ-005",
        "operational qualification (here two scenarios; without --only, all of them)",
    ),
    ex(
        "simulate",
        "edc-sync simulate --port 8080 --profile vault --fault 3=429:seconds:2",
        "a Vault-like EDC on 127.0.0.1:8080 whose third request is throttled with Retry-After: 2",
    ),
    ex(
        "completions",
        "edc-sync completions bash",
        "the bash completion script (also zsh, fish, elvish, powershell)",
    ),
    ex(
        "man",
        "edc-sync man --out-dir /usr/local/share/man/man1",
        "every manual page, one per subcommand",
    ),
];

/// The examples of `command` and of every subcommand under it.
pub fn of(command: &str) -> impl Iterator<Item = &'static Example> + '_ {
    EXAMPLES.iter().filter(move |e| {
        command.is_empty() || e.command == command || e.command.starts_with(&format!("{command} "))
    })
}

/// The "Examples:" block after `command`'s `--help`.
pub fn help(command: &str) -> String {
    let mut text = String::from("Examples:");
    for e in of(command) {
        text.push_str(&format!("\n  # {}\n  {}", e.what, e.line));
    }
    text
}
