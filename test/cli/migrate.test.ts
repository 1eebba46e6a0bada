// `bursar migrate` on a fresh path: creates the default database's directory, applies every
// migration once, and a second run reports "up to date". An explicit BURSAR_DB's directory must
// exist, as for `bursar serve`.

import Database from "better-sqlite3";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrations } from "../../src/ledger/index.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

function recordedVersions(db_path: string): number[] {
  const db = new Database(db_path, { readonly: true });
  try {
    return (db.prepare("SELECT version FROM schema_migrations ORDER BY version").all() as Array<{ version: number }>).map((row) => row.version);
  } finally {
    db.close();
  }
}

describe("bursar migrate", () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-migrate-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const versions = migrations.map((migration) => migration.version).sort((a, b) => a - b);

  it("applies every migration to a fresh data directory, then reports up to date", async () => {
    const data_dir = join(dir, "fresh", "data");
    const env = { BURSAR_DATA_DIR: data_dir, BURSAR_DB: "" };
    const first = await runBursar(["migrate"], env);
    expect(first.code).toBe(0);
    for (const migration of migrations) {
      expect(first.stdout).toContain(`applied ${String(migration.version).padStart(3, "0")} ${migration.name}`);
    }
    expect(recordedVersions(join(data_dir, "bursar.db"))).toEqual(versions);

    const second = await runBursar(["migrate"], env);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("up to date");
    expect(second.stdout).not.toContain("applied");
  });

  it("migrates the database BURSAR_DB names, outside the data directory", async () => {
    const db_path = join(dir, "elsewhere", "nested", "ledger.db");
    mkdirSync(join(dir, "elsewhere", "nested"), { recursive: true });
    const data_dir = join(dir, "unused-data-dir");
    const result = await runBursar(["migrate"], { BURSAR_DATA_DIR: data_dir, BURSAR_DB: db_path });
    expect(result.code).toBe(0);
    expect(recordedVersions(db_path)).toEqual(versions);
    expect(existsSync(data_dir)).toBe(false);
  });

  it("refuses an explicit BURSAR_DB whose directory does not exist, as serve does: one line, exit 2, nothing created", async () => {
    const missing_dir = join(dir, "missing", "dir");
    const db_path = join(missing_dir, "x.db");
    const result = await runBursar(["migrate"], { BURSAR_DATA_DIR: join(dir, "unused-data-dir-2"), BURSAR_DB: db_path });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`bursar migrate: BURSAR_DB=${db_path}: cannot open the SQLite database (Cannot open database because the directory does not exist)\n`);
    expect(result.stdout).toBe("");
    expect(existsSync(join(dir, "missing"))).toBe(false);
  });
});
