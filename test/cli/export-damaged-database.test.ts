// `bursar export` on a SQLite database it cannot read (cut short, a damaged page met only after
// the log was found) says so in one line naming BURSAR_DB and SQLite's message, exit 2, as
// `bursar migrate` does; it printed "bursar: SqliteError: database disk image is malformed"
// with a stack, exit 1. Nothing is written to --out.

import { closeSync, copyFileSync, existsSync, openSync, statSync, truncateSync, writeSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { builtSuiteDir, servedDataDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const dir = builtSuiteDir("bursar-export-damaged-");
let data_dir = "";
let database = "";

beforeAll(async () => {
  // A first start makes a database holding a log; closing it leaves its pages in the file itself.
  data_dir = await servedDataDir(dir());
  database = join(data_dir, "bursar.db");
});

/** A copy of the database cut to half its size, as `truncate -s 50%` does. */
function cutInHalf(): string {
  const copy = join(dir(), "cut.db");
  copyFileSync(database, copy);
  truncateSync(copy, Math.floor(statSync(copy).size / 2));
  return copy;
}

/**
 * A copy whose log_checkpoints root page is overwritten: the log's first entry still reads, so
 * the damage is met only once export reads its checkpoints.
 */
function checkpointsPageDamaged(): string {
  const copy = join(dir(), "damaged-page.db");
  copyFileSync(database, copy);
  const reader = new Database(copy, { readonly: true });
  const page_size = reader.pragma("page_size", { simple: true }) as number;
  const { rootpage } = reader.prepare("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'log_checkpoints'").get() as { rootpage: number };
  reader.close();
  const fd = openSync(copy, "r+");
  writeSync(fd, Buffer.alloc(page_size, 0xff), 0, page_size, (rootpage - 1) * page_size);
  closeSync(fd);
  return copy;
}

describe("bursar export on a database SQLite cannot read", () => {
  const cases: Array<[string, () => string]> = [
    ["cut in half", cutInHalf],
    ["with its checkpoints page overwritten", checkpointsPageDamaged],
  ];
  it.each(cases)("says a database %s in one line naming BURSAR_DB and SQLite's message, exit 2, writing no --out", async (_, damaged) => {
    const db = damaged();
    const out = join(dir(), "never.jsonl");
    const result = await runBursar(["export", "--out", out], { BURSAR_DATA_DIR: data_dir, BURSAR_DB: db, BURSAR_SIGNING_KEY: "", BURSAR_LOG_ORIGIN: "" }, undefined, 60_000);
    expect(result.stderr).toBe(`bursar export: BURSAR_DB=${db}: cannot read the SQLite database (database disk image is malformed)\n`);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(existsSync(out)).toBe(false);
  });

  it("says BURSAR_DB=/dev/null is no database file in one line, exit 2", async () => {
    const result = await runBursar(["export", "--out", join(dir(), "never.jsonl")], { BURSAR_DATA_DIR: data_dir, BURSAR_DB: "/dev/null", BURSAR_SIGNING_KEY: "", BURSAR_LOG_ORIGIN: "" }, undefined, 60_000);
    expect(result.stderr).toBe("bursar export: BURSAR_DB=/dev/null: a character device, not a regular file; SQLite keeps a database in a regular file: point it at one (a new path is created)\n");
    expect(result.code).toBe(2);
  });
});
