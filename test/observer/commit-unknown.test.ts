// A batch of observed calls whose COMMIT's outcome is unknown (PostgreSQL's connection broke
// during it) is written once, never twice: before anything else is appended the sink asks the
// log whether the batch's last entry is there, and the recorder writes it again only if not. Its
// gap entry's count is not counted twice either. The log and its database are real; only the
// broken connection is staged, by a driver that commits (or rolls back) and then reports the
// outcome as unknown, as the PostgreSQL driver does.

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import type { SqlDriver } from "../../src/ledger/driver.js";
import { CommitOutcomeUnknownError } from "../../src/ledger/postgres.js";
import { logSink, Recorder } from "../../src/observer/recorder.js";

type Staged = "took_effect" | "no_effect" | null;

let bursar: Bursar;
let recorder: Recorder;
/** What the next transaction's COMMIT does before it reports an unknown outcome. */
let staged: Staged = null;
/** Transactions that fail (the store cannot be reached) after the staged one: the store cannot tell yet. */
let unreachable_for = 0;
const source_id = "src_commitunknown00001";

class Rollback extends Error {}

/** The real driver, but for the staged transaction and the failing ones after it. */
function stagingDriver(real: SqlDriver): SqlDriver {
  return new Proxy(real, {
    get(target, property) {
      if (property === "transaction") {
        return async (work: Parameters<SqlDriver["transaction"]>[0], options?: Parameters<SqlDriver["transaction"]>[1]) => {
          const stage = staged;
          if (stage === null && unreachable_for > 0) {
            unreachable_for -= 1;
            throw new Error("connection refused");
          }
          if (stage === null) return target.transaction(work, options);
          staged = null;
          if (stage === "took_effect") await target.transaction(work, options);
          else
            await target
              .transaction(async (tx) => {
                await work(tx);
                throw new Rollback();
              }, options)
              .catch((error: unknown) => {
                if (!(error instanceof Rollback)) throw error;
              });
          throw new CommitOutcomeUnknownError("the connection broke during COMMIT; the outcome is unknown");
        };
      }
      const value = Reflect.get(target, property) as unknown;
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

beforeEach(async () => {
  bursar = await createBursar({ db: ":memory:" });
  recorder = new Recorder({ sink: logSink(stagingDriver(bursar.driver), bursar.log), clock: () => new Date(), flush_delay_ms: 1, retry_delay_ms: 10 });
  staged = null;
  unreachable_for = 0;
});

afterEach(async () => {
  await recorder.close();
  await bursar.close();
});

/** The log's observer.call bodies' `n`, and its gap entries' counts. */
async function written(): Promise<{ calls: number[]; gaps: number[] }> {
  const entries = await bursar.log.entries(0, await bursar.log.treeSize());
  return {
    calls: entries.filter((stored) => stored.entry.kind === "observer.call").map((stored) => (stored.entry.body as { n: number }).n),
    gaps: entries.filter((stored) => stored.entry.kind === "system.evidence_gap").map((stored) => (stored.entry.body as { unrecorded_calls: number }).unrecorded_calls),
  };
}

function observe(ns: number[]): void {
  for (const n of ns) recorder.enqueue({ build: () => ({ kind: "observer.call", source: "observer", body: { n } }) }, 100, source_id);
}

describe("a batch whose COMMIT's outcome is unknown", () => {
  it.each([
    ["took effect", "took_effect", 0],
    ["took effect, the store unable to tell at first", "took_effect", 3],
    ["did not take effect", "no_effect", 0],
  ] as const)("is written once, with its gap counted once, when it %s", async (_name, stage, unreachable) => {
    recorder.unrecorded(2, "queue_full", source_id);
    staged = stage;
    unreachable_for = unreachable;
    observe([1, 2, 3]);
    expect(await recorder.drain(5_000)).toBe(true);
    // Calls after it are written after it, once.
    observe([4]);
    expect(await recorder.drain(5_000)).toBe(true);
    expect(await written()).toEqual({ calls: [1, 2, 3, 4], gaps: [2] });
    expect(unreachable_for).toBe(0);
  });

  it.each([
    ["took effect", "took_effect", [2, 1]],
    ["did not take effect", "no_effect", [3]],
  ] as const)("keeps a gap counted while it is unresolved apart from its own, and writes each once, when it %s", async (_name, stage, gaps) => {
    recorder.unrecorded(2, "queue_full", source_id);
    staged = stage;
    // The store cannot tell at first: the batch stays unresolved while another call goes unrecorded.
    unreachable_for = 3;
    observe([1, 2, 3]);
    while (unreachable_for === 3) await new Promise((resolve) => setTimeout(resolve, 1));
    recorder.unrecorded(1, "queue_full", source_id);
    expect(await recorder.drain(5_000)).toBe(true);
    expect(await written()).toEqual({ calls: [1, 2, 3], gaps });
  });
});
