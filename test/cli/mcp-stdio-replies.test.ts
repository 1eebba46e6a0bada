// `bursar mcp-stdio` (the compiled bridge) gives every request it forwards exactly one answer,
// whatever the server at --url does with it (a gateway in front of the gate may answer over SSE),
// and keeps the URL's query out of what it prints even when that server quotes it back.

import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bridge_error_code } from "../../src/cli/commands/mcp-stdio.js";
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

/** A server in the gate's place, answering each request as its path's first segment says. */
function answerAs(mode: string, request: IncomingMessage, response: ServerResponse, message: { id?: unknown }): void {
  const reply = { jsonrpc: "2.0", id: message.id, result: { content: [], late: true } };
  switch (mode) {
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
        if (request.method !== "POST") return void response.writeHead(405).end();
        const message = JSON.parse(body) as { id?: unknown };
        received.push(`${String(request.url)} ${String(message.id)}`);
        if (message.id === undefined) return void response.writeHead(202).end();
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
    ["an SSE stream holding only a notification", "notification-only"],
  ])("answers a request whose answer is %s as one that may have been carried out", async (_what, mode) => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/${mode}`], { BURSAR_AGENT_TOKEN: token }, `${call(2)}\n`, 15_000);
    const answers = answersOf(piped.stdout).filter((answer) => answer.id !== undefined);
    // No answer for id 2 (and, for another id's reply, an answer for id 999, which was never sent).
    expect(answers).toEqual([
      {
        jsonrpc: "2.0",
        id: 2,
        error: { code: bridge_error_code, message: expect.stringMatching(new RegExp(`^the gate's answer at ${base}/${mode}/mcp ended without a reply to this request; the call may have been carried out`)) },
      },
    ]);
    if (mode === "other-id") expect(piped.stderr).toContain("dropped an answer for id 999, which no request sent waits on");
    expect(piped.code).toBe(0);
  });

  it("writes one answer for a request the server answered twice, and says it dropped the other", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/twice`], { BURSAR_AGENT_TOKEN: token }, `${call(3)}\n`, 15_000);
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id: 3, result: { content: [], late: true } }]);
    expect(piped.stderr).toContain("dropped an answer for id 3");
  });

  it("keeps the URL's query out of its answers and stderr when the server quotes it back", async () => {
    const secret = "SECRETKEY123";
    const piped = await runBursar(["mcp-stdio", "--url", `${base}/nope?code=${secret}`], { BURSAR_AGENT_TOKEN: token }, `${call(4)}\n`, 15_000);
    // Printed: `… answered HTTP 404: not_found: no route POST /nope/mcp?code=SECRETKEY123`.
    expect(answersOf(piped.stdout)).toEqual([{ jsonrpc: "2.0", id: 4, error: expect.objectContaining({ message: expect.stringContaining("answered HTTP 404") }) }]);
    expect(piped.stdout).not.toContain(secret);
    expect(piped.stderr).not.toContain(secret);
    expect(piped.stdout).toContain("no route POST /nope/mcp?[redacted]");
  });

  it("says a TLS URL for a server that speaks plain HTTP failed over TLS and was not sent", async () => {
    const piped = await runBursar(["mcp-stdio", "--url", base.replace("http:", "https:")], { BURSAR_AGENT_TOKEN: token }, `${call(11)}\n`, 15_000);
    // It asked whether `bursar serve` was running, which it was.
    expect(answersOf(piped.stdout)).toEqual([
      { jsonrpc: "2.0", id: 11, error: { code: bridge_error_code, message: expect.stringMatching(/^cannot reach the gate at https:\/\/127\.0\.0\.1:\d+\/mcp over TLS \(ERR_SSL_[A-Z_]+\): .* It was not sent$/) } },
    ]);
    expect(received).not.toContain("/mcp 11");
  });

  it("answers a request read after SIGTERM as not sent, and the one in flight with its reply", async () => {
    const child = spawn(process.execPath, [bursar_bin, "mcp-stdio", "--url", `${base}/sse-late`], {
      env: { ...process.env, BURSAR_AGENT_TOKEN: token },
      stdio: ["pipe", "pipe", "pipe"],
      timeout: 15_000,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stdin.write(`${call(5)}\n`);
    await waitUntil("the server to receive id 5", () => received.includes("/sse-late/mcp 5"));
    child.kill("SIGTERM");
    // Once the signal is handled (its handler runs before stdin's next read), a request goes unsent.
    await new Promise((resolve) => setTimeout(resolve, 100));
    child.stdin.write(`${call(6)}\n`);
    const [code] = (await once(child, "exit")) as [number | null];
    // Id 6 got no answer at all.
    expect(answersOf(stdout).sort((a, b) => Number(a.id) - Number(b.id))).toEqual([
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
