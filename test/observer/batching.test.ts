// Observed calls are written in batches flush_delay_ms apart while calls keep coming: a batch
// written at once after the last took only the few calls that came during its commit, so under
// steady load the recorder committed (and flushed the disk) many times a second.

import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { createBursar } from "../../src/index.js";
import { logSink, Recorder, type EvidenceSink } from "../../src/observer/recorder.js";

describe("the recorder under steady load", () => {
  it("writes a batch per flush delay, each holding the calls that came meanwhile", async () => {
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
});
