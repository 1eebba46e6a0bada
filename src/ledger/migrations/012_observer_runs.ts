// Migration 12: each running observer's count of the tools/call it took in and of those it
// wrote down, so that a process that stops without draining its queue (killed, crashed, or
// closed while the store failed) leaves a trace: another start finds its run unended and
// silent, and writes a system.observer_lost entry saying how many calls had no entry.

import type { Migration } from "../driver.js";

const ddl = (bigint: string) => `
CREATE TABLE observer_runs (
  run_id TEXT PRIMARY KEY,
  started_at_ms ${bigint} NOT NULL,
  seen_at_ms ${bigint} NOT NULL,
  calls_taken ${bigint} NOT NULL DEFAULT 0 CHECK (calls_taken >= 0),
  calls_written ${bigint} NOT NULL DEFAULT 0 CHECK (calls_written >= 0),
  ended_at_ms ${bigint}
);
CREATE INDEX observer_runs_open ON observer_runs (seen_at_ms) WHERE ended_at_ms IS NULL;
`;

export const migration: Migration = { version: 12, name: "observer_runs", sqlite: ddl("INTEGER"), postgres: ddl("BIGINT") };
