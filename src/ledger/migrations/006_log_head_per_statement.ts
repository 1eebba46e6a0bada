// PostgreSQL advances the log head once per INSERT statement instead of once per entry. The row
// trigger of migration 2 updated log_head for every entry: a batch of 16 entries made 16 versions
// of that row, and this work ran while the batch held the log's sequence lock (about 0.25 ms of
// server time per batch of 16, measured with pgbench). An AFTER STATEMENT trigger reads the
// statement's new rows once and moves the head by their count, under the same rule: the new
// sequence numbers must be exactly head, head + 1, … (the primary key makes them distinct, so a
// count and the lowest and highest number prove there is no gap). SQLite keeps its row trigger.

import type { Migration } from "../driver.js";

const postgres = `
DROP TRIGGER log_entries_seq_is_next ON log_entries;
DROP FUNCTION log_entries_take_next_seq();

CREATE FUNCTION log_entries_advance_head() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  added BIGINT;
  lowest BIGINT;
  highest BIGINT;
BEGIN
  SELECT COUNT(*), MIN(seq), MAX(seq) INTO added, lowest, highest FROM new_entries;
  IF added = 0 THEN
    RETURN NULL;
  END IF;
  UPDATE log_head SET size = size + added WHERE id = 1 AND size = lowest AND highest = lowest + added - 1;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'log_entries: seq % to % is not the next % sequence numbers', lowest, highest, added;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER log_entries_seq_is_next AFTER INSERT ON log_entries
  REFERENCING NEW TABLE AS new_entries
  FOR EACH STATEMENT EXECUTE FUNCTION log_entries_advance_head();

-- As before, only the entry trigger's own UPDATE (trigger depth 2) may move the head, and only
-- forward; it now moves by a statement's entries at once.
CREATE OR REPLACE FUNCTION log_head_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_trigger_depth() < 2 OR NEW.id <> OLD.id OR NEW.size <= OLD.size THEN
    RAISE EXCEPTION 'log_head advances only by inserting the next entries';
  END IF;
  RETURN NEW;
END $$;
`;

export const migration: Migration = { version: 6, name: "log_head_per_statement", sqlite: "", postgres };
