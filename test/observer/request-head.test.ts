// What the client's request carries besides its body reaches the upstream as sent: the trailer
// fields after a chunked body, and the Trailer header announcing them. Bursar's token is never
// forwarded as a trailer field either, and a Trailer header no trailers can follow (a request
// with a Content-Length) is dropped, never the request.

import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource, rawRequest, recorded as recordedCalls, toolCall, type ObserverSourceCreated } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;
/** What the upstream received of each request, in order. */
const seen: Array<{ headers: IncomingHttpHeaders; raw_headers: string[]; trailers: Record<string, string | undefined>; body: string }> = [];

beforeAll(async () => {
  upstream = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ headers: request.headers, raw_headers: request.rawHeaders, trailers: { ...request.trailers }, body });
      const id = body === "" ? null : (JSON.parse(body) as { id: number }).id;
      const answer = JSON.stringify({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: "done" }] } });
      response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) }).end(answer);
    });
  });
  upstream_url = await listenLoopback(upstream);
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

const body = JSON.stringify(toolCall(1, "pay", { amount: 5 }));

/** POSTs call 1 through the observer, framed by `headers` (chunked unless they say otherwise), with `trailers` after a chunked body; resolves with the status. */
function post(source: ObserverSourceCreated, headers: Record<string, string>, trailers: Record<string, string>): Promise<number> {
  const target = new URL(source.observer_url);
  const sent = { "content-type": "application/json", "x-bursar-observer-token": source.observer_token, ...headers };
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: target.hostname, port: target.port, path: target.pathname, method: "POST", headers: sent }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
    });
    request.on("error", reject);
    request.write(body);
    request.addTrailers(trailers);
    request.end();
  });
}

describe("the client request's trailers", () => {
  it("forwards the trailer fields after a chunked body, and the Trailer header announcing them, and records the call", async () => {
    const source = await observerSource(h, upstream_url);
    expect(await post(source, { "transfer-encoding": "chunked", trailer: "x-checksum" }, { "x-checksum": "c0ffee" })).toBe(200);
    const received = seen.at(-1)!;
    expect(received.body).toBe(body);
    expect(received.headers).toMatchObject({ "transfer-encoding": "chunked", trailer: "x-checksum" });
    expect(received.trailers).toEqual({ "x-checksum": "c0ffee" });
    expect((await recordedCalls(h, source.id)).map((call) => call.outcome)).toEqual([{ type: "result", is_error: false }]);
  });

  it("never forwards Bursar's token as a trailer field", async () => {
    const source = await observerSource(h, upstream_url);
    const trailers = { "x-checksum": "c0ffee", "x-bursar-observer-token": source.observer_token };
    expect(await post(source, { "transfer-encoding": "chunked" }, trailers)).toBe(200);
    expect(seen.at(-1)!.trailers).toEqual({ "x-checksum": "c0ffee" });
  });

  it("drops a Trailer header on a body with a Content-Length (no trailers can follow it), and relays the request", async () => {
    const source = await observerSource(h, upstream_url);
    // Node's client refuses to send such a header: the request is written as bytes.
    const head = `POST /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nx-bursar-observer-token: ${source.observer_token}\r\ncontent-type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nTrailer: x-checksum\r\nConnection: close\r\n\r\n`;
    expect(await rawRequest(h.url, head + body)).toMatch(/^HTTP\/1\.1 200 /);
    const received = seen.at(-1)!;
    expect(received.body).toBe(body);
    expect(received.headers).not.toHaveProperty("trailer");
    expect((await recordedCalls(h, source.id)).map((call) => call.outcome)).toEqual([{ type: "result", is_error: false }]);
  });
});

describe("the client request's head", () => {
  it("forwards fields named like Object.prototype's members untouched on a request without a body (set one by one there)", async () => {
    const source = await observerSource(h, upstream_url);
    const target = new URL(source.observer_url);
    const fields = ["constructor", "c1", "toString", "t1", "__proto__", "p1", "hasOwnProperty", "o1", "X-Keep", "k1"];
    const lines = fields.flatMap((field, i) => (i % 2 === 0 ? [`${field}: ${fields[i + 1]}`] : []));
    const head = `POST ${target.pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-bursar-observer-token: ${source.observer_token}\r\n${lines.join("\r\n")}\r\nConnection: close\r\n\r\n`;
    expect(await rawRequest(h.url, head)).toMatch(/^HTTP\/1\.1 200 /);
    const received = seen.at(-1)!.raw_headers;
    const pairs = Array.from({ length: received.length / 2 }, (_, i) => [received[2 * i]!.toLowerCase(), received[2 * i + 1]!]);
    for (let i = 0; i < fields.length; i += 2) expect(pairs.filter(([name]) => name === fields[i]!.toLowerCase())).toEqual([[fields[i]!.toLowerCase(), fields[i + 1]]]);
  });
});
