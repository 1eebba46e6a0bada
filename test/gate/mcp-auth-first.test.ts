// POST /mcp checks the Origin and the agent token before it reads the body: a caller without a
// token cannot make the gate buffer and parse up to 1 MiB of JSON. It checks them again once the
// body has arrived, so an agent disabled meanwhile gets nothing through. After such a refusal a
// keep-alive connection stays usable (Node discards the unread body before the next request),
// unless the body is chunked or declared over the limit: then the gate closes the connection.

import { Agent, request as httpRequest, type IncomingMessage } from "node:http";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { body_limit_default_bytes } from "../../src/server/app.js";
import { RawConnection } from "../support/raw-connection.js";
import { operator_token, testServer, type TestServer } from "../support/server.js";

let server: TestServer;

beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

const tools_list = JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list" });

const mcp_headers = (token?: string): Record<string, string> => ({
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  ...(token ? { authorization: `Bearer ${token}` } : {}),
});

interface Answer {
  status: number;
  headers: IncomingMessage["headers"];
  text: string;
  reused_socket: boolean;
}

/** POSTs to /mcp over node:http (through `agent` when given) and reads the whole answer. */
function post(headers: Record<string, string>, body: string, agent?: Agent): Promise<Answer> {
  return postBytes(headers, Buffer.from(body, "utf8"), agent);
}

function postBytes(headers: Record<string, string>, body: Buffer, agent?: Agent): Promise<Answer> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: "/mcp", method: "POST", headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8"), reused_socket: req.reusedSocket }),
      );
    });
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Sends a POST's headers (and `first_chunk`, if given) on a keep-alive connection but never the
 * rest of its body, and answers the response's status and Connection header. (That the gate then
 * closes such a connection, test/server/unread-body.test.ts shows on raw sockets: Node's client
 * closes its own side after "Connection: close" whatever the server does.)
 */
function refusedBeforeBody(headers: Record<string, string>, first_chunk?: string): Promise<{ status: number; connection: string | undefined }> {
  const url = new URL(server.url);
  const agent = new Agent({ keepAlive: true });
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: "/mcp", method: "POST", headers, agent });
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => {
        resolve({ status: res.statusCode ?? 0, connection: res.headers.connection });
        agent.destroy();
      });
    });
    req.on("error", (error) => (req.destroyed ? undefined : reject(error)));
    req.flushHeaders();
    if (first_chunk !== undefined) req.write(first_chunk);
  });
}

/**
 * Sends `req`'s headers and resolves once the gate (in this process) reads its body: once a
 * listener takes its data, which happens only after the request's onRequest hooks let it pass.
 */
async function bodyAwaited(req: ReturnType<typeof httpRequest>): Promise<void> {
  const http_server = server.started.app.server;
  const arrived = new Promise<IncomingMessage>((resolve) => {
    const seen = (message: IncomingMessage) => {
      if (message.url !== "/mcp") return;
      http_server.off("request", seen);
      resolve(message);
    };
    http_server.on("request", seen);
  });
  req.flushHeaders();
  const message = await arrived;
  const deadline = Date.now() + body_awaited_timeout_ms;
  while (message.listenerCount("data") === 0) {
    if (Date.now() > deadline) throw new Error(`the gate did not read the request's body within ${body_awaited_timeout_ms} ms`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const body_awaited_timeout_ms = 10_000;

/** Not JSON at all: the route would answer 400 and JSON-RPC -32700 if the parser ever saw it. */
const not_json = "this is { not json";

describe("POST /mcp authenticates before it reads the body", () => {
  it("answers 401 with WWW-Authenticate: Bearer to a body that is not JSON and no token (the parser's 400 would mean it was parsed first)", async () => {
    for (const token of [undefined, "bsr_agent_forged"]) {
      const answer = await post(mcp_headers(token), not_json);
      expect({ token, status: answer.status, www_authenticate: answer.headers["www-authenticate"] }).toEqual({ token, status: 401, www_authenticate: "Bearer" });
      expect(JSON.parse(answer.text)).toEqual({ error: { code: "unauthorized", message: token ? "the agent token is not valid" : "an agent bearer token is required" } });
    }
  });

  it("answers 401, not 415, to a caller without a token whatever the content type", async () => {
    // No parser takes application/xml: finding none (415) means the body was about to be read.
    const xml = await post({ ...mcp_headers(), "content-type": "application/xml" }, "<not-json/>");
    expect(xml.status).toBe(401);
  });

  it("answers 403 to a foreign Origin sent after 2,500 other header lines (Node dropped it unseen, and none read as allowed)", async () => {
    const agent = await server.agent("auth-first-origin-late");
    const connection = await RawConnection.open(server.url);
    try {
      const head = `POST /mcp HTTP/1.1\ncontent-type: application/json\naccept: application/json, text/event-stream\nauthorization: Bearer ${agent.token}`;
      connection.writeHead(`${head}\n${"a:\n".repeat(2_500)}origin: https://evil.example\ncontent-length: ${not_json.length}`);
      connection.write(not_json);
      const answer = await connection.response();
      expect({ status: answer.status, body: JSON.parse(answer.body) as unknown }).toEqual({
        status: 403,
        body: { error: { code: "origin_forbidden", message: "this Origin may not call the gate" } },
      });
    } finally {
      connection.destroy();
    }
  });

  it("answers 403 to a foreign Origin with a valid token, and to the operator token, before parsing the body", async () => {
    const agent = await server.agent("auth-first-origin");
    const foreign = await post({ ...mcp_headers(agent.token), origin: "https://evil.example" }, not_json);
    expect(foreign.status).toBe(403);
    expect(JSON.parse(foreign.text)).toEqual({ error: { code: "origin_forbidden", message: "this Origin may not call the gate" } });
    const operator = await post(mcp_headers(operator_token), not_json);
    expect(operator.status).toBe(403);
    expect(JSON.parse(operator.text)).toEqual({ error: { code: "forbidden", message: "the operator token cannot call money tools; use an agent token" } });
    // An auditor's token too is a valid credential of another principal (from a review: it was 401).
    const auditor = await server.api<{ token: string }>("POST", "/api/v1/auditor-tokens", { name: "auth-first auditor" });
    const audited = await post(mcp_headers(auditor.body.token), not_json);
    expect(audited.status).toBe(403);
    expect(JSON.parse(audited.text)).toEqual({ error: { code: "forbidden", message: "an auditor token cannot use money tools: it reads the log's entries and proofs only" } });
  });

  it("answers 401 before the declared body has arrived, and keeps the connection for a body declared within the limit", async () => {
    // Headers only: had the gate waited for the body it would never answer (the test times out).
    const answer = await refusedBeforeBody({ ...mcp_headers(), "content-length": String(body_limit_default_bytes) });
    expect(answer).toMatchObject({ status: 401, connection: "keep-alive" });
  }, 10_000);

  it("answers 401 and closes the connection to a body declared over the limit or of no declared length (Node would discard it for as long as it came)", async () => {
    const over_limit = await refusedBeforeBody({ ...mcp_headers(), "content-length": String(body_limit_default_bytes + 1) });
    expect(over_limit).toMatchObject({ status: 401, connection: "close" });
    const chunked = await refusedBeforeBody({ ...mcp_headers(), "transfer-encoding": "chunked" }, "{");
    expect(chunked).toMatchObject({ status: 401, connection: "close" });
  }, 10_000);

  it("checks the token again once the body has arrived: an agent disabled while its body was on the way is refused, and nothing is held", async () => {
    const agent = await server.agent("auth-first-disabled-meanwhile");
    const call = JSON.stringify({
      jsonrpc: "2.0",
      id: 9,
      method: "tools/call",
      params: { name: "create_order", arguments: { amount: 5_000, currency: "INR", idempotency_key: "sent-before-disable" } },
    });
    const url = new URL(server.url);
    const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpRequest(
        { host: url.hostname, port: url.port, path: "/mcp", method: "POST", headers: { ...mcp_headers(agent.token), "content-length": String(Buffer.byteLength(call)) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        },
      );
      req.on("error", reject);
      // The headers (and the valid token) go now; the body only once the gate, having let them
      // through, waits for it (it reads the body only past its onRequest hooks), and the agent
      // has been disabled.
      void bodyAwaited(req).then(async () => {
        const disabled = await server.api("POST", `/api/v1/agents/${agent.agent_id}/disable`);
        expect(disabled.status).toBe(200);
        req.end(call);
      }).catch(reject);
    });
    const answer = await answered;
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.text)).toEqual({ error: { code: "unauthorized", message: "the agent token is not valid" } });
    const block = await server.api<{ held: number; spent: number }>("GET", `/api/v1/blocks/${agent.block_id}`);
    expect(block.body).toMatchObject({ held: 0, spent: 0 });
  });

  it("still parses the body of an authenticated agent: invalid JSON is a 400 (JSON-RPC -32700) and tools/list answers", async () => {
    const agent = await server.agent("auth-first-agent");
    const malformed = await post(mcp_headers(agent.token), not_json);
    expect(malformed.status).toBe(400);
    expect(JSON.parse(malformed.text)).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
    const listed = await post(mcp_headers(agent.token), tools_list);
    expect(listed.status).toBe(200);
    expect(JSON.parse(listed.text)).toMatchObject({ jsonrpc: "2.0", id: 7, result: { tools: expect.arrayContaining([expect.objectContaining({ name: "create_order" })]) } });
  });

  it("answers 415 with Accept-Encoding: identity to a compressed body, before reading it (it is not malformed JSON), and takes identity", async () => {
    const agent = await server.agent("auth-first-encoded");
    for (const coding of ["gzip", "GZIP", "br"]) {
      const req = httpRequest({ host: new URL(server.url).hostname, port: new URL(server.url).port, path: "/mcp", method: "POST", headers: { ...mcp_headers(agent.token), "content-encoding": coding } });
      const answered = new Promise<IncomingMessage>((resolve, reject) => {
        req.on("response", resolve);
        req.on("error", reject);
      });
      req.flushHeaders();
      // Answered while the body has not been sent at all.
      const response = await answered;
      const text = await new Promise<string>((resolve) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      });
      req.destroy();
      expect({ coding, status: response.statusCode, accept_encoding: response.headers["accept-encoding"], code: (JSON.parse(text) as { error: { code: string } }).error.code }).toEqual({
        coding,
        status: 415,
        accept_encoding: "identity",
        code: "unsupported_media_type",
      });
    }
    // Sent whole, on a kept-alive connection that then answers the next request.
    const keep = new Agent({ keepAlive: true });
    const whole = await postBytes({ ...mcp_headers(agent.token), "content-encoding": "gzip" }, gzipSync(tools_list), keep);
    const next = await post(mcp_headers(agent.token), tools_list, keep);
    keep.destroy();
    expect({ whole: whole.status, next: next.status, reused: next.reused_socket }).toEqual({ whole: 415, next: 200, reused: true });
    const identity = await post({ ...mcp_headers(agent.token), "content-encoding": "identity" }, tools_list);
    expect(identity.status).toBe(200);
  });
});

describe("GET and DELETE /mcp", () => {
  it("answer 405 with Allow: POST without a token too: only the POST route authenticates", async () => {
    for (const method of ["GET", "DELETE"]) {
      const response = await fetch(`${server.url}/mcp`, { method, headers: { origin: "https://evil.example" } });
      expect({ method, status: response.status, allow: response.headers.get("allow") }).toEqual({ method, status: 405, allow: "POST" });
    }
  });
});

describe("keep-alive after a refusal with an unread body", () => {
  it("answers the next request on the same connection after a 401 or 403 to a body of exactly the limit (1 MiB)", async () => {
    const agent = await server.agent("auth-first-keepalive");
    const connection = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // Valid JSON of exactly the body limit: the most a caller without a token could make the gate parse.
      const envelope = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { padding: "" } });
      const large = envelope.replace('"padding":""', `"padding":"${"x".repeat(body_limit_default_bytes - envelope.length)}"`);
      expect(large.length).toBe(body_limit_default_bytes);
      for (const token of [undefined, "bsr_agent_forged"]) {
        const refused = await post(mcp_headers(token), large, connection);
        expect({ token, status: refused.status }).toEqual({ token, status: 401 });
        // Had the unread body been left on the wire, its bytes would be read as the next request
        // line (a 400 from Node's parser and a closed connection), not answered as tools/list.
        const next = await post(mcp_headers(agent.token), tools_list, connection);
        expect({ token, status: next.status, reused_socket: next.reused_socket }).toEqual({ token, status: 200, reused_socket: true });
        expect(JSON.parse(next.text)).toMatchObject({ jsonrpc: "2.0", id: 7, result: { tools: expect.any(Array) } });
      }
      const foreign = await post({ ...mcp_headers(agent.token), origin: "https://evil.example" }, large, connection);
      expect(foreign.status).toBe(403);
      const after_foreign = await post(mcp_headers(agent.token), tools_list, connection);
      expect({ status: after_foreign.status, reused_socket: after_foreign.reused_socket }).toEqual({ status: 200, reused_socket: true });
    } finally {
      connection.destroy();
    }
  });

  it("keeps fetch's (undici's) connection open and answering after a 401 to a body it never read", async () => {
    const agent = await server.agent("auth-first-fetch");
    // fetch cannot say which connection it used, and its pool takes turns between the ones it
    // has open: the server sees each request's client port, and whether its connection closes.
    const ports: Array<number | undefined> = [];
    const closed: Array<number | undefined> = [];
    const seen = (request: IncomingMessage) => {
      const port = request.socket.remotePort;
      ports.push(port);
      request.socket.once("close", () => closed.push(port));
    };
    const http_server = server.started.app.server;
    http_server.on("request", seen);
    try {
      const refused = await fetch(`${server.url}/mcp`, { method: "POST", headers: mcp_headers(), body: "x".repeat(body_limit_default_bytes) });
      expect(refused.status).toBe(401);
      expect(await refused.json()).toEqual({ error: { code: "unauthorized", message: "an agent bearer token is required" } });
      for (let round = 0; round < 3; round++) {
        const next = await fetch(`${server.url}/mcp`, { method: "POST", headers: mcp_headers(agent.token), body: tools_list });
        expect({ round, status: next.status }).toEqual({ round, status: 200 });
        expect(await next.json()).toMatchObject({ jsonrpc: "2.0", id: 7, result: { tools: expect.any(Array) } });
      }
    } finally {
      http_server.off("request", seen);
    }
    expect(ports).toHaveLength(4);
    expect(ports.slice(1)).toContain(ports[0]);
    expect(closed).toEqual([]);
  });
});
