// Evidence writing off the critical path: with the evidence store stopped every call still
// goes through; when it is back, a system.evidence_gap entry says how many calls went
// unrecorded and when, and /metrics counted them.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppendInput } from "../../src/evidence/index.js";
import { harness, type Harness } from "../ingest/support.js";
import { observerSource, sdkClient, StoppableStore, type ObserverSourceCreated } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

const queue_length_max = 3;
let h: Harness;
let upstream: Upstream;
let store: StoppableStore;
let source: ObserverSourceCreated;

beforeAll(async () => {
  upstream = await startUpstream();
  let current: Harness | undefined;
  const placeholder = { append: (inputs: readonly AppendInput[]) => store.append(inputs) };
  h = await harness({ sink: placeholder, queue_length_max, retry_delay_ms: 50 });
  current = h;
  store = new StoppableStore(h.db, () => current!);
  store.start();
  source = await observerSource(h, `${upstream.url}/mcp`);
});
afterAll(async () => {
  await store.stop();
  await h.close();
  await upstream.close();
});

describe("when the evidence store stops", () => {
  it("does not break a single call, and reports the unrecorded calls once the store is back", async () => {
    const client = await sdkClient(source.observer_url, { "x-bursar-observer-token": source.observer_token });
    await client.callTool({ name: "echo", arguments: { text: "before" } });
    await h.evidence.observer.recorder.drain();
    await store.stop();
    const total = 10;
    for (let i = 0; i < total; i++) {
      const result = await client.callTool({ name: "echo", arguments: { text: `during ${i}` } });
      expect(result.content).toEqual([{ type: "text", text: `during ${i}` }]);
    }
    await client.close();
    const unrecorded = total - queue_length_max;
    expect(h.evidence.observer.recorder.pending).toBe(queue_length_max);
    expect(h.evidence.observer.recorder.unrecorded_pending).toBe(unrecorded);
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toContain(`bursar_evidence_gap_calls_total{reason="queue_full"} ${unrecorded}`);

    store.start();
    expect(await h.evidence.observer.recorder.drain(5_000)).toBe(true);
    const entries = await h.entries();
    const gap = entries.filter((stored) => stored.entry.kind === "system.evidence_gap");
    expect(gap).toHaveLength(1);
    expect(gap[0]!.entry.body).toMatchObject({ unrecorded_calls: unrecorded, reasons: ["queue_full"], by_source: { [source.id]: unrecorded } });
    expect(typeof gap[0]!.entry.body.first_missed_at).toBe("string");
    const texts = entries.filter((stored) => stored.entry.kind === "observer.call").map((stored) => (stored.entry.body.args as { text: string }).text);
    expect(texts).toEqual(["before", "during 0", "during 1", "during 2"]);
    const gap_seq = gap[0]!.seq;
    expect(entries.find((stored) => (stored.entry.body.args as { text?: string } | undefined)?.text === "during 0")!.seq).toBeGreaterThan(gap_seq);
  });
});
