// A batch of observed calls whose COMMIT's outcome is unknown is written once, never twice:
// before anything else is appended the sink asks the log whether the batch's last entry is there,
// and the recorder writes it again only if not. Its gap entry's count is not counted twice either.
// The log is on a real PostgreSQL; a loopback proxy cuts the connection carrying the batch's
// `INSERT …; COMMIT`, before the server has it (no effect) or after it answered (took effect),
// and refuses new connections while the store cannot tell.

import { generateKeyPairSync } from "node:crypto";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createLogSigner, EvidenceLog } from "../../src/evidence/index.js";
import { migrations } from "../../src/ledger/migrations/index.js";
import { PostgresDriver } from "../../src/ledger/postgres.js";
import { logSink, Recorder } from "../../src/observer/recorder.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { startPgProxy, type PgProxy } from "../support/pg-proxy.js";
import { waitUntil } from "../support/wait.js";

const pg_server = postgresServerUrl();
const source_id = "src_commitunknown00001";
const origin = "commit-unknown.test/log";
/** The statement a batch's append ends with: its entries' INSERT, sent with the COMMIT. */
const batch_commit = /^INSERT INTO log_entries[\s\S]*; COMMIT$/;

describe.skipIf(!pg_server)("a batch whose COMMIT's outcome is unknown (PostgreSQL, connection cut by a proxy)", () => {
  let proxy: PgProxy;
  let schema: Awaited<ReturnType<typeof freshSchema>>;
  let driver: PostgresDriver;
  let log: EvidenceLog;
  let recorder: Recorder;

  beforeAll(async () => {
    proxy = await startPgProxy(pg_server as string);
  });
  afterAll(async () => proxy?.close());

  beforeEach(async () => {
    schema = await freshSchema(pg_server as string);
    // A short reconnect budget: while the proxy refuses, a transaction fails instead of waiting.
    driver = new PostgresDriver({ url: proxy.url(schema.url), pool_connections_max: 2, reconnect_budget_ms: 200 });
    await driver.migrate(migrations);
    log = await EvidenceLog.open(driver, { signer: createLogSigner(generateKeyPairSync("ed25519").privateKey, origin), origin, clock: () => new Date() });
    recorder = new Recorder({ sink: logSink(driver, log), clock: () => new Date(), flush_delay_ms: 1, retry_delay_ms: 50 });
  });
  afterEach(async () => {
    proxy.refuse(false);
    await recorder.close();
    await driver.close();
    await schema.drop();
  });

  /** The log's observer.call bodies' `n`, and its gap entries' counts. */
  async function written(): Promise<{ calls: number[]; gaps: number[] }> {
    const entries = await log.entries(0, await log.treeSize());
    return {
      calls: entries.filter((stored) => stored.entry.kind === "observer.call").map((stored) => (stored.entry.body as { n: number }).n),
      gaps: entries.filter((stored) => stored.entry.kind === "system.evidence_gap").map((stored) => (stored.entry.body as { unrecorded_calls: number }).unrecorded_calls),
    };
  }

  function observe(ns: number[]): void {
    for (const n of ns) recorder.enqueue({ build: () => ({ kind: "observer.call", source: "observer", body: { n } }) }, 100, source_id);
  }

  it.each([
    ["took effect", "after_reply"],
    ["did not take effect", "before"],
  ] as const)("is written once, with its gap counted once, when it %s", async (_name, when) => {
    recorder.unrecorded(2, "queue_full", source_id);
    const cuts = proxy.cut.length;
    proxy.arm({ sql: batch_commit, when });
    observe([1, 2, 3]);
    expect(await recorder.drain(10_000)).toBe(true);
    // Calls after it are written after it, once.
    observe([4]);
    expect(await recorder.drain(10_000)).toBe(true);
    expect(proxy.cut).toHaveLength(cuts + 1);
    expect(await written()).toEqual({ calls: [1, 2, 3, 4], gaps: [2] });
  });

  it.each([
    ["took effect", "after_reply", [2, 1]],
    ["did not take effect", "before", [3]],
  ] as const)("keeps a gap counted while the store cannot tell apart from its own, and writes each once, when it %s", async (_name, when, gaps) => {
    recorder.unrecorded(2, "queue_full", source_id);
    const cuts = proxy.cut.length;
    proxy.arm({ sql: batch_commit, when });
    observe([1, 2, 3]);
    await waitUntil("the batch's connection to be cut", () => proxy.cut.length === cuts + 1);
    // The store cannot be reached: asking whether the batch took effect fails, and it stays unresolved.
    proxy.refuse(true);
    const refused = proxy.refused;
    await waitUntil("the recorder to ask and be refused", () => proxy.refused > refused);
    recorder.unrecorded(1, "queue_full", source_id);
    proxy.refuse(false);
    expect(await recorder.drain(10_000)).toBe(true);
    expect(await written()).toEqual({ calls: [1, 2, 3], gaps });
  });
});
