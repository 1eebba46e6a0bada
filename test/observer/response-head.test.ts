// What the upstream's answer carries besides its status and body reaches the client as sent: no
// Date the upstream did not send, the trailer fields after a chunked body (and the Trailer header
// announcing them), and 103 Early Hints ahead of the final answer.

import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource, recorded as recordedCalls, toolCall } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;

const answer_json = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "done" }] } });
const early_link = "</style.css>; rel=preload; as=style";

/** `/no-date` answers without a Date header; `/trailers` chunked, with a trailer field; `/early-hints` a 103 first. */
function answer(path: string, response: import("node:http").ServerResponse): void {
  response.sendDate = false;
  if (path === "/early-hints") response.writeEarlyHints({ link: early_link, "x-hint": "soon" });
  if (path === "/trailers") {
    response.writeHead(200, { "content-type": "application/json", trailer: "x-checksum" });
    response.write(answer_json);
    response.addTrailers({ "x-checksum": "c0ffee" });
    return void response.end();
  }
  response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer_json) }).end(answer_json);
}

beforeAll(async () => {
  upstream = createServer((request, response) => {
    request.resume();
    request.on("end", () => answer(request.url ?? "/", response));
  });
  upstream_url = await listenLoopback(upstream);
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  trailers: Record<string, string | undefined>;
  /** The 1xx answers before the final one: status and headers. */
  informational: Array<{ status: number; headers: IncomingHttpHeaders }>;
  body: string;
}

/** POSTs call 1 to `url` (with `headers`) and reads the whole answer, 1xx and trailers included. */
function post(url: string, headers: Record<string, string>): Promise<Answer> {
  const target = new URL(url);
  const body = JSON.stringify(toolCall(1, "pay", { amount: 5 }));
  return new Promise((resolve, reject) => {
    const informational: Answer["informational"] = [];
    const sent = { "content-type": "application/json", "content-length": String(body.length), ...headers };
    const request = httpRequest({ host: target.hostname, port: target.port, path: target.pathname, method: "POST", headers: sent }, (response) => {
      let text = "";
      response.on("data", (chunk: Buffer) => (text += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, trailers: response.trailers, informational, body: text }));
    });
    request.on("information", (info) => informational.push({ status: info.statusCode, headers: info.headers }));
    request.on("error", reject);
    request.end(body);
  });
}

const observed = async (path: string) => {
  const source = await observerSource(h, `${upstream_url}${path}`);
  return { source, answer: await post(source.observer_url, { "x-bursar-observer-token": source.observer_token }) };
};

describe("the upstream answer's head and trailers", () => {
  it("adds no Date header the upstream did not send", async () => {
    expect((await post(`${upstream_url}/no-date`, {})).headers).not.toHaveProperty("date");
    const { answer } = await observed("/no-date");
    expect(answer.body).toBe(answer_json);
    expect(answer.headers).not.toHaveProperty("date");
  });

  it("relays the trailer fields after a chunked body, and the Trailer header announcing them, and records the call", async () => {
    const { source, answer } = await observed("/trailers");
    expect(answer.body).toBe(answer_json);
    expect(answer.headers.trailer).toBe("x-checksum");
    expect(answer.trailers).toEqual({ "x-checksum": "c0ffee" });
    expect((await recordedCalls(h, source.id)).map((body) => body.outcome)).toEqual([{ type: "result", is_error: false }]);
  });

  it("relays a 103 Early Hints ahead of the final answer", async () => {
    const { answer } = await observed("/early-hints");
    expect(answer.informational).toEqual([{ status: 103, headers: { link: early_link, "x-hint": "soon" } }]);
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(answer_json);
  });
});
