// `bursar mcp-stdio` (the compiled bridge) passes on a reply only for the request it came with,
// answers a request whose answer held no reply, waits for replies still arriving on SSE streams
// (resumed ones too) when stdin closes, whatever the server at --url does (a gateway in front of
// the gate may answer over SSE), and keeps the URL's query out of what it prints even when that
// server quotes it back.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answers_in_flight_max, bridge_error_code, in_flight_max } from "../../src/cli/commands/mcp-stdio.js";
import { bursar_bin, ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { waitUntil } from "../support/wait.js";

interface Answer {
  id: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
}

const answersOf = (stdout: string): Answer[] =>
  stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Answer);

const call = (id: number) => JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "get_block", arguments: {} } });
const token = "bsr_agent_replies_test_token";
/** Answers held back this long come after a piped client has closed stdin. */
const late_ms = 500;

const sse = (response: ServerResponse, messages: unknown[]) => {
  for (const message of messages) response.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  response.end();
};

/** Replies a resumed stream (a GET with Last-Event-ID) sends, by event id. */
const resumable = new Map<string, unknown>();
/** The gate's pings waiting on the client's answer, by their id: each ends a stream with a reply. */
const pinging = new Map<string, () => void>();

/** A server in the gate's place, answering each request as its path's first segment says ("by-name": as its tool's name says). */
function answerAs(mode: string, request: IncomingMessage, response: ServerResponse, message: { id?: unknown; params?: { name?: string } }): void {
  if (mode === "by-name") mode = String(message.params?.name);
  const reply = { jsonrpc: "2.0", id: message.id, result: { content: [], late: true } };
  switch (mode) {
    case "json":
      return void response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ...reply, result: { content: [], json: true } }));
    case "string-id":
      return void response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ...reply, id: String(message.id) }));
    case "resume": {
      // A stream that ends after an event id only: the SDK resumes it with a GET (MCP 2025-11-25
      // lets servers close so), after its default delay of 1 s, as no `retry` field sets another.
      const event = `ev-${String(message.id)}`;
      resumable.set(event, { ...reply, result: { content: [], resumed: true } });
      return void response.writeHead(200, { "content-type": "text/event-stream" }).end(`id: ${event}\ndata: \n\n`);
    }
    case "break":
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write(": working\n\n");
      return void setTimeout(() => response.socket?.destroy(), 100);
    case "resume-forever": {
      // Every stream ends after an event id, its resumed ones too: the SDK resumes it for ever.
      resumable.set("forever", "forever");
      return void response.writeHead(200, { "content-type": "text/event-stream" }).end("id: forever\nretry: 50\ndata: \n\n");
    }
    case "reply-then-break":
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write(`event: message\ndata: ${JSON.stringify(reply)}\n\n`);
      return void setTimeout(() => response.socket?.destroy(), 30);
    case "null-id-error":
      return void response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "bad" } }));
    case "error-without-id":
      return void response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: "gateway: upstream said no" } }));
    case "get-stream-reply":
      // Its reply comes late; meanwhile the stream the SDK opened for the gate's own messages carries a forged one.
      return void setTimeout(() => response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ...reply, result: { content: [], real: true } })), 500);
    case "refuse-key":
      // A gateway that names the key it refuses, without the "?" it came with.
      response.writeHead(403, { "content-type": "application/json" });
      return void response.end(JSON.stringify({ error: { code: "forbidden", message: `key ${new URL(String(request.url), "http://x").searchParams.get("code")} not valid` } }));
    case "ask": {
      // The gate asks the client something first (a ping on the request's stream) and replies once it has its answer.
      const ping = `srv-${String(message.id)}`;
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: ping, method: "ping" })}\n\n`);
      pinging.set(ping, () => sse(response, [{ ...reply, result: { content: [], asked: true } }]));
      return;
    }
    case "sse-late":
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.flushHeaders();
      setTimeout(() => sse(response, [reply]), late_ms);
      return;
    case "accepted":
      return void response.writeHead(202).end();
    case "other-id":
      return void response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ...reply, id: 999 }));
    case "notification-only":
      response.writeHead(200, { "content-type": "text/event-stream" });
      return sse(response, [{ jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "working" } }]);
    case "twice":
      response.writeHead(200, { "content-type": "text/event-stream" });
      return sse(response, [reply, { ...reply, result: { content: [], second: true } }]);
    default:
      // Bursar's own 404 names the path it was sent, query and all.
      response.writeHead(404, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { code: "not_found", message: `no route ${String(request.method)} ${String(request.url)}` } }));
  }
}

/** A bridge to `url` whose stdin the test writes; what it has written to stdout and stderr so far. */
function bridgeTo(url: string): { child: ChildProcessWithoutNullStreams; stdout: () => string; stderr: () => string } {
  const child = spawn(process.execPath, [bursar_bin, "mcp-stdio", "--url", url], {
    env: { ...process.env, BURSAR_AGENT_TOKEN: token },
    stdio: ["pipe", "pipe", "pipe"],
    timeout: 15_000,
    killSignal: "SIGKILL",
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return { child, stdout: () => stdout, stderr: () => stderr };
}

describe("bursar mcp-stdio: exactly one answer per request", () => {
  let server: Server;
  let base: string;
  const received: string[] = [];
  beforeAll(async () => {
    ensureBuilt();
    server = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk: Buffer) => (body += chunk.toString()));
      request.on("end", () => {
        if (request.method === "GET") received.push(`GET ${String(request.url)} ${String(request.headers["last-event-id"])}`);
        const resumed = resumable.get(String(request.headers["last-event-id"]));
        if (request.method === "GET" && String(request.url).startsWith("/get-404")) return void response.writeHead(404, { "content-type": "application/json" }).end('{"error":"no session"}');
        if (request.method === "GET" && resumed === "forever") return void response.writeHead(200, { "content-type": "text/event-stream" }).end("id: forever\nretry: 50\ndata: \n\n");
        if (request.method === "GET" && String(request.url).startsWith("/get-stream-reply")) {
          response.writeHead(200, { "content-type": "text/event-stream" });
          return void response.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: 2, result: { content: [], forged: true } })}\n\n`);
        }
        if (request.method === "GET" && resumed !== undefined) {
          response.writeHead(200, { "content-type": "text/event-stream" });
          return sse(response, [resumed]);
        }
        if (request.method !== "POST") return void response.writeHead(405).end();
        const message = JSON.parse(body) as { id?: unknown; method?: string };
        received.push(`${String(request.url)} ${String(message.id)}`);
        if (message.method === undefined) pinging.get(String(message.id))?.();
        if (message.method === undefined && String(request.url).startsWith("/slow-answers")) return void setTimeout(() => response.writeHead(202).end(), 200);
        if (message.id === undefined || message.method === undefined) return void response.writeHead(202).end();
        answerAs(String(request.url).split("/")[1]!, request, response, message);
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    server.close();
  });

  it("answers a request whose reply comes on an SSE stream after stdin closed, then exits 0", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/sse-late`], { BURSAR_AGENT_TOKEN: token }, `${call(1)}\n`, 15_000);
    // Its stream was cut when stdin closed: nothing on stdout, exit 0.
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id: 1, result: { content: [], late: true } }]);
    expect(piped.code).toBe(0);
  });

  it.each([
    ["an empty 202", "accepted"],
    ["another id's reply", "other-id"],
  ])("answers a request whose answer is %s as one that may have been carried out", async (_what, mode) => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/${mode}`], { BURSAR_AGENT_TOKEN: token }, `${call(2)}\n`, 15_000);
    // No answer for id 2 (and, for another id's reply, an answer for id 999, which was never sent).
    expect(answersOf(piped.stdout)).toEqual([
      {
        jsonrpc: "2.0",
        id: 2,
        error: { code: bridge_error_code, message: expect.stringMatching(new RegExp(`^the gate's answer at ${base}/${mode}/mcp held no reply to this request; the call may have been carried out`)) },
      },
    ]);
    if (mode === "other-id") expect(piped.stderr).toContain("dropped an answer for id 999: it came with request 2");
    expect(piped.code).toBe(0);
  });

  it.each([
    ["ends holding only a notification", "notification-only"],
    ["breaks off", "break"],
    ["is resumed for ever, each stream ending without it", "resume-forever"],
  ])("answers a request whose SSE stream %s as one that may have been carried out", async (_what, mode) => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/${mode}`], { BURSAR_AGENT_TOKEN: token }, `${call(12)}\n`, 15_000);
    // The client waited until its own timeout (or, resumed for ever, the bridge never exited).
    expect(answersOf(piped.stdout).filter((answer) => answer.id === 12)).toEqual([
      {
        jsonrpc: "2.0",
        id: 12,
        error: { code: bridge_error_code, message: expect.stringMatching(new RegExp(`^the gate's answer at ${base}/${mode}/mcp ended without a reply to this request; the call may have been carried out`)) },
      },
    ]);
    expect(piped.code).toBe(0);
  });

  it("passes on an error without an id in a request's own answer as that request's", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/error-without-id`], { BURSAR_AGENT_TOKEN: token }, `${call(15)}\n`, 15_000);
    // Two lines came back: the error with no id, and the bridge's "held no reply" for id 15.
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id: 15, error: { code: -32603, message: "gateway: upstream said no" } }]);
  });

  it("says nothing of a stream broken after its request had its reply: nothing is in doubt", async () => {
    const { child, stdout, stderr } = bridgeTo(`${base}/reply-then-break`);
    child.stdin.write(`${call(17)}\n`);
    // stdin stays open until the stream has broken, 30 ms after the reply.
    await waitUntil("the reply", () => answersOf(stdout()).length === 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    child.stdin.end();
    await once(child, "exit");
    expect(answersOf(stdout())).toEqual([{ jsonrpc: "2.0", id: 17, result: { content: [], late: true } }]);
    // stderr said the connection "broke before its answer; the call may have been carried out".
    expect(stderr()).toBe("");
  });

  it("answers a request whose answer the MCP SDK does not read as JSON-RPC (an error with id null) in one short line, not as a broken connection", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/null-id-error`], { BURSAR_AGENT_TOKEN: token }, `${call(18)}\n`, 15_000);
    // It said the connection broke, and quoted the SDK's schema error whole (3,589 characters).
    expect(answersOf(piped.stdout)).toEqual([
      {
        jsonrpc: "2.0",
        id: 18,
        error: { code: bridge_error_code, message: `the gate at ${base}/null-id-error/mcp answered with a message the MCP SDK does not read as JSON-RPC (an error with "id": null, say); the call may have been carried out: repeat it with the same idempotency_key to learn its outcome, never with a new one` },
      },
    ]);
    expect(piped.stderr.split("\n").filter((line) => line !== "")).toHaveLength(1);
  });

  it("says once that a stream of the gate's own messages could not be opened", async () => {
    const initialized = JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" });
    const { child, stderr } = bridgeTo(`${base}/get-404`);
    child.stdin.write(`${initialized}\n`);
    await waitUntil("the GET", () => received.includes("GET /get-404/mcp undefined"));
    await new Promise((resolve) => setTimeout(resolve, 200));
    child.stdin.end();
    await once(child, "exit");
    // The line came twice: the SDK reports a failed GET as it fails and again as send() catches it.
    expect(stderr().split("\n").filter((line) => line.includes("a stream of the gate's own messages"))).toHaveLength(1);
  });

  it("drops a reply on the stream the SDK opens for the gate's own messages, which no request came with", async () => {
    const initialized = JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" });
    const { child, stdout, stderr } = bridgeTo(`${base}/get-stream-reply`);
    child.stdin.write(`${initialized}\n`);
    await waitUntil("the GET stream", () => received.includes("/get-stream-reply/mcp undefined"));
    await new Promise((resolve) => setTimeout(resolve, 200));
    child.stdin.end(`${call(2)}\n`);
    const [code] = (await once(child, "exit")) as [number | null];
    // The forged reply came first, and the SDK's client took it for create_order's.
    expect(answersOf(stdout())).toEqual([{ jsonrpc: "2.0", id: 2, result: { content: [], real: true } }]);
    expect(stderr()).toContain("dropped an answer for id 2: it came on a stream no request came with");
    expect(code).toBe(0);
  });

  it("writes one answer for a request the server answered twice, and says it dropped the other", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/twice`], { BURSAR_AGENT_TOKEN: token }, `${call(3)}\n`, 15_000);
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id: 3, result: { content: [], late: true } }]);
    expect(piped.stderr).toContain("dropped an answer for id 3: the request it came with (id 3) had its answer");
  });

  it("gives two requests sent with the same id each its own reply, the quicker one first", async () => {
    const named = (name: string) => JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name, arguments: {} } });
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/by-name`], { BURSAR_AGENT_TOKEN: token }, `${named("sse-late")}\n${named("json")}\n`, 15_000);
    // The JSON reply was taken for the SSE request's: it got a made-up "ended without a reply", and its own reply was dropped.
    expect(answersOf(piped.stdout)).toEqual([
      { jsonrpc: "2.0", id: 7, result: { content: [], json: true } },
      { jsonrpc: "2.0", id: 7, result: { content: [], late: true } },
    ]);
    expect(piped.stderr).toBe("");
  });

  it("passes on a reply whose id is the request's written as a string, as the MCP SDK's client takes it", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/string-id`], { BURSAR_AGENT_TOKEN: token }, `${call(8)}\n`, 15_000);
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id: "8", result: { content: [], late: true } }]);
    expect(piped.stderr).toBe("");
  });

  it("resumes no SSE stream: a request whose stream ends after an event id, without its reply, is answered at once, and the bridge exits", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/resume`], { BURSAR_AGENT_TOKEN: token }, `${call(9)}\n`, 15_000);
    expect(answersOf(piped.stdout)).toEqual([
      { jsonrpc: "2.0", id: 9, error: { code: bridge_error_code, message: expect.stringContaining("ended without a reply to this request; the call may have been carried out") } },
    ]);
    expect(piped.stderr).toBe("");
    expect(received).not.toContain("GET /resume/mcp ev-9");
    expect(piped.code).toBe(0);
  });

  it.each([["code=SECRETKEY123", "SECRETKEY123"], ["k=ab1", "k=ab1"]])("keeps the URL's query (?%s) out of its answers and stderr when the server quotes it back", async (query, secret) => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/nope?${query}`], { BURSAR_AGENT_TOKEN: token }, `${call(4)}\n`, 15_000);
    // Printed: `… answered HTTP 404: not_found: no route POST /nope/mcp?code=SECRETKEY123`.
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id: 4, error: expect.objectContaining({ message: expect.stringContaining("answered HTTP 404") }) }]);
    expect(piped.stdout).not.toContain(secret);
    expect(piped.stderr).not.toContain(secret);
    expect(piped.stdout).toContain("no route POST /nope/mcp?[redacted]");
  });

  it("keeps a query parameter's value out of what it prints when a server quotes it without its ?", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/refuse-key?code=SECRETKEY123`], { BURSAR_AGENT_TOKEN: token }, `${call(16)}\n`, 15_000);
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id: 16, error: expect.objectContaining({ message: expect.stringContaining("forbidden: key [redacted] not valid") }) }]);
    expect(piped.stdout + piped.stderr).not.toContain("SECRETKEY123");
  });

  it("takes a query out only where it stands as the query, not from other text that holds its letters", async () => {
    const port = (server.address() as AddressInfo).port;
    // The query's text is the host's: it was cut out of the host in every message.
    const piped = await runBursar(["mcp-stdio", "--url", `http://127.0.0.1:${port}/nope?127.0.0.1`], { BURSAR_AGENT_TOKEN: token }, `${call(13)}\n`, 15_000);
    expect(answersOf(piped.stdout)).toEqual([
      { jsonrpc: "2.0", id: 13, error: expect.objectContaining({ message: `the gate at http://127.0.0.1:${port}/nope/mcp?… answered HTTP 404: not_found: no route POST /nope/mcp?[redacted]` }) },
    ]);
  });

  it("says a TLS URL for a server that speaks plain HTTP failed over TLS and was not sent", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", base.replace("http:", "https:")], { BURSAR_AGENT_TOKEN: token }, `${call(11)}\n`, 15_000);
    // It asked whether `bursar serve` was running, which it was.
    expect(answersOf(piped.stdout)).toEqual([
      { jsonrpc: "2.0", id: 11, error: { code: bridge_error_code, message: expect.stringMatching(/^cannot reach the gate at https:\/\/127\.0\.0\.1:\d+\/mcp over TLS \(ERR_SSL_[A-Z_]+\): .* It was not sent$/) } },
    ]);
    expect(received).not.toContain("/mcp 11");
  });

  it("sends the client's answer to a request of the gate's while it stops, so the request in flight that waits on it gets its reply", async () => {
    const { child, stdout } = bridgeTo(`${base}/ask`);
    child.stdin.write(`${call(14)}\n`);
    await waitUntil("the gate's ping", () => stdout().includes('"method":"ping"'));
    child.kill("SIGTERM");
    await new Promise((resolve) => setTimeout(resolve, 100));
    child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: "srv-14", result: {} })}\n`);
    const [code] = (await once(child, "exit")) as [number | null];
    // The answer was refused as "not sent", and the bridge waited 150 s for a reply that waited on it.
    expect(answersOf(stdout())).toEqual([
      { jsonrpc: "2.0", id: "srv-14", method: "ping" },
      { jsonrpc: "2.0", id: 14, result: { content: [], asked: true } },
    ]);
    expect(code).toBe(0);
  });

  it(`sends the client's answers to the gate's requests with ${in_flight_max} requests in flight that wait on them`, async () => {
    const { child, stdout } = bridgeTo(`${base}/ask`);
    const ids = Array.from({ length: in_flight_max }, (_, i) => 100 + i);
    child.stdin.write(ids.map((id) => `${call(id)}\n`).join(""));
    await waitUntil("the gate's pings", () => answersOf(stdout()).length === in_flight_max);
    // Each was refused as one more than 64 in flight, and the requests waited on them until their time ran out.
    child.stdin.end(ids.map((id) => `${JSON.stringify({ jsonrpc: "2.0", id: `srv-${id}`, result: {} })}\n`).join(""));
    const [code] = (await once(child, "exit")) as [number | null];
    expect(answersOf(stdout()).filter((answer) => answer.result?.asked === true).map((answer) => answer.id)).toEqual(expect.arrayContaining(ids));
    expect(answersOf(stdout())).toHaveLength(2 * in_flight_max);
    expect(code).toBe(0);
  });

  it(`forwards at most ${answers_in_flight_max} of the client's answers at once, and drops the rest with one stderr line each`, async () => {
    const answers = Array.from({ length: 300 }, (_, i) => `${JSON.stringify({ jsonrpc: "2.0", id: `srv-${i}`, result: {} })}\n`).join("");
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/slow-answers`], { BURSAR_AGENT_TOKEN: token }, answers, 15_000);
    // 300 were forwarded at once, and Node warned of 129 abort listeners on stderr.
    const lines = piped.stderr.split("\n").filter((line) => line !== "");
    expect(lines.every((line) => line.startsWith("bursar mcp-stdio: "))).toBe(true);
    expect(lines.filter((line) => line.includes(`dropped a response: more than ${answers_in_flight_max} answers to the gate's requests in flight`)).length).toBeGreaterThan(0);
    expect(received.filter((line) => line.startsWith("/slow-answers/mcp srv-")).length).toBeLessThan(300);
    expect(piped.code).toBe(0);
  });

  it("answers a request read after SIGTERM as not sent, and the one in flight with its reply", async () => {
    const { child, stdout } = bridgeTo(`${base}/sse-late`);
    child.stdin.write(`${call(5)}\n`);
    await waitUntil("the server to receive id 5", () => received.includes("/sse-late/mcp 5"));
    child.kill("SIGTERM");
    // Once the signal is handled (its handler runs before stdin's next read), a request goes unsent.
    await new Promise((resolve) => setTimeout(resolve, 100));
    child.stdin.write(`${call(6)}\n`);
    const [code] = (await once(child, "exit")) as [number | null];
    // Id 6 got no answer at all.
    expect(answersOf(stdout()).sort((a, b) => Number(a.id) - Number(b.id))).toEqual([
      { jsonrpc: "2.0", id: 5, result: { content: [], late: true } },
      { jsonrpc: "2.0", id: 6, error: { code: bridge_error_code, message: "the bridge is stopping; it was not sent (nothing was carried out)" } },
    ]);
    expect(received).not.toContain("/sse-late/mcp 6");
    expect(code).toBe(0);
  });
});

describe("bursar mcp-stdio: a line refused unread is answered with its id when the id is read as sent", () => {
  beforeAll(() => ensureBuilt());

  it.each([
    ["a key written twice in its arguments", '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_block","arguments":{"a":1,"a":2}}}', 7],
    ["a number JSON.parse changes in its arguments", '{"jsonrpc":"2.0","id":"seven","method":"tools/call","params":{"name":"x","arguments":{"big":12345678901234567890}}}', "seven"],
    ["its id written twice", '{"jsonrpc":"2.0","id":8,"id":9,"method":"tools/call","params":{}}', null],
    ["an id JSON.parse changes", '{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{}}', null],
    ["no method (a response)", '{"jsonrpc":"2.0","id":10,"result":{"a":1,"a":2}}', null],
  ])("%s", async (_what, line, id) => {
    // Nothing is sent: the port is closed.
    const piped = await runBursar(["mcp-stdio", "--url", "http://127.0.0.1:9"], { BURSAR_AGENT_TOKEN: token }, `${line}\n`, 15_000);
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id, error: { code: -32700, message: expect.stringContaining("Parse error: the line is refused") } }]);
  });
});
