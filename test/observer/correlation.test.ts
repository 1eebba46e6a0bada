// Matching responses to calls: a stateless MCP server has no session id, so two gateways'
// clients may both send JSON-RPC id 1 at once; each call must be recorded with its own result.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { LATEST_PROTOCOL_VERSION, observerSource, raw, toolCall } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

let h: Harness;
let upstream: Upstream;

beforeAll(async () => {
  upstream = await startUpstream();
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await upstream.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("without an MCP session id", () => {
  for (const path of ["/mcp-stateless-json", "/mcp-stateless"]) {
    it(`records each of two concurrent calls with the same JSON-RPC id with its own result (${path.endsWith("json") ? "JSON" : "SSE"})`, async () => {
      const source = await observerSource(h, `${upstream.url}${path}`);
      const headers = { "x-bursar-observer-token": source.observer_token };
      // A is answered first, while B (sent after A, same id) is still pending.
      const [a, b] = await Promise.all([
        raw(source.observer_url, "POST", headers, toolCall(1, "slow", { who: "A", delay_ms: 300 })),
        sleep(50).then(() => raw(source.observer_url, "POST", headers, toolCall(1, "slow", { who: "B", delay_ms: 600 }))),
      ]);
      expect(a.bytes.toString()).toContain('\\"who\\":\\"A\\"');
      expect(b.bytes.toString()).toContain('\\"who\\":\\"B\\"');

      await h.evidence.observer.recorder.drain();
      const recorded = (await h.entries("observer.call")).filter((stored) => stored.entry.source === source.id).map((stored) => stored.entry.body);
      expect(recorded).toHaveLength(2);
      for (const body of recorded) {
        const who = (body.args as { who: string }).who;
        expect(body.outcome, who).toEqual({ type: "result", is_error: false });
        const text = (body.result as { content: Array<{ text: string }> }).content[0]!.text;
        expect(JSON.parse(text), who).toMatchObject({ who });
      }
    });
  }

  it("records a call whose SSE stream ended unanswered as no_response at once: without a session nothing can resume it", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-stateless`);
    const headers = { "x-bursar-observer-token": source.observer_token, "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
    const polled = await raw(source.observer_url, "POST", headers, toolCall(7, "poll", {}));
    expect(polled.status).toBe(200);
    expect(polled.bytes.toString()).not.toContain("polled");
    await h.evidence.observer.recorder.drain();
    const recorded = (await h.entries("observer.call")).filter((stored) => stored.entry.source === source.id);
    expect(recorded.map((stored) => stored.entry.body.outcome)).toEqual([{ type: "no_response", reason: "stream_ended" }]);
    expect(recorded[0]!.entry.body.transport).toBe("sse");
  });
});
