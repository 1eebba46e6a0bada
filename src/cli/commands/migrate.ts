// `bursar migrate`: applies the schema migrations not yet recorded in BURSAR_DB and exits,
// so a deploy can migrate once before starting several instances.

import { databaseError, fileError, loadConfig, maskedDb } from "../../config.js";
import { ensureDataDir } from "../../datadir.js";
import { openDriver } from "../../index.js";
import { migrations, type SqlDriver } from "../../ledger/index.js";
import { parseFlags, println, type CliIo } from "../command.js";

export const help = `usage: bursar migrate

Opens the database (BURSAR_DB, default $BURSAR_DATA_DIR/bursar.db) and applies the migrations
not yet recorded in its schema_migrations table, in version order: on SQLite each in its own
transaction, on PostgreSQL all in one. Prints each version applied, or "up to date". Running it
again is harmless. \`bursar serve\` also migrates at start; this command lets a deploy do it
once, up front. Stop every instance of an earlier release first: one left running against
the migrated schema fails its money calls (closed: nothing is held or forwarded). On
PostgreSQL a wait for a lock another session holds gives up after 120 s, nothing changed (one
line, exit 2); the migrations themselves have no time limit.

Options: none.

A database it cannot open, read (a SQLite file damaged or cut short) or reach is one line on
stderr naming BURSAR_DB (a postgres URL with its password masked), exit 2, as for \`bursar serve\`. So is a database a newer bursar
migrated (a schema version this one has no migration for): nothing is applied to it.

Environment:
  BURSAR_DATA_DIR   data directory (default ./.bursar); created if missing for the default database
  BURSAR_DB         SQLite path (default $BURSAR_DATA_DIR/bursar.db) or a postgres:// URL; an
                    explicit SQLite path's directory must exist (one line naming BURSAR_DB, exit 2)
The other BURSAR_* variables are validated as for \`bursar serve\`.`;

export async function run(argv: string[], io: CliIo): Promise<number> {
  parseFlags(argv, {});
  const config = loadConfig(io.env);
  const shown = maskedDb(config.db);
  let driver: SqlDriver;
  try {
    // The default database's data directory is created (private, as `bursar serve` does); an
    // explicit BURSAR_DB's directory must exist, so a mistyped path fails instead of growing a tree.
    if (!io.env.BURSAR_DB) ensureDataDir(config.data_dir);
    driver = openDriver(config.db);
  } catch (error) {
    // A database it cannot open (a directory it cannot create, a file that is not SQLite) is
    // one line naming BURSAR_DB and exit 2, as for `bursar serve`.
    // Anything else is a bug, and crashes loudly with its stack.
    throw fileError(databaseError(config.db, error), `BURSAR_DB=${shown}`);
  }
  try {
    // PostgreSQL is first reached here: an unreachable server is one line naming BURSAR_DB
    // (its password masked) and exit 2, as `bursar serve` reports it, not a pg-pool stack.
    const applied = await driver.migrate(migrations).catch((error: unknown) => Promise.reject(databaseError(config.db, error)));
    const latest = Math.max(...migrations.map((migration) => migration.version));
    if (applied.length === 0) {
      println(io.stdout, `${shown}: up to date (version ${latest})`);
      return 0;
    }
    for (const version of applied) {
      const name = migrations.find((migration) => migration.version === version)?.name ?? "";
      println(io.stdout, `applied ${String(version).padStart(3, "0")} ${name}`);
    }
    println(io.stdout, `${shown}: now at version ${latest}`);
    return 0;
  } finally {
    await driver.close();
  }
}
