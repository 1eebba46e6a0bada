// Migration 4: evidence sources (decision-record feeds and chained observers), their
// secrets (hashes, or ciphertext for the HMAC signing key), and ingested records for
// idempotency per (source, event_id) with the signed receipt of each delivery.

import type { Migration } from "../driver.js";

const ddl = (bigint: string) => `
CREATE TABLE evidence_sources (
  source_id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('decisions', 'observer')),
  name TEXT NOT NULL,
  upstream_url TEXT,
  shadow_json TEXT,
  created_at_ms ${bigint} NOT NULL,
  disabled_at_ms ${bigint},
  CHECK ((kind = 'observer') = (upstream_url IS NOT NULL))
);

CREATE TABLE evidence_source_secrets (
  secret_id TEXT PRIMARY KEY,
  source_id TEXT NOT NULL REFERENCES evidence_sources (source_id),
  purpose TEXT NOT NULL CHECK (purpose IN ('signing_key', 'api_key', 'observer_token')),
  token_sha256 TEXT UNIQUE,
  ciphertext TEXT,
  created_at_ms ${bigint} NOT NULL,
  expires_at_ms ${bigint},
  CHECK ((purpose = 'signing_key') = (ciphertext IS NOT NULL)),
  CHECK ((purpose = 'signing_key') = (token_sha256 IS NULL))
);
CREATE INDEX evidence_source_secrets_by_source ON evidence_source_secrets (source_id, purpose);

CREATE TABLE ingest_deliveries (
  delivery_id TEXT PRIMARY KEY,
  source_id TEXT NOT NULL REFERENCES evidence_sources (source_id),
  received_at TEXT NOT NULL,
  records ${bigint} NOT NULL CHECK (records >= 1 AND records <= 500),
  receipt_json TEXT NOT NULL
);

CREATE TABLE ingest_records (
  source_id TEXT NOT NULL REFERENCES evidence_sources (source_id),
  event_id TEXT NOT NULL,
  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
  seq ${bigint} NOT NULL UNIQUE,
  leaf_hash TEXT NOT NULL CHECK (length(leaf_hash) = 64),
  occurred_at TEXT NOT NULL,
  received_at TEXT NOT NULL,
  delivery_id TEXT NOT NULL REFERENCES ingest_deliveries (delivery_id),
  PRIMARY KEY (source_id, event_id)
);
`;

export const migration: Migration = { version: 4, name: "sources", sqlite: ddl("INTEGER"), postgres: ddl("BIGINT") };
