// A lock another connection holds on the SQLite file (another process: a CLI command, a backup, a
// stuck tool) is waited for off the event loop: better-sqlite3 waits on the loop's own thread, so
// a long busy timeout froze every request, every proxied observer stream and /healthz for as long
// as the lock was held. Each attempt now waits at most sqlite_busy_timeout_ms; the retries wait
// with timers, so the loop runs meanwhile, and the transaction commits once the lock is free.

import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { SqliteDriver } from "../../src/ledger/sqlite.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

it("waits for another connection's write lock with the event loop running, then commits", async () => {
  const dir = mkdtempSync(join(tmpdir(), "bursar-busy-"));
  dirs.push(dir);
  const path = join(dir, "b.db");
  const driver = new SqliteDriver({ path });
  await driver.transaction(async (tx) => void (await tx.run("CREATE TABLE t (x INTEGER)")));
  const other = new Database(path);
  other.exec("BEGIN IMMEDIATE");
  let turns = 0;
  const ticker = setInterval(() => turns++, 5);
  try {
    const written = driver.transaction(async (tx) => void (await tx.run("INSERT INTO t (x) VALUES (1)")));
    await new Promise((resolve) => setTimeout(resolve, 400));
    // With a 5 s busy timeout the loop ran no timer at all while the lock was held.
    expect(turns).toBeGreaterThan(10);
    other.exec("COMMIT");
    await written;
  } finally {
    clearInterval(ticker);
    other.close();
  }
  expect(await driver.read((tx) => tx.get<{ n: number }>("SELECT COUNT(*) AS n FROM t"))).toEqual({ n: 1 });
  await driver.close();
});
