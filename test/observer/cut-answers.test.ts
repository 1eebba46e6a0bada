// Answers that do not follow the request neatly: an upstream answering before the request body
// has ended, an answer cut by the upstream after it began, and one the gateway gave up on after
// its headers. Each call gets the outcome of what happened, not a 502 nobody sent or a timeout.

import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource, toolCall, type ObserverSourceCreated } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const answer_json = JSON.stringify({ jsonrpc: "2.0", id: 7, result: { content: [{ type: "text", text: "x".repeat(100_000) }] } });

/** Opened once `/reused-id` has served a GET: a call it answers "after_get" waits for it. */
let get_served!: () => void;
let served = new Promise<void>((resolve) => (get_served = resolve));

const sseAnswer = (event_id: string, text: string, is_error: boolean) =>
  `id: ${event_id}\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: 7, result: { ...(is_error ? { isError: true } : {}), content: [{ type: "text", text }] } })}\n\n`;

/**
 * `/reused-id` (session "S1") answers call 7 on the POST's SSE stream as its `answer` argument
 * says: "cut" sends event evA1 and resets, and the GET resuming from evA1 answers "A ok";
 * "now" answers "B ok"; "after_get" answers isError "B failed" once that GET has been served;
 * "hold" sends event evC1 and ends, unanswered, 300 ms after that GET has been served.
 */
function reusedId(request: IncomingMessage, response: ServerResponse, body: string): void {
  const sse = { "content-type": "text/event-stream", "mcp-session-id": "S1" };
  if (request.method === "GET") {
    response.writeHead(200, sse).end(sseAnswer("evA2", "A ok", false));
    return get_served();
  }
  const answer = (JSON.parse(body) as { params: { arguments: { answer: string } } }).params.arguments.answer;
  response.writeHead(200, sse).flushHeaders();
  if (answer === "cut") {
    response.write("id: evA1\ndata: \n\n");
    return void setTimeout(() => response.socket?.resetAndDestroy(), 50);
  }
  if (answer === "now") return void response.end(sseAnswer("evB1", "B ok", false));
  if (answer === "hold") response.write("id: evC1\ndata: \n\n");
  void served.then(() => {
    served = new Promise<void>((resolve) => (get_served = resolve));
    // Well after the GET's answer has passed Bursar: the stream is still open when it does.
    if (answer === "hold") setTimeout(() => response.end(), 300);
    else response.end(sseAnswer("evB1", "B failed", true));
  });
}

/**
 * Answers framed neither by Content-Length nor by chunks, which end with their connection (as an
 * HTTP/1.0 server's do): `/unframed-json-whole` closes it in order after the whole answer,
 * `/unframed-json-cut` resets it part way, `/unframed-sse-hang` sends a comment and waits.
 */
function unframed(path: string, socket: Socket): void {
  const media = path.includes("sse") ? "text/event-stream" : "application/json";
  const head = `HTTP/1.1 200 OK\r\ncontent-type: ${media}\r\nconnection: close\r\n\r\n`;
  if (path === "/unframed-json-whole") return void socket.end(head + answer_json);
  if (path === "/unframed-sse-hang") return void socket.write(`${head}: working\n\n`);
  socket.write(head + answer_json.slice(0, 1000));
  setTimeout(() => socket.resetAndDestroy(), 50);
}

/** `/whole-then-cut` answers call 1 whole (3 MB, with its length) and cuts call 2's answer, which has a length too, part way. */
function wholeThenCut(call: { id: number }, response: ServerResponse): void {
  const whole = JSON.stringify({ jsonrpc: "2.0", id: call.id, result: { content: [{ type: "text", text: "w".repeat(3_000_000) }] } });
  if (call.id === 1) return void response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(whole) }).end(whole);
  response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer_json) }).write(answer_json.slice(0, 1000));
  setTimeout(() => response.socket?.resetAndDestroy(), 50);
}

/**
 * `/early` answers 401 at once, reading nothing, and `/status-099` answers status 099 so; `/cut-json` sends part of a JSON answer, then
 * resets the connection; `/hang-json` sends part and waits; `/cut-sse` (session "S1") sends a
 * resumable SSE event then resets, and answers call 7 on the GET that resumes the stream.
 */
function upstreamAnswer(request: IncomingMessage, response: ServerResponse): void {
  const path = request.url ?? "/";
  // A status line Node's client reads but its server cannot write, before the request body has arrived.
  if (path === "/status-099") return void request.socket.end("HTTP/1.1 099 Early\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
  if (path === "/early") return void response.writeHead(401, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"unauthorized"},"id":null}');
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    if (path === "/reused-id") return reusedId(request, response, Buffer.concat(chunks).toString("utf8"));
    if (path.startsWith("/unframed-")) return unframed(path, request.socket);
    if (path === "/whole-then-cut") return wholeThenCut(JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id: number }, response);
    if (path === "/cut-sse" && request.method === "GET") return void response.writeHead(200, { "content-type": "text/event-stream" }).end(`id: ev2\ndata: ${answer_json}\n\n`);
    if (path === "/cut-sse") response.writeHead(200, { "content-type": "text/event-stream", "mcp-session-id": "S1" }).write("id: ev1\ndata: \n\n");
    else response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer_json) }).write(answer_json.slice(0, 1000));
    if (path !== "/hang-json") setTimeout(() => response.socket?.resetAndDestroy(), 50);
  });
}

beforeAll(async () => {
  upstream = createServer(upstreamAnswer);
  upstream_url = await listenLoopback(upstream);
  // Calls wait 2 s for their answer here, not 15 minutes: a call left pending shows as a timeout.
  h = await harness({ sweep_ms: 20, pending_call_ttl_ms: 2_000 });
});
afterAll(async () => {
  await h.close();
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

/** The source's observer.call entries, once there are any (or after 5 s, when none came). */
async function recordedCalls(source_id: string): Promise<Array<Record<string, unknown>>> {
  const deadline = performance.now() + 5_000;
  for (;;) {
    await h.evidence.observer.recorder.drain();
    const calls = (await h.entries("observer.call")).filter((stored) => stored.entry.source === source_id).map((stored) => stored.entry.body);
    if (calls.length > 0 || performance.now() > deadline) return calls;
    await sleep(10);
  }
}

function headers(source: ObserverSourceCreated): Record<string, string> {
  return { "x-bursar-observer-token": source.observer_token, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": "S1" };
}

/** Call `id` as a raw HTTP/`version` POST through the source's observer. */
function rawPost(source: ObserverSourceCreated, id: number, version: "1.0" | "1.1"): string {
  const body = JSON.stringify(toolCall(id, "pay", {}));
  const { pathname } = new URL(source.observer_url);
  return (
    `POST ${pathname} HTTP/${version}\r\nhost: x\r\nx-bursar-observer-token: ${source.observer_token}\r\ncontent-type: application/json\r\n` +
    `accept: application/json, text/event-stream\r\ncontent-length: ${body.length}\r\n\r\n${body}`
  );
}

/** "end" when the connection is closed in order, else the error's code (ECONNRESET for a reset). */
function howItEnds(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    socket.on("end", () => resolve("end"));
    socket.on("error", (error: NodeJS.ErrnoException) => resolve(String(error.code)));
  });
}

/** POSTs call 7 in two parts, `pause_ms` apart; resolves with the answer's status. */
function splitPost(source: ObserverSourceCreated, pause_ms: number): Promise<number> {
  const body = JSON.stringify(toolCall(7, "pay", { amount: 5 }));
  const url = new URL(source.observer_url);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { ...headers(source), "content-length": String(body.length) } }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
    });
    request.on("error", reject);
    request.write(body.slice(0, 10));
    setTimeout(() => request.end(body.slice(10)), pause_ms);
  });
}

describe("answers out of step with their request", () => {
  it("records the answer an upstream gave before the request body ended (a 401), not a timeout", async () => {
    const source = await observerSource(h, `${upstream_url}/early`);
    expect(await splitPost(source, 300)).toBe(401);
    expect((await recordedCalls(source.id)).map((call) => [call.outcome, call.transport])).toEqual([[{ type: "no_response", reason: "http_status", status: 401 }, "json"]]);
  });

  it("records a call whose body was still arriving when Bursar answered 502 (upstream unreachable), as when it had arrived whole", async () => {
    const closed = createServer();
    const closed_url = await listenLoopback(closed);
    await new Promise((resolve) => closed.close(resolve));
    const source = await observerSource(h, `${closed_url}/mcp`);
    expect(await splitPost(source, 300)).toBe(502);
    expect((await recordedCalls(source.id)).map((call) => [call.outcome, call.transport])).toEqual([[{ type: "no_response", reason: "upstream_unreachable", status: 502 }, "none"]]);
    expect(h.evidence.observer.held.bytes).toBe(0);
  });

  it("records a call whose body was still arriving when Bursar answered 502 (a status it cannot relay), as when it had arrived whole", async () => {
    const source = await observerSource(h, `${upstream_url}/status-099`);
    expect(await splitPost(source, 300)).toBe(502);
    expect((await recordedCalls(source.id)).map((call) => [call.outcome, call.transport])).toEqual([[{ type: "no_response", reason: "unrelayable_status", status: 502, upstream_status: 99 }, "none"]]);
  });

  // The one that ends with its connection reached the client as a chunked answer ended neatly, its first 1,000 bytes as if whole.
  it.each([
    ["/cut-json", "with its length"],
    ["/unframed-json-cut", "that ends with its connection"],
  ])("records a JSON answer (%s, %s) the upstream cut after it began as response_cut with the status the client got, and cuts the client's answer", async (path) => {
    const source = await observerSource(h, `${upstream_url}${path}`);
    const answered = await fetch(source.observer_url, { method: "POST", headers: headers(source), body: JSON.stringify(toolCall(7, "pay", {})) });
    expect(answered.status).toBe(200);
    await expect(answered.text()).rejects.toThrow();
    expect((await recordedCalls(source.id)).map((call) => call.outcome)).toEqual([{ type: "no_response", reason: "response_cut", status: 200 }]);
    // The part of the answer the tap held is let go with the cut.
    expect(h.evidence.observer.held.bytes).toBe(0);
  });

  it("records a JSON answer the gateway gave up on after its headers as cancelled at once, not as a timeout", async () => {
    const source = await observerSource(h, `${upstream_url}/hang-json`);
    const controller = new AbortController();
    const answered = await fetch(source.observer_url, { method: "POST", headers: headers(source), body: JSON.stringify(toolCall(7, "pay", {})), signal: controller.signal });
    expect(answered.status).toBe(200);
    controller.abort();
    expect((await recordedCalls(source.id)).map((call) => call.outcome)).toEqual([{ type: "no_response", reason: "cancelled", status: 200 }]);
    expect(h.evidence.observer.held.bytes).toBe(0);
  });

  it("records an answer that ends with its connection, closed in order after the whole of it, as its result", async () => {
    const source = await observerSource(h, `${upstream_url}/unframed-json-whole`);
    const answered = await fetch(source.observer_url, { method: "POST", headers: headers(source), body: JSON.stringify(toolCall(7, "pay", {})) });
    expect(await answered.text()).toBe(answer_json);
    expect((await recordedCalls(source.id)).map((call) => call.outcome)).toEqual([{ type: "result", is_error: false }]);
  });

  it("resets an HTTP/1.0 gateway's connection when its answer is cut, so that it cannot take the part it got for the whole", async () => {
    const source = await observerSource(h, `${upstream_url}/unframed-json-cut`);
    const socket = connect(Number(new URL(source.observer_url).port), "127.0.0.1");
    socket.write(rawPost(source, 7, "1.0"));
    let received = "";
    socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")));
    // Its answer has neither a length nor chunks: a close in order read as the end of a whole answer.
    const ended = await howItEnds(socket);
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(ended).toBe("ECONNRESET");
    expect((await recordedCalls(source.id)).map((call) => call.outcome)).toEqual([{ type: "no_response", reason: "response_cut", status: 200 }]);
  });

  it("ends a cut answer that has a length with a close, so that a gateway reading slowly still gets the whole answer before it", async () => {
    const source = await observerSource(h, `${upstream_url}/whole-then-cut`);
    const socket = connect(Number(new URL(source.observer_url).port), "127.0.0.1");
    socket.write(rawPost(source, 1, "1.1") + rawPost(source, 2, "1.1"));
    // A gateway that does not read for a while: the first answer waits in the connection's buffers.
    socket.pause();
    await sleep(1_000);
    let received = 0;
    socket.on("data", (chunk: Buffer) => (received += chunk.length));
    socket.resume();
    const ended = await howItEnds(socket);
    // A reset threw away what the gateway had not read: 193,584 bytes of the 3 MB answer came.
    expect(ended).toBe("end");
    expect(received).toBeGreaterThan(3_000_000);
    expect((await recordedCalls(source.id)).map((call) => call.outcome)).toEqual(
      expect.arrayContaining([{ type: "result", is_error: false }, { type: "no_response", reason: "response_cut", status: 200 }]),
    );
  });

  it("records an answer that ends with its connection as cancelled at once when the gateway gives up on it", async () => {
    const source = await observerSource(h, `${upstream_url}/unframed-sse-hang`);
    const controller = new AbortController();
    // Without a session: no GET stream can resume the call (with one, it would wait for one).
    const { "mcp-session-id": _session, ...sessionless } = headers(source);
    const answered = await fetch(source.observer_url, { method: "POST", headers: sessionless, body: JSON.stringify(toolCall(7, "pay", {})), signal: controller.signal });
    expect(answered.status).toBe(200);
    controller.abort();
    // Nothing was recorded until the call's 2 s here (15 minutes by default) ran out: a timeout.
    expect((await recordedCalls(source.id)).map((call) => [call.outcome, call.transport])).toEqual([[{ type: "no_response", reason: "cancelled", status: 200 }, "sse"]]);
    expect(h.evidence.observer.held.bytes).toBe(0);
  });

  it("keeps a call pending when the upstream cuts its session's SSE stream, so the GET that resumes it records the result", async () => {
    const source = await observerSource(h, `${upstream_url}/cut-sse`);
    const answered = await fetch(source.observer_url, { method: "POST", headers: headers(source), body: JSON.stringify(toolCall(7, "pay", {})) });
    expect(answered.status).toBe(200);
    await expect(answered.text()).rejects.toThrow();
    await sleep(100);
    expect(h.evidence.observer.correlator.size).toBe(1);
    const resumed = await fetch(source.observer_url, { headers: { ...headers(source), "last-event-id": "ev1" } });
    expect(await resumed.text()).toContain('"id":7');
    expect((await recordedCalls(source.id)).map((call) => [call.outcome, call.transport])).toEqual([[{ type: "result", is_error: false }, "sse_get"]]);
  });
});

describe("a JSON-RPC id two requests of one session use while both await answers", () => {
  const post = (source: ObserverSourceCreated, answer: string) => fetch(source.observer_url, { method: "POST", headers: headers(source), body: JSON.stringify(toolCall(7, "pay", { answer })) });
  const resume = (source: ObserverSourceCreated, from = "evA1") => fetch(source.observer_url, { headers: { ...headers(source), "last-event-id": from } });
  const described = (calls: Array<Record<string, unknown>>) => calls.map((call) => [(call.args as { answer: string }).answer, call.outcome, call.transport, call.result]);
  const a_ok = { content: [{ type: "text", text: "A ok" }] };

  it("gives a resumed stream's response to the call whose stream it resumes, and the other its own stream's answer", async () => {
    const source = await observerSource(h, `${upstream_url}/reused-id`);
    const a = await post(source, "cut");
    await expect(a.text()).rejects.toThrow();
    const b = await post(source, "after_get");
    expect(b.status).toBe(200);
    // The GET resumes from evA1, an event of A's stream, which was cut with A unanswered.
    expect(await (await resume(source)).text()).toContain("A ok");
    expect(await b.text()).toContain("B failed");
    expect(described(await recordedCalls(source.id))).toEqual([
      ["cut", { type: "result", is_error: false }, "sse_get", a_ok],
      ["after_get", { type: "result", is_error: true }, "sse", { isError: true, content: [{ type: "text", text: "B failed" }] }],
    ]);
  });

  it("gives it so too when the later call was answered first", async () => {
    const source = await observerSource(h, `${upstream_url}/reused-id`);
    const a = await post(source, "cut");
    await expect(a.text()).rejects.toThrow();
    expect(await (await post(source, "now")).text()).toContain("B ok");
    expect(await (await resume(source)).text()).toContain("A ok");
    expect(described(await recordedCalls(source.id))).toEqual([
      ["now", { type: "result", is_error: false }, "sse", { content: [{ type: "text", text: "B ok" }] }],
      ["cut", { type: "result", is_error: false }, "sse_get", a_ok],
    ]);
  });

  it("gives a GET resuming a stream still open to Bursar (a client that gave up on it) that stream's call's answer", async () => {
    const source = await observerSource(h, `${upstream_url}/reused-id`);
    const held = await post(source, "hold");
    const reader = held.body!.getReader();
    // The client has the stream's event evC1, which Bursar relayed, and resumes from it.
    expect(new TextDecoder().decode((await reader.read()).value)).toContain("id: evC1");
    expect(await (await resume(source, "evC1")).text()).toContain("A ok");
    while (!(await reader.read()).done);
    expect(described(await recordedCalls(source.id))).toEqual([["hold", { type: "result", is_error: false }, "sse_get", a_ok]]);
  });

  it("takes a response on a GET resuming an answered call's stream for no other call's: the call cut waits for its own", async () => {
    // A client that reuses an answered call's id, then resumes from an event of that call's
    // stream: the upstream replays the old answer, which is not the new call's.
    const source = await observerSource(h, `${upstream_url}/reused-id`);
    expect(await (await post(source, "now")).text()).toContain("B ok");
    const a = await post(source, "cut");
    await expect(a.text()).rejects.toThrow();
    expect(await (await resume(source, "evB1")).text()).toContain("A ok");
    // Nothing resumes the cut call's stream: it times out here in 2 s (15 minutes by default).
    for (const deadline = performance.now() + 10_000; (await recordedCalls(source.id)).length < 2 && performance.now() < deadline; ) await sleep(20);
    expect(described(await recordedCalls(source.id))).toEqual([
      ["now", { type: "result", is_error: false }, "sse", { content: [{ type: "text", text: "B ok" }] }],
      ["cut", { type: "no_response", reason: "timeout" }, "none", undefined],
    ]);
  });

  it("takes a response on a GET resuming from an event no stream Bursar relayed carried for no call's: the call awaiting one is unattributed", async () => {
    const source = await observerSource(h, `${upstream_url}/reused-id`);
    const a = await post(source, "cut");
    await expect(a.text()).rejects.toThrow();
    expect(await (await resume(source, "evOld")).text()).toContain("A ok");
    expect(described(await recordedCalls(source.id))).toEqual([["cut", { type: "unattributed", reason: "unknown_stream" }, "sse_get", undefined]]);
  });

  it("takes no response on a resumed GET for a call whose own stream is still open: it is that stream's to answer", async () => {
    const source = await observerSource(h, `${upstream_url}/reused-id`);
    const b = await post(source, "after_get");
    expect(b.status).toBe(200);
    // Resumed from an event no stream Bursar relayed carried: the replayed answer is no call's.
    expect(await (await resume(source, "evOld")).text()).toContain("A ok");
    expect(await b.text()).toContain("B failed");
    expect(described(await recordedCalls(source.id))).toEqual([
      ["after_get", { type: "result", is_error: true }, "sse", { isError: true, content: [{ type: "text", text: "B failed" }] }],
    ]);
  });
});
