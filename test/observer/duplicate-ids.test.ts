// A JSON-RPC id that two request messages of one body share (a batch) cannot tell their responses
// apart: a tools/call with such an id is recorded as unattributed, never with a result that may be
// another message's, whatever that other message's method. Nor can a resumed stream's response
// with an id that calls of two requests of one session await at once (see cut-answers.test.ts).

import { createServer, type Server } from "node:http";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Correlator, heldArguments, heldId, resumable_event_id_chars_max, resumable_event_ids_max, type PendingCall } from "../../src/observer/calls.js";
import type { ObserverSource } from "../../src/sources/store.js";
import { harness, type Harness } from "../ingest/support.js";
import { waitFor } from "../provider/support.js";
import { listenLoopback, observerSource, raw, recorded as recordedCalls, toolCall } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;

interface Message {
  id?: number;
  method?: string;
  params?: { name?: string };
}

/** Answers every request message of a body, in order: a tools/call with a result naming its tool, any other method with `{}`. */
function answer(message: Message): unknown {
  const result = message.method === "tools/call" ? { content: [{ type: "text", text: `ran ${message.params?.name}` }] } : {};
  return { jsonrpc: "2.0", id: message.id, result };
}

/** Opened once the upstream has served a GET stream: the tool "slow" is answered only after that. */
let stream_served!: () => void;
let served = new Promise<void>((resolve) => (stream_served = resolve));

/** A GET is a session's stream: it sends one response, with id 5, and ends. */
const get_stream_event = `event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: 5, result: { content: [{ type: "text", text: "from the GET stream" }] } })}\n\n`;

beforeAll(async () => {
  upstream = createServer((request, response) => {
    if (request.method === "GET") {
      response.writeHead(200, { "content-type": "text/event-stream" }).end(get_stream_event);
      return stream_served();
    }
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", async () => {
      const parsed = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Message | Message[];
      const answered = Array.isArray(parsed) ? parsed.filter((message) => message.id !== undefined && message.method !== undefined).map(answer) : answer(parsed);
      // The tool "slow" is answered only once a GET stream has been served, however slow the machine.
      if (!Array.isArray(parsed) && parsed.params?.name === "slow") {
        await served;
        served = new Promise<void>((resolve) => (stream_served = resolve));
      }
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answered));
    });
  });
  upstream_url = `${await listenLoopback(upstream)}/mcp`;
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

const recorded = (source_id: string) => recordedCalls(h, source_id);

const ping = (id: number) => ({ jsonrpc: "2.0", id, method: "ping" });
const unattributed = { type: "unattributed", reason: "duplicate_id" };

describe("a JSON-RPC id repeated within one request body", () => {
  it("records both tools/calls sharing it as unattributed, and a call with an id of its own with its result", async () => {
    const source = await observerSource(h, upstream_url);
    const batch = [toolCall(5, "transfer_funds", { amount: 100 }), toolCall(5, "big", {}), toolCall(6, "echo", {})];
    const answered = await raw(source.observer_url, "POST", { "x-bursar-observer-token": source.observer_token }, batch);
    expect(answered.status).toBe(200);

    const bodies = await recorded(source.id);
    expect(bodies.map((body) => [body.tool, body.jsonrpc_id, body.outcome])).toEqual([
      ["transfer_funds", 5, unattributed],
      ["big", 5, unattributed],
      ["echo", 6, { type: "result", is_error: false }],
    ]);
    expect(bodies.map((body) => "result" in body)).toEqual([false, false, true]);
    expect(bodies[2]!.result).toEqual({ content: [{ type: "text", text: "ran echo" }] });
  });

  it("records a tools/call sharing its id with a ping as unattributed, not with the ping's result", async () => {
    const source = await observerSource(h, upstream_url);
    const answered = await raw(source.observer_url, "POST", { "x-bursar-observer-token": source.observer_token }, [toolCall(8, "big", {}), ping(8)]);
    expect(answered.status).toBe(200);
    expect((await recorded(source.id)).map((body) => [body.tool, body.outcome, body.result])).toEqual([["big", unattributed, undefined]]);
  });

  it("still matches a call whose id only a notification or a response in the body also names (neither is answered)", async () => {
    const source = await observerSource(h, upstream_url);
    const batch = [toolCall(9, "echo", {}), { jsonrpc: "2.0", method: "notifications/progress", params: { id: 9 } }, { jsonrpc: "2.0", id: 9, result: {} }];
    await raw(source.observer_url, "POST", { "x-bursar-observer-token": source.observer_token }, batch);
    expect((await recorded(source.id)).map((body) => body.outcome)).toEqual([{ type: "result", is_error: false }]);
  });

  it("gives no earlier call of the session a resumed GET stream's response with that id: it may be the unattributed call's", async () => {
    const source = await observerSource(h, upstream_url);
    const headers = { "x-bursar-observer-token": source.observer_token, "mcp-session-id": "session-1" };
    const slow = raw(source.observer_url, "POST", headers, toolCall(5, "slow", {}));
    await waitFor(() => h.evidence.observer.correlator.size === 1, 5_000, "the slow call to be pending");
    await raw(source.observer_url, "POST", headers, [toolCall(5, "echo", {}), ping(5)]);
    expect((await raw(source.observer_url, "GET", headers)).bytes.toString()).toContain("from the GET stream");
    expect((await slow).status).toBe(200);

    const bodies = await recorded(source.id);
    expect(bodies.map((body) => [body.tool, body.outcome, body.transport])).toEqual([
      ["echo", unattributed, "none"],
      ["slow", { type: "result", is_error: false }, "json"],
    ]);
    expect(bodies[1]!.result).toEqual({ content: [{ type: "text", text: "ran slow" }] });
  });
});

describe("the correlator's index of a session's ids", () => {
  const source: ObserverSource = { source_id: "src_index", upstream: new URL("http://upstream.test:8080/mcp"), shadow: null };
  const pending = (exchange: number): PendingCall => ({ source, session: "S", exchange, id: heldId(7), ...heldArguments(source, "pay", {}, new Date(0)), started_at: new Date(0), started_ms: performance.now(), bytes: 1024 });
  const resumed = (correlator: Correlator) => correlator.takeInSession(source.source_id, "S", heldId(7).key);

  it("gives a resumed response with an id two requests' calls await to neither while any is pending, then to a later call alone again", () => {
    const correlator = new Correlator(() => undefined);
    const [a, b] = [pending(correlator.nextExchange()), pending(correlator.nextExchange())];
    correlator.add(a);
    correlator.add(b);
    // Both requests' own streams are open: the response is taken as no call's, and both stay pending.
    expect(resumed(correlator)).toEqual({ unattributed: [] });
    expect(correlator.size).toBe(2);
    correlator.awaitResume(a.exchange, [a.id.key]);
    expect(correlator.takeOwn(b.exchange, b.id.key)).toBe(b);
    // B answered by its own stream: a response on a resumed stream may still be a replay of B's.
    expect(resumed(correlator)).toEqual({ unattributed: [a] });
    expect(correlator.size).toBe(0);
    const c = pending(correlator.nextExchange());
    correlator.add(c);
    // C's own stream is open: a resumed stream's response with its id replays another call's answer.
    expect(resumed(correlator)).toBeUndefined();
    expect(correlator.size).toBe(1);
    correlator.awaitResume(c.exchange, [c.id.key]);
    expect(resumed(correlator)).toEqual({ call: c });
  });

  it("remembers the event ids of cut streams per session, at most resumable_event_ids_max, the oldest forgotten first", () => {
    const correlator = new Correlator(() => undefined);
    const ids = Array.from({ length: resumable_event_ids_max + 1 }, (_, index) => `ev${index}`);
    correlator.resumableFrom("src_1", "S", ids, 1);
    expect(correlator.resumedExchange("src_1", "S", "ev0")).toBeUndefined();
    expect(correlator.resumedExchange("src_1", "S", "ev1")).toBe(1);
    expect(correlator.resumedExchange("src_1", "S", `ev${resumable_event_ids_max}`)).toBe(1);
    // Another session's or source's stream is not resumed by the same event id.
    expect(correlator.resumedExchange("src_1", "T", "ev1")).toBeUndefined();
    expect(correlator.resumedExchange("src_2", "S", "ev1")).toBeUndefined();
    const long = "x".repeat(resumable_event_id_chars_max + 1);
    correlator.resumableFrom("src_1", "S", [long], 2);
    expect(correlator.resumedExchange("src_1", "S", long)).toBeUndefined();
  });

  it("forgets the event ids of the source remembering the most: one source's streams cannot push out another's", () => {
    const correlator = new Correlator(() => undefined);
    correlator.resumableFrom("src_quiet", "S", ["q1", "q2"], 1);
    const flood = Array.from({ length: resumable_event_ids_max * 2 }, (_, index) => `ev${index}`);
    correlator.resumableFrom("src_busy", "S", flood, 2);
    expect(correlator.resumedExchange("src_quiet", "S", "q1")).toBe(1);
    expect(correlator.resumedExchange("src_quiet", "S", "q2")).toBe(1);
    // The busy source keeps what is left of the bound, its newest ids.
    expect(correlator.resumedExchange("src_busy", "S", `ev${flood.length - 1}`)).toBe(2);
    expect(correlator.resumedExchange("src_busy", "S", `ev${flood.length - (resumable_event_ids_max - 2)}`)).toBe(2);
    expect(correlator.resumedExchange("src_busy", "S", `ev${flood.length - (resumable_event_ids_max - 1)}`)).toBeUndefined();
    // Replacing a stream's latest id keeps the count: the quiet source still fits beside the flood.
    correlator.resumableFrom("src_quiet", "S", ["q3"], 1, "q2");
    expect(correlator.resumedExchange("src_quiet", "S", "q2")).toBeUndefined();
    expect(correlator.resumedExchange("src_quiet", "S", "q3")).toBe(1);
    expect(correlator.resumedExchange("src_busy", "S", `ev${flood.length - (resumable_event_ids_max - 2)}`)).toBe(2);
  });
});
