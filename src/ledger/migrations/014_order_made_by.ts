// Migration 14: which provider named each reservation's order (`order_made_by`), stamped when the
// order is named (its creation answered, or a check or webhook linked it by receipt). The
// simulator `bursar serve` mounts keeps orders in memory only: an order stamped by another
// process's mounted simulator is lost once that process has stopped, and a reservation check
// releases its hold (src/gate/lost-orders.ts). An order stamped otherwise, or not at all (named
// before this migration), may still exist where it was made, and is never taken for lost.

import type { Migration } from "../driver.js";

const ddl = "ALTER TABLE reservations ADD COLUMN order_made_by TEXT;";

export const migration: Migration = { version: 14, name: "order_made_by", sqlite: ddl, postgres: ddl };
