// Migration 15: an index of the held reservations a start looks through for orders another
// process's mounted simulator named (src/gate/lost-orders.ts). The start now does so under any
// provider, `razorpay` included (a data directory switched from the mounted simulator), so it
// must not read every reservation: on a real account nearly every order is stamped `razorpay`
// and stays out of this index. Its terms are written out as the start's query writes them, so
// that SQLite and PostgreSQL can see the query implies them.

import type { Migration } from "../driver.js";

const ddl = "CREATE INDEX reservations_held_off_account ON reservations (reservation_id) WHERE status = 'held' AND outcome_unknown = 0 AND order_made_by <> 'razorpay';";

export const migration: Migration = { version: 15, name: "held_simulator_orders", sqlite: ddl, postgres: ddl };
