// Observer runs on both backends: a run's counts move with the batches written, a silent run is
// claimed by exactly one of several instances looking at once, and only then is its entry written.

import { describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import type { AppendInput } from "../../src/evidence/index.js";
import { logSink, observer_lost_kind, observer_resumed_kind, ObserverRuns, type CallCounts } from "../../src/observer/index.js";
import { Recorder } from "../../src/observer/recorder.js";
import { run_kept_ms, run_silent_ms_max_default } from "../../src/observer/runs.js";
import { backends, closeAfterTest } from "../support/backends.js";
import { manualClock, type ManualClock } from "../support/clock.js";

async function entries(bursar: Bursar) {
  return (await bursar.log.entries(0, await bursar.log.treeSize())).map((stored) => stored.entry);
}

/** A run's row with PostgreSQL's BIGINT strings read as numbers, or undefined. */
async function runRow(bursar: Bursar, run_id: string): Promise<{ taken: number; written: number; ended: boolean } | undefined> {
  const row = await bursar.driver.read((tx) =>
    tx.get<{ calls_taken: number | string; calls_written: number | string; ended_at_ms: number | string | null }>(
      "SELECT calls_taken, calls_written, ended_at_ms FROM observer_runs WHERE run_id = ?",
      [run_id],
    ),
  );
  return row && { taken: Number(row.calls_taken), written: Number(row.calls_written), ended: row.ended_at_ms !== null };
}

function runs(bursar: Bursar, clock: ManualClock, run_id?: string): ObserverRuns {
  return new ObserverRuns({ driver: bursar.driver, log: bursar.log, clock, ...(run_id ? { run_id } : {}) });
}

for (const backend of backends()) {
  describe(backend.name, () => {
    async function opened(): Promise<{ bursar: Bursar; clock: ManualClock }> {
      const clock = manualClock();
      const bursar = await createBursar({ db: await backend.db(), clock });
      closeAfterTest(bursar);
      return { bursar, clock };
    }

    it("counts written calls in the batch's own transaction: a rolled-back batch counts none", async () => {
      const { bursar, clock } = await opened();
      const run = runs(bursar, clock, "run_counts");
      await bursar.driver.transaction((tx) => run.written(tx, 3, () => 5));
      await expect(bursar.driver.transaction(async (tx) => {
        await run.written(tx, 2, () => 6);
        throw new Error("the batch failed");
      })).rejects.toThrow("the batch failed");
      expect(await runRow(bursar, "run_counts")).toEqual({ taken: 5, written: 3, ended: false });
    });

    it("the recorder counts each call handed over once, and as written once its entry or its gap count is", async () => {
      const { bursar, clock } = await opened();
      const run = runs(bursar, clock, "run_recorder");
      const sink = logSink(bursar.driver, bursar.log, run);
      let failures = 1;
      const recorder = new Recorder({
        // The first write fails as a store that went away does; the next ones go through.
        sink: { append: (inputs: readonly AppendInput[], counts: CallCounts) => (failures-- > 0 ? Promise.reject(new Error("store down")) : sink.append(inputs, counts)) },
        clock,
        queue_length_max: 3,
        flush_delay_ms: 1,
        retry_delay_ms: 5,
      });
      const call = (text: string) => ({ build: (): AppendInput => ({ kind: "observer.call", source: "src_x", body: { text } }) });
      // A kind the log refuses: the batch is refused, then each call is written alone.
      const unrecordable = { build: (): AppendInput => ({ kind: "observer.bogus", source: "src_x", body: {} }) };
      // 3 queued (one the log refuses), 2 more over the queue's length, 4 counted as too large.
      for (const input of [call("a"), unrecordable, call("c"), call("d"), call("e")]) recorder.enqueue(input, 10, "src_x");
      recorder.unrecorded(4, "too_large", "src_x");
      expect(recorder.taken).toBe(9);
      expect(await recorder.drain(5_000)).toBe(true);
      expect(await runRow(bursar, "run_recorder")).toEqual({ taken: 9, written: 9, ended: false });
      const written = await entries(bursar);
      const gap_calls = written.filter((entry) => entry.kind === "system.evidence_gap").reduce((sum, entry) => sum + Number(entry.body.unrecorded_calls), 0);
      expect(written.filter((entry) => entry.kind === "observer.call")).toHaveLength(2);
      expect(gap_calls).toBe(7);
    });

    it("a silent run is claimed by one of several instances looking at once, with one entry", async () => {
      const { bursar, clock } = await opened();
      await bursar.driver.transaction((tx) => tx.run("INSERT INTO evidence_sources (source_id, kind, name, upstream_url, created_at_ms) VALUES ('src_x', 'observer', 'x', 'http://127.0.0.1:1/mcp', 0)"));
      const dead = runs(bursar, clock, "run_dead");
      await bursar.driver.transaction((tx) => dead.written(tx, 4, () => 9));
      clock.advance(run_silent_ms_max_default + 1);
      const finders = Array.from({ length: 4 }, () => runs(bursar, clock));
      const found = await Promise.all(finders.map((finder) => finder.findLost()));
      expect(found.flat()).toEqual(["run_dead"]);
      const lost = (await entries(bursar)).filter((entry) => entry.kind === observer_lost_kind).map((entry) => entry.body);
      expect(lost).toMatchObject([{ run_id: "run_dead", calls_taken: 9, calls_written: 4, calls_unwritten: 5 }]);
    });

    it("a run taken for lost that stops cleanly says it came back, then ends", async () => {
      const { bursar, clock } = await opened();
      const stalled = runs(bursar, clock, "run_stalled");
      await bursar.driver.transaction(async (tx) => stalled.stored(await stalled.written(tx, 2, () => 2)));
      clock.advance(run_silent_ms_max_default + 1);
      expect(await runs(bursar, clock).findLost()).toEqual(["run_stalled"]);
      expect(await stalled.end(2)).toBe(true);
      const kinds = (await entries(bursar)).map((entry) => entry.kind).filter((kind) => kind.startsWith("system.observer_"));
      expect(kinds).toEqual([observer_lost_kind, observer_resumed_kind]);
      expect(await runRow(bursar, "run_stalled")).toMatchObject({ ended: true });
      expect(await runs(bursar, clock).findLost()).toEqual([]);
    });

    it("ended runs are deleted once kept long enough", async () => {
      const { bursar, clock } = await opened();
      await runs(bursar, clock, "run_old").end(0);
      const finder = runs(bursar, clock);
      await finder.findLost();
      expect(await runRow(bursar, "run_old")).toMatchObject({ ended: true });
      clock.advance(run_kept_ms + 1);
      await finder.findLost();
      expect(await runRow(bursar, "run_old")).toBeUndefined();
    });
  });
}
