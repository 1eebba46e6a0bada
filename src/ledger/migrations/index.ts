// Every schema migration in version order; both drivers apply the same list.

import { SchemaNewerError, type Migration } from "../driver.js";
import { migration as ledger } from "./001_ledger.js";
import { migration as evidence } from "./002_evidence.js";
import { migration as access } from "./003_access.js";
import { migration as sources } from "./004_sources.js";
import { migration as unreconciled } from "./005_unreconciled.js";
import { migration as log_head_per_statement } from "./006_log_head_per_statement.js";
import { migration as partial_indexes } from "./007_partial_indexes.js";
import { migration as agent_disable } from "./008_agent_disable.js";
import { migration as approval_order } from "./009_approval_order.js";
import { migration as velocity_ordinal } from "./010_velocity_ordinal.js";
import { migration as rotation_replays } from "./011_rotation_replays.js";
import { migration as observer_runs } from "./012_observer_runs.js";
import { migration as conflict_reports } from "./013_conflict_reports.js";
import { migration as order_made_by } from "./014_order_made_by.js";
import { migration as held_simulator_orders } from "./015_held_simulator_orders.js";
import { migration as webhook_body_hash } from "./016_webhook_body_hash.js";

export const migrations: readonly Migration[] = Object.freeze([ledger, evidence, access, sources, unreconciled, log_head_per_statement, partial_indexes, agent_disable, approval_order, velocity_ordinal, rotation_replays, observer_runs, conflict_reports, order_made_by, held_simulator_orders, webhook_body_hash]);

/** The newest schema version this code knows. */
export const schema_version_latest: number = Math.max(...migrations.map((migration) => migration.version));

/** The newest version a database records (`version`, null for none), as every check below reads it. */
export const newest_schema_version_sql = "SELECT MAX(version) AS version FROM schema_migrations";

/**
 * Refuses a database whose newest recorded version (`recorded`, null for none) is past every
 * version this code knows: the full list, and `applying` (a caller may apply a subset, as
 * `bursar export` does, or test-only steps).
 */
export function refuseNewerSchema(recorded: number | null | undefined, applying: readonly Migration[]): void {
  const known = Math.max(schema_version_latest, ...applying.map((migration) => migration.version));
  if (recorded !== null && recorded !== undefined && recorded > known) throw new SchemaNewerError(recorded, known);
}
