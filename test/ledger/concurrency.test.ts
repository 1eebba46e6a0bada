// Four OS processes hammer one database (a SQLite file; a PostgreSQL schema when BURSAR_TEST_PG
// is set) with authorizations against one block for five seconds: no invariant violation, no
// BUSY / serialization / deadlock error reaches a caller, and the held and spent totals equal
// the sums over reservations.

import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/index.js";
import { createBursar } from "../../src/index.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { ensureBuilt } from "../support/build.js";

const run = promisify(execFile);
const processes = 4;
const seconds = 5;

/** Runs the four hammer processes against `db` and checks the block against its reservations. */
async function hammerAndCheck(db: string, key_path: string): Promise<void> {
  writeFileSync(key_path, generateSigningKeyPem(), { mode: 0o600 });
  const signingKey = readFileSync(key_path, "utf8");
  const setup = await createBursar({ db, signingKey });
  const agent = await setup.operator.createAgent({ name: "hammer" });
  const block = await setup.operator.createBlock({
    agent_id: agent.agent_id,
    currency: "INR",
    reserved: 2_000_000,
    per_call_cap: 10_000,
    approval_threshold: 10_000,
    velocity: { max_calls: 1_000_000, window_seconds: 1 },
  });
  await setup.close();

  const script = join(import.meta.dirname, "fixtures/hammer.mjs");
  const results = await Promise.all(
    Array.from({ length: processes }, (_, worker) =>
      // Each runs for `seconds`; one that hangs is killed at 50 s rather than left behind a failed test.
      run(process.execPath, [script, db, agent.agent_id, String(seconds), String(worker), key_path], { maxBuffer: 16 << 20, timeout: 50_000, killSignal: "SIGKILL" }),
    ),
  );
  const stats = results.map((result) => JSON.parse(result.stdout) as { decisions: number; allowed: number; errors: string[] });
  expect(stats.flatMap((entry) => entry.errors)).toEqual([]);
  expect(stats.every((entry) => entry.decisions > 0)).toBe(true);

  const check = await createBursar({ db, signingKey });
  try {
    const final = await check.operator.getBlock(block.block_id);
    const sums = await check.driver.read((tx) =>
      tx.get<{ held: number; spent: number }>(
        `SELECT COALESCE(SUM(CASE WHEN status = 'held' THEN amount ELSE 0 END), 0) AS held,
                COALESCE(SUM(CASE WHEN status = 'committed' THEN captured_amount ELSE 0 END), 0) AS spent
         FROM reservations WHERE block_id = ?`,
        [block.block_id],
      ),
    );
    expect(final.spent + final.held).toBeLessThanOrEqual(final.reserved);
    expect({ held: final.held, spent: final.spent }).toEqual(sums);
    // The block filled up: contention was real, and R1 refused the overflow.
    expect(stats.reduce((sum, entry) => sum + entry.allowed, 0)).toBeGreaterThan(0);
    // The log stayed gap-free under four writers: seqs 0..size-1, each exactly once.
    const log = await check.driver.read((tx) =>
      tx.get<{ entries: number; low: number; high: number }>("SELECT COUNT(*) AS entries, MIN(seq) AS low, MAX(seq) AS high FROM log_entries"),
    );
    expect(log).toEqual({ entries: (log?.high ?? 0) + 1, low: 0, high: (log?.entries ?? 0) - 1 });
    expect(await check.log.treeSize()).toBe(log?.entries);
  } finally {
    await check.close();
  }
}

describe("SQLite under four processes", () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-hammer-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps spent + held <= reserved with zero BUSY errors surfaced", async () => {
    await hammerAndCheck(join(dir, "bursar.db"), join(dir, "signing-key.pem"));
  });
});

const pg_server = postgresServerUrl();
describe.skipIf(!pg_server)("PostgreSQL under four processes", () => {
  let dir: string;
  let schema: Awaited<ReturnType<typeof freshSchema>> | undefined;
  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-hammer-pg-"));
    schema = await freshSchema(pg_server as string);
  });
  afterAll(async () => {
    await schema?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps spent + held <= reserved with zero serialization or deadlock errors surfaced", async () => {
    await hammerAndCheck((schema as { url: string }).url, join(dir, "signing-key.pem"));
  });
});
