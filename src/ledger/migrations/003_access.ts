// Read-only auditor tokens the operator issues for the evidence log's entries and proofs.

import type { Migration } from "../driver.js";

const ddl = (bigint: string) => `
CREATE TABLE auditor_tokens (
  auditor_id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  token_sha256 TEXT NOT NULL UNIQUE,
  created_at_ms ${bigint} NOT NULL,
  revoked_at_ms ${bigint}
);
`;

export const migration: Migration = { version: 3, name: "access", sqlite: ddl("INTEGER"), postgres: ddl("BIGINT") };
