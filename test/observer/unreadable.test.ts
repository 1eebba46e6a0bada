// Bodies the tap cannot read as they are. A request body in a form MCP servers accept — a leading
// BOM, compressed (express.json inflates it), another charset (express.json decodes it) — still
// runs its tools upstream: it is parsed when its bytes are UTF-8 JSON (a BOM, or a label the
// SDK's server ignores: see body-label.test.ts), its calls counted in the gap when they are not.
// A response the tap did not read (compressed, or past the inspection limit) is recorded as
// unread, never as no response: the call was answered.

import { createServer, request as httpRequest, type Server } from "node:http";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { observed_body_bytes_max } from "../../src/observer/proxy.js";
import { sse_event_chars_max } from "../../src/observer/sse.js";
import { harness, type Harness } from "../ingest/support.js";
import { gapCalls, listenLoopback, observerSource, recorded as recordedCalls, toolCall } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;
/** The tools the upstream ran, in order. */
const ran: string[] = [];

interface Message {
  id?: number;
  method?: string;
  params?: { name?: string };
}

/** The answer's bytes and headers for each path: plain JSON, gzipped JSON, a gzipped SSE event, or JSON past the inspection limit. */
function answerFor(path: string, answered: unknown): { headers: Record<string, string>; bytes: Buffer } {
  const json = JSON.stringify(answered);
  if (path === "/gzip-json") return { headers: { "content-type": "application/json", "content-encoding": "gzip" }, bytes: gzipSync(json) };
  // A transfer coding: Node's client takes off the chunked framing only, the gzip stays on the bytes.
  if (path === "/gzip-transfer-json") return { headers: { "content-type": "application/json", "transfer-encoding": "gzip, chunked" }, bytes: gzipSync(json) };
  if (path === "/gzip-sse") return { headers: { "content-type": "text/event-stream", "content-encoding": "gzip" }, bytes: gzipSync(`event: message\ndata: ${json}\n\n`) };
  if (path === "/large") {
    const padded = { ...(answered as Record<string, unknown>), pad: "p".repeat(observed_body_bytes_max) };
    return { headers: { "content-type": "application/json" }, bytes: Buffer.from(JSON.stringify(padded)) };
  }
  // One event past the reader's limit; with a session id (which would leave the call to a resumed stream) or without.
  if (path === "/large-sse" || path === "/large-sse-session") {
    const padded = { ...(answered as Record<string, unknown>), pad: "p".repeat(sse_event_chars_max) };
    const session: Record<string, string> = path === "/large-sse-session" ? { "mcp-session-id": "S1" } : {};
    return { headers: { "content-type": "text/event-stream", ...session }, bytes: Buffer.from(`event: message\ndata: ${JSON.stringify(padded)}\n\n`) };
  }
  // A session's stream that ends with its priming event only: the call is left to a resumed GET stream.
  if (path === "/large-sse-resumed") return { headers: { "content-type": "text/event-stream", "mcp-session-id": "S1" }, bytes: Buffer.from("id: ev1\ndata: \n\n") };
  // The answer's "id" key written as a JSON escape, which JSON.parse reads as "id".
  if (path === "/escaped-id-sse") return { headers: { "content-type": "text/event-stream" }, bytes: Buffer.from(`event: message\ndata: ${json.replace('"id":', '"\\u0069d":')}\n\n`) };
  return { headers: { "content-type": "application/json" }, bytes: Buffer.from(json) };
}

/** The GET resuming `/large-sse-resumed` after ev1: call 1's answer in one event past the reader's limit. */
function resumedAnswer(response: import("node:http").ServerResponse): void {
  const answered = { jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "ran transfer_funds" }] }, pad: "p".repeat(sse_event_chars_max) };
  const bytes = Buffer.from(`id: ev2\nevent: message\ndata: ${JSON.stringify(answered)}\n\n`);
  response.writeHead(200, { "content-type": "text/event-stream", "mcp-session-id": "S1", "content-length": String(bytes.length) }).end(bytes);
}

/** Reads a body as express.json and the SDK's transport do: inflated, decoded by its charset, a BOM dropped. */
function lenientParse(body: Buffer, encoding: string | undefined, content_type: string | undefined): Message | Message[] {
  const inflated = encoding === "gzip" ? gunzipSync(body) : body;
  const charset = /charset=([^;\s]+)/i.exec(content_type ?? "")?.[1] ?? "utf-8";
  return JSON.parse(new TextDecoder(charset).decode(inflated)) as Message | Message[];
}

beforeAll(async () => {
  upstream = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      if (request.method === "GET") return resumedAnswer(response);
      let parsed: Message | Message[];
      try {
        parsed = lenientParse(Buffer.concat(chunks), request.headers["content-encoding"], request.headers["content-type"]);
      } catch {
        return void response.writeHead(400, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
      }
      const messages = Array.isArray(parsed) ? parsed : [parsed];
      const answered = messages.map((message) => {
        ran.push(message.params?.name ?? "");
        return { jsonrpc: "2.0", id: message.id, result: { content: [{ type: "text", text: `ran ${message.params?.name}` }] } };
      });
      const { headers, bytes } = answerFor(request.url ?? "/", Array.isArray(parsed) ? answered : answered[0]);
      const length = headers["transfer-encoding"] === undefined ? { "content-length": String(bytes.length) } : {};
      response.writeHead(200, { ...headers, ...length }).end(bytes);
    });
  });
  upstream_url = `${await listenLoopback(upstream)}`;
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

async function post(path: string, headers: Record<string, string>, body: Buffer) {
  const source = await observerSource(h, `${upstream_url}${path}`);
  const response = await fetch(source.observer_url, {
    method: "POST",
    headers: { accept: "application/json, text/event-stream", "content-type": "application/json", "x-bursar-observer-token": source.observer_token, ...headers },
    body: new Uint8Array(body),
  });
  return { source_id: source.id, status: response.status, text: await response.text() };
}

const recorded = (source_id: string) => recordedCalls(h, source_id, 5_000);

/** The calls the gap entries count for this source, and their reasons. */
async function gap(source_id: string) {
  expect(await h.evidence.observer.recorder.drain(5_000)).toBe(true);
  const bodies = (await h.entries("system.evidence_gap")).map((stored) => stored.entry.body);
  const mine = bodies.filter((body) => gapCalls(body, source_id) !== undefined);
  return { calls: mine.reduce((sum, body) => sum + gapCalls(body, source_id)!, 0), reasons: [...new Set(mine.flatMap((body) => body.reasons as string[]))] };
}

const batch = (names: string[]) => JSON.stringify(names.map((name, i) => toolCall(i + 1, name, { amount: 100 })));

describe("a request body the tap cannot parse as it is", () => {
  it("records a call whose body starts with a UTF-8 BOM, as the server reads it", async () => {
    const sent = await post("/json", {}, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(toolCall(1, "transfer_funds", { amount: 100 })))]));
    expect(sent.status).toBe(200);
    const bodies = await recorded(sent.source_id);
    expect(bodies.map((body) => [body.tool, body.args, body.outcome])).toEqual([["transfer_funds", { amount: 100 }, { type: "result", is_error: false }]]);
    expect(await gap(sent.source_id)).toEqual({ calls: 0, reasons: [] });
  });

  const forms: Array<[string, Record<string, string>, Buffer, number]> = [
    // Compressed bytes say nothing of the calls inside: at least one is counted.
    ["gzip-compressed", { "content-encoding": "gzip" }, gzipSync(batch(["transfer_funds", "refund"])), 1],
    // UTF-16: JSON's own characters are not single bytes, so the calls cannot be counted either.
    ["in UTF-16LE", { "content-type": "application/json; charset=utf-16le" }, Buffer.from(batch(["transfer_funds", "refund"]), "utf16le"), 1],
    // A body labelled ISO-8859-1 whose bytes are UTF-8 JSON is recorded: see body-label.test.ts.
  ];
  for (const [form, headers, body, counted] of forms) {
    it(`counts the calls of a body ${form} in the gap as unparsed (${counted}), and relays it untouched`, async () => {
      const before = ran.length;
      const sent = await post("/json", headers, body);
      expect(sent.status).toBe(200);
      expect(ran.slice(before)).toEqual(["transfer_funds", "refund"]);
      expect(await recorded(sent.source_id)).toEqual([]);
      expect(await gap(sent.source_id)).toEqual({ calls: counted, reasons: ["unparsed"] });
    });
  }

  it("counts the calls of a body that is not JSON in the gap as unparsed, and the /metrics counter with them", async () => {
    const unparsed = async () => Number(/bursar_evidence_gap_calls_total\{reason="unparsed"\} (\d+)/.exec(await (await fetch(`${h.url}/metrics`)).text())?.[1] ?? 0);
    const before = await unparsed();
    const sent = await post("/json", {}, Buffer.from(`${batch(["transfer_funds", "refund"])},`));
    expect(sent.status).toBe(400);
    expect(await gap(sent.source_id)).toEqual({ calls: 2, reasons: ["unparsed"] });
    expect((await unparsed()) - before).toBe(2);
  });
});

describe("a response the tap did not read", () => {
  const cases: Array<[string, string, Record<string, unknown>]> = [
    ["past the inspection limit", "/large", { type: "unread_response", reason: "too_large", status: 200 }],
    ["gzip-compressed JSON", "/gzip-json", { type: "unread_response", reason: "encoded", status: 200 }],
    ["a gzip-compressed SSE stream", "/gzip-sse", { type: "unread_response", reason: "encoded", status: 200 }],
    ["an SSE event past the inspection limit, no session", "/large-sse", { type: "unread_response", reason: "too_large", status: 200 }],
    ["an SSE event past the inspection limit, with a session", "/large-sse-session", { type: "unread_response", reason: "too_large", status: 200 }],
  ];
  for (const [what, path, outcome] of cases) {
    it(`records the call as answered but unread, not as no response (${what})`, async () => {
      const sent = await post(path, {}, Buffer.from(JSON.stringify(toolCall(1, "transfer_funds", { amount: 100 }))));
      expect(sent.status).toBe(200);
      expect(sent.text).toContain("ran transfer_funds");
      const bodies = await recorded(sent.source_id);
      expect(bodies.map((body) => body.outcome)).toEqual([outcome]);
      expect(bodies[0]).not.toHaveProperty("result");
    });
  }
});

describe("a response under a transfer coding other than chunked", () => {
  it("is relayed with its coding named, chunked again, and its call recorded as answered but unread", async () => {
    const source = await observerSource(h, `${upstream_url}/gzip-transfer-json`);
    const body = JSON.stringify(toolCall(1, "transfer_funds", { amount: 100 }));
    const url = new URL(source.observer_url);
    const answer = await new Promise<{ coding: string | undefined; bytes: Buffer }>((resolve, reject) => {
      const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "x-bursar-observer-token": source.observer_token };
      const request = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve({ coding: response.headers["transfer-encoding"], bytes: Buffer.concat(chunks) }));
      });
      request.on("error", reject);
      request.end(body);
    });
    expect(answer.coding).toBe("gzip, chunked");
    expect(gunzipSync(answer.bytes).toString()).toContain("ran transfer_funds");
    expect((await recorded(source.id)).map((recorded_body) => recorded_body.outcome)).toEqual([{ type: "unread_response", reason: "encoded", status: 200 }]);
  });
});

describe("a resumed GET stream the tap did not read", () => {
  it("records the calls it leaves unanswered after an event past the inspection limit as answered but unread, as a POST's stream does", async () => {
    const source = await observerSource(h, `${upstream_url}/large-sse-resumed`);
    const headers = { accept: "application/json, text/event-stream", "content-type": "application/json", "x-bursar-observer-token": source.observer_token, "mcp-session-id": "S1" };
    const posted = await fetch(source.observer_url, { method: "POST", headers, body: JSON.stringify(toolCall(1, "transfer_funds", { amount: 100 })) });
    expect(await posted.text()).toBe("id: ev1\ndata: \n\n");
    // Its own stream ended without its answer: with a session, the call awaits a resumed stream.
    expect(await recorded(source.id)).toEqual([]);
    const resumed = await fetch(source.observer_url, { headers: { ...headers, "last-event-id": "ev1" } });
    expect(await resumed.text()).toContain("ran transfer_funds");
    const bodies = await recorded(source.id);
    expect(bodies.map((body) => [body.outcome, body.transport])).toEqual([[{ type: "unread_response", reason: "too_large", status: 200 }, "sse_get"]]);
    expect(bodies[0]).not.toHaveProperty("result");
  });
});

describe("a response the tap reads however it is written", () => {
  it("records the result of an SSE answer whose id key is written as a \\u escape", async () => {
    const sent = await post("/escaped-id-sse", {}, Buffer.from(JSON.stringify(toolCall(1, "transfer_funds", { amount: 100 }))));
    expect(sent.text).toContain('"\\u0069d":1');
    const bodies = await recorded(sent.source_id);
    expect(bodies.map((body) => [body.outcome, body.transport])).toEqual([[{ type: "result", is_error: false }, "sse"]]);
  });
});
