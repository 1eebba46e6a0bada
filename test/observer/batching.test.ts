// Observed calls are written in batches flush_delay_ms apart while calls keep coming: a batch
// written as soon as the last had committed took only the few calls that came during its commit,
// so under steady load the recorder committed (and flushed the disk) many times a second. A batch
// already full, by entries or by bytes, goes at once. The recorder's timers are faked (its delay
// moves only when the test moves it), the log it writes to is a real one.

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { batch_entries_max, logSink, Recorder, type EvidenceSink } from "../../src/observer/recorder.js";

const flush_delay_ms = 100;

let bursar: Bursar;
let recorder: Recorder;
/** The size of each batch written so far. */
let batches: number[];

beforeEach(async () => {
  bursar = await createBursar({ db: ":memory:" });
  const real = logSink(bursar.driver, bursar.log);
  batches = [];
  const sink: EvidenceSink = {
    append: async (inputs, counts) => {
      batches.push(inputs.length);
      await real.append(inputs, counts);
    },
  };
  // Only setTimeout: the log's group commit runs on setImmediate, which stays real.
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  recorder = new Recorder({ sink, clock: () => new Date(), flush_delay_ms });
});

afterEach(async () => {
  vi.useRealTimers();
  await recorder.close();
  await bursar.close();
});

function enqueue(count: number, bytes: number): void {
  for (let n = 0; n < count; n++) recorder.enqueue({ build: () => ({ kind: "observer.call", source: "observer", body: { n } }) }, bytes, "src_batching0000000001");
}

/** Lets every write that needs no timer run: turns of the event loop, with no time passing. */
async function settle(): Promise<void> {
  for (let turn = 0; turn < 50; turn++) await new Promise((resolve) => setImmediate(resolve));
}

describe("the recorder under steady load", () => {
  it("waits the flush delay before each batch that is not full, the second as the first", async () => {
    enqueue(batch_entries_max + 1, 100);
    await settle();
    expect(batches).toEqual([]);
    await vi.advanceTimersByTimeAsync(flush_delay_ms);
    await settle();
    // A whole batch went at once; the one call left waits for the calls after it.
    expect(batches).toEqual([batch_entries_max]);
    await vi.advanceTimersByTimeAsync(flush_delay_ms);
    await settle();
    expect(batches).toEqual([batch_entries_max, 1]);
  });

  it("writes batches full by bytes back to back, without the delay (large calls)", async () => {
    // Each call counted at 1 MiB: batches hold 4 (batch_bytes_max), far under batch_entries_max.
    enqueue(40, 1_048_576);
    await vi.advanceTimersByTimeAsync(flush_delay_ms);
    await settle();
    expect(batches).toEqual(Array.from({ length: 10 }, () => 4));
  });
});
