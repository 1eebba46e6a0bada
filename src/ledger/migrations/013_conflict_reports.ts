// Migration 13: conflicts that moved no money (a payment's status contradicting a capture, a
// payment reused across reservations, a settled payment reported again otherwise), one row per
// report as it read. The provider reports one fact several times (payment.captured and
// order.paid, retries for a day): the first report freezes the block, and the same report again
// is recorded without freezing it again, so an operator's unfreeze given after reviewing it
// stands, as it does for a payment already counted as unreconciled (migration 5).

import type { Migration } from "../driver.js";

const ddl = (bigint: string) => `
CREATE TABLE conflict_reports (
  payment_id TEXT NOT NULL,
  reservation_id TEXT NOT NULL REFERENCES reservations (reservation_id),
  reason TEXT NOT NULL,
  status TEXT NOT NULL,
  amount ${bigint} NOT NULL,
  currency TEXT NOT NULL,
  reported_at_ms ${bigint} NOT NULL,
  PRIMARY KEY (payment_id, reservation_id, reason, status, amount, currency)
);
`;

export const migration: Migration = { version: 13, name: "conflict_reports", sqlite: ddl("INTEGER"), postgres: ddl("BIGINT") };
