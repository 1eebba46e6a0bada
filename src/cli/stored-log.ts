// What a database holds of an evidence log, read without writing to it: a command that only
// looks first (export, key) must not change a file it may then refuse, as opening it for
// writing does (SQLite's WAL mode is set on open).

import { existsSync } from "node:fs";
import { isPostgresUrl } from "../config.js";
import type { Entry } from "../evidence/entry.js";
import { isMissingTable, storedGenesis } from "../evidence/store.js";
import { openDriver } from "../index.js";
import type { SqlDriver } from "../ledger/index.js";
import { newest_schema_version_sql, refuseNewerSchema } from "../ledger/migrations/index.js";
import { SqliteDriver } from "../ledger/sqlite.js";

/** The log's entry 0 in `db` (a SQLite path or a postgres:// URL); undefined when it holds no log, or is no file yet.
 *  Throws SchemaNewerError for a database a newer Bursar migrated that holds no log. */
export async function storedGenesisIn(db: string, options: { pg_prepared_statements?: boolean }): Promise<Entry | undefined> {
  if (!isPostgresUrl(db) && (db === ":memory:" || !existsSync(db))) return undefined;
  const driver = isPostgresUrl(db) ? openDriver(db, options) : new SqliteDriver({ path: db, readonly: true });
  try {
    const genesis = await storedGenesis(driver);
    if (genesis === undefined) await refuseNewerStoredSchema(driver);
    return genesis;
  } finally {
    await driver.close().catch(() => undefined);
  }
}

/**
 * A database a newer Bursar migrated is refused as such (SchemaNewerError), also when it holds no
 * log yet: told to start 'bursar serve' on it first, a user met serve's refusal instead.
 */
async function refuseNewerStoredSchema(driver: SqlDriver): Promise<void> {
  let recorded: number | null | undefined;
  try {
    recorded = (await driver.read((tx) => tx.get<{ version: number | null }>(newest_schema_version_sql)))?.version;
  } catch (error) {
    if (isMissingTable(error)) return;
    throw error;
  }
  refuseNewerSchema(recorded, []);
}
