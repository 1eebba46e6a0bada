// The ledger's tables: agents, blocks, reservations, idempotency keys, velocity counts,
// approvals and webhook event ids. The balance invariant lives in the schema, not only in code.

import type { Migration } from "../driver.js";

const common = (bigint: string) => `
CREATE TABLE agents (
  agent_id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  token_sha256 TEXT NOT NULL UNIQUE,
  created_at_ms ${bigint} NOT NULL
);

CREATE TABLE blocks (
  block_id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(agent_id),
  currency TEXT NOT NULL CHECK (length(currency) = 3),
  reserved ${bigint} NOT NULL CHECK (reserved > 0 AND reserved <= 1000000000000),
  spent ${bigint} NOT NULL DEFAULT 0,
  held ${bigint} NOT NULL DEFAULT 0,
  unreconciled ${bigint} NOT NULL DEFAULT 0 CHECK (unreconciled >= 0),
  per_call_cap ${bigint} NOT NULL CHECK (per_call_cap > 0),
  approval_threshold ${bigint} NOT NULL CHECK (approval_threshold >= 0),
  velocity_max_calls INTEGER NOT NULL CHECK (velocity_max_calls > 0),
  velocity_window_seconds INTEGER NOT NULL CHECK (velocity_window_seconds > 0),
  created_at_ms ${bigint} NOT NULL,
  expires_at_ms ${bigint} NOT NULL,
  revoked_at_ms ${bigint},
  frozen_at_ms ${bigint},
  freeze_reason TEXT,
  CHECK (spent >= 0 AND held >= 0 AND spent + held <= reserved)
);
CREATE INDEX blocks_by_agent ON blocks (agent_id, created_at_ms);

CREATE TABLE reservations (
  reservation_id TEXT PRIMARY KEY,
  block_id TEXT NOT NULL REFERENCES blocks(block_id),
  agent_id TEXT NOT NULL REFERENCES agents(agent_id),
  amount ${bigint} NOT NULL CHECK (amount > 0),
  currency TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('held', 'committed', 'released')),
  outcome_unknown INTEGER NOT NULL DEFAULT 0,
  unknown_reason TEXT,
  order_id TEXT UNIQUE,
  payment_id TEXT UNIQUE,
  captured_amount ${bigint},
  release_reason TEXT,
  created_at_ms ${bigint} NOT NULL,
  updated_at_ms ${bigint} NOT NULL
);
CREATE INDEX reservations_by_block ON reservations (block_id, created_at_ms);
CREATE INDEX reservations_unknown ON reservations (outcome_unknown, status);

CREATE TABLE idempotency_keys (
  agent_id TEXT NOT NULL REFERENCES agents(agent_id),
  key TEXT NOT NULL,
  derived INTEGER NOT NULL,
  tool TEXT NOT NULL,
  params_hash TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('in_flight', 'stored')),
  effect TEXT,
  reservation_id TEXT REFERENCES reservations(reservation_id),
  approval_id TEXT,
  result_json TEXT,
  first_at_ms ${bigint} NOT NULL,
  lease_expires_at_ms ${bigint},
  PRIMARY KEY (agent_id, key)
);
CREATE INDEX idempotency_leases ON idempotency_keys (status, lease_expires_at_ms);

CREATE TABLE money_calls (
  agent_id TEXT NOT NULL,
  at_ms ${bigint} NOT NULL
);
CREATE INDEX money_calls_window ON money_calls (agent_id, at_ms);

CREATE TABLE approvals (
  approval_id TEXT PRIMARY KEY,
  reservation_id TEXT NOT NULL UNIQUE REFERENCES reservations(reservation_id),
  agent_id TEXT NOT NULL REFERENCES agents(agent_id),
  block_id TEXT NOT NULL REFERENCES blocks(block_id),
  idempotency_key TEXT NOT NULL,
  tool TEXT NOT NULL,
  args_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'forwarding', 'approved', 'denied', 'expired')),
  created_at_ms ${bigint} NOT NULL,
  expires_at_ms ${bigint} NOT NULL,
  decided_at_ms ${bigint},
  result_json TEXT
);
CREATE INDEX approvals_by_state ON approvals (state, expires_at_ms);

CREATE TABLE webhook_events (
  event_id TEXT PRIMARY KEY,
  event TEXT NOT NULL,
  payment_id TEXT,
  outcome TEXT NOT NULL,
  received_at_ms ${bigint} NOT NULL
);

CREATE TABLE settings (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
`;

export const migration: Migration = {
  version: 1,
  name: "ledger",
  sqlite: common("INTEGER"),
  postgres: common("BIGINT"),
};
