// What a database holds of an evidence log, read without writing to it: a command that only
// looks first (export, key) must not change a file it may then refuse, as opening it for
// writing does (SQLite's WAL mode is set on open).

import { existsSync } from "node:fs";
import { isPostgresUrl } from "../config.js";
import type { Entry } from "../evidence/entry.js";
import { storedGenesis } from "../evidence/store.js";
import { openDriver } from "../index.js";
import { SqliteDriver } from "../ledger/sqlite.js";

/** The log's entry 0 in `db` (a SQLite path or a postgres:// URL); undefined when it holds no log, or is no file yet. */
export async function storedGenesisIn(db: string, options: { pg_prepared_statements?: boolean }): Promise<Entry | undefined> {
  if (!isPostgresUrl(db) && (db === ":memory:" || !existsSync(db))) return undefined;
  const driver = isPostgresUrl(db) ? openDriver(db, options) : new SqliteDriver({ path: db, readonly: true });
  try {
    return await storedGenesis(driver);
  } finally {
    await driver.close().catch(() => undefined);
  }
}
