// What a database holds of an evidence log, read without writing to it: a command that only
// looks first (export, key) must not change a file it may then refuse, as opening it for
// writing does (SQLite's WAL mode is set on open).

import Database from "better-sqlite3";
import { isPostgresUrl } from "../config.js";
import type { Entry } from "../evidence/entry.js";
import { storedGenesis } from "../evidence/store.js";
import { openDriver } from "../index.js";

/** The log's entry 0 in `db` (a SQLite path that exists, or a postgres:// URL); undefined when it holds no log. */
export async function storedGenesisIn(db: string, options: { pg_prepared_statements?: boolean }): Promise<Entry | undefined> {
  if (isPostgresUrl(db)) {
    const driver = openDriver(db, options);
    try {
      return await storedGenesis(driver);
    } finally {
      await driver.close().catch(() => undefined);
    }
  }
  const sqlite = new Database(db, { readonly: true, fileMustExist: true });
  try {
    if (!sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log_entries'").get()) return undefined;
    const row = sqlite.prepare("SELECT entry_text FROM log_entries WHERE seq = 0").get() as { entry_text: string } | undefined;
    return row ? (JSON.parse(row.entry_text) as Entry) : undefined;
  } finally {
    sqlite.close();
  }
}
