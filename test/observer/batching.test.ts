// Observed calls are written in batches flush_delay_ms apart while calls keep coming: a batch
// written at once after the last took only the few calls that came during its commit, so under
// steady load the recorder committed (and flushed the disk) many times a second.

import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { createBursar } from "../../src/index.js";
import { logSink, Recorder, type EvidenceSink } from "../../src/observer/recorder.js";
import { waitUntil } from "../support/wait.js";

/** A recorder writing to a real log, noting each batch's size and the wait before it. */
async function watchedRecorder() {
  const bursar = await createBursar({ db: ":memory:" });
  const real = logSink(bursar.driver, bursar.log);
  const batches: number[] = [];
  /** Milliseconds from the end of each write to the start of the next. */
  const waits: number[] = [];
  let ended: number | undefined;
  const sink: EvidenceSink = {
    append: async (inputs, counts) => {
      if (ended !== undefined) waits.push(performance.now() - ended);
      batches.push(inputs.length);
      await real.append(inputs, counts);
      ended = performance.now();
    },
  };
  const recorder = new Recorder({ sink, clock: () => new Date(), flush_delay_ms: 100 });
  return { bursar, recorder, batches, waits };
}

describe("the recorder under steady load", () => {
  it("writes a batch per flush delay, each holding the calls that came meanwhile", async () => {
    const { bursar, recorder, batches, waits } = await watchedRecorder();
    const calls = 300;
    for (let n = 0; n < calls; n++) {
      recorder.enqueue({ build: () => ({ kind: "observer.call", source: "observer", body: { n } }) }, 100, "src_batching0000000001");
      await sleep(2);
    }
    expect(await recorder.drain(5_000)).toBe(true);
    expect(batches.reduce((sum, size) => sum + size, 0)).toBe(calls);
    // Each write waited the flush delay after the last while calls kept coming (libuv may round a
    // timer a millisecond short, no more).
    expect(batches.length).toBeGreaterThan(2);
    expect(waits.filter((ms) => ms < 98)).toEqual([]);
    await recorder.close();
    await bursar.close();
  });

  it("writes batches full by bytes back to back, without the delay (large calls)", async () => {
    const { bursar, recorder, batches, waits } = await watchedRecorder();
    // Each call counted at 1 MiB: batches hold 4 (batch_bytes_max), far under batch_entries_max.
    for (let n = 0; n < 40; n++) recorder.enqueue({ build: () => ({ kind: "observer.call", source: "observer", body: { n } }) }, 1_048_576, "src_batching0000000002");
    // Not drain(), which writes back to back whatever is queued.
    await waitUntil("40 calls written", () => batches.reduce((sum, size) => sum + size, 0) === 40, { timeout_ms: 5_000 });
    expect(batches).toEqual(Array.from({ length: 10 }, () => 4));
    expect(waits.filter((ms) => ms >= 90)).toEqual([]);
    await recorder.close();
    await bursar.close();
  });
});
