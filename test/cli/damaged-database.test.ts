// `bursar serve` and `bursar migrate` on a SQLite database cut short say so as `bursar export`
// does (docs/configuration.md): one line naming BURSAR_DB and SQLite's message, exit 2. serve
// printed "bursar: SqliteError: database disk image is malformed" with a stack, exit 1;
// migrate "cannot open …: database disk image is malformed", exit 1.

import { copyFileSync, readFileSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const dir = builtSuiteDir("bursar-damaged-database-");
let database = "";

beforeAll(async () => {
  // A real database: `bursar migrate` creates it with every table.
  const made = await runBursar(["migrate"], { BURSAR_DATA_DIR: join(dir(), "made") }, undefined, 60_000);
  expect(made.code).toBe(0);
  database = join(dir(), "made", "bursar.db");
});

/** Its first 1000 bytes, as `head -c 1000 bursar.db > cut.db` leaves them. */
function firstBytes(): string {
  const cut = join(dir(), "head.db");
  writeFileSync(cut, readFileSync(database).subarray(0, 1000));
  return cut;
}

/** Cut to half its size, as `truncate -s 50%` does. */
function cutInHalf(): string {
  const cut = join(dir(), "half.db");
  copyFileSync(database, cut);
  truncateSync(cut, Math.floor(statSync(cut).size / 2));
  return cut;
}

describe("a SQLite BURSAR_DB cut short", () => {
  const cases = [
    { command: "serve", args: ["serve", "--port", "0"], cut: "its first 1000 bytes", damaged: firstBytes },
    { command: "serve", args: ["serve", "--port", "0"], cut: "half of it", damaged: cutInHalf },
    { command: "migrate", args: ["migrate"], cut: "its first 1000 bytes", damaged: firstBytes },
    { command: "migrate", args: ["migrate"], cut: "half of it", damaged: cutInHalf },
  ];
  it.each(cases)("bursar $command on $cut says it cannot read it in one line naming BURSAR_DB, exit 2", async ({ command, args, damaged }) => {
    const db = damaged();
    const env = { BURSAR_DATA_DIR: join(dir(), `data-${command}`), BURSAR_DB: db, BURSAR_ADMIN_TOKEN: "x".repeat(20) };
    const result = await runBursar(args, env, undefined, 60_000);
    expect(result.stderr).toBe(`bursar ${command}: BURSAR_DB=${db}: cannot read the SQLite database (database disk image is malformed)\n`);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
  });
});
