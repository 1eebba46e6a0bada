// Payments counted as unreconciled money: one row per payment id, so a conflicting payment adds
// to its block's `unreconciled` once however many webhooks, captures or checks report it.

import type { Migration } from "../driver.js";

const ddl = (bigint: string) => `
CREATE TABLE unreconciled_payments (
  payment_id TEXT PRIMARY KEY,
  reservation_id TEXT NOT NULL REFERENCES reservations (reservation_id),
  block_id TEXT NOT NULL REFERENCES blocks (block_id),
  amount ${bigint} NOT NULL CHECK (amount >= 0),
  currency TEXT NOT NULL,
  reason TEXT NOT NULL,
  counted_at_ms ${bigint} NOT NULL
);
`;

export const migration: Migration = { version: 5, name: "unreconciled", sqlite: ddl("INTEGER"), postgres: ddl("BIGINT") };
