// Migration 7: the operator inbox's and the lease sweeper's indexes hold only the rows those
// queries look for. Before, every reservation had an entry in reservations_unknown and every
// idempotency key one in idempotency_leases, so each create_order rewrote a page of each index
// in both of its transactions although almost no row is ever outcome-unknown and a key is in
// flight only for the length of its provider call.

import type { Migration } from "../driver.js";

const both = `
DROP INDEX reservations_unknown;
CREATE INDEX reservations_unknown ON reservations (created_at_ms) WHERE outcome_unknown = 1 AND status = 'held';
DROP INDEX idempotency_leases;
CREATE INDEX idempotency_leases ON idempotency_keys (lease_expires_at_ms) WHERE status = 'in_flight';
`;

export const migration: Migration = { version: 7, name: "partial_indexes", sqlite: both, postgres: both };
