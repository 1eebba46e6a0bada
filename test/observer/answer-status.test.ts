// A JSON-RPC answer that came in an HTTP status outside 2xx (a result in a 500, say) is recorded
// with that status beside its outcome, so an auditor can tell it from a plain success; an answer
// in a 2xx status is recorded as before, without one.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource, recorded as recordedCalls, toolCall } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;

/** `/{json|sse}-{status}-{result|error}` answers the call's id with a result or a JSON-RPC error, as JSON or one SSE event, under that status. */
function answer(request: IncomingMessage, response: ServerResponse, body: string): void {
  const [, form, status, kind] = /^\/(json|sse)-(\d{3})-(result|error)$/.exec(request.url ?? "")!;
  const id = (JSON.parse(body) as { id: number }).id;
  const answered = kind === "result" ? { jsonrpc: "2.0", id, result: { content: [{ type: "text", text: "done" }] } } : { jsonrpc: "2.0", id, error: { code: -32603, message: "boom" } };
  const bytes = form === "json" ? JSON.stringify(answered) : `event: message\ndata: ${JSON.stringify(answered)}\n\n`;
  const type = form === "json" ? "application/json" : "text/event-stream";
  response.writeHead(Number(status), { "content-type": type, "content-length": Buffer.byteLength(bytes) }).end(bytes);
}

beforeAll(async () => {
  upstream = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => answer(request, response, Buffer.concat(chunks).toString("utf8")));
  });
  upstream_url = await listenLoopback(upstream);
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

describe("the HTTP status of an answer", () => {
  const cases: Array<[string, number, Record<string, unknown>, string]> = [
    ["/json-500-result", 500, { type: "result", is_error: false, status: 500 }, "json"],
    ["/json-503-error", 503, { type: "error", code: -32603, message: "boom", status: 503 }, "json"],
    ["/sse-500-result", 500, { type: "result", is_error: false, status: 500 }, "sse"],
    ["/json-404-result", 404, { type: "result", is_error: false, status: 404 }, "json"],
    ["/json-200-result", 200, { type: "result", is_error: false }, "json"],
    ["/json-202-error", 202, { type: "error", code: -32603, message: "boom" }, "json"],
  ];
  for (const [path, status, outcome, transport] of cases) {
    it(`records a JSON-RPC answer in HTTP ${status} with ${"status" in outcome ? "that status in its outcome" : "no status, as a plain answer"} (${path})`, async () => {
      const source = await observerSource(h, `${upstream_url}${path}`);
      const answered = await fetch(source.observer_url, {
        method: "POST",
        headers: { accept: "application/json, text/event-stream", "content-type": "application/json", "x-bursar-observer-token": source.observer_token },
        body: JSON.stringify(toolCall(1, "pay", { amount: 5 })),
      });
      expect(answered.status).toBe(status);
      await answered.arrayBuffer();
      const bodies = await recordedCalls(h, source.id);
      expect(bodies.map((body) => [body.outcome, body.transport])).toEqual([[outcome, transport]]);
      // The answer is still kept as the answer: its hash, and its value.
      expect(bodies[0]).toHaveProperty("result_hash");
      expect(bodies[0]).toHaveProperty("result");
    });
  }
});
