// The observer records as a call's answer what the MCP SDK's client takes as one, no more: the
// SDK's Streamable HTTP client transport sends each call through the observer to an upstream that
// answers fixed bytes, and the entry is held beside what the transport handed on (onmessage) or
// refused (an error). A JSON body the client refuses whole (one malformed member, or a media type
// it does not read) answers nothing; on an SSE stream a malformed event is skipped and the
// well-formed answer after it is the one the client takes.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource, recorded, toolCall } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;

const good = { jsonrpc: "2.0", id: 2, result: { content: [{ type: "text", text: "the client took this" }] } };
/** A result whose `_meta` the SDK's ResultSchema refuses (it must be an object). */
const bad_meta = { jsonrpc: "2.0", id: 2, result: { _meta: 5, content: [{ type: "text", text: "the client refused this" }] } };
const sse = (...messages: unknown[]) => messages.map((message) => `event: message\ndata: ${JSON.stringify(message)}\n\n`).join("");

/** Each path's answer: its media type (each Content-Type field of it) and bytes. */
const answers: Record<string, { type: string | string[]; body: string }> = {
  "/sse-bad-then-good": { type: "text/event-stream", body: sse(bad_meta, good) },
  "/sse-array": { type: "text/event-stream", body: `event: message\ndata: ${JSON.stringify([good])}\n\n` },
  "/json-bad-meta": { type: "application/json", body: JSON.stringify(bad_meta) },
  "/json-batch-one-bad": { type: "application/json", body: JSON.stringify([good, { bad: 1 }]) },
  "/json-as-text": { type: "text/plain", body: JSON.stringify(good) },
  "/json-with-parameters": { type: "Application/JSON; charset=utf-8", body: JSON.stringify(good) },
  "/json-two-content-types": { type: ["application/json", "application/json"], body: JSON.stringify(good) },
};

/**
 * An MCP server that writes every response's id as a string (`"id":"1"` for request 1), in JSON
 * answers (`/string-ids`) or on SSE streams (`/string-ids-sse`).
 */
function stringIds(request: IncomingMessage, response: ServerResponse): void {
  let text = "";
  request.on("data", (chunk: Buffer) => (text += chunk.toString()));
  request.on("end", () => {
    if (request.method !== "POST") return void response.writeHead(405).end();
    const message = JSON.parse(text) as { id?: number; method: string };
    if (message.id === undefined) return void response.writeHead(202).end();
    const result =
      message.method === "initialize"
        ? { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: { tools: {} }, serverInfo: { name: "string-ids", version: "1" } }
        : { content: [{ type: "text", text: "paid 500000" }] };
    const answer = JSON.stringify({ jsonrpc: "2.0", id: String(message.id), result });
    if (request.url === "/string-ids") return void response.writeHead(200, { "content-type": "application/json" }).end(answer);
    response.writeHead(200, { "content-type": "text/event-stream" }).end(`event: message\ndata: ${answer}\n\n`);
  });
}

beforeAll(async () => {
  upstream = createServer((request, response) => {
    if (request.url?.startsWith("/string-ids")) return stringIds(request, response);
    request.resume();
    request.on("end", () => {
      const { type, body } = answers[request.url ?? ""]!;
      const types = (Array.isArray(type) ? type : [type]).flatMap((value) => ["content-type", value]);
      response.writeHead(200, [...types, "content-length", String(Buffer.byteLength(body))]).end(body);
    });
  });
  upstream_url = await listenLoopback(upstream);
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

/** Sends call 2 with the SDK's client transport through an observer of `path`: what it took, and whether it refused something. */
async function throughClient(path: string): Promise<{ source_id: string; took: string[]; refused: boolean }> {
  const source = await observerSource(h, `${upstream_url}${path}`);
  const transport = new StreamableHTTPClientTransport(new URL(source.observer_url), { requestInit: { headers: { "x-bursar-observer-token": source.observer_token } } });
  const took: string[] = [];
  let refused = false;
  transport.onmessage = (message: JSONRPCMessage) => took.push(JSON.stringify(message));
  transport.onerror = () => (refused = true);
  await transport.start();
  try {
    await transport.send(toolCall(2, "pay", { amount: 5 }) as JSONRPCMessage);
  } catch {
    refused = true;
  }
  // The SSE stream is read after send resolves: wait for the observer's record, which follows its end.
  const bodies = await recorded(h, source.id);
  expect(bodies).toHaveLength(1);
  await transport.close();
  return { source_id: source.id, took, refused };
}

describe("what the observer records is what the SDK's client took", () => {
  it("on an SSE stream, skips an event the client refuses and records the answer it then takes", async () => {
    const { source_id, took, refused } = await throughClient("/sse-bad-then-good");
    expect({ took, refused }).toEqual({ took: [JSON.stringify(good)], refused: true });
    const [body] = await recorded(h, source_id);
    expect({ outcome: body!.outcome, result: body!.result, transport: body!.transport }).toEqual({ outcome: { type: "result", is_error: false }, result: good.result, transport: "sse" });
  });

  const refused_whole: Array<[string, string]> = [
    ["/json-bad-meta", "a JSON answer whose result's _meta is no object"],
    ["/json-batch-one-bad", "a JSON batch with one malformed member beside the answer"],
    ["/json-as-text", "a JSON answer labelled text/plain"],
    ["/json-two-content-types", "a JSON answer with two Content-Type fields, which fetch reads as one"],
  ];
  it.each(refused_whole)("takes nothing from %s (%s): the call is recorded as unreadable, not answered", async (path) => {
    const { source_id, took, refused } = await throughClient(path);
    expect({ took, refused }).toEqual({ took: [], refused: true });
    const [body] = await recorded(h, source_id);
    expect({ outcome: body!.outcome, transport: body!.transport }).toEqual({ outcome: { type: "no_response", reason: "unreadable_response", status: 200 }, transport: "json" });
    expect(body).not.toHaveProperty("result");
  });

  it("takes no array from an SSE event: the call stays unanswered when its stream ends", async () => {
    const { source_id, took } = await throughClient("/sse-array");
    expect(took).toEqual([]);
    const [body] = await recorded(h, source_id);
    expect(body!.outcome).toEqual({ type: "no_response", reason: "stream_ended" });
  });

  it("reads a JSON media type written in capitals and with parameters, as the client does", async () => {
    const { source_id, took, refused } = await throughClient("/json-with-parameters");
    expect({ took, refused }).toEqual({ took: [JSON.stringify(good)], refused: false });
    const [body] = await recorded(h, source_id);
    expect(body!.outcome).toEqual({ type: "result", is_error: false });
  });
});

describe("a response whose id is the request's written as a string", () => {
  it.each([["/string-ids", "json"], ["/string-ids-sse", "sse"]])("is the answer the SDK's client takes (it reads ids as numbers), so the result on %s is recorded", async (path, transport) => {
    const source = await observerSource(h, `${upstream_url}${path}`);
    const client = new Client({ name: "string-ids", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(source.observer_url), { requestInit: { headers: { "x-bursar-observer-token": source.observer_token } } }));
    try {
      expect(await client.callTool({ name: "pay", arguments: { amount: 5 } })).toMatchObject({ content: [{ type: "text", text: "paid 500000" }] });
    } finally {
      await client.close();
    }
    const [body] = await recorded(h, source.id);
    // It was no_response (http_status, or stream_ended on SSE): the result the agent got was not in the log.
    expect({ outcome: body!.outcome, result: body!.result, transport: body!.transport }).toEqual({
      outcome: { type: "result", is_error: false },
      result: { content: [{ type: "text", text: "paid 500000" }] },
      transport,
    });
  });
});
