// bursar serve refuses a database put back from an older copy, or replaced by a new one: the
// data directory's last-checkpoint file keeps the newest checkpoint the server saw (a final one
// at each stop covers everything written), and a start whose database no longer holds it stops
// with one line naming BURSAR_DB and the file. Carrying on would have forgotten spending and
// idempotency keys the provider had acted on, so an agent could spend again what it spent.

import Database from "better-sqlite3";
import { copyFileSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { lastCheckpointPath } from "../../src/data-files.js";
import { keptCheckpointOf } from "../../src/evidence/witness.js";
import { readTreeSize } from "../../src/evidence/store.js";
import { startServer } from "../../src/server/start.js";
import { builtSuiteDir } from "../support/build.js";
import { runBursar, startBursar } from "../support/process.js";
import { waitUntil } from "../support/wait.js";

describe("a database rolled back under bursar serve", () => {
  const dir = builtSuiteDir("bursar-rollback-");
  const configOf = (data_dir: string) => loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: "" });

  async function serveAndWrite(data_dir: string, agents: number, before_stop?: () => Promise<void>): Promise<number> {
    const started = await startServer(configOf(data_dir), { logger: false });
    for (let n = 0; n < agents; n++) await started.bursar.operator.createAgent({ name: `agent-${n}` });
    await before_stop?.();
    const size = await started.bursar.driver.read((tx) => readTreeSize(tx));
    await started.app.close();
    return size;
  }

  it("an online backup put back after more was written is refused at the next start; removing the file lets it start", async () => {
    const data_dir = join(dir(), "restored");
    const db = join(data_dir, "bursar.db");
    const backup = join(dir(), "backup.db");
    await serveAndWrite(data_dir, 2, async () => {
      const source = new Database(db, { readonly: true });
      await source.backup(backup);
      source.close();
    });
    const size = await serveAndWrite(data_dir, 3);
    // The stop's own checkpoint is the one kept: every entry written is covered.
    expect(keptCheckpointOf(readFileSync(join(data_dir, "last-checkpoint"), "utf8"), "file").size).toBe(size);

    copyFileSync(backup, db);
    rmSync(`${db}-wal`, { force: true });
    rmSync(`${db}-shm`, { force: true });
    const refused = startServer(configOf(data_dir), { logger: false });
    await expect(refused).rejects.toThrow(ConfigError);
    await expect(refused).rejects.toThrow(
      new RegExp(`^BURSAR_DB=${db}: the database holds a log of \\d+ entries and no checkpoint of ${size}, but ${join(data_dir, "last-checkpoint")} keeps a signed checkpoint of ${size} entries .*restored from an older copy`),
    );

    rmSync(join(data_dir, "last-checkpoint"));
    const started = await startServer(configOf(data_dir), { logger: false });
    await started.app.close();
  });

  it("a changed BURSAR_LOG_ORIGIN on the same database is refused with the advice to set it back, not to remove last-checkpoint", async () => {
    const data_dir = join(dir(), "renamed-origin");
    await serveAndWrite(data_dir, 1);
    const renamed = startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: "", BURSAR_LOG_ORIGIN: "renamed.example/log" }), { logger: false });
    await expect(renamed).rejects.toThrow(/^the log's origin is "bursar.local\/log", but BURSAR_LOG_ORIGIN is "renamed.example\/log": .*set BURSAR_LOG_ORIGIN back to "bursar.local\/log"/);
    await expect(renamed).rejects.not.toThrow(/last-checkpoint/);
    // Set back, it starts.
    const started = await startServer(configOf(data_dir), { logger: false });
    await started.app.close();
  });

  it("a database deleted (or moved away) is not silently replaced by a new log under the same key", async () => {
    const data_dir = join(dir(), "deleted");
    await serveAndWrite(data_dir, 1);
    for (const suffix of ["", "-wal", "-shm"]) rmSync(join(data_dir, `bursar.db${suffix}`), { force: true });
    await expect(startServer(configOf(data_dir), { logger: false })).rejects.toThrow(/: the database holds no log \(a new database\), but .*last-checkpoint keeps a signed checkpoint/);
    // Nothing was written into the new database: put the old one back and it starts.
    const reopened = new Database(join(data_dir, "bursar.db"));
    expect(reopened.prepare("SELECT count(*) AS n FROM log_entries").get()).toEqual({ n: 0 });
    reopened.close();
  });

  it("a database rolled back under a running bursar serve stops it (exit 75), and the restart is refused", async () => {
    const data_dir = join(dir(), "under");
    const token = "bsr_op_rollbackUnderTest0123456789";
    const env = { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: token, BURSAR_CHECKPOINT_SECONDS: "1", BURSAR_LOG_LEVEL: "info" };
    const server = await startBursar(["serve", "--port", "0"], env);
    const createAgent = (name: string) =>
      fetch(`${server.url}/api/v1/agents`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ name }) });
    try {
      expect((await createAgent("one")).status).toBe(201);
      expect((await createAgent("two")).status).toBe(201);
      const db = new Database(join(data_dir, "bursar.db"));
      const stored = () => (db.prepare("SELECT size FROM log_head").get() as { size: number }).size;
      // Once a checkpoint covers both (the process has seen them): its last entry and that
      // checkpoint taken out from under it, as a restore of a slightly older copy would: the next
      // append is refused, the server stops, and the file's checkpoint refuses the restart.
      await waitUntil("a checkpoint of every entry kept", () => keptCheckpointOf(readFileSync(join(data_dir, "last-checkpoint"), "utf8"), "file").size === stored(), { timeout_ms: 10_000 });
      for (const trigger of db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('log_entries', 'log_head', 'log_checkpoints')").all() as { name: string }[]) db.exec(`DROP TRIGGER ${trigger.name}`);
      const size = stored();
      db.prepare("DELETE FROM log_entries WHERE seq = ?").run(size - 1);
      db.prepare("DELETE FROM log_checkpoints WHERE tree_size >= ?").run(size);
      db.prepare("UPDATE log_head SET size = ?").run(size - 1);
      db.close();
      expect((await createAgent("three")).status).toBe(500);
      const code = await new Promise<number | null>((resolve) => (server.child.exitCode !== null ? resolve(server.child.exitCode) : server.child.once("exit", resolve)));
      expect(code).toBe(75);
      expect(server.output()).toMatch(/bursar serve: the stored log no longer holds what this process saw: \d+ entries stored, \d+ seen.*; stopping:/);
      // The JSON log's stop line says why, not only that the stop was asked for.
      const stopping = server.stdout().split("\n").filter((line) => line.includes('"shutting down"'));
      expect(stopping).toHaveLength(1);
      expect(JSON.parse(stopping[0] as string)).toMatchObject({ reason: expect.stringMatching(/^evidence log lost entries: the stored log no longer holds what this process saw/) });
    } finally {
      await server.stop("SIGKILL");
    }
    const restarted = await runBursar(["serve", "--port", "0"], env, undefined, 20_000);
    expect(restarted.code).toBe(2);
    expect(restarted.stderr).toMatch(/last-checkpoint keeps a signed checkpoint of \d+ entries/);
  });

  it("one data directory serving two databases keeps a checkpoint for each: neither start is refused for the other's", async () => {
    const data_dir = join(dir(), "two-databases");
    const configFor = (db: string) => loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_DB: join(data_dir, db), BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: "" });
    for (const db of ["a.db", "b.db", "a.db", "b.db"]) {
      const started = await startServer(configFor(db), { logger: false });
      await started.bursar.operator.createAgent({ name: db });
      await started.app.close();
    }
    const kept = readdirSync(data_dir).filter((name) => name.startsWith("last-checkpoint"));
    expect(kept).toHaveLength(2);
    expect(kept).toEqual(expect.arrayContaining([basename(lastCheckpointPath(data_dir, join(data_dir, "a.db")))]));
  });

  it("bursar export refuses to write over a kept checkpoint (a database restored from an older copy would then start)", async () => {
    const data_dir = join(dir(), "export-over");
    await serveAndWrite(data_dir, 1);
    const kept = join(data_dir, "last-checkpoint");
    const before = readFileSync(kept, "utf8");
    for (const option of ["--checkpoint", "--out"]) {
      const args = option === "--out" ? ["export", "--out", kept] : ["export", "--out", join(dir(), "export.jsonl"), "--checkpoint", kept];
      const result = await runBursar(args, { BURSAR_DATA_DIR: data_dir });
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(new RegExp(`${option} ${kept}: refusing to overwrite`));
    }
    expect(readFileSync(kept, "utf8")).toBe(before);
  });
});
