// Migration 11: a rotation sent with an Idempotency-Key can be repeated after a lost answer.
// Without it, the retry was a second rotation, which ended the secrets the source's gateway
// still used (an earlier rotation's grace ends at the next one) and issued secrets nobody
// had seen. The answer is kept sealed under the master key for an hour at most, and only while
// its secrets are the source's current ones: the maintenance sweep, the next rotation or a
// disable erases it.

import type { Migration } from "../driver.js";

const ddl = (bigint: string) => `
CREATE TABLE evidence_source_rotations (
  source_id TEXT NOT NULL REFERENCES evidence_sources (source_id),
  idempotency_key TEXT NOT NULL,
  request_sha256 TEXT NOT NULL CHECK (length(request_sha256) = 64),
  sealed_answer TEXT,
  created_at_ms ${bigint} NOT NULL,
  PRIMARY KEY (source_id, idempotency_key)
);
`;

export const migration: Migration = { version: 11, name: "rotation_replays", sqlite: ddl("INTEGER"), postgres: ddl("BIGINT") };
