// Crash safety: a child appending in a loop is SIGKILLed at random moments and restarted;
// afterwards the log has no gap, every committed ledger row has its entry, no rolled-back
// entry exists, and the export verifies against a fresh checkpoint.

import { spawn, spawnSync } from "node:child_process";
import { readdirSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock.js";
import { exportLog } from "../../src/evidence/export.js";
import { createLogSigner, generateSigningKeyPem, loadSigningKey } from "../../src/evidence/keys.js";
import { EvidenceLog } from "../../src/evidence/store.js";
import { bufferLines, verifyExportLines } from "../../src/evidence/verify.js";
import { migratedDriver, tempDir } from "./support.js";

const root = resolve(import.meta.dirname, "../..");
const dist = join(root, "dist");
const child = join(import.meta.dirname, "fixtures/crash-child.mjs");
const kill_cycles = 3;

function newestMtime(directory: string): number {
  return Math.max(
    0,
    ...readdirSync(directory, { withFileTypes: true }).map((entry) => {
      const path = join(directory, entry.name);
      return entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs;
    }),
  );
}

/** `npm test` builds first; when run alone, rebuild if the compiled evidence code is stale. */
function ensureBuilt(): void {
  const compiled = join(dist, "src/evidence/index.js");
  let stale = true;
  try {
    stale = statSync(compiled).mtimeMs < Math.max(newestMtime(join(root, "src/evidence")), newestMtime(join(root, "src/ledger")));
  } catch {
    stale = true;
  }
  if (stale) spawnSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root, stdio: "ignore", timeout: 240_000 });
  statSync(compiled);
}

/** Runs the child until it is ready, lets it append for a random while, then SIGKILLs it. */
async function runAndKill(databasePath: string, keyPath: string): Promise<void> {
  const childProcess = spawn("node", [child, databasePath, keyPath, dist], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  childProcess.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolveExit) => childProcess.on("exit", (code) => resolveExit(code)));
  // A child that never gets ready is killed at 30 s, not left running behind a failed test.
  const timer = setTimeout(() => childProcess.kill("SIGKILL"), 30_000);
  await new Promise<void>((ready, fail) => {
    childProcess.stdout.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && ready());
    void exited.then(() => fail(new Error(`child exited before ready: ${stderr}`)));
  });
  clearTimeout(timer);
  await new Promise((wait) => setTimeout(wait, 150 + Math.random() * 350));
  childProcess.kill("SIGKILL");
  await exited;
}

const dir = tempDir();
afterAll(() => dir.remove());
beforeAll(() => ensureBuilt(), 120_000);

describe("SIGKILL during appends", () => {
  it("leaves a gap-free log where every committed row has its entry and nothing rolled back does", async () => {
    const databasePath = join(dir.path, "crash.db");
    const keyPath = join(dir.path, "key.pem");
    writeFileSync(keyPath, generateSigningKeyPem(), { mode: 0o600 });
    for (let cycle = 0; cycle < kill_cycles; cycle++) await runAndKill(databasePath, keyPath);

    const driver = await migratedDriver(databasePath);
    const signer = createLogSigner(loadSigningKey(keyPath), "crash.test/log");
    const log = await EvidenceLog.open(driver, { signer, origin: "crash.test/log", clock: systemClock });
    const counts = await driver.read(async (tx) => ({
      head: (await tx.get<{ size: number }>("SELECT size FROM log_head"))!.size,
      entries: (await tx.get<{ n: number; max: number }>("SELECT count(*) AS n, max(seq) AS max FROM log_entries"))!,
      crashEntries: (await tx.get<{ n: number }>("SELECT count(*) AS n FROM log_entries WHERE source = 'crash'"))!.n,
      rows: (await tx.get<{ n: number }>("SELECT count(*) AS n FROM crash_ledger"))!.n,
      orphanRows: (await tx.get<{ n: number }>("SELECT count(*) AS n FROM crash_ledger c LEFT JOIN log_entries e ON e.seq = c.seq WHERE e.seq IS NULL OR e.source <> 'crash'"))!.n,
      rolledBack: (await tx.get<{ n: number }>("SELECT count(*) AS n FROM log_entries WHERE entry_text LIKE '%rolled_back%'"))!.n,
    }));
    expect(counts.rows).toBeGreaterThan(0);
    expect(counts.entries.n).toBe(counts.head);
    expect(counts.entries.max).toBe(counts.head - 1);
    expect(counts.orphanRows).toBe(0);
    expect(counts.crashEntries).toBe(counts.rows);
    expect(counts.rolledBack).toBe(0);

    // The restarted log signs a checkpoint consistent with every one signed before the kills.
    const final = await log.checkpoint();
    expect(final.size).toBe(counts.head);
    const chunks: string[] = [];
    await exportLog(driver, { size: final.size, exported_at: "2026-01-01T00:00:00Z", write: async (text) => void chunks.push(text) });
    const report = verifyExportLines(bufferLines(Buffer.from(chunks.join(""))), { checkpoint: final.note, key: log.verifierKey, allReceipts: true });
    expect(report.failure).toBeUndefined();
    expect(report.entries).toBe(counts.head);
    expect(report.checkpoints).toBeGreaterThan(kill_cycles);
    await driver.close();
  });
});
