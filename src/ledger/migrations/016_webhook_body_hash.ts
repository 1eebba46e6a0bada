// Migration 16: the hex SHA-256 of the bytes each webhook event id was first delivered with.
// Razorpay does not sign event ids, so a used id arriving with other signed bytes is not a
// redelivery: it is settled as any new event is (settlement is idempotent on the signed payment
// id), where before it was dropped as a duplicate, capture and all. Events recorded before this
// migration have no hash and are answered as duplicates, as they were.

import type { Migration } from "../driver.js";

const ddl = "ALTER TABLE webhook_events ADD COLUMN body_sha256 TEXT;";

export const migration: Migration = { version: 16, name: "webhook_body_hash", sqlite: ddl, postgres: ddl };
