// Memory bounds while evidence waits: a queued call counts all it holds (a JSON-RPC id can be
// megabytes, so a long one is kept by hash), and pending calls are bounded in bytes too. Bodies
// past the inspection limit are relayed, their tools/call requests counted as unrecorded, and so
// are bodies arriving while the taps of all exchanges hold their shared limit.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex, type AppendInput } from "../../src/evidence/index.js";
import { jsonrpc_id_chars_max, pending_bytes_max } from "../../src/observer/calls.js";
import { createServer } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { observed_body_bytes_max, observed_bytes_held_max, observed_bytes_held_per_source_max, observed_calls_per_request_max } from "../../src/observer/proxy.js";
import { waitFor } from "../provider/support.js";
import { harness, type Harness } from "../ingest/support.js";
import { gapCalls, LATEST_PROTOCOL_VERSION, observerSource, raw, rawSession, recorded as recordedCalls, StoppableStore, toolCall, unicodeEscaped, type ObserverSourceCreated, type RawAnswer } from "./support.js";
import { arrivedIn, startUpstream, type Upstream } from "./upstream.js";

let h: Harness;
let upstream: Upstream;
let store: StoppableStore;

beforeAll(async () => {
  upstream = await startUpstream();
  h = await harness({ sink: { append: (inputs: readonly AppendInput[]) => store.append(inputs) }, retry_delay_ms: 50 });
  store = new StoppableStore(h.db, () => h);
  store.start();
});
afterAll(async () => {
  await store.stop();
  await h.close();
  await upstream.close();
});

const recorded = (source_id: string) => recordedCalls(h, source_id, 10_000);

/** The calls each gap entry counts for this source, once the queue has drained. */
async function gaps(source_id: string): Promise<number[]> {
  expect(await h.evidence.observer.recorder.drain(5_000)).toBe(true);
  return (await h.entries("system.evidence_gap")).map((gap) => gapCalls(gap.entry.body, source_id)).filter((calls) => calls !== undefined);
}

/** A tools/call of `slow` (which answers its args but `pad`) whose `method` member, name and value, is written in \\u escapes: 60 bytes for "tools/call". */
function escapedCall(id: number, args: Record<string, unknown>): Buffer {
  const params = JSON.stringify({ name: "slow", arguments: args });
  return Buffer.from(`{"jsonrpc":"2.0","id":${id},"${unicodeEscaped("method")}":"${unicodeEscaped("tools/call")}","params":${params}}`);
}

describe("queued evidence", () => {
  it("keeps a JSON-RPC id longer than the limit by its hash, and counts each queued call at least at its size", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const session = await rawSession(`${upstream.url}/mcp-json`);
    const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
    const ids = ["x".repeat(3_000_000), "y".repeat(jsonrpc_id_chars_max), "z".repeat(jsonrpc_id_chars_max + 1)];
    await store.stop();
    for (const [i, id] of ids.entries()) {
      const answer = await raw(source.observer_url, "POST", headers, { jsonrpc: "2.0", id, method: "tools/call", params: { name: "echo", arguments: { text: `call ${i}` } } });
      expect(answer.bytes.toString()).toContain(`call ${i}`);
    }
    const counted_bytes = h.evidence.observer.recorder.pending_bytes;
    store.start();

    const bodies = await recorded(source.id);
    expect(bodies.map((body) => body.jsonrpc_id ?? body.jsonrpc_id_hash)).toEqual([sha256Hex(ids[0]!), ids[1], sha256Hex(ids[2]!)]);
    expect(bodies.map((body) => body.jsonrpc_id_omitted)).toEqual(["too_large", undefined, "too_large"]);
    const stored_bytes = bodies.reduce((sum, body) => sum + Buffer.byteLength(JSON.stringify(body)), 0);
    expect(counted_bytes).toBeGreaterThanOrEqual(stored_bytes);
  });
});

describe("pending calls", () => {
  it("are bounded in bytes: past the bound the oldest are recorded as evicted, and every call is still answered", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-stateless-json`);
    const headers = { "x-bursar-observer-token": source.observer_token };
    const pad = "p".repeat(3_500_000);
    const calls = Math.ceil(pending_bytes_max / pad.length) + 4;
    // All pending at once: each is answered only once the last has reached the upstream. Sent
    // four at a time, each four once the ones before have reached the upstream (a fixed pause
    // was too short on a busy machine): a source uploading more at once than its share of the
    // bytes read (HeldBytes) beside another's reserve would have some calls counted unread instead.
    const group = `bounded-${source.id}`;
    const sent: Array<Promise<RawAnswer>> = [];
    for (let i = 0; i < calls; i++) {
      if (i > 0 && i % 4 === 0) await waitFor(() => arrivedIn(group) >= i, 30_000, `calls 0..${i - 1} to reach the upstream`);
      sent.push(raw(source.observer_url, "POST", headers, toolCall(i, "slow", { i, pad, wait_for: calls, group })));
    }
    const answers = await Promise.all(sent);
    for (const [i, answer] of answers.entries()) expect(answer.bytes.toString()).toContain(`\\"i\\":${i}`);

    const outcomes = (await recorded(source.id)).map((body) => body.outcome as { type: string; reason?: string });
    expect(outcomes).toHaveLength(calls);
    const evicted = outcomes.filter((outcome) => outcome.reason === "evicted").length;
    expect(evicted).toBeGreaterThanOrEqual(4);
    expect(outcomes.filter((outcome) => outcome.type === "result")).toHaveLength(calls - evicted);
  });
});

describe("a batch of many tool calls", () => {
  it(`records the first ${observed_calls_per_request_max} calls of one request and counts the rest in the gap`, async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-stateless-json`);
    const headers = { "x-bursar-observer-token": source.observer_token };
    const batch = Array.from({ length: observed_calls_per_request_max + 50 }, (_, id) => toolCall(id, "echo", { text: `call ${id}` }));
    await raw(source.observer_url, "POST", headers, batch);
    expect(await recorded(source.id)).toHaveLength(observed_calls_per_request_max);
    const gaps = (await h.entries("system.evidence_gap")).map((gap) => gap.entry.body);
    expect(gaps.filter((gap) => gapCalls(gap, source.id) !== undefined)).toEqual([expect.objectContaining({ by_source: [{ source_id: source.id, calls: 50 }], reasons: ["too_large"] })]);
  });

  it("records a kept call whose id comes again past the limit as unattributed, never with a result: a response could be either one's", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-stateless-json`);
    const headers = { "x-bursar-observer-token": source.observer_token };
    const batch = Array.from({ length: observed_calls_per_request_max + 1 }, (_, id) => toolCall(id, "echo", { text: `call ${id}` }));
    batch.push(toolCall(5, "echo", { text: "call 5 again" }));
    await raw(source.observer_url, "POST", headers, batch);
    const bodies = await recorded(source.id);
    expect(bodies).toHaveLength(observed_calls_per_request_max);
    const fifth = bodies.filter((body) => body.jsonrpc_id === 5);
    expect(fifth.map((body) => [body.args, body.outcome, body.result])).toEqual([[{ text: "call 5" }, { type: "unattributed", reason: "duplicate_id" }, undefined]]);
  });
});

describe("requests too large to inspect", () => {
  it("are relayed, and counted in the gap by the tools/call requests they carry", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-large`);
    const session = await rawSession(`${upstream.url}/mcp-large`);
    const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
    const pad = "p".repeat(observed_body_bytes_max);

    const notified = await raw(source.observer_url, "POST", headers, { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: pad } });
    expect(notified.status).toBe(202);
    expect(await gaps(source.id)).toEqual([]);
    const third = pad.slice(0, observed_body_bytes_max / 3);
    // "tools/call" inside an argument is not a call.
    const batch = [1, 2, 3].map((id) => toolCall(id, "echo", { text: `"method":"tools/call" ${third}` }));
    const answered = await raw(source.observer_url, "POST", headers, [...batch, { jsonrpc: "2.0", method: "notifications/initialized" }]);
    expect((JSON.parse(answered.bytes.toString()) as Array<{ id: number }>).map((response) => response.id)).toEqual([1, 2, 3]);
    expect(await gaps(source.id)).toEqual([3]);
  });

  it("count a call whose method member is written in \\u escapes, as the server decodes it", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-large`);
    const session = await rawSession(`${upstream.url}/mcp-large`);
    const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
    const body = escapedCall(41, { ran: "escaped", pad: "p".repeat(observed_body_bytes_max) });
    expect(body.length).toBeGreaterThan(observed_body_bytes_max);
    const answered = await raw(source.observer_url, "POST", headers, body);
    expect(answered.bytes.toString()).toContain('\\"ran\\":\\"escaped\\"');
    expect(await gaps(source.id)).toEqual([1]);
  });
});

describe("the bytes all exchanges' taps hold", () => {
  /** Uploads each within the per-body limit, stalled before their declared end, through `sources` in turn. */
  function stallUploads(sources: readonly ObserverSourceCreated[], uploads: number): Socket[] {
    const sockets: Socket[] = [];
    for (let i = 0; i < uploads; i++) {
      const socket = connect(Number(new URL(h.url).port), "127.0.0.1");
      socket.on("error", () => undefined);
      const token = sources[i % sources.length]!.observer_token;
      socket.write(`POST /observe HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${2 * observed_body_bytes_max}\r\nx-bursar-observer-token: ${token}\r\n\r\n`);
      socket.write(Buffer.alloc(stalled_bytes, 0x20));
      sockets.push(socket);
    }
    return sockets;
  }
  const stalled_bytes = observed_body_bytes_max - 65_536;

  it("are bounded together: while stalled uploads hold the limit, bodies are read as too large, and the bytes come back when they go", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-large`);
    const session = await rawSession(`${upstream.url}/mcp-large`);
    const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
    // Stalled uploads through four other sources, none past its share, hold all but 1 MiB.
    const uploads = Math.ceil((observed_bytes_held_max - 1_048_576) / stalled_bytes);
    const stallers = await Promise.all([1, 2, 3, 4].map(() => observerSource(h, `${upstream.url}/mcp-large`)));
    expect(Math.ceil(uploads / stallers.length) * stalled_bytes).toBeLessThanOrEqual(observed_bytes_held_per_source_max);
    const sockets = stallUploads(stallers, uploads);
    await waitFor(() => h.evidence.observer.held.bytes === uploads * stalled_bytes, 10_000, "the stalled uploads to be held");

    const pad = "p".repeat(1_572_864);
    expect((await raw(source.observer_url, "POST", headers, toolCall(1, "echo", { text: pad }))).status).toBe(200);
    expect(await gaps(source.id)).toEqual([1]);
    expect((await raw(source.observer_url, "POST", headers, toolCall(2, "big", { size: 2_000_000 }))).status).toBe(200);
    expect((await recorded(source.id)).map((call) => call.outcome)).toEqual([{ type: "unread_response", reason: "too_large", status: 200 }]);

    for (const socket of sockets) socket.destroy();
    await waitFor(() => h.evidence.observer.held.bytes === 0, 5_000, "the stalled uploads' bytes to come back");
    expect((await raw(source.observer_url, "POST", headers, toolCall(3, "echo", { text: pad }))).status).toBe(200);
    expect((await recorded(source.id)).map((call) => [call.jsonrpc_id, call.outcome])).toEqual([
      [2, { type: "unread_response", reason: "too_large", status: 200 }],
      [3, { type: "result", is_error: false }],
    ]);
  }, 30_000);

  it("leave a source past its share no more than keeps that share free for the others: its stalled uploads leave other sources' bodies read", async () => {
    const [staller, other] = [await observerSource(h, `${upstream.url}/mcp-large`), await observerSource(h, `${upstream.url}/mcp-large`)];
    const session = await rawSession(`${upstream.url}/mcp-large`);
    const headers = (source: ObserverSourceCreated) => ({ "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token });
    // More stalled uploads than fit beside the reserve: those that fit are held, the rest go unread.
    const fitting = Math.floor((observed_bytes_held_max - observed_bytes_held_per_source_max) / stalled_bytes);
    const sockets = stallUploads([staller], fitting + 2);
    await waitFor(() => h.evidence.observer.held.heldBy(staller.id) === fitting * stalled_bytes, 10_000, "the stalling source's uploads to be held");
    try {
      const pad = "p".repeat(1_572_864);
      expect((await raw(other.observer_url, "POST", headers(other), toolCall(1, "echo", { text: pad }))).status).toBe(200);
      expect((await recorded(other.id)).map((call) => call.outcome)).toEqual([{ type: "result", is_error: false }]);
      expect(await gaps(other.id)).toEqual([]);
      // The stalling source's own body does not fit beside the reserve.
      expect((await raw(staller.observer_url, "POST", headers(staller), toolCall(2, "echo", { text: pad }))).status).toBe(200);
      expect(await gaps(staller.id)).toEqual([1]);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    await waitFor(() => h.evidence.observer.held.bytes === 0, 5_000, "the stalled uploads' bytes to come back");
  }, 30_000);

  it("count an SSE event being read too: one that does not fit is skipped as too large, and what a stream held comes back when it ends", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-stateless`);
    const headers = { "x-bursar-observer-token": source.observer_token, "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
    const held = h.evidence.observer.held;
    expect(held.bytes).toBe(0);
    // Standing in for other exchanges holding all but 1 MiB: a 600,000-character event is charged at two bytes a unit.
    const others = observed_bytes_held_max - 1_048_576;
    expect(held.take(others)).toBe(true);
    try {
      const answered = await raw(source.observer_url, "POST", headers, toolCall(5, "big", { size: 600_000 }));
      expect(answered.status).toBe(200);
      expect(answered.bytes.length).toBeGreaterThan(600_000);
      expect(held.bytes).toBe(others);
    } finally {
      held.give(others);
    }
    expect((await raw(source.observer_url, "POST", headers, toolCall(6, "big", { size: 600_000 }))).status).toBe(200);
    expect(held.bytes).toBe(0);
    const calls = await recorded(source.id);
    expect(calls.map((call) => [call.jsonrpc_id, call.transport, call.outcome])).toEqual([
      [5, "sse", { type: "unread_response", reason: "too_large", status: 200 }],
      [6, "sse", { type: "result", is_error: false }],
    ]);
  });

  it("come back when the gateway goes away mid-upload after the answer has ended (Node no longer closes such a request), and the upload to the upstream is cut", async () => {
    // An upstream that answers at once, before the body has arrived: part of an event, then the end.
    let upstream_connection_closed = false;
    const early = createServer((request, response) => {
      request.socket.on("close", () => (upstream_connection_closed = true));
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write(`data: ${"x".repeat(300_000)}`);
      setTimeout(() => response.end(), 100);
    });
    // Nothing of its own ends the unfinished upload (Node's server would after 5 s, taking the
    // connection for an idle one once its answer has ended).
    early.requestTimeout = 0;
    early.keepAliveTimeout = 0;
    await new Promise<void>((resolve) => early.listen(0, "127.0.0.1", resolve));
    try {
      const source = await observerSource(h, `http://127.0.0.1:${(early.address() as AddressInfo).port}/mcp`);
      const held = h.evidence.observer.held;
      expect(held.bytes).toBe(0);
      const socket = connect(Number(new URL(h.url).port), "127.0.0.1");
      socket.on("error", () => undefined);
      let answer = "";
      socket.on("data", (chunk: Buffer) => (answer += chunk.toString("latin1")));
      socket.write(`POST /observe HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nx-bursar-observer-token: ${source.observer_token}\r\n\r\n`);
      socket.write('11\r\n{"jsonrpc":"2.0",\r\n');
      await waitFor(() => answer.endsWith("0\r\n\r\n"), 5_000, "the answer to end");
      // The answer's unfinished event is let go as the answer ends; the request's bytes once its connection closes.
      expect(held.bytes).toBe(Buffer.byteLength('{"jsonrpc":"2.0",'));
      socket.destroy();
      await waitFor(() => held.bytes === 0, 10_000, "the bytes held for the request to come back");
      await waitFor(() => upstream_connection_closed, 5_000, "the unfinished upload to the upstream to be cut");
    } finally {
      early.closeAllConnections();
      await new Promise<void>((resolve) => early.close(() => resolve()));
    }
  });

  it("while full, count a small call whose method member is written in \\u escapes, which a stock SDK server runs", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const session = await rawSession(`${upstream.url}/mcp-json`);
    const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
    const held = h.evidence.observer.held;
    // Standing in for stalled uploads that hold the whole bound.
    expect(held.take(observed_bytes_held_max)).toBe(true);
    try {
      const answered = await raw(source.observer_url, "POST", headers, escapedCall(4, { ran: "escaped" }));
      expect(answered.bytes.toString()).toContain('\\"ran\\":\\"escaped\\"');
    } finally {
      held.give(observed_bytes_held_max);
    }
    expect(await gaps(source.id)).toEqual([1]);
    expect(await recorded(source.id)).toEqual([]);
  });
});
