// Migration 2: the evidence log's tables. Entries and checkpoints are append-only and
// sequence numbers gap-free, enforced by triggers in both dialects, not only by code.

import type { Migration } from "../driver.js";

// log_head is the one-row sequence counter. Appends lock it first (FOR UPDATE on Postgres:
// "the log's sequence lock"), insert entries whose seq must equal head.size, and the
// insert trigger advances head.size by one per row, so a seq can neither repeat nor skip.
// The tables are the same in both dialects but for the width of sequence numbers.
const tables = (bigint: string) => `
CREATE TABLE log_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  size ${bigint} NOT NULL CHECK (size >= 0)
);
INSERT INTO log_head (id, size) VALUES (1, 0);

CREATE TABLE log_entries (
  seq ${bigint} PRIMARY KEY CHECK (seq >= 0),
  kind TEXT NOT NULL,
  source TEXT NOT NULL,
  received_at TEXT NOT NULL,
  entry_text TEXT NOT NULL,
  leaf_hash TEXT NOT NULL CHECK (length(leaf_hash) = 64),
  receipt_signature TEXT NOT NULL
);

CREATE TABLE log_checkpoints (
  tree_size ${bigint} PRIMARY KEY CHECK (tree_size >= 0),
  root_hash TEXT NOT NULL CHECK (length(root_hash) = 64),
  note TEXT NOT NULL,
  created_at TEXT NOT NULL
);`;

const sqlite = `${tables("INTEGER")}

CREATE TRIGGER log_entries_seq_is_next BEFORE INSERT ON log_entries
WHEN NEW.seq IS NOT (SELECT size FROM log_head WHERE id = 1)
BEGIN SELECT RAISE(ABORT, 'log_entries: seq is not the next sequence number'); END;

CREATE TRIGGER log_entries_advance_head AFTER INSERT ON log_entries
BEGIN UPDATE log_head SET size = size + 1 WHERE id = 1; END;

CREATE TRIGGER log_entries_no_update BEFORE UPDATE ON log_entries
BEGIN SELECT RAISE(ABORT, 'log_entries is append-only'); END;

CREATE TRIGGER log_entries_no_delete BEFORE DELETE ON log_entries
BEGIN SELECT RAISE(ABORT, 'log_entries is append-only'); END;

CREATE TRIGGER log_head_forward_only BEFORE UPDATE ON log_head
WHEN NEW.id IS NOT OLD.id OR NEW.size IS NOT OLD.size + 1
  OR NOT EXISTS (SELECT 1 FROM log_entries WHERE seq = OLD.size)
BEGIN SELECT RAISE(ABORT, 'log_head advances only by inserting the next entry'); END;

CREATE TRIGGER log_head_no_delete BEFORE DELETE ON log_head
BEGIN SELECT RAISE(ABORT, 'log_head cannot be deleted'); END;

CREATE TRIGGER log_checkpoints_no_update BEFORE UPDATE ON log_checkpoints
BEGIN SELECT RAISE(ABORT, 'log_checkpoints is append-only'); END;

CREATE TRIGGER log_checkpoints_no_delete BEFORE DELETE ON log_checkpoints
BEGIN SELECT RAISE(ABORT, 'log_checkpoints is append-only'); END;
`;

// Postgres fires AFTER ROW triggers at the end of a multi-row statement, so the head is
// checked and advanced in one BEFORE ROW trigger instead (migration 6 replaces it with one
// AFTER STATEMENT trigger that advances the head once per INSERT).
const postgres = `${tables("BIGINT")}

CREATE FUNCTION log_entries_take_next_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE log_head SET size = size + 1 WHERE id = 1 AND size = NEW.seq;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'log_entries: seq % is not the next sequence number', NEW.seq;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER log_entries_seq_is_next BEFORE INSERT ON log_entries
  FOR EACH ROW EXECUTE FUNCTION log_entries_take_next_seq();

CREATE FUNCTION log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
CREATE TRIGGER log_entries_append_only BEFORE UPDATE OR DELETE ON log_entries
  FOR EACH ROW EXECUTE FUNCTION log_refuse_change();
CREATE TRIGGER log_entries_no_truncate BEFORE TRUNCATE ON log_entries
  FOR EACH STATEMENT EXECUTE FUNCTION log_refuse_change();
CREATE TRIGGER log_checkpoints_append_only BEFORE UPDATE OR DELETE ON log_checkpoints
  FOR EACH ROW EXECUTE FUNCTION log_refuse_change();
CREATE TRIGGER log_checkpoints_no_truncate BEFORE TRUNCATE ON log_checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION log_refuse_change();
CREATE TRIGGER log_head_no_delete BEFORE DELETE ON log_head
  FOR EACH ROW EXECUTE FUNCTION log_refuse_change();
CREATE TRIGGER log_head_no_truncate BEFORE TRUNCATE ON log_head
  FOR EACH STATEMENT EXECUTE FUNCTION log_refuse_change();

-- Only the entry trigger's own UPDATE (trigger depth 2) may move the head: a bare
-- "UPDATE log_head" from a session is depth 1 and is refused, as SQLite refuses a head bump
-- with no entry behind it.
CREATE FUNCTION log_head_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_trigger_depth() < 2 OR NEW.id <> OLD.id OR NEW.size <> OLD.size + 1 THEN
    RAISE EXCEPTION 'log_head advances only by inserting the next entry';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER log_head_forward_only BEFORE UPDATE ON log_head
  FOR EACH ROW EXECUTE FUNCTION log_head_forward_only();
`;

export const migration: Migration = { version: 2, name: "evidence", sqlite, postgres };
