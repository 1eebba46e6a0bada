// `bursar mcp-stdio` (the compiled bridge) in front of a real gate, fed what a well-behaved
// client never sends: a token with a line break in it, batches, a request the SDK's schema
// refuses, a line over the bridge's 4 MiB limit, and a connection cut after the gate took a
// money call.

import { spawn } from "node:child_process";
import { createServer as createHttpServer } from "node:http";
import { connect, createConnection, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { existsSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { leadingRequestId, oneLine, stdin_buffer_max_bytes } from "../../src/cli/commands/mcp-stdio.js";
import { message_bytes_max } from "../../src/server/jsonrpc.js";
import { bursar_bin, ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";

interface Piped {
  code: number | null;
  stdout: string;
  stderr: string;
  ids: unknown[];
}

/** Writes raw stdin text to a bridge, closes stdin, and collects what it printed and the ids it answered. */
async function pipe(input: string | Buffer, env: Record<string, string>): Promise<Piped> {
  const { code, stdout, stderr } = await runBursar(["mcp-stdio"], env, input);
  const ids = stdout
    .split("\n")
    .filter((line) => line !== "")
    .flatMap((line) => {
      const parsed = JSON.parse(line) as unknown;
      return (Array.isArray(parsed) ? parsed : [parsed]).map((message) => (message as { id?: unknown }).id);
    });
  return { code, stdout, stderr, ids };
}

const call = (id: number, name: string, args: Record<string, unknown> = {}) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args },
});

describe("bursar mcp-stdio: unusual input and broken connections", () => {
  let server: TestServer;
  beforeAll(async () => {
    ensureBuilt();
    server = await testServer();
  });
  afterAll(async () => server.close());

  it("refuses a token that is not a valid header value without printing it", async () => {
    const agent = await server.agent("leaky");
    // e.g. a token pasted with a line break inside: the real token is still in it.
    const token = `${agent.token}\nexport OTHER=1`;
    const piped = await pipe(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })}\n`, {
      BURSAR_URL: server.url,
      BURSAR_AGENT_TOKEN: token,
    });
    // fetch's error quoted the whole header ("Bearer bsr_agent_…\nexport OTHER=1" is an invalid header value).
    expect(piped.stdout).not.toContain(agent.token);
    expect(piped.stderr).not.toContain(agent.token);
    expect(piped.code).toBe(2);
    expect(piped.stderr).toContain("BURSAR_AGENT_TOKEN holds whitespace or a control character");
  });

  it("keeps the token out of what it prints when something in front of the gate echoes the Authorization header", async () => {
    const agent = await server.agent("echoed");
    // A misconfigured proxy whose error body quotes the request's headers.
    const echo = createHttpServer((request, response) => {
      response.writeHead(502, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { code: 502, message: `upstream refused ${String(request.headers.authorization)}` } }));
    });
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
      const piped = await pipe(`${JSON.stringify(call(1, "get_block"))}\n`, { BURSAR_URL: url, BURSAR_AGENT_TOKEN: agent.token });
      expect(JSON.parse(piped.stdout.trim())).toMatchObject({ id: 1, error: { message: expect.stringContaining("upstream refused Bearer [redacted]") } });
      expect(piped.stdout).not.toContain(agent.token);
      expect(piped.stderr).not.toContain(agent.token);
    } finally {
      await new Promise((resolve) => echo.close(resolve));
    }
  });

  it("answers each request of a JSON-RPC batch (MCP 2025-06-18 has no batches) instead of dropping it", async () => {
    const agent = await server.agent("batcher");
    const batch = [call(1, "get_block"), call(2, "get_block")];
    const piped = await pipe(`${JSON.stringify(batch)}\n`, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    // The SDK's reader dropped it with a line on stderr, and a client waited for ids 1 and 2 forever.
    expect(piped.ids.sort()).toEqual([1, 2]);
    const answer = JSON.parse(piped.stdout.trim()) as Array<{ error: { code: number; message: string } }>;
    expect(answer.map((reply) => reply.error.code)).toEqual([-32600, -32600]);
    expect(answer[0]!.error.message).toContain("batches are not supported");
  });

  it("answers a request it cannot accept with a JSON-RPC error for that id instead of dropping it silently", async () => {
    const agent = await server.agent("strict");
    const odd = { ...call(3, "get_block"), trace: "abc" }; // an extra top-level member
    const piped = await pipe(`${JSON.stringify(odd)}\n`, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    expect(piped.ids).toEqual([3]);
    expect(JSON.parse(piped.stdout.trim())).toMatchObject({ id: 3, error: { code: -32600 } });
  });

  it("keeps a refused message's warning on one stderr line, so a member name cannot forge a warning of its own", async () => {
    const agent = await server.agent("forger");
    // id 4.5 fails the SDK's schema, whose issue quotes every member name, this one's "\n" decoded.
    const forged = '{"jsonrpc":"2.0","id":4.5,"method":"ping","a\\nbursar mcp-stdio: FORGED":1}';
    const piped = await pipe(`${forged}\n`, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    expect(JSON.parse(piped.stdout.trim())).toMatchObject({ id: 4.5, error: { code: -32600 } });
    const lines = piped.stderr.split("\n").filter((line) => line !== "");
    expect(lines.filter((line) => line.startsWith("bursar mcp-stdio: FORGED"))).toEqual([]);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^bursar mcp-stdio: refused a message: .*a\\nbursar mcp-stdio: FORGED/);
  });

  it("answers a line that is not JSON with -32700 and id null, reads a line that starts with a UTF-8 BOM, and ignores a blank line", async () => {
    const agent = await server.agent("bom");
    const input = `this is { not json\n\uFEFF${JSON.stringify(call(21, "get_block"))}\n\r\n${JSON.stringify(call(22, "get_block"))}\n`;
    const piped = await pipe(input, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    // Both the line that is not JSON and the one with a BOM went unanswered (a line on stderr each).
    expect(piped.ids.sort()).toEqual([21, 22, null].sort());
    const answers = piped.stdout.trim().split("\n").map((line) => JSON.parse(line) as { id: unknown; error?: { code: number; message: string }; result?: unknown });
    expect(answers.find((answer) => answer.id === null)).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringContaining("not valid JSON") } });
    expect(answers.find((answer) => answer.id === 21)?.result).toMatchObject({ structuredContent: { block_id: agent.block_id } });
    expect(piped.stderr.split("\n").filter((line) => line !== "")).toHaveLength(1);
    expect(piped.code).toBe(0);
  });

  it("answers a line whose bytes are not UTF-8 with -32700 and id null, and forwards nothing of it", async () => {
    const agent = await server.agent("not-utf8-line");
    // The key "buy" and a byte 0xff, which no UTF-8 text holds.
    const [before, after] = JSON.stringify(call(31, "create_order", { amount: 700, currency: "INR", idempotency_key: "buy#" })).split("#");
    const line = Buffer.concat([Buffer.from(before!), Buffer.from([0xff]), Buffer.from(`${after!}\n`)]);
    const piped = await pipe(Buffer.concat([line, Buffer.from(`${JSON.stringify(call(32, "get_block"))}\n`)]), { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    const answers = piped.stdout.trim().split("\n").map((text) => JSON.parse(text) as { id: unknown; error?: { code: number; message: string }; result?: { structuredContent?: Record<string, unknown> } });
    expect(answers.find((answer) => answer.id === null)).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringContaining("not UTF-8") } });
    expect(answers.find((answer) => answer.id === 32)?.result?.structuredContent).toMatchObject({ held: 0 });
  });

  // Forwarded, the SDK would write either message again as JSON.parse read it: the last amount
  // only, or an amount of 100, which the gate would allow.
  const unread_lines: Array<[string, string, string]> = [
    ["writes a key twice in one object", '"amount":100,"currency":"INR","amount":900', "writes the key params.arguments.amount twice"],
    ["holds a number JSON.parse reads as another", '"amount":99.999999999999999,"currency":"INR"', "writes the number at params.arguments.amount with digits no double holds"],
  ];
  for (const [what, args, message] of unread_lines) {
    it(`answers a line that ${what} with -32700 for its id (read as sent), naming the place, and forwards nothing of it`, async () => {
      const agent = await server.agent("unread-line");
      const line = `{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"create_order","arguments":{${args}}}}`;
      const piped = await pipe(`${line}\n${JSON.stringify(call(34, "get_block"))}\n`, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
      const answers = piped.stdout.trim().split("\n").map((text) => JSON.parse(text) as { id: unknown; error?: { code: number; message: string }; result?: { structuredContent?: Record<string, unknown> } });
      // Its one answer is the refusal: the gate never saw it, and nothing is held.
      expect(answers.filter((answer) => answer.id === 33)).toEqual([{ jsonrpc: "2.0", id: 33, error: { code: -32700, message: expect.stringContaining(message) } }]);
      expect(answers.find((answer) => answer.id === 34)?.result?.structuredContent).toMatchObject({ held: 0 });
    });
  }

  it("answers a line whose id is no id, or that is no message, with -32600 and id null, as the gate's /mcp does", async () => {
    const agent = await server.agent("no-id");
    const lines = ['{"jsonrpc":"2.0","id":null,"method":"ping"}', '{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"get_block"}}', "5", "null"];
    const piped = await pipe(`${lines.join("\n")}\n${JSON.stringify(call(23, "get_block"))}\n`, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    const answers = piped.stdout.trim().split("\n").map((line) => JSON.parse(line) as { id: unknown; error?: { code: number; message: string } });
    // The SDK's reader dropped each of them, with only a line on stderr: the client waited.
    expect(answers.filter((answer) => answer.id === null)).toEqual(
      lines.map(() => ({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining("not a valid JSON-RPC message") } })),
    );
    expect(answers.filter((answer) => answer.id === 23)).toHaveLength(1);
    expect(piped.code).toBe(0);
  });

  it("forwards a tools/call whose params the SDK's schema refuses, so the gate's policy decides it with evidence", async () => {
    const agent = await server.agent("odd-params");
    const lines = [
      { jsonrpc: "2.0", id: 31, method: "tools/call", params: "create_order" },
      { jsonrpc: "2.0", id: 32, method: "tools/call", params: { name: "create_order", arguments: { amount: 5_000, currency: "INR", idempotency_key: "bridge-meta" }, _meta: "x" } },
    ];
    const piped = await pipe(lines.map((line) => `${JSON.stringify(line)}\n`).join(""), { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    // The bridge answered both -32600 itself: nothing reached the gate, nothing was recorded.
    const answers = piped.stdout.trim().split("\n").map((line) => JSON.parse(line) as { id: number; result?: { structuredContent: Record<string, unknown> } });
    expect(answers.find((answer) => answer.id === 31)?.result?.structuredContent).toMatchObject({ effect: "BLOCK", rule: "ALLOWLIST", evidence: { seq: expect.any(Number) } });
    expect(answers.find((answer) => answer.id === 32)?.result?.structuredContent).toMatchObject({ effect: "ALLOW", evidence: { seq: expect.any(Number) } });
    expect(piped.code).toBe(0);
  });

  it("says a tools/call nested too deep to write as JSON was not sent, instead of that it may have been carried out", async () => {
    const agent = await server.agent("deep-args");
    const deep = `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"create_order","arguments":{"a":${"[".repeat(400_000)}${"]".repeat(400_000)}}}}`;
    const piped = await pipe(`${deep}\n${JSON.stringify(call(42, "get_block"))}\n`, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    const answers = piped.stdout.trim().split("\n").map((line) => JSON.parse(line) as { id: number; error?: { message: string } });
    const refused = answers.find((answer) => answer.id === 41)?.error?.message ?? "";
    expect(refused).toMatch(/it cannot be written as JSON \(.+\); it was not sent$/);
    expect(refused).not.toContain("may have been carried out");
    expect(answers.map((answer) => answer.id).sort()).toEqual([41, 42]);
  });

  it("reads a last line that has no newline", async () => {
    const agent = await server.agent("no-newline");
    const piped = await pipe(JSON.stringify(call(4, "get_block")), { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    expect(piped.ids).toEqual([4]);
    expect(piped.code).toBe(0);
  });

  it("answers a line over the 4 MiB limit with -32600 for its id, then answers the next request", async () => {
    const agent = await server.agent("overlong");
    const overlong = call(5, "get_block", { pad: "x".repeat(stdin_buffer_max_bytes) });
    const piped = await pipe(`${JSON.stringify(overlong)}\n${JSON.stringify(call(6, "get_block"))}\n`, {
      BURSAR_URL: server.url,
      BURSAR_AGENT_TOKEN: agent.token,
    });
    // It printed "ignoring unreadable input: ReadBuffer exceeded…" and exited 1, answering neither.
    expect(piped.code).toBe(0);
    const answers = piped.stdout.trim().split("\n").map((line) => JSON.parse(line) as { id: unknown; error?: { code: number; message: string }; result?: unknown });
    expect(answers.find((answer) => answer.id === 5)).toEqual({
      jsonrpc: "2.0",
      id: 5,
      error: { code: -32600, message: expect.stringContaining(`longer than ${stdin_buffer_max_bytes} bytes`) },
    });
    expect(answers.find((answer) => answer.id === 6)?.result).toMatchObject({ structuredContent: { block_id: agent.block_id } });
    expect(answers).toHaveLength(2);
  });

  it("sends a message of exactly the gate's 1 MiB limit, answers one byte more as not sent, and a line over 4 MiB unread", async () => {
    const agent = await server.agent("line-limit");
    const before = await server.started.bursar.log.treeSize();
    /** A request line of exactly `bytes` bytes, its newline included. */
    const lineOf = (id: number, bytes: number) => {
      const empty = JSON.stringify(call(id, "create_order", { amount: 1_000, currency: "INR", receipt: "" }));
      return `${JSON.stringify(call(id, "create_order", { amount: 1_000, currency: "INR", receipt: "x".repeat(bytes - empty.length - 1) }))}\n`;
    };
    const input = lineOf(10, message_bytes_max + 1) + lineOf(11, message_bytes_max + 2) + lineOf(12, stdin_buffer_max_bytes + 1);
    const piped = await pipe(input, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    const answers = piped.stdout.trim().split("\n").map((line) => JSON.parse(line) as { id: number; error?: { code: number; message: string }; result?: Record<string, unknown> });
    // At the limit the gate takes it and decides it (R0: the receipt is too long), with evidence.
    expect(answers.find((answer) => answer.id === 10)?.result).toMatchObject({ isError: true, structuredContent: { effect: "BLOCK", rule: "R0" } });
    // One byte more: sent, the gate would close the connection mid-upload, and the bridge would
    // see a broken pipe, answered "may have been carried out". It is not sent at all.
    expect(answers.find((answer) => answer.id === 11)?.error).toEqual({
      code: -32000,
      message: `a message of ${message_bytes_max + 1} bytes is over the gate's limit of ${message_bytes_max} bytes; it was not sent (nothing was carried out)`,
    });
    expect(answers.find((answer) => answer.id === 12)?.error).toMatchObject({ code: -32600, message: expect.stringContaining("longer than") });
    expect(await server.started.bursar.log.treeSize()).toBe(before + 1);
    expect(piped.code).toBe(0);
  });

  it("answers over-long lines whose id is not at their start with id null, the last one cut off by end of input", async () => {
    const agent = await server.agent("overlong-late-id");
    const pad = "x".repeat(stdin_buffer_max_bytes);
    const late_id = JSON.stringify({ jsonrpc: "2.0", params: { name: "get_block", arguments: { pad } }, id: 7, method: "tools/call" });
    const unended = JSON.stringify(call(8, "get_block", { pad })).slice(0, -2); // cut before its end, no newline
    const piped = await pipe(`${late_id}\n${JSON.stringify(call(9, "get_block"))}\n${unended}`, {
      BURSAR_URL: server.url,
      BURSAR_AGENT_TOKEN: agent.token,
    });
    expect(piped.code).toBe(0);
    // The cut-off line's start does hold its id, so it is answered with it.
    expect(piped.ids.sort()).toEqual([8, 9, null].sort());
    expect(piped.stderr).not.toContain("ReadBuffer");
  });

  it.skipIf(!existsSync("/proc/self/status"))("keeps memory bounded on a 256 MiB line: its bytes past the limit are dropped, not buffered", async () => {
    const child = spawn(process.execPath, [bursar_bin, "mcp-stdio"], {
      env: { ...process.env, BURSAR_URL: "http://127.0.0.1:1", BURSAR_AGENT_TOKEN: "bsr_agent_x" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    const listeners = new Set<() => void>();
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      for (const listener of listeners) listener();
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    // Waits end when the bridge exits: it used to die at 4 MiB, leaving the test waiting for drain.
    const gone = exited.then((code) => Promise.reject(new Error(`the bridge exited ${code}`)));
    gone.catch(() => undefined);
    const answered = (id: number) => {
      const answer = new Promise<void>((resolve) => {
        const check = () => stdout.includes(`"id":${id},`) && resolve();
        listeners.add(check);
        check();
      });
      return Promise.race([gone, answer]);
    };
    const peak_kib = () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1]);
    const write = async (text: string) => {
      if (!child.stdin.write(text)) await Promise.race([gone, new Promise((resolve) => child.stdin.once("drain", resolve))]);
    };
    child.stdin.on("error", () => undefined);
    try {
      await write(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })}\n`);
      await answered(1);
      const before_kib = peak_kib();
      const line_mib = 256;
      await write('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"pad":"');
      const mebibyte = "x".repeat(1024 * 1024);
      for (let written = 0; written < line_mib; written++) await write(mebibyte);
      await write(`"}}\n${JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" })}\n`);
      await answered(3);
      expect(stdout).toContain('"id":2,"error":{"code":-32600');
      // Buffering the line would grow the peak by its 256 MiB; garbage not yet collected adds ~40.
      expect((peak_kib() - before_kib) / 1024).toBeLessThan(line_mib / 2);
    } finally {
      child.stdin.end();
      if ((await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve("running"), 5_000))])) === "running") child.kill("SIGKILL");
    }
  });

  describe("the gate received the money call but the connection broke before its answer", () => {
    let proxy: Server;
    let proxy_url = "";
    const sockets = new Set<Socket>();
    beforeAll(async () => {
      const gate = new URL(server.url);
      proxy = createServer((client) => {
        sockets.add(client);
        const upstream = createConnection({ host: gate.hostname, port: Number(gate.port) });
        sockets.add(upstream);
        client.pipe(upstream);
        // The gate has executed the call once its answer starts: cut the client off there.
        upstream.once("data", () => {
          client.destroy();
          upstream.destroy();
        });
        client.on("error", () => undefined);
        upstream.on("error", () => undefined);
      });
      await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
      const address = proxy.address();
      proxy_url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    });
    afterAll(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    });

    it("does not tell the agent the gate was unreachable when the order was in fact created", async () => {
      const agent = await server.agent("reset-mid-call");
      const piped = await pipe(`${JSON.stringify(call(1, "create_order", { amount: 5_000, currency: "INR" }))}\n`, {
        BURSAR_URL: proxy_url,
        BURSAR_AGENT_TOKEN: agent.token,
      });
      // The gate did take the call: the money is held for an order.
      const block = await server.started.bursar.ledger.getBlock(agent.block_id);
      expect(block.held).toBe(5_000);
      const answer = JSON.parse(piped.stdout.trim()) as { id: number; error?: { message: string } };
      expect(answer.id).toBe(1);
      // It was "cannot reach the gate … is `bursar serve` running?", inviting a retry under a new key.
      expect(answer.error?.message).not.toMatch(/cannot reach the gate/);
      expect(answer.error?.message).toMatch(/broke before its answer .*repeat it with the same idempotency_key/);
    });
  });
});

it("stops cleanly (exit 0, a line on stderr) when its stdin is reset, instead of dying of an unhandled error", async () => {
  ensureBuilt();
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const client = connect((server.address() as { port: number }).port, "127.0.0.1");
  await new Promise((resolve) => client.once("connect", resolve));
  const peer = await accepted;
  const child = spawn(process.execPath, [bursar_bin, "mcp-stdio"], {
    env: { ...process.env, BURSAR_URL: "http://127.0.0.1:1", BURSAR_AGENT_TOKEN: "bsr_agent_x" },
    stdio: [client, "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  // Once the bridge has answered a request (the gate is unreachable: an error), it is reading stdin.
  const answered = new Promise((resolve) => child.stdout.once("data", resolve));
  peer.write(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })}\n`);
  await answered;
  client.destroy();
  peer.resetAndDestroy();
  server.close();
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  const code = await exited;
  clearTimeout(timer);
  expect(stderr).not.toMatch(/Unhandled 'error' event/);
  expect(stderr).toContain("stdin failed");
  expect(code).toBe(0);
});

describe("a warning's text on one line", () => {
  it("writes C0 and C1 controls, DEL and U+2028/U+2029 as JSON escapes, and leaves the rest alone", () => {
    expect(oneLine("a\nb\rc\td\u0000e\u001bf\u007fg\u0085h\u009fi\u2028j\u2029k")).toBe(
      "a\\nb\\rc\\td\\u0000e\\u001bf\\u007fg\\u0085h\\u009fi\\u2028j\\u2029k",
    );
    expect(oneLine('plain "text" \\ é ₹ 😀')).toBe('plain "text" \\ é ₹ 😀');
  });
});

describe("the id an over-long line is answered with, read from its first bytes", () => {
  it.each([
    ['{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":', 7],
    ['{ "method" : "tools/call", "id" : "abc-1", "params":', "abc-1"],
    ['{"jsonrpc":"2.0","id":0,"method":"x","params":', 0],
    ['{"jsonrpc":"2.0","id":7,"result":{"content":', null], // a response: not ours to answer as a request
    ['{"params":{"pad":"…"},"id":7,"method":"tools/call"', null], // the id comes after the big member
    ['[{"jsonrpc":"2.0","id":1,"method":"x",', null], // a batch
    ['{"jsonrpc":"2.0","id":01,"method":"x",', null], // not a JSON number
    ['{"jsonrpc":"2.0","id":1.5,"method":"x",', null],
    ['{"jsonrpc":"2.0","id":"a\\"b","method":"x",', null], // an escape: not read cheaply
    ["not json at all", null],
  ] as const)("%s → %s", (start, id) => {
    expect(leadingRequestId(start)).toBe(id);
  });
});
