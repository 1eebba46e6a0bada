// A database a newer Bursar migrated (its schema_migrations records a version this code has no
// migration for) is refused on SQLite and PostgreSQL: the driver applies nothing, and
// `bursar migrate` and `bursar serve` print one line naming BURSAR_DB and both versions, exit 2,
// rather than "up to date" or a start on a schema the code was not written for.

import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, maskedDb } from "../../src/config.js";
import { openDriver } from "../../src/index.js";
import { migrations, SchemaNewerError, type SqlDriver } from "../../src/ledger/index.js";
import { migration as evidence_migration } from "../../src/ledger/migrations/002_evidence.js";
import { schema_version_latest } from "../../src/ledger/migrations/index.js";
import { startServer } from "../../src/server/start.js";
import { backends } from "../support/backends.js";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const newer = schema_version_latest + 1;

async function recordedVersions(driver: SqlDriver): Promise<number[]> {
  const rows = await driver.read((tx) => tx.all<{ version: number }>("SELECT version FROM schema_migrations ORDER BY version"));
  return rows.map((row) => Number(row.version));
}

describe.each(backends())("a database migrated by a newer bursar ($name)", (backend) => {
  const dir = builtSuiteDir(`bursar-schema-newer-${backend.name}-`);

  /** A database at every version this code knows, plus one it does not. */
  async function aheadDb(): Promise<string> {
    const db = backend.name === "sqlite" ? join(dir(), `ahead-${randomBytes(4).toString("hex")}.db`) : await backend.db();
    const driver = openDriver(db);
    try {
      await driver.migrate(migrations);
      await driver.transaction((tx) =>
        tx.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", [newer, "from_the_future", new Date().toISOString()]),
      );
    } finally {
      await driver.close();
    }
    return db;
  }

  const message = (db: string) =>
    `BURSAR_DB=${maskedDb(db)}: the database's schema is at version ${newer}, newer than this bursar knows (version ${schema_version_latest}); run the bursar release that migrated it, or point BURSAR_DB at another database`;

  it("the driver refuses to migrate it, with both versions, and applies nothing (nor for a subset, as export migrates)", async () => {
    const db = await aheadDb();
    const driver = openDriver(db);
    try {
      for (const applying of [migrations, [evidence_migration]]) {
        const refused = await driver.migrate(applying).catch((error: unknown) => error);
        expect(refused).toBeInstanceOf(SchemaNewerError);
        expect(refused).toMatchObject({ database_version: newer, known_version: schema_version_latest });
      }
      expect(await recordedVersions(driver)).toEqual([...migrations.map((migration) => migration.version), newer]);
    } finally {
      await driver.close();
    }
  });

  it("bursar migrate prints one line naming BURSAR_DB and both versions and exits 2, not 'up to date'", async () => {
    const db = await aheadDb();
    const result = await runBursar(["migrate"], { BURSAR_DATA_DIR: join(dir(), "data-migrate"), BURSAR_DB: db });
    expect(result).toEqual({ code: 2, stdout: "", stderr: `bursar migrate: ${message(db)}\n` });
  });

  it("bursar serve refuses to start on it, in the same words", async () => {
    const db = await aheadDb();
    const config = loadConfig({ BURSAR_DATA_DIR: join(dir(), "data-serve"), BURSAR_DB: db, BURSAR_PORT: "0" });
    await expect(startServer(config, { logger: false })).rejects.toThrow(new ConfigError(message(db)));
    const result = await runBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: join(dir(), "data-serve-cli"), BURSAR_DB: db, BURSAR_ADMIN_TOKEN: "" });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`bursar serve: ${message(db)}\n`);
  });

  it("bursar export refuses it in the same words, also when it holds no log yet (not 'start bursar serve on it first', which serve refuses)", async () => {
    const db = await aheadDb();
    const data = join(dir(), "data-export");
    const result = await runBursar(["export", "--out", join(dir(), "export.jsonl")], { BURSAR_DATA_DIR: data, BURSAR_DB: db });
    expect(result).toEqual({ code: 2, stdout: "", stderr: `bursar export: ${message(db)}\n` });
  });

  it("a database at the version this code knows still migrates as up to date", async () => {
    const db = backend.name === "sqlite" ? join(dir(), "current.db") : await backend.db();
    const driver = openDriver(db);
    try {
      await driver.migrate(migrations);
      expect(await driver.migrate(migrations)).toEqual([]);
    } finally {
      await driver.close();
    }
  });
});
