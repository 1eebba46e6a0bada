// A system.evidence_gap entry keeps every source's count, whatever its id looks like: the log
// scrubs a value whose key looks like a secret's name, and random source ids can ("src_vcv…"
// holds "cvc", "src_…Token…" holds "token"). The counts are a list, never keyed by the id.

import { describe, expect, it } from "vitest";
import { createBursar } from "../../src/index.js";
import { logSink, Recorder } from "../../src/observer/recorder.js";

describe("the evidence gap entry", () => {
  it("records each source's unrecorded calls, ids that look like secrets' names included", async () => {
    const bursar = await createBursar({ db: ":memory:" });
    const recorder = new Recorder({ sink: logSink(bursar.driver, bursar.log), clock: () => new Date(), flush_delay_ms: 1 });
    const ids = ["src_vcvAb12Cd34Ef56Gh", "src_x9TokenQ1w2e3r4t5", "src_Plain0000000000a"];
    ids.forEach((id, index) => recorder.unrecorded(index + 1, "queue_full", id));
    expect(await recorder.drain(5_000)).toBe(true);
    const size = await bursar.log.treeSize();
    const gaps = (await bursar.log.entries(0, size)).filter((stored) => stored.entry.kind === "system.evidence_gap");
    expect(gaps.map((stored) => stored.entry.body)).toEqual([
      expect.objectContaining({
        unrecorded_calls: 6,
        by_source: [
          { source_id: "src_Plain0000000000a", calls: 3 },
          { source_id: "src_vcvAb12Cd34Ef56Gh", calls: 1 },
          { source_id: "src_x9TokenQ1w2e3r4t5", calls: 2 },
        ],
      }),
    ]);
    await recorder.close();
    await bursar.close();
  });
});
