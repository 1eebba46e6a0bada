// The SQLite driver's durability contract with the WAL flushed off the event loop: a write is
// reported only after the flush that covers its COMMIT (an async_commit one at COMMIT, flushed
// by the next flush anyone waits for or within async_flush_delay_ms), one flush serves every
// commit before it, a read waits for what it saw, and a failed flush stops the driver; a read
// that ran inside a group fails with the group.

import Database from "better-sqlite3";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { async_flush_delay_ms, checkpoint_every_commits } from "../../src/ledger/sqlite-wal.js";
import { SqliteDriver, type SqliteOptions, type WalFlush } from "../../src/ledger/sqlite.js";

/** A flush the test releases (or fails) by hand, counting how often the driver asked for one. */
function heldFlush() {
  const pending: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
  let asked = 0;
  const flush: WalFlush = () => {
    asked++;
    return new Promise<void>((resolve, reject) => pending.push({ resolve, reject }));
  };
  return {
    flush,
    get asked() {
      return asked;
    },
    release: () => pending.shift()?.resolve(),
    fail: (error: Error) => pending.shift()?.reject(error),
  };
}

const settled = async (promise: Promise<unknown>) => {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
  return done;
};

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function fileDriver(options: Omit<SqliteOptions, "path"> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "bursar-wal-"));
  dirs.push(dir);
  const path = join(dir, "t.db");
  const driver = new SqliteDriver({ path, ...options });
  await driver.migrate([{ version: 1, name: "t", sqlite: "CREATE TABLE t (v INTEGER)", postgres: "" }]);
  return { driver, path };
}

/** An async_commit insert, as an order's second phase is committed. */
const secondPhase = (driver: SqliteDriver, v: number) => driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (?)", [v]), { async_commit: true });

/** Waits until the delayed flush of an async_commit transaction has been asked for (its timer is
 *  armed first, so it fires before this one). */
const pastDelayedFlush = () => new Promise((resolve) => setTimeout(resolve, async_flush_delay_ms + 20));

/** A file-backed driver whose WAL flushes the test releases by hand. */
async function heldDriver() {
  const held = heldFlush();
  return { held, ...(await fileDriver({ flush: held.flush })) };
}

describe("SQLite WAL durability", () => {
  it("reports a transaction only after the flush covering its COMMIT", async () => {
    const { held, driver, path } = await heldDriver();
    const write = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (1)"));
    expect(await settled(write)).toBe(false);
    // Committed (another connection sees it) but not yet reported: the flush is still running.
    const other = new Database(path, { readonly: true });
    expect(other.prepare("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 1 });
    other.close();
    expect(held.asked).toBe(1);
    held.release();
    await expect(write).resolves.toEqual({ changes: 1 });
    await driver.close();
  });

  it("serves every commit made before a flush starts with that one flush", async () => {
    const { held, driver } = await heldDriver();
    const first = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (1)"));
    await settled(first);
    const rest = [2, 3, 4, 5].map((v) => driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (?)", [v])));
    expect(await settled(Promise.all(rest))).toBe(false);
    expect(held.asked).toBe(1);
    held.release();
    await first;
    expect(held.asked).toBe(2);
    held.release();
    await Promise.all(rest);
    expect(held.asked).toBe(2);
    await driver.close();
  });

  it("shares one COMMIT between transactions started one after the other in the same turn of the event loop", async () => {
    const { held, driver } = await heldDriver();
    let first_ran!: () => void;
    const first_work_done = new Promise<void>((resolve) => (first_ran = resolve));
    const first = driver.transaction(async (tx) => {
      await tx.run("INSERT INTO t (v) VALUES (1)");
      first_ran();
    });
    await first_work_done;
    // Microtasks only: the first transaction has left the lock, and this turn has not ended.
    for (let tick = 0; tick < 10; tick++) await Promise.resolve();
    expect(held.asked).toBe(0);
    const second = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (2)"));
    expect(await settled(Promise.all([first, second]))).toBe(false);
    expect(held.asked).toBe(1);
    held.release();
    await first;
    // Had the first committed on leaving, the second's COMMIT would need a flush of its own.
    expect(held.asked).toBe(1);
    await expect(second).resolves.toEqual({ changes: 1 });
    await driver.close();
  });

  it("answers a read only once what it saw is durable", async () => {
    const { held, driver } = await heldDriver();
    const write = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (7)"));
    const read = driver.read((tx) => tx.all<{ v: number }>("SELECT v FROM t"));
    expect(await settled(read)).toBe(false);
    held.release();
    await expect(read).resolves.toEqual([{ v: 7 }]);
    await write;
    await driver.close();
  });

  it("answers an unreported read at once, inside the open group or after its COMMIT, while the flush is pending", async () => {
    const { held, driver } = await heldDriver();
    const write = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (5)"));
    // In the same turn the group is still open: the read sees its pending write and does not join it.
    const inside = driver.read((tx) => tx.all<{ v: number }>("SELECT v FROM t"), { unreported: true });
    expect(await settled(inside)).toBe(true);
    await expect(inside).resolves.toEqual([{ v: 5 }]);
    // The group has committed and waits for its flush: a deferred read of its own, answered at once.
    const after = driver.read((tx) => tx.all<{ v: number }>("SELECT v FROM t"), { unreported: true });
    expect(await settled(after)).toBe(true);
    expect(await settled(write)).toBe(false);
    held.release();
    await write;
    await driver.close();
  });

  it("resolves an async_commit transaction at COMMIT and flushes it within async_flush_delay_ms when nothing else does", async () => {
    const { held, driver } = await heldDriver();
    await expect(secondPhase(driver, 9)).resolves.toEqual({ changes: 1 });
    expect(held.asked).toBe(0);
    await pastDelayedFlush();
    expect(held.asked).toBe(1);
    held.release();
    await driver.close();
  });

  it("makes a read after an async_commit transaction start the flush at once and wait for it", async () => {
    const { held, driver } = await heldDriver();
    await secondPhase(driver, 9);
    const read = driver.read((tx) => tx.all<{ v: number }>("SELECT v FROM t"));
    expect(await settled(read)).toBe(false);
    expect(held.asked).toBe(1);
    held.release();
    await expect(read).resolves.toEqual([{ v: 9 }]);
    await driver.close();
  });

  it("refuses all later work once the delayed flush of an async_commit transaction fails", async () => {
    const { held, driver } = await heldDriver();
    await secondPhase(driver, 9);
    await pastDelayedFlush();
    expect(held.asked).toBe(1);
    held.fail(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
    await new Promise((resolve) => setImmediate(resolve));
    await expect(driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (10)"))).rejects.toThrow(/refuses further work/);
    await driver.close();
  });

  it("flushes an async_commit transaction committed while a flush ran with one of its own afterwards", async () => {
    const { held, driver } = await heldDriver();
    const write = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (1)"));
    expect(await settled(write)).toBe(false);
    expect(held.asked).toBe(1);
    await secondPhase(driver, 2);
    held.release();
    await write;
    await pastDelayedFlush();
    expect(held.asked).toBe(2);
    held.release();
    await driver.close();
  });

  it("lets an async_commit transaction ride on the next flush someone waits for: one flush for both", async () => {
    const { held, driver } = await heldDriver();
    await secondPhase(driver, 9);
    const write = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (10)"));
    expect(await settled(write)).toBe(false);
    expect(held.asked).toBe(1);
    held.release();
    await write;
    // The flush the write waited for covered the earlier commit: the delayed one finds nothing to do.
    await pastDelayedFlush();
    expect(held.asked).toBe(1);
    const read = driver.read((tx) => tx.all<{ v: number }>("SELECT v FROM t ORDER BY v"));
    await expect(read).resolves.toEqual([{ v: 9 }, { v: 10 }]);
    expect(held.asked).toBe(1);
    await driver.close();
  });

  it("rolls back only a failed transaction's writes, whether it opened the group or joined it", async () => {
    const { held, driver } = await heldDriver();
    const insertThen = (v: number, fail: boolean) =>
      driver.transaction(async (tx) => {
        await tx.run("INSERT INTO t (v) VALUES (?)", [v]);
        if (fail) throw new Error(`work ${v} failed`);
      });
    // Issued together: the first opens a group, the others queue behind it and join it.
    const opener_fails = [insertThen(1, true), insertThen(2, false), insertThen(3, true), insertThen(4, false)];
    await expect(opener_fails[0]).rejects.toThrow("work 1 failed");
    await expect(opener_fails[2]).rejects.toThrow("work 3 failed");
    const survivors = Promise.all([opener_fails[1], opener_fails[3]]);
    expect(await settled(survivors)).toBe(false);
    expect(held.asked).toBe(1);
    held.release();
    await survivors;
    expect(held.asked).toBe(1);
    const rows = await driver.read((tx) => tx.all<{ v: number }>("SELECT v FROM t ORDER BY v"));
    expect(rows).toEqual([{ v: 2 }, { v: 4 }]);
    await driver.close();
  });

  it("fails a read that joined a group whose COMMIT failed, instead of leaving it waiting", async () => {
    const { driver } = await fileDriver();
    await driver.transaction(async (tx) => {
      await tx.run("CREATE TABLE parent (id INTEGER PRIMARY KEY)");
      await tx.run("CREATE TABLE child (parent_id INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)");
    });
    // The orphan passes its INSERT (the key is checked at COMMIT); the read queued behind it runs
    // inside the still-open group and sees the orphan; then the group's COMMIT fails.
    const orphan = driver.transaction((tx) => tx.run("INSERT INTO child (parent_id) VALUES (99)"));
    const read = driver.read((tx) => tx.all<{ parent_id: number }>("SELECT parent_id FROM child"));
    await expect(orphan).rejects.toThrow(/FOREIGN KEY/);
    await expect(read).rejects.toThrow(/FOREIGN KEY/);
    await driver.close();
  });

  it("fails a read that joined a group a later member's error rolled back, so it reports no lost row", async () => {
    const { driver, path } = await fileDriver();
    await driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (0)"));
    const pages = Number(driver.db.pragma("page_count", { simple: true }));
    driver.db.pragma(`max_page_count = ${pages + 2}`);
    // Issued together: the small write opens a group, the read and the oversized write join it;
    // SQLITE_FULL on the last rolls the whole group back, the small write's row with it.
    const small = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (1)"));
    const read = driver.read((tx) => tx.all<{ v: number }>("SELECT v FROM t ORDER BY v"));
    const big = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (?)", ["x".repeat(128 * 1024)]));
    await expect(big).rejects.toThrow(/full/i);
    await expect(small).rejects.toThrow(/full/i);
    await expect(read).rejects.toThrow(/full/i);
    await driver.close();
    const other = new Database(path, { readonly: true });
    expect(other.prepare("SELECT v FROM t ORDER BY v").all()).toEqual([{ v: 0 }]);
    other.close();
  });

  it("fails the callers of a failed flush and refuses all later work", async () => {
    const { held, driver } = await heldDriver();
    const write = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (1)"));
    await settled(write);
    held.fail(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
    await expect(write).rejects.toThrow(/EIO/);
    await expect(driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (2)"))).rejects.toThrow(/refuses further work/);
    await expect(driver.read((tx) => tx.all("SELECT v FROM t"))).rejects.toThrow(/refuses further work/);
    await driver.close();
  });

  it("tells its failure listeners once, after the failing call, so that `bursar serve` can stop for a restart", async () => {
    const { held, driver } = await heldDriver();
    const heard: unknown[] = [];
    driver.onFailure((error) => heard.push(error));
    const write = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (1)"));
    await settled(write);
    const failure = Object.assign(new Error("ENOSPC: no space left on device, fdatasync"), { code: "ENOSPC" });
    held.fail(failure);
    await expect(write).rejects.toThrow(/ENOSPC/);
    await expect(driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (2)"))).rejects.toThrow(/refuses further work/);
    await new Promise((resolve) => setImmediate(resolve));
    expect(heard).toEqual([failure]);
    await driver.close();
  });

  it("fails the group's callers the same way when the flush throws instead of rejecting", async () => {
    const { driver } = await fileDriver({
      flush: () => {
        throw Object.assign(new Error("EBADF: bad file descriptor, fdatasync"), { code: "EBADF" });
      },
    });
    const writes = [1, 2].map((v) => driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (?)", [v])));
    for (const write of writes) await expect(write).rejects.toThrow(/EBADF/);
    await expect(driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (3)"))).rejects.toThrow(/refuses further work/);
    await driver.close();
  });
});

describe("SQLite checkpoints on a worker thread", () => {
  const until = async (condition: () => boolean, what: string) => {
    const deadline = Date.now() + 10_000;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const insertMany = async (driver: SqliteDriver, count: number) => {
    for (let i = 0; i < count; i++) await driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (?)", [i]));
  };

  it("starts no worker for a short-lived database, then copies the WAL into the file off the writer's thread", async () => {
    const { driver, path } = await fileDriver();
    expect(driver.db.pragma("wal_autocheckpoint", { simple: true })).toBe(0);
    await insertMany(driver, checkpoint_every_commits - 2);
    expect(driver.checkpointer?.active).toBe(false);
    const before = statSync(path).size;
    await insertMany(driver, 2_000);
    expect(driver.checkpointer?.active).toBe(true);
    await until(() => statSync(path).size > before, "the worker's checkpoint to grow the database file");
    expect(driver.checkpointer?.taken_back).toBeUndefined();
    await driver.close();
    expect(driver.checkpointer?.taken_back).toBe("closed");
    const reopened = new Database(path, { readonly: true });
    expect(reopened.prepare("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: checkpoint_every_commits - 2 + 2_000 });
    reopened.close();
  });

  it("starts the WAL over under steady writes, so it stays bounded while commits land during every checkpoint", async () => {
    const { driver, path } = await fileDriver({ wal_restart_frames: 200 });
    const row = "x".repeat(3_000); // about one WAL frame per commit beside the table's own
    let wal_bytes_max = 0;
    for (let i = 0; i < 4_000; i++) {
      await driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (?)", [`${i}${row}`]));
      if (i % 100 === 0) wal_bytes_max = Math.max(wal_bytes_max, statSync(`${path}-wal`).size);
    }
    // Without restarts the WAL would hold every frame of the run: over 8,000 frames, 32 MB.
    expect(driver.checkpointer?.restarts).toBeGreaterThan(0);
    expect(wal_bytes_max).toBeLessThan(8 * 1024 * 1024);
    await driver.close();
    const reopened = new Database(path, { readonly: true });
    expect(reopened.prepare("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 4_000 });
    reopened.close();
  });

  it("gives checkpointing back to the writer when the worker dies", async () => {
    const { driver } = await fileDriver();
    await insertMany(driver, checkpoint_every_commits);
    const worker = (driver.checkpointer as unknown as { worker: Worker }).worker;
    await worker.terminate();
    await until(() => driver.checkpointer?.taken_back !== undefined, "the writer to take checkpointing back");
    expect(driver.checkpointer?.taken_back).toBe("the checkpoint worker exited");
    expect(driver.db.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
    await insertMany(driver, 10);
    await driver.close();
  });
});
