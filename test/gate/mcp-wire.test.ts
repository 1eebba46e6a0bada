// /mcp over real HTTP with bodies an SDK client would never send: argument shapes and tools/call
// envelopes the SDK's schema and Fastify's JSON parser used to stop before the policy (so no rule
// and no evidence), messages that are not JSON-RPC or not JSON, and the Origin check against a
// DNS-rebinding page.

import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shortened } from "../../src/policy/text.js";
import { decisionBody } from "../support/inprocess.js";
import { rawMcpPost, rawToolCall, testServer, type TestServer } from "../support/server.js";

type Structured = Record<string, unknown>;
let server: TestServer;

beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

const mcp_headers = (token: string) => ({
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  authorization: `Bearer ${token}`,
});

/** Log size: every money decision appends one entry. */
async function treeSize(): Promise<number> {
  const answer = await server.api<{ tree_size: number }>("GET", "/api/v1/log/entries?start=0&end=0");
  return answer.body.tree_size;
}

describe("argument shapes that never reach the policy (DESIGN: any argument shape reaches the policy, refused under R0 with evidence)", () => {
  it("a money call whose arguments carry a \"__proto__\" or \"constructor\" key gets a rule and an evidence entry, not HTTP 400", async () => {
    const agent = await server.agent("proto-smuggler");
    for (const args of [
      '{"amount": 5000, "currency": "INR", "__proto__": {"transfers": [{"account": "acc_x", "amount": 5000}]}}',
      '{"amount": 5000, "currency": "INR", "constructor": {"prototype": {"partial_payment": true}}}',
    ]) {
      const before = await treeSize();
      const answer = await rawToolCall(server.url, agent.token, "create_order", args);
      // Fastify's default parser answered 400 ("not valid JSON") and nothing was logged.
      expect({ args, status: answer.status, body: answer.text.slice(0, 160) }).toMatchObject({ args, status: 200 });
      const result = (JSON.parse(answer.text) as { result: { isError?: boolean; structuredContent: Structured } }).result;
      expect(result.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0", evidence: { seq: expect.any(Number) } });
      expect(await treeSize()).toBe(before + 1);
    }
  });

  it("a \"__proto__\" note (kept as data by providerNotes) reaches the gate over /mcp", async () => {
    const agent = await server.agent("proto-note");
    const answer = await rawToolCall(server.url, agent.token, "create_order", '{"amount": 5000, "currency": "INR", "notes": {"__proto__": "x"}}');
    expect({ status: answer.status, body: answer.text.slice(0, 160) }).toMatchObject({ status: 200 });
    const result = (JSON.parse(answer.text) as { result: { structuredContent: Structured } }).result;
    expect(result.structuredContent).toMatchObject({ effect: expect.any(String), evidence: { seq: expect.any(Number) } });
  });

  it("a money call whose arguments are not an object is refused under R0 with evidence, not a JSON-RPC -32603", async () => {
    const agent = await server.agent("positional");
    for (const args of ['[5000, "INR"]', '"amount=5000 currency=INR"', "null"]) {
      const before = await treeSize();
      const answer = await rawToolCall(server.url, agent.token, "create_order", args);
      expect(answer.status).toBe(200);
      const body = JSON.parse(answer.text) as { result?: { structuredContent: Structured }; error?: { code: number; message: string } };
      // The SDK's schema answered a JSON-RPC error ("expected record") and nothing was logged.
      expect({ args, error: body.error?.code }).toEqual({ args, error: undefined });
      expect(body.result?.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0", evidence: { seq: expect.any(Number) } });
      expect(await treeSize()).toBe(before + 1);
    }
  });
});

interface ToolCallAnswer {
  result?: { isError?: boolean; structuredContent: Structured };
  error?: { code: number; message: string };
}

/** POSTs a tools/call whose params are the raw JSON text given; answers the JSON-RPC reply. */
async function toolCallWithParams(token: string, params_json: string | undefined): Promise<{ status: number; body: ToolCallAnswer }> {
  const params = params_json === undefined ? "" : `,"params":${params_json}`;
  const answer = await rawMcpPost(server.url, token, `{"jsonrpc":"2.0","id":1,"method":"tools/call"${params}}`);
  return { status: answer.status, body: JSON.parse(answer.text) as ToolCallAnswer };
}

const order_arguments = '{"amount": 5000, "currency": "INR"}';

describe("tools/call envelopes the SDK refused before the gate (DESIGN: every money call reaches the policy and counts toward R6)", () => {
  it("a money call carrying params.task or a malformed params._meta is decided by the policy as if they were absent, with evidence", async () => {
    const agent = await server.agent("odd-envelope");
    // The SDK answered -32603 "Server does not support task creation" (MCP 2025-11-25: a server
    // without task support MUST process the request normally), or a schema error (-32603, or
    // 400 -32700 for a bad _meta), before any handler ran: no decision, no evidence.
    const extras = ['"task": {"ttl": 60000}', '"task": "soon"', '"_meta": "x"', '"_meta": {"progressToken": {}}', '"_meta": {"io.modelcontextprotocol/related-task": "t"}'];
    for (const [index, extra] of extras.entries()) {
      const key = `odd-envelope-${index}`;
      const before = await treeSize();
      const answer = await toolCallWithParams(agent.token, `{"name": "create_order", "arguments": {"amount": 5000, "currency": "INR", "idempotency_key": "${key}"}, ${extra}}`);
      expect({ extra, status: answer.status, error: answer.body.error }).toEqual({ extra, status: 200, error: undefined });
      const result = answer.body.result!;
      expect(result.structuredContent).toMatchObject({ effect: "ALLOW", order: { amount: 5000 }, evidence: { seq: expect.any(Number) } });
      const decision = await decisionBody(server.started.bursar, result);
      expect(decision.body).toMatchObject({ tool: "create_order", args: { amount: 5000, idempotency_key: key } });
      expect(await treeSize()).toBeGreaterThan(before);
    }
  });

  it("a tools/call whose name is missing or not a string, or whose params are not an object, is refused under ALLOWLIST with evidence of what was sent", async () => {
    const agent = await server.agent("nameless");
    // [params as sent, the tool name the evidence records, the arguments it records]
    const cases: Array<[string | undefined, string, unknown]> = [
      [`{"name": 5, "arguments": ${order_arguments}}`, "5", { amount: 5000, currency: "INR" }],
      [`{"name": null, "arguments": ${order_arguments}}`, "null", { amount: 5000, currency: "INR" }],
      [`{"name": ["create_order"], "arguments": ${order_arguments}}`, '["create_order"]', { amount: 5000, currency: "INR" }],
      [`{"name": {"tool": "create_order"}, "arguments": ${order_arguments}}`, '{"tool":"create_order"}', { amount: 5000, currency: "INR" }],
      // Unread, as arguments of that size are: written out, 90,000 members took ~0.3 s of the thread.
      [`{"name": {${Array.from({ length: 1_001 }, (_, i) => `"k${i}": 0`).join(", ")}}, "arguments": ${order_arguments}}`, "[name not read: more than 1000 values]", { amount: 5000, currency: "INR" }],
      [`{"arguments": ${order_arguments}}`, "", { amount: 5000, currency: "INR" }],
      ['"create_order"', "", "create_order"],
      [`["create_order", ${order_arguments}]`, "", ["create_order", { amount: 5000, currency: "INR" }]],
      ["null", "", {}],
      [undefined, "", {}],
    ];
    for (const [params, tool, args] of cases) {
      const before = await treeSize();
      const answer = await toolCallWithParams(agent.token, params);
      // The SDK answered a JSON-RPC error (-32603 with its schema's text, or 400 -32700 with id null).
      expect({ params, status: answer.status, error: answer.body.error }).toEqual({ params, status: 200, error: undefined });
      const result = answer.body.result!;
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({
        effect: "BLOCK",
        rule: "ALLOWLIST",
        reason: expect.any(String),
        evidence: { seq: expect.any(Number), leaf_hash: expect.stringMatching(/^[0-9a-f]{64}$/), receipt: expect.anything() },
      });
      expect((await decisionBody(server.started.bursar, result)).body).toMatchObject({ tool, args, verdict: { effect: "BLOCK", rule: "ALLOWLIST" } });
      expect(await treeSize()).toBe(before + 1);
    }
  });

  it("such calls count toward the velocity limit (R6) like every call that reaches the policy", async () => {
    const agent = await server.agent("odd-velocity", { velocity: { max_calls: 2, window_seconds: 60 } });
    for (const params of ['"create_order"', `{"name": 5, "arguments": ${order_arguments}}`]) {
      expect((await toolCallWithParams(agent.token, params)).body.result?.structuredContent).toMatchObject({ rule: "ALLOWLIST" });
    }
    const third = await rawToolCall(server.url, agent.token, "create_order", order_arguments);
    expect((JSON.parse(third.text) as ToolCallAnswer).result?.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R6" });
  });
});

describe("bodies that are not a JSON-RPC message (answered as the stdio bridge answers them)", () => {
  it("answers valid JSON that is not a valid JSON-RPC message with 400 and -32600 for the message's own id, and runs nothing", async () => {
    const agent = await server.agent("not-json-rpc");
    const size = await treeSize();
    // [body, the id answered, what the message says is wrong]: the SDK answered every one -32700
    // "Parse error" with id null; its schema's own words for most were "(message): Invalid input".
    const cases: Array<[string, string | number | null, string]> = [
      [`{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "create_order", "arguments": ${order_arguments}}, "trace": "abc"}`, 9, 'unknown member "trace"'],
      ['{"jsonrpc": "1.0", "id": "abc", "method": "tools/list"}', "abc", 'jsonrpc must be "2.0", got "1.0"'],
      ['{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": "all"}', 7, "params"],
      ['{"jsonrpc": "2.0", "id": 4.5, "method": "ping"}', 4.5, "id must be a string or an integer"],
      ['{"jsonrpc": "2.0", "id": true, "method": "ping"}', null, "id must be a string or an integer"],
      ['{"method": "ping"}', null, 'jsonrpc must be "2.0", got nothing'],
      // Shown by its kind, never written out: nested 400,000 deep it overflowed the stack (a 500);
      // 60,000 deep is as deep as the body limit lets a message nest.
      [`{"jsonrpc": ${"[".repeat(60_000)}${"]".repeat(60_000)}, "id": 1, "method": "x"}`, 1, 'jsonrpc must be "2.0", got an array'],
      [`{"jsonrpc": "${"2".repeat(1_000)}", "id": 2, "method": "x"}`, 2, `jsonrpc must be "2.0", got "${"2".repeat(63)}…`],
      ['{"jsonrpc": "2.0", "id": 3}', 3, "a message needs a method"],
      // A notification: the SDK answered 202 and nothing decided or recorded the call.
      [`{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "create_order", "arguments": ${order_arguments}}}`, null, "a tools/call is a request and needs an id"],
      // 1 MiB of bad icons took the SDK 6–8 s to answer, with every schema issue: 120 MB.
      [`{"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1", "icons": [${Array(1_000).fill(0).join(",")}]}}}`, 9, "it holds more than 1000 values"],
      // Nested 400,000 deep, a response overflowed the SDK's stack: -32700, id null, "RangeError: …".
      [`{"jsonrpc": "2.0", "id": 8, "result": {"a": ${"[".repeat(60_000)}${"]".repeat(60_000)}}}`, 8, "it nests objects and arrays more than 64 deep"],
      [`{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": ${"[".repeat(63)}${"]".repeat(63)}}}`, null, "it nests objects and arrays more than 64 deep"],
      ["42", null, "a message is a JSON object"],
    ];
    for (const [body, id, says] of cases) {
      const answer = await rawMcpPost(server.url, agent.token, body);
      expect({ body: shortened(body), status: answer.status, reply: JSON.parse(answer.text) as unknown }).toEqual({
        body: shortened(body),
        status: 400,
        reply: { jsonrpc: "2.0", id, error: { code: -32600, message: expect.stringContaining(`not a valid JSON-RPC message: ${says}`) } },
      });
    }
    expect(await treeSize()).toBe(size);
  });

  it("takes a message nested exactly 64 deep (the limit for messages other than tools/call)", async () => {
    const agent = await server.agent("deep-enough");
    // The message, its params and 62 arrays: 64 levels.
    const body = `{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"a": ${"[".repeat(62)}${"]".repeat(62)}}}`;
    const answer = await rawMcpPost(server.url, agent.token, body);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toMatchObject({ id: 6, result: { tools: expect.any(Array) } });
  });

  it("answers a body that is not JSON with 400 and -32700, id null, and reads a body that starts with a UTF-8 BOM", async () => {
    const agent = await server.agent("not-json");
    for (const body of ["this is { not json", "", '{"jsonrpc": "2.0", "id": 3,']) {
      const answer = await rawMcpPost(server.url, agent.token, body);
      expect({ body, status: answer.status, reply: JSON.parse(answer.text) as unknown }).toEqual({
        body,
        status: 400,
        reply: { jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringContaining("not valid JSON") } },
      });
    }
    const bom = await rawMcpPost(server.url, agent.token, `\uFEFF${JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/list" })}`);
    expect(bom.status).toBe(200);
    expect(JSON.parse(bom.text)).toMatchObject({ id: 5, result: { tools: expect.arrayContaining([expect.objectContaining({ name: "create_order" })]) } });
  });

  it("refuses a body that writes a key twice in one object with 400 and -32700, naming the key: nothing is decided, held or recorded", async () => {
    // JSON.parse keeps the last amount, a gateway or observer in front may read the first: the
    // two would disagree on what the call spent.
    const agent = await server.agent("key-twice");
    const before = await treeSize();
    for (const [body, path] of [
      ['{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "create_order", "arguments": {"amount": 100, "currency": "INR", "amount": 90000}}}', "params.arguments.amount"],
      ['{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "get_block", "arguments": {}}, "method": "tools/list"}', "method"],
      ['{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "create_order", "arguments": {"amount": 100, "currency": "INR", "\u0061mount": 100}}}', "params.arguments.amount"],
    ]) {
      const answer = await rawMcpPost(server.url, agent.token, body!);
      expect({ status: answer.status, reply: JSON.parse(answer.text) as unknown }).toEqual({
        status: 400,
        reply: { jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringContaining(`writes the key ${path!} twice`) } },
      });
    }
    expect(await treeSize()).toBe(before);
    expect(await server.started.bursar.ledger.getBlock(agent.block_id)).toMatchObject({ held: 0, spent: 0 });
  });
});

describe("numbers JSON.parse reads as others", () => {
  it("refuses a body holding one with 400 and -32700 naming its place, and takes the exact forms of an integer", async () => {
    // A reader in front that keeps decimals exactly would see a non-integer amount, or another note.
    const agent = await server.agent("inexact-number");
    const before = await treeSize();
    const call = (id: number, args: string) => `{"jsonrpc": "2.0", "id": ${id}, "method": "tools/call", "params": {"name": "create_order", "arguments": ${args}}}`;
    for (const [id, args, path] of [
      [11, '{"amount": 99.99999999999999999, "currency": "INR"}', "params.arguments.amount"],
      // 17 digits, but not a double's own: they read as 100.
      [16, '{"amount": 99.999999999999999, "currency": "INR"}', "params.arguments.amount"],
      [12, '{"amount": 1000, "currency": "INR", "notes": {"sku": 12345678901234567891}}', "params.arguments.notes.sku"],
    ] as const) {
      const answer = await rawMcpPost(server.url, agent.token, call(id, args));
      expect({ status: answer.status, reply: JSON.parse(answer.text) as unknown }).toEqual({
        status: 400,
        reply: { jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringContaining(`writes the number at ${path} with digits no double holds`) } },
      });
    }
    expect(await treeSize()).toBe(before);
    // 100.0, 1e2 and 0.1e3 are exactly 100: decided as 100. A note as C's %.16g writes 0.07 is taken too.
    for (const [id, amount] of [[13, "100.0"], [14, "1e2"], [15, "0.1e3"]] as const) {
      const answer = await rawMcpPost(server.url, agent.token, call(id, `{"amount": ${amount}, "currency": "INR", "idempotency_key": "exact-${id}", "notes": {"rate": 0.07000000000000001}}`));
      expect(answer.status).toBe(200);
      expect((JSON.parse(answer.text) as { result: { structuredContent: Structured } }).result.structuredContent).toMatchObject({ effect: "ALLOW", order: { amount: 100 } });
    }
  });
});

describe("the /mcp body limit, 128 KiB", () => {
  it("answers a body over 131,072 bytes 413 before reading it: nothing is decided, held or recorded", async () => {
    const agent = await server.agent("big-body");
    const size_before = await treeSize();
    // 200 KB of arguments: a megabyte of such calls, 128 in flight, held the event loop for seconds.
    const padding = "x".repeat(200_000);
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "create_order", arguments: { amount: 700, currency: "INR", receipt: padding } } });
    const answer = await rawMcpPost(server.url, agent.token, body);
    expect({ status: answer.status, body: JSON.parse(answer.text) as unknown }).toEqual({
      status: 413,
      body: { error: { code: "body_too_large", message: "the request body is larger than 131072 bytes", details: { limit: 131_072 } } },
    });
    expect(await treeSize()).toBe(size_before);
    expect((await server.api<Record<string, number>>("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 0 });
  });
});

describe("a body whose bytes are not UTF-8", () => {
  it("is answered 400 and -32700, not read with replacement characters: keys that differ only in bad bytes are never one key", async () => {
    const agent = await server.agent("not-utf8");
    const body = (key_bytes: number[]) =>
      new Uint8Array(
        Buffer.concat([
          Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_order","arguments":{"amount":700,"currency":"INR","idempotency_key":"buy'),
          Buffer.from(key_bytes),
          Buffer.from('"}}}'),
        ]),
      );
    for (const key_bytes of [[0xff], [0xfe], [0xc0], [0xed, 0xa0, 0x80]]) {
      const answer = await rawMcpPost(server.url, agent.token, body(key_bytes));
      expect({ key_bytes, status: answer.status, reply: JSON.parse(answer.text) as unknown }).toEqual({
        key_bytes,
        status: 400,
        reply: { jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringContaining("not UTF-8") } },
      });
    }
    // Nothing was decided, held or sent; the key written as a well-formed U+FFFD is a key of its own.
    expect((await server.api<Record<string, number>>("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 0 });
    const replacement = await rawMcpPost(server.url, agent.token, body([0xef, 0xbf, 0xbd]));
    expect(JSON.parse(replacement.text)).toMatchObject({ id: 1, result: { structuredContent: { effect: "ALLOW" } } });
    expect(JSON.parse(replacement.text).result.structuredContent.replayed).toBeUndefined();
  });
});

describe("Origin validation (docs/clients.md: only loopback origins, which also stops DNS rebinding)", () => {
  /** node:http, because fetch will not let a test set Host. */
  function post(headers: Record<string, string>, body: string): Promise<number> {
    const url = new URL(server.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: url.hostname, port: url.port, path: "/mcp", method: "POST", headers }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  it("refuses a rebinding page: Origin and Host both name the attacker's domain", async () => {
    const agent = await server.agent("rebind");
    const port = new URL(server.url).port;
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    // (A foreign Origin against the loopback Host: test/gate/security.test.ts.) After DNS
    // rebinding the browser sends Host = Origin's host = the attacker's name: a "same host" rule
    // would let it through.
    const status = await post(
      { ...mcp_headers(agent.token), host: `rebind.attacker.example:${port}`, origin: `http://rebind.attacker.example:${port}` },
      body,
    );
    expect(status).toBe(403);
  });

  it("answers a Host that is not a host and optional port with Bursar's 400 malformed, not an empty 400", async () => {
    const agent = await server.agent("odd-host");
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    for (const host of ["127.0.0.1:99999", "[", "x/y", "x\\y", "user@host", "localhost:abc", "x?y", "x#y"]) {
      const answer = await rawHostPost(host, { ...mcp_headers(agent.token) }, body);
      expect({ host, status: answer.status, code: (JSON.parse(answer.text) as { error?: { code: string } }).error?.code }).toEqual({ host, status: 400, code: "malformed" });
    }
    const port = new URL(server.url).port;
    expect((await rawHostPost(`LOCALHOST:${port}`, { ...mcp_headers(agent.token) }, body)).status).toBe(200);
  });

  /** node:http with a Host header as given, and the answer's text. */
  function rawHostPost(host: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
    const url = new URL(server.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: url.hostname, port: url.port, path: "/mcp", method: "POST", headers: { ...headers, host }, setHost: false }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on("error", reject);
      req.end(body);
    });
  }
});

describe("media types (docs/gate.md: a Content-Type other than application/json is 415, -32000)", () => {
  it("answers every other media type as the SDK's transport does, before the body is read, and takes JSON with parameters in any case", async () => {
    const agent = await server.agent("media-types");
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    const size = await treeSize();
    for (const content_type of ["text/plain", "text/plain; a=application/json", "application/xml", "application/x-www-form-urlencoded", "application/json-seq"]) {
      const response = await fetch(`${server.url}/mcp`, { method: "POST", headers: { ...mcp_headers(agent.token), "content-type": content_type }, body });
      expect({ content_type, status: response.status, body: await response.json() }).toEqual({
        content_type,
        status: 415,
        body: { jsonrpc: "2.0", error: { code: -32000, message: "Unsupported Media Type: Content-Type must be application/json" }, id: null },
      });
    }
    // No Content-Type at all, with a body or without one, is answered alike.
    for (const with_body of [true, false]) {
      const headers: Record<string, string> = { ...mcp_headers(agent.token) };
      delete headers["content-type"];
      const response = await fetch(`${server.url}/mcp`, { method: "POST", headers, ...(with_body ? { body: new TextEncoder().encode(body) } : {}) });
      expect({ with_body, status: response.status, body: await response.json() }).toEqual({
        with_body,
        status: 415,
        body: { jsonrpc: "2.0", error: { code: -32000, message: "Unsupported Media Type: Content-Type must be application/json" }, id: null },
      });
    }
    expect(await treeSize()).toBe(size);
    for (const content_type of ["application/json; charset=utf-8", "Application/JSON"]) {
      const response = await fetch(`${server.url}/mcp`, { method: "POST", headers: { ...mcp_headers(agent.token), "content-type": content_type }, body });
      expect({ content_type, status: response.status }).toEqual({ content_type, status: 200 });
      expect(((await response.json()) as { result: { tools: unknown[] } }).result.tools.length).toBeGreaterThan(0);
    }
  });

  it("checks the token first: a caller without one gets 401 whatever it sends", async () => {
    const response = await fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "text/plain", accept: "application/json, text/event-stream" }, body: "x" });
    expect(response.status).toBe(401);
  });
});

describe("methods other than POST (the gate's /mcp is stateless)", () => {
  it("answers GET, DELETE and every other method but POST with 405 and Allow: POST, with or without a JSON content type", async () => {
    const agent = await server.agent("methods");
    for (const method of ["GET", "DELETE", "PUT", "PATCH", "OPTIONS"]) {
      const variants: Array<Record<string, string>> = [{ authorization: `Bearer ${agent.token}` }, { authorization: `Bearer ${agent.token}`, "content-type": "application/json" }];
      for (const headers of variants) {
        const response = await fetch(`${server.url}/mcp`, { method, headers });
        expect({ method, headers, status: response.status, allow: response.headers.get("allow") }).toEqual({ method, headers, status: 405, allow: "POST" });
        expect(((await response.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
      }
    }
  });
});

describe("JSON-RPC batches (MCP 2025-06-18 removed batching)", () => {
  it("refuses a batch of money calls whole with 400 and -32600 before any of it runs", async () => {
    const agent = await server.agent("batcher");
    const size = await treeSize();
    const batch = Array.from({ length: 16 }, (_, index) => ({
      jsonrpc: "2.0",
      id: index,
      method: "tools/call",
      params: { name: "create_order", arguments: { amount: 1_000, currency: "INR", idempotency_key: `batch-${index}` } },
    }));
    const response = await fetch(`${server.url}/mcp`, { method: "POST", headers: mcp_headers(agent.token), body: JSON.stringify(batch) });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining("batches are not supported") } });
    expect(await treeSize()).toBe(size);
    const block = await server.api<{ held: number }>("GET", `/api/v1/blocks/${agent.block_id}`);
    expect(block.body.held).toBe(0);
  });
});
