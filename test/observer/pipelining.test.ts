// A client connection relays one exchange at a time: requests pipelined on it wait for the
// answers before theirs (which go out in order anyway), so one connection cannot open more than
// one upstream exchange, and past a bound of waiting requests it is closed. A client sending one
// request at a time, and SSE GET streams, are relayed as before; a wait ends when the exchange
// ahead fails, and a waiting request's body still coming is relayed when its turn comes.

import { connect } from "node:net";
import { Agent, createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pipelined_requests_waiting_max } from "../../src/observer/proxy.js";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource, recorded, toolCall, type ObserverSourceCreated } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;
/** Upstream requests open now, the most open at once since `reset`, and how many came. */
const load = { open: 0, peak: 0, requests: 0 };
const reset = () => Object.assign(load, { open: 0, peak: 0, requests: 0 });

/**
 * GET `/mcp/stream` is an SSE stream that never ends; GET `/mcp/slow` answers after 100 ms; POST
 * `/mcp/reset` is cut with no answer; any other POST answers each call's id after 20 ms.
 */
function answer(request: IncomingMessage, response: ServerResponse): void {
  load.requests++;
  load.open++;
  load.peak = Math.max(load.peak, load.open);
  response.on("close", () => load.open--);
  if (request.url === "/mcp/stream") {
    response.writeHead(200, { "content-type": "text/event-stream" });
    return void response.write(": open\n\n");
  }
  if (request.url === "/mcp/slow") return void setTimeout(() => response.writeHead(200, { "content-type": "text/plain", "content-length": "4" }).end("slow"), 100);
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    if (request.url === "/mcp/reset") return void request.socket.destroy();
    const { id } = JSON.parse(Buffer.concat(chunks).toString()) as { id: number };
    const text = JSON.stringify({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: `done ${id}` }] } });
    setTimeout(() => response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text), 20);
  });
}

beforeAll(async () => {
  upstream = createServer(answer);
  upstream_url = await listenLoopback(upstream);
  h = await harness();
});
afterAll(async () => {
  await h.close();
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

const source = () => observerSource(h, `${upstream_url}/mcp`);

function get(observed: ObserverSourceCreated, path: string): string {
  return `GET /observe${path} HTTP/1.1\r\nHost: 127.0.0.1\r\naccept: text/event-stream\r\nx-bursar-observer-token: ${observed.observer_token}\r\n\r\n`;
}

function post(observed: ObserverSourceCreated, id: number, path = ""): string {
  const body = JSON.stringify(toolCall(id, "charge", { amount: id }));
  return `POST /observe${path} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\nx-bursar-observer-token: ${observed.observer_token}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
}

/** A connection to the observer that collects all it is answered. */
function connection() {
  const socket = connect(Number(new URL(h.url).port), "127.0.0.1");
  let answered = "";
  socket.on("data", (chunk: Buffer) => (answered += chunk.toString()));
  socket.on("error", () => undefined);
  return { socket, answered: () => answered };
}

async function until(done: () => boolean, ms = 10_000): Promise<void> {
  for (const started = Date.now(); !done(); ) {
    if (Date.now() - started > ms) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const statusLines = (text: string) => text.match(/HTTP\/1\.1 \d{3}/g) ?? [];
const answeredIds = (text: string) => [...text.matchAll(/"text":"done (\d+)"/g)].map((match) => Number(match[1]));

describe("requests pipelined on one connection", () => {
  it("open one upstream exchange, not one per request, behind an SSE stream that never ends; the client's close still ends it", async () => {
    const observed = await source();
    reset();
    const client = connection();
    client.socket.write(get(observed, "/stream").repeat(1 + pipelined_requests_waiting_max));
    await until(() => load.requests >= 1);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(load.requests).toBe(1);
    expect(h.evidence.observer.exchanges_open).toBe(1);
    expect(client.socket.destroyed).toBe(false);
    client.socket.destroy();
    await until(() => load.open === 0 && h.evidence.observer.exchanges_open === 0);
  });

  it(`close the connection once more than ${pipelined_requests_waiting_max} wait, opening no more upstream exchanges`, async () => {
    const observed = await source();
    reset();
    const client = connection();
    client.socket.write(get(observed, "/stream").repeat(2 + pipelined_requests_waiting_max));
    await until(() => client.socket.destroyed);
    await until(() => load.open === 0 && h.evidence.observer.exchanges_open === 0);
    expect(load.peak).toBeLessThanOrEqual(1);
    expect(load.requests).toBeLessThanOrEqual(1);
  });

  it("are relayed one at a time and answered in order, each call recorded", async () => {
    const observed = await source();
    reset();
    const client = connection();
    const ids = Array.from({ length: 20 }, (_, i) => i + 1);
    client.socket.write(ids.map((id) => post(observed, id)).join(""));
    await until(() => statusLines(client.answered()).length === ids.length);
    expect(statusLines(client.answered())).toEqual(ids.map(() => "HTTP/1.1 200"));
    expect(answeredIds(client.answered())).toEqual(ids);
    expect(load).toMatchObject({ requests: ids.length, peak: 1 });
    client.socket.destroy();
    expect((await recorded(h, observed.id)).map((body) => [body.jsonrpc_id, body.outcome])).toEqual(ids.map((id) => [id, { type: "result", is_error: false }]));
  });

  it("relay a request whose Content-Length comes after 2,500 other header lines with its body, not its body as a request of its own", async () => {
    const observed = await source();
    reset();
    const client = connection();
    // Node kept 2,000 header lines and dropped the rest unseen, yet framed the body by them: the
    // relay saw no body, and wrote it upstream unframed, where it was read as a second request.
    // The filler is what the relay drops anyway (TE), so the upstream would have seen a clean request.
    const [head, body] = post(observed, 7).split("\r\n\r\n") as [string, string];
    const [request_line, ...headers] = head.split("\r\n");
    const length = headers.find((line) => line.startsWith("Content-Length"))!;
    const hidden = [request_line, ...headers.filter((line) => line !== length), ..."te:".repeat(2_500).match(/te:/g)!, length].join("\r\n");
    client.socket.write(`${hidden}\r\n\r\n${body}`);
    await until(() => statusLines(client.answered()).length === 1);
    expect(statusLines(client.answered())).toEqual(["HTTP/1.1 200"]);
    expect(answeredIds(client.answered())).toEqual([7]);
    client.socket.destroy();
    expect(load.requests).toBe(1);
    expect((await recorded(h, observed.id)).map((recorded_body) => recorded_body.jsonrpc_id)).toEqual([7]);
  });

  it("go on once the exchange ahead fails upstream (a 502)", async () => {
    const observed = await source();
    const client = connection();
    client.socket.write(post(observed, 1, "/reset") + post(observed, 2) + post(observed, 3));
    await until(() => statusLines(client.answered()).length === 3);
    expect(statusLines(client.answered())).toEqual(["HTTP/1.1 502", "HTTP/1.1 200", "HTTP/1.1 200"]);
    expect(answeredIds(client.answered())).toEqual([2, 3]);
    client.socket.destroy();
  });

  it("relay a waiting request's body still coming once its turn comes", async () => {
    const observed = await source();
    const client = connection();
    const second = post(observed, 2);
    // The second request's head and half its body come with the first; the rest 50 ms later.
    client.socket.write(get(observed, "/slow") + second.slice(0, -10));
    setTimeout(() => client.socket.write(second.slice(-10)), 50);
    await until(() => statusLines(client.answered()).length === 2);
    expect(client.answered()).toMatch(/^HTTP\/1\.1 200[^]*\r\n\r\nslowHTTP\/1\.1 200/);
    expect(answeredIds(client.answered())).toEqual([2]);
    client.socket.destroy();
  });
});

describe("a client sending one request at a time", () => {
  it("is relayed on its kept-alive connection as before, while an SSE stream stays open on another", async () => {
    const observed = await source();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const url = new URL(observed.observer_url);
    const send = (options: { method: string; path: string; body?: string }) =>
      new Promise<{ status: number; text: string; response: IncomingMessage }>((resolve, reject) => {
        const headers = { "x-bursar-observer-token": observed.observer_token, "content-type": "application/json", accept: "application/json, text/event-stream" };
        const request = httpRequest({ host: url.hostname, port: url.port, path: options.path, method: options.method, headers, agent }, (response) => {
          if (options.method === "GET") return resolve({ status: response.statusCode ?? 0, text: "", response });
          let text = "";
          response.on("data", (chunk: Buffer) => (text += chunk.toString()));
          response.on("end", () => resolve({ status: response.statusCode ?? 0, text, response }));
        });
        request.on("error", reject);
        request.end(options.body);
      });
    const stream_agent = new Agent({ keepAlive: true });
    const stream = await new Promise<IncomingMessage>((resolve) =>
      httpRequest({ host: url.hostname, port: url.port, path: "/observe/stream", headers: { "x-bursar-observer-token": observed.observer_token, accept: "text/event-stream" }, agent: stream_agent }, resolve).end(),
    );
    expect(stream.statusCode).toBe(200);
    const sockets = new Set<unknown>();
    for (const id of [1, 2, 3, 4, 5]) {
      const answered = await send({ method: "POST", path: "/observe", body: JSON.stringify(toolCall(id, "charge", { amount: id })) });
      sockets.add(answered.response.socket);
      expect(answered.status).toBe(200);
      expect(answeredIds(answered.text)).toEqual([id]);
    }
    expect(sockets.size).toBe(1);
    stream.destroy();
    agent.destroy();
    stream_agent.destroy();
  });
});
