// Migration 10: each agent's money calls are numbered (n = 1, 2, 3, … in time order), so the
// velocity guard counts the calls in a window from two index seeks (the newest call's number less
// the number of the window's first call, plus one) instead of stepping through every call in the
// window under the write lock: up to max_calls index entries for each decision, a millisecond
// and more for an agent allowed thousands of calls a window. A number is the agent's once: the
// table is keyed by (agent_id, n) (on SQLite without a rowid), so two PostgreSQL transactions
// that number a call alike collide, and the driver runs the later one again (see
// recordMoneyCall). The existing rows are numbered by time; SQLite cannot add a NOT NULL column
// without a default, so the table is copied.

import type { Migration } from "../driver.js";

const common = (bigint: string, table_options: string) => `
CREATE TABLE money_calls_numbered (
  agent_id TEXT NOT NULL,
  at_ms ${bigint} NOT NULL,
  n ${bigint} NOT NULL,
  CONSTRAINT money_calls_number PRIMARY KEY (agent_id, n)
)${table_options};
INSERT INTO money_calls_numbered (agent_id, at_ms, n)
  SELECT agent_id, at_ms, ROW_NUMBER() OVER (PARTITION BY agent_id ORDER BY at_ms) FROM money_calls;
DROP TABLE money_calls;
ALTER TABLE money_calls_numbered RENAME TO money_calls;
CREATE INDEX money_calls_window ON money_calls (agent_id, at_ms, n);
`;

export const migration: Migration = { version: 10, name: "velocity_ordinal", sqlite: common("INTEGER", " WITHOUT ROWID"), postgres: common("BIGINT", "") };
