//! The database schema under change control: numbered migrations, applied
//! only by `edc-sync state migrate` (never silently by a run), each
//! recorded in `edc_sync_schema` with who applied it and with which
//! binary. A run requires exactly [`CURRENT`]: an older database is
//! refused ("run state migrate"), a newer one too ("this binary is older
//! than the schema"), both 78.
//!
//! Append-only is enforced twice: the run role is granted only SELECT on
//! the trail, the manifest and the anchors (`--grant-to`) and adds to them
//! through the schema's append functions (version 4), and triggers refuse
//! UPDATE, DELETE and TRUNCATE on them for every role,
//! the owner included (only a superuser who drops the triggers can
//! rewrite, and the chain and the keyed checkpoints then say so). Another
//! trigger checks every new trail row against the row before it: its
//! number, byte offset, SHA-256 and `prev_sha256`, so no writer can insert
//! a line that does not chain.
//!
//! One concept: the schema's versions. Each migration's SQL stays beside
//! the reason it exists, and the step that applies them and grants the run
//! role its rights reads them; the SQL is most of the length.

use super::DbUrl;
use crate::db_error::DbError;

/// The schema version this binary reads and writes.
pub const CURRENT: i32 = 6;

/// One migration: its version, what it does, and its SQL.
struct Migration {
    version: i32,
    description: &'static str,
    sql: &'static str,
}

const MIGRATIONS: [Migration; 6] = [
    Migration {
        version: 1,
        description: "audit trail, manifest, cursor, run lock and anchors; append-only and chain triggers",
        sql: V1,
    },
    Migration {
        version: 2,
        description: "a cursor row moves only with its page_committed line",
        sql: V2,
    },
    Migration {
        version: 3,
        description: "page_committed lines seal the lookback memory: the cursor trigger compares the rest",
        sql: V3,
    },
    Migration {
        version: 4,
        description:
            "runs append through the schema's functions, never by INSERT; an audit key can be required",
        sql: V4,
    },
    Migration {
        version: 5,
        description: "a cursor row holds its lookback memory by its seal, the memory in edc_sync_memory rows",
        sql: V5,
    },
    Migration {
        version: 6,
        description:
            "every function and trigger pins its search path and names its tables by schema; no TEMP for runs",
        sql: V6,
    },
];

const V1: &str = r#"
CREATE TABLE edc_sync_identity (
    state_id text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO edc_sync_identity (state_id)
    VALUES (md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text));

CREATE TABLE edc_sync_audit_line (
    trail text NOT NULL,
    n bigint NOT NULL CHECK (n >= 1),
    byte_offset bigint NOT NULL CHECK (byte_offset >= 0),
    line text NOT NULL,
    sha256 text NOT NULL,
    event text NOT NULL,
    stream text,
    PRIMARY KEY (trail, n),
    UNIQUE (trail, byte_offset)
);
CREATE INDEX edc_sync_audit_line_commits ON edc_sync_audit_line (trail, stream, n) WHERE event = 'page_committed';

CREATE TABLE edc_sync_manifest (
    stream text NOT NULL,
    n bigint NOT NULL CHECK (n >= 1),
    line text NOT NULL,
    page_key text NOT NULL,
    sha256 text NOT NULL,
    trail text NOT NULL,
    audit_n bigint NOT NULL,
    PRIMARY KEY (stream, n),
    UNIQUE (stream, page_key, sha256),
    FOREIGN KEY (trail, audit_n) REFERENCES edc_sync_audit_line (trail, n)
);

CREATE TABLE edc_sync_cursor (
    stream text PRIMARY KEY,
    state text NOT NULL,
    trail text NOT NULL,
    audit_n bigint NOT NULL,
    FOREIGN KEY (trail, audit_n) REFERENCES edc_sync_audit_line (trail, n)
);

CREATE TABLE edc_sync_run_lock (
    stream text PRIMARY KEY,
    fence bigint NOT NULL CHECK (fence >= 1),
    holder text NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE edc_sync_anchor (
    trail text NOT NULL,
    n bigint NOT NULL,
    sha256 text NOT NULL,
    anchored_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trail, n),
    FOREIGN KEY (trail, n) REFERENCES edc_sync_audit_line (trail, n)
);

CREATE FUNCTION edc_sync_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'edc-sync: % is append-only; % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'ED001';
END $$;

CREATE FUNCTION edc_sync_audit_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    prev edc_sync_audit_line%ROWTYPE;
BEGIN
    IF NEW.sha256 <> encode(sha256(convert_to(NEW.line, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'edc-sync: line % of trail % does not hash to its sha256', NEW.n, NEW.trail USING ERRCODE = 'ED002';
    END IF;
    SELECT * INTO prev FROM edc_sync_audit_line WHERE trail = NEW.trail ORDER BY n DESC LIMIT 1;
    IF NOT FOUND THEN
        IF NEW.n <> 1 OR NEW.byte_offset <> 0 OR (NEW.line::json ->> 'prev_sha256') IS DISTINCT FROM repeat('0', 64) THEN
            RAISE EXCEPTION 'edc-sync: the first line of trail % must be line 1 at byte 0 chained to zeros', NEW.trail USING ERRCODE = 'ED002';
        END IF;
    ELSIF NEW.n <> prev.n + 1
        OR NEW.byte_offset <> prev.byte_offset + octet_length(prev.line) + 1
        OR (NEW.line::json ->> 'prev_sha256') IS DISTINCT FROM prev.sha256 THEN
        RAISE EXCEPTION 'edc-sync: line % of trail % does not chain to line %', NEW.n, NEW.trail, prev.n USING ERRCODE = 'ED002';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER edc_sync_audit_line_chain BEFORE INSERT ON edc_sync_audit_line
    FOR EACH ROW EXECUTE FUNCTION edc_sync_audit_chain();
CREATE TRIGGER edc_sync_audit_line_append_only BEFORE UPDATE OR DELETE ON edc_sync_audit_line
    FOR EACH ROW EXECUTE FUNCTION edc_sync_append_only();
CREATE TRIGGER edc_sync_audit_line_no_truncate BEFORE TRUNCATE ON edc_sync_audit_line
    FOR EACH STATEMENT EXECUTE FUNCTION edc_sync_append_only();
CREATE TRIGGER edc_sync_manifest_append_only BEFORE UPDATE OR DELETE ON edc_sync_manifest
    FOR EACH ROW EXECUTE FUNCTION edc_sync_append_only();
CREATE TRIGGER edc_sync_manifest_no_truncate BEFORE TRUNCATE ON edc_sync_manifest
    FOR EACH STATEMENT EXECUTE FUNCTION edc_sync_append_only();
CREATE TRIGGER edc_sync_anchor_append_only BEFORE UPDATE OR DELETE ON edc_sync_anchor
    FOR EACH ROW EXECUTE FUNCTION edc_sync_append_only();
CREATE TRIGGER edc_sync_anchor_no_truncate BEFORE TRUNCATE ON edc_sync_anchor
    FOR EACH STATEMENT EXECUTE FUNCTION edc_sync_append_only();
CREATE TRIGGER edc_sync_identity_append_only BEFORE UPDATE OR DELETE ON edc_sync_identity
    FOR EACH ROW EXECUTE FUNCTION edc_sync_append_only();

REVOKE ALL ON edc_sync_identity, edc_sync_audit_line, edc_sync_manifest, edc_sync_cursor,
    edc_sync_run_lock, edc_sync_anchor FROM PUBLIC;
"#;

/// A cursor row is held to the line it names: it moves only in the
/// transaction that appends its `page_committed` line (a page commit:
/// line, manifest row and cursor in one transaction), or to exactly what
/// the stream's last commit records (`--repair-state`, which then writes
/// its `state_repaired` line). A role with UPDATE on the cursor (the run
/// role) can no longer move a stream on, or back, on its own; the start-up
/// proof still checks every row (an owner can turn triggers off).
const V2: &str = r#"
CREATE FUNCTION edc_sync_cursor_with_its_line() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ours boolean;
    says jsonb;
    last_commit bigint;
BEGIN
    SELECT l.xmin = pg_current_xact_id()::xid, (l.line::jsonb) -> 'cursor_state' INTO ours, says
        FROM edc_sync_audit_line l
        WHERE l.trail = NEW.trail AND l.n = NEW.audit_n AND l.event = 'page_committed' AND l.stream = NEW.stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'edc-sync: edc_sync_cursor row % names line % of trail %, which is no page_committed line of its stream',
            NEW.stream, NEW.audit_n, NEW.trail USING ERRCODE = 'ED003';
    END IF;
    IF ours THEN
        RETURN NEW;
    END IF;
    SELECT max(n) INTO last_commit FROM edc_sync_audit_line
        WHERE trail = NEW.trail AND event = 'page_committed' AND stream = NEW.stream;
    IF NEW.audit_n IS DISTINCT FROM last_commit OR (NEW.state::jsonb - 'receipt') IS DISTINCT FROM says THEN
        RAISE EXCEPTION 'edc-sync: edc_sync_cursor row % moves only with its page_committed line, in one transaction, or to what the stream''s last commit (line %) records',
            NEW.stream, last_commit USING ERRCODE = 'ED003';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER edc_sync_cursor_with_its_line BEFORE INSERT OR UPDATE ON edc_sync_cursor
    FOR EACH ROW EXECUTE FUNCTION edc_sync_cursor_with_its_line();
"#;

/// A `page_committed` line records the lookback memory by its seal (its
/// SHA-256, which SQL cannot recompute from `jsonb`), the cursor row holds
/// it whole: the trigger holds a row moved outside its commit's
/// transaction to everything else the line records, and the start-up
/// proof holds its memory to the seal.
const V3: &str = r#"
CREATE OR REPLACE FUNCTION edc_sync_cursor_with_its_line() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ours boolean;
    says jsonb;
    last_commit bigint;
BEGIN
    SELECT l.xmin = pg_current_xact_id()::xid, (l.line::jsonb) -> 'cursor_state' INTO ours, says
        FROM edc_sync_audit_line l
        WHERE l.trail = NEW.trail AND l.n = NEW.audit_n AND l.event = 'page_committed' AND l.stream = NEW.stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'edc-sync: edc_sync_cursor row % names line % of trail %, which is no page_committed line of its stream',
            NEW.stream, NEW.audit_n, NEW.trail USING ERRCODE = 'ED003';
    END IF;
    IF ours THEN
        RETURN NEW;
    END IF;
    SELECT max(n) INTO last_commit FROM edc_sync_audit_line
        WHERE trail = NEW.trail AND event = 'page_committed' AND stream = NEW.stream;
    IF NEW.audit_n IS DISTINCT FROM last_commit
        OR (NEW.state::jsonb - 'receipt' - 'lookback') IS DISTINCT FROM (says - 'lookback') THEN
        RAISE EXCEPTION 'edc-sync: edc_sync_cursor row % moves only with its page_committed line, in one transaction, or to what the stream''s last commit (line %) records',
            NEW.stream, last_commit USING ERRCODE = 'ED003';
    END IF;
    RETURN NEW;
END $$;
"#;

/// The run role appends through functions that run with the owner's
/// rights (SECURITY DEFINER), never by INSERT: a trail line through
/// `edc_sync_append_line` (the chain trigger still checks it, and, when an
/// audit key is required, a MAC from a holder of the key: [`super::gate`]),
/// a manifest row through `edc_sync_append_manifest` only with its
/// `page_committed` line in one transaction, an anchor through
/// `edc_sync_append_anchor` only as the line it names is. Every role that
/// could INSERT into those tables loses it here and gets the functions.
/// Each function's search path is fixed to the schema it was made in.
const V4: &str = r#"
CREATE TABLE edc_sync_append_gate (
    id bigserial PRIMARY KEY,
    key_id text NOT NULL,
    gate_key bytea NOT NULL CHECK (octet_length(gate_key) = 32),
    registered_at timestamptz NOT NULL DEFAULT now(),
    registered_by text NOT NULL DEFAULT current_user
);
REVOKE ALL ON edc_sync_append_gate FROM PUBLIC;
CREATE TRIGGER edc_sync_append_gate_append_only BEFORE UPDATE OR DELETE ON edc_sync_append_gate
    FOR EACH ROW EXECUTE FUNCTION edc_sync_append_only();
CREATE TRIGGER edc_sync_append_gate_no_truncate BEFORE TRUNCATE ON edc_sync_append_gate
    FOR EACH STATEMENT EXECUTE FUNCTION edc_sync_append_only();

-- RFC 2104 over the server's own SHA-256, for a key of 32 bytes.
CREATE FUNCTION edc_sync_hmac_sha256(k bytea, m bytea) RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    block bytea := k || decode(repeat('00', 64 - octet_length(k)), 'hex');
    inner_pad bytea := block;
    outer_pad bytea := block;
BEGIN
    FOR i IN 0..63 LOOP
        inner_pad := set_byte(inner_pad, i, get_byte(block, i) # 54);
        outer_pad := set_byte(outer_pad, i, get_byte(block, i) # 92);
    END LOOP;
    RETURN sha256(outer_pad || sha256(inner_pad || m));
END $$;

CREATE FUNCTION edc_sync_gate_key_id() RETURNS text LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT key_id FROM edc_sync_append_gate ORDER BY id DESC LIMIT 1
$$;

CREATE FUNCTION edc_sync_append_line(p_trail text, p_n bigint, p_offset bigint, p_line text, p_sha256 text,
        p_event text, p_stream text, p_gate_mac text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    gate edc_sync_append_gate%ROWTYPE;
BEGIN
    SELECT * INTO gate FROM edc_sync_append_gate ORDER BY id DESC LIMIT 1;
    IF FOUND AND p_gate_mac IS DISTINCT FROM
            encode(edc_sync_hmac_sha256(gate.gate_key, convert_to(p_sha256, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'edc-sync: line % of trail % is not from a holder of audit key % (state migrate --require-audit-key)',
            p_n, p_trail, gate.key_id USING ERRCODE = 'ED004';
    END IF;
    INSERT INTO edc_sync_audit_line (trail, n, byte_offset, line, sha256, event, stream)
        VALUES (p_trail, p_n, p_offset, p_line, p_sha256, p_event, p_stream);
END $$;

CREATE FUNCTION edc_sync_append_manifest(p_stream text, p_line text, p_page_key text, p_sha256 text,
        p_trail text, p_audit_n bigint) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM 1 FROM edc_sync_audit_line l
        WHERE l.trail = p_trail AND l.n = p_audit_n AND l.event = 'page_committed' AND l.stream = p_stream
          AND l.xmin = pg_current_xact_id()::xid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'edc-sync: a manifest row of stream % is added only with its page_committed line, in one transaction (line % of trail % is not one)',
            p_stream, p_audit_n, p_trail USING ERRCODE = 'ED005';
    END IF;
    INSERT INTO edc_sync_manifest (stream, n, line, page_key, sha256, trail, audit_n)
        SELECT p_stream, coalesce(max(n), 0) + 1, p_line, p_page_key, p_sha256, p_trail, p_audit_n
        FROM edc_sync_manifest WHERE stream = p_stream;
END $$;

CREATE FUNCTION edc_sync_append_anchor(p_trail text, p_n bigint, p_sha256 text) RETURNS void
        LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM 1 FROM edc_sync_audit_line WHERE trail = p_trail AND n = p_n AND sha256 = p_sha256;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'edc-sync: an anchor names line % of trail % as it is, and it is not %',
            p_n, p_trail, p_sha256 USING ERRCODE = 'ED005';
    END IF;
    INSERT INTO edc_sync_anchor (trail, n, sha256) VALUES (p_trail, p_n, p_sha256) ON CONFLICT DO NOTHING;
END $$;

-- What a run role may do to the evidence tables: add through the functions.
CREATE FUNCTION edc_sync_grant_appends(role text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON edc_sync_audit_line, edc_sync_manifest, '
        'edc_sync_anchor, edc_sync_append_gate FROM %I', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION edc_sync_append_line(text, bigint, bigint, text, text, text, text, text), '
        'edc_sync_append_manifest(text, text, text, text, text, bigint), edc_sync_append_anchor(text, bigint, text), '
        'edc_sync_gate_key_id() TO %I', role);
END $$;

REVOKE ALL ON FUNCTION edc_sync_hmac_sha256(bytea, bytea), edc_sync_gate_key_id(),
    edc_sync_append_line(text, bigint, bigint, text, text, text, text, text),
    edc_sync_append_manifest(text, text, text, text, text, bigint), edc_sync_append_anchor(text, bigint, text),
    edc_sync_grant_appends(text) FROM PUBLIC;

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT grantee FROM information_schema.role_table_grants
        WHERE table_schema = current_schema()
          AND table_name IN ('edc_sync_audit_line', 'edc_sync_manifest', 'edc_sync_anchor')
          AND privilege_type = 'INSERT' AND grantee NOT IN (current_user, 'PUBLIC')
    LOOP
        PERFORM edc_sync_grant_appends(r.grantee);
    END LOOP;
    EXECUTE format('ALTER FUNCTION edc_sync_gate_key_id() SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION edc_sync_append_line(text, bigint, bigint, text, text, text, text, text) '
        'SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION edc_sync_append_manifest(text, text, text, text, text, bigint) '
        'SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION edc_sync_append_anchor(text, bigint, text) '
        'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END $$;
"#;

/// The lookback memory a cursor row seals, kept as the journal beside a
/// cursor file is (`memory.rs`): a commit adds its change as a row in its
/// own transaction instead of rewriting the memory in the cursor row.
/// Rows are not evidence (the trail's seals prove them, and they are
/// replaced when they grow), so the run role that moves the cursor adds
/// and removes them; every role that may UPDATE the cursor gets that here.
const V5: &str = r#"
CREATE TABLE edc_sync_memory (
    stream text NOT NULL,
    n bigint NOT NULL CHECK (n >= 0),
    line text NOT NULL,
    PRIMARY KEY (stream, n)
);
REVOKE ALL ON edc_sync_memory FROM PUBLIC;

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT grantee FROM information_schema.role_table_grants
        WHERE table_schema = current_schema() AND table_name = 'edc_sync_cursor'
          AND privilege_type = 'UPDATE' AND grantee NOT IN (current_user, 'PUBLIC')
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON edc_sync_memory TO %I', r.grantee);
    END LOOP;
END $$;
"#;

/// A session searches its own temporary tables before any schema, so a
/// role that may create one could shadow `edc_sync_audit_line` with a
/// table of its own and have a trigger read that instead (a cursor row
/// moved "with its line" when the line is the role's own). From here every
/// function the schema made, triggers included, runs with its search path
/// fixed to `pg_catalog`, the schema it was made in and `pg_temp` last, and
/// names every table by that schema; and no role that may move a cursor
/// keeps TEMP on the database (the grant step checks it: [`migrate`]).
/// `@schema@` is the schema the migration runs in, as a quoted identifier.
const V6: &str = r#"
CREATE OR REPLACE FUNCTION @schema@.edc_sync_append_only() RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, @schema@, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'edc-sync: % is append-only; % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'ED001';
END $$;

CREATE OR REPLACE FUNCTION @schema@.edc_sync_audit_chain() RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    prev @schema@.edc_sync_audit_line%ROWTYPE;
BEGIN
    IF NEW.sha256 <> encode(sha256(convert_to(NEW.line, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'edc-sync: line % of trail % does not hash to its sha256', NEW.n, NEW.trail USING ERRCODE = 'ED002';
    END IF;
    SELECT * INTO prev FROM @schema@.edc_sync_audit_line WHERE trail = NEW.trail ORDER BY n DESC LIMIT 1;
    IF NOT FOUND THEN
        IF NEW.n <> 1 OR NEW.byte_offset <> 0 OR (NEW.line::json ->> 'prev_sha256') IS DISTINCT FROM repeat('0', 64) THEN
            RAISE EXCEPTION 'edc-sync: the first line of trail % must be line 1 at byte 0 chained to zeros', NEW.trail USING ERRCODE = 'ED002';
        END IF;
    ELSIF NEW.n <> prev.n + 1
        OR NEW.byte_offset <> prev.byte_offset + octet_length(prev.line) + 1
        OR (NEW.line::json ->> 'prev_sha256') IS DISTINCT FROM prev.sha256 THEN
        RAISE EXCEPTION 'edc-sync: line % of trail % does not chain to line %', NEW.n, NEW.trail, prev.n USING ERRCODE = 'ED002';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION @schema@.edc_sync_cursor_with_its_line() RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    ours boolean;
    says jsonb;
    last_commit bigint;
BEGIN
    SELECT l.xmin = pg_current_xact_id()::xid, (l.line::jsonb) -> 'cursor_state' INTO ours, says
        FROM @schema@.edc_sync_audit_line l
        WHERE l.trail = NEW.trail AND l.n = NEW.audit_n AND l.event = 'page_committed' AND l.stream = NEW.stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'edc-sync: edc_sync_cursor row % names line % of trail %, which is no page_committed line of its stream',
            NEW.stream, NEW.audit_n, NEW.trail USING ERRCODE = 'ED003';
    END IF;
    IF ours THEN
        RETURN NEW;
    END IF;
    SELECT max(n) INTO last_commit FROM @schema@.edc_sync_audit_line
        WHERE trail = NEW.trail AND event = 'page_committed' AND stream = NEW.stream;
    IF NEW.audit_n IS DISTINCT FROM last_commit
        OR (NEW.state::jsonb - 'receipt' - 'lookback') IS DISTINCT FROM (says - 'lookback') THEN
        RAISE EXCEPTION 'edc-sync: edc_sync_cursor row % moves only with its page_committed line, in one transaction, or to what the stream''s last commit (line %) records',
            NEW.stream, last_commit USING ERRCODE = 'ED003';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION @schema@.edc_sync_hmac_sha256(k bytea, m bytea) RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT
        SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    block bytea := k || decode(repeat('00', 64 - octet_length(k)), 'hex');
    inner_pad bytea := block;
    outer_pad bytea := block;
BEGIN
    FOR i IN 0..63 LOOP
        inner_pad := set_byte(inner_pad, i, get_byte(block, i) # 54);
        outer_pad := set_byte(outer_pad, i, get_byte(block, i) # 92);
    END LOOP;
    RETURN sha256(outer_pad || sha256(inner_pad || m));
END $$;

CREATE OR REPLACE FUNCTION @schema@.edc_sync_gate_key_id() RETURNS text LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT key_id FROM @schema@.edc_sync_append_gate ORDER BY id DESC LIMIT 1
$$;

CREATE OR REPLACE FUNCTION @schema@.edc_sync_append_line(p_trail text, p_n bigint, p_offset bigint, p_line text,
        p_sha256 text, p_event text, p_stream text, p_gate_mac text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
        SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    gate @schema@.edc_sync_append_gate%ROWTYPE;
BEGIN
    SELECT * INTO gate FROM @schema@.edc_sync_append_gate ORDER BY id DESC LIMIT 1;
    IF FOUND AND p_gate_mac IS DISTINCT FROM
            encode(@schema@.edc_sync_hmac_sha256(gate.gate_key, convert_to(p_sha256, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'edc-sync: line % of trail % is not from a holder of audit key % (state migrate --require-audit-key)',
            p_n, p_trail, gate.key_id USING ERRCODE = 'ED004';
    END IF;
    INSERT INTO @schema@.edc_sync_audit_line (trail, n, byte_offset, line, sha256, event, stream)
        VALUES (p_trail, p_n, p_offset, p_line, p_sha256, p_event, p_stream);
END $$;

CREATE OR REPLACE FUNCTION @schema@.edc_sync_append_manifest(p_stream text, p_line text, p_page_key text,
        p_sha256 text, p_trail text, p_audit_n bigint) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
        SET search_path = pg_catalog, @schema@, pg_temp AS $$
BEGIN
    PERFORM 1 FROM @schema@.edc_sync_audit_line l
        WHERE l.trail = p_trail AND l.n = p_audit_n AND l.event = 'page_committed' AND l.stream = p_stream
          AND l.xmin = pg_current_xact_id()::xid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'edc-sync: a manifest row of stream % is added only with its page_committed line, in one transaction (line % of trail % is not one)',
            p_stream, p_audit_n, p_trail USING ERRCODE = 'ED005';
    END IF;
    INSERT INTO @schema@.edc_sync_manifest (stream, n, line, page_key, sha256, trail, audit_n)
        SELECT p_stream, coalesce(max(n), 0) + 1, p_line, p_page_key, p_sha256, p_trail, p_audit_n
        FROM @schema@.edc_sync_manifest WHERE stream = p_stream;
END $$;

CREATE OR REPLACE FUNCTION @schema@.edc_sync_append_anchor(p_trail text, p_n bigint, p_sha256 text) RETURNS void
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
BEGIN
    PERFORM 1 FROM @schema@.edc_sync_audit_line WHERE trail = p_trail AND n = p_n AND sha256 = p_sha256;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'edc-sync: an anchor names line % of trail % as it is, and it is not %',
            p_n, p_trail, p_sha256 USING ERRCODE = 'ED005';
    END IF;
    INSERT INTO @schema@.edc_sync_anchor (trail, n, sha256) VALUES (p_trail, p_n, p_sha256) ON CONFLICT DO NOTHING;
END $$;

CREATE OR REPLACE FUNCTION @schema@.edc_sync_grant_appends(role text) RETURNS void LANGUAGE plpgsql
        SET search_path = pg_catalog, @schema@, pg_temp AS $$
BEGIN
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON @schema@.edc_sync_audit_line, @schema@.edc_sync_manifest, '
        '@schema@.edc_sync_anchor, @schema@.edc_sync_append_gate FROM %I', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION @schema@.edc_sync_append_line(text, bigint, bigint, text, text, text, text, text), '
        '@schema@.edc_sync_append_manifest(text, text, text, text, text, bigint), '
        '@schema@.edc_sync_append_anchor(text, bigint, text), @schema@.edc_sync_gate_key_id() TO %I', role);
END $$;

-- TEMP is a right on the database, not the schema: a migration run by
-- the database's owner takes it from PUBLIC and from every role that may
-- move a cursor; run by anyone else this only warns, and the grant step
-- refuses a run role that still has it.
DO $$
DECLARE
    r record;
BEGIN
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    FOR r IN SELECT DISTINCT grantee FROM information_schema.role_table_grants
        WHERE table_schema = current_schema() AND table_name = 'edc_sync_cursor'
          AND privilege_type = 'UPDATE' AND grantee NOT IN (current_user, 'PUBLIC')
    LOOP
        EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM %I', current_database(), r.grantee);
    END LOOP;
END $$;
"#;

/// What the run role is granted (`state migrate --grant-to ROLE`): reading
/// everything, adding to the trail, the manifest and the anchors through
/// the append functions only (`edc_sync_grant_appends`, version 4), and
/// moving only the cursor (with its lookback memory's rows, version 5) and
/// the run lock. Never UPDATE or DELETE on a table whose rows are evidence,
/// and never TEMP on the database (version 6): [`migrate`] then checks that
/// the role has none left, from PUBLIC or from a grant of its own.
const GRANTS: [&str; 5] = [
    "REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC, {role}",
    "GRANT SELECT ON edc_sync_schema, edc_sync_identity, edc_sync_audit_line, edc_sync_manifest, edc_sync_anchor \
     TO {role}",
    "GRANT SELECT, INSERT, UPDATE ON edc_sync_cursor, edc_sync_run_lock TO {role}",
    "GRANT SELECT, INSERT, DELETE ON edc_sync_memory TO {role}",
    "SELECT edc_sync_grant_appends({literal})",
];

/// One migration applied by [`migrate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub version: i32,
    pub description: &'static str,
}

/// Brings the schema to [`CURRENT`], each migration in its own
/// transaction with its `edc_sync_schema` row; grants the run role its
/// rights when `grant_to` names one. Refuses a database newer than this
/// binary (78). Returns what it applied (nothing when current).
pub async fn migrate(
    client: &mut tokio_postgres::Client,
    url: &DbUrl,
    grant_to: Option<&str>,
) -> Result<Vec<Applied>, DbError> {
    let classify = |op| move |e| super::error::classify(url, op, e);
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS edc_sync_schema (
                 version integer PRIMARY KEY,
                 description text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now(),
                 applied_by text NOT NULL DEFAULT current_user,
                 tool_version text NOT NULL
             )",
        )
        .await
        .map_err(classify("create the schema table in"))?;
    let found = version(client, url).await?;
    if found > CURRENT {
        return Err(newer(url, found));
    }
    let schema: Option<String> = client
        .query_one("SELECT current_schema()", &[])
        .await
        .map_err(classify("read the schema of"))?
        .get(0);
    let schema = schema.ok_or_else(|| DbError::Config {
        url: url.shown().to_string(),
        detail: "has no schema on the search path to create the edc-sync schema in (nothing was written)"
            .into(),
    })?;
    let mut applied = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| m.version > found) {
        let tx = client
            .transaction()
            .await
            .map_err(classify("start a migration in"))?;
        tx.batch_execute(&m.sql.replace("@schema@", &quote_ident(&schema)))
            .await
            .map_err(classify("apply a migration to"))?;
        tx.execute(
            "INSERT INTO edc_sync_schema (version, description, tool_version) VALUES ($1, $2, $3)",
            &[&m.version, &m.description, &env!("CARGO_PKG_VERSION").to_string()],
        )
        .await
        .map_err(classify("record a migration in"))?;
        tx.commit().await.map_err(classify("commit a migration to"))?;
        applied.push(Applied {
            version: m.version,
            description: m.description,
        });
    }
    if let Some(role) = grant_to {
        grant(client, url, role).await?;
    }
    Ok(applied)
}

/// Grants `role` what runs need ([`GRANTS`]), then refuses (78) when it
/// can still create temporary tables: only the database's owner can take
/// TEMP from PUBLIC, and a schema owner who is not it is told what to ask.
async fn grant(client: &tokio_postgres::Client, url: &DbUrl, role: &str) -> Result<(), DbError> {
    let classify = |op| move |e| super::error::classify(url, op, e);
    let database: String = client
        .query_one("SELECT current_database()", &[])
        .await
        .map_err(classify("read the name of"))?
        .get(0);
    let literal = format!("'{}'", role.replace('\'', "''"));
    for grant in GRANTS {
        let sql = grant
            .replace("{role}", &quote_ident(role))
            .replace("{literal}", &literal)
            .replace("{database}", &quote_ident(&database));
        client
            .batch_execute(&sql)
            .await
            .map_err(classify("grant the run role its rights in"))?;
    }
    let temp: bool = client
        .query_one(
            "SELECT has_database_privilege($1, current_database(), 'TEMPORARY')",
            &[&role],
        )
        .await
        .map_err(classify("read the run role's rights in"))?
        .get(0);
    if temp {
        return Err(DbError::Config {
            url: url.shown().to_string(),
            detail: format!(
                "the run role {role} can still create temporary tables in database {database}, which could \
                 shadow the trail for its own session; as the database's owner run `REVOKE TEMPORARY ON \
                 DATABASE {q} FROM PUBLIC, {r}` (and from any role {role} is a member of that holds it), then \
                 migrate again with --grant-to",
                q = quote_ident(&database),
                r = quote_ident(role)
            ),
        });
    }
    Ok(())
}

/// The schema version of the database (0: none yet).
pub async fn version(client: &tokio_postgres::Client, url: &DbUrl) -> Result<i32, DbError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('edc_sync_schema') IS NOT NULL", &[])
        .await
        .map_err(|e| super::error::classify(url, "read the schema version of", e))?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM edc_sync_schema", &[])
        .await
        .map_err(|e| super::error::classify(url, "read the schema version of", e))?;
    Ok(row.get(0))
}

/// The version a run needs, or a refusal saying which way it is off (78).
pub async fn require_current(client: &tokio_postgres::Client, url: &DbUrl) -> Result<i32, DbError> {
    let found = version(client, url).await?;
    match found {
        v if v == CURRENT => Ok(v),
        v if v > CURRENT => Err(newer(url, v)),
        0 => Err(DbError::Config {
            url: url.shown().to_string(),
            detail: format!(
                "holds no edc-sync schema; create it (schema version {CURRENT}) with `edc-sync state migrate \
                 --state {url}` as the schema's owner"
            ),
        }),
        v => Err(DbError::Config {
            url: url.shown().to_string(),
            detail: format!(
                "schema version {v} is older than this binary's {CURRENT}; apply the migrations with \
                 `edc-sync state migrate --state {url}` as the schema's owner (nothing was written)"
            ),
        }),
    }
}

/// The identity the first migration made.
pub(super) async fn state_id(client: &tokio_postgres::Client, url: &DbUrl) -> Result<String, DbError> {
    client
        .query_one("SELECT state_id FROM edc_sync_identity", &[])
        .await
        .map(|r| r.get(0))
        .map_err(|e| super::error::classify(url, "read the state id of", e))
}

fn newer(url: &DbUrl, found: i32) -> DbError {
    DbError::Config {
        url: url.shown().to_string(),
        detail: format!(
            "schema version {found} is newer than this binary understands ({CURRENT}); run the edc-sync \
             release that migrated it (nothing was written)"
        ),
    }
}

/// `role` as a quoted SQL identifier.
fn quote_ident(role: &str) -> String {
    format!("\"{}\"", role.replace('"', "\"\""))
}
