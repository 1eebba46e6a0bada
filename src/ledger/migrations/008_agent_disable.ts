// Migration 8: an operator can disable an agent. Its token then authenticates nothing, so a
// hostile agent's calls stop reaching the ledger at all: a revoked block still refused each of
// them with an evidence entry and a velocity row, which a looping agent could keep writing.

import type { Migration } from "../driver.js";

export const migration: Migration = {
  version: 8,
  name: "agent_disable",
  sqlite: "ALTER TABLE agents ADD COLUMN disabled_at_ms INTEGER;",
  postgres: "ALTER TABLE agents ADD COLUMN disabled_at_ms BIGINT;",
};
