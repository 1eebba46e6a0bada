// The chained observer with a real SDK MCP server behind it and the SDK client in front:
// bytes, statuses and MCP headers pass untouched; each tools/call becomes one observer.call.

import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canonicalSha256Hex } from "../../src/evidence/index.js";
import { tokenAndRest, upstream_sockets_idle_max } from "../../src/observer/index.js";
import { harness, type Harness } from "../ingest/support.js";
import { gapCalls, LATEST_PROTOCOL_VERSION, observerSource, raw, rawRequest, rawSession, sdkClient, toolCall, type ObserverSourceCreated } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

let h: Harness;
let upstream: Upstream;
let sse: ObserverSourceCreated;

beforeAll(async () => {
  upstream = await startUpstream();
  h = await harness();
  sse = await observerSource(h, `${upstream.url}/mcp`);
});
afterAll(async () => {
  await h.close();
  await upstream.close();
});

async function calls(source_id?: string) {
  await h.evidence.observer.recorder.drain();
  return (await h.entries("observer.call")).filter((stored) => source_id === undefined || stored.entry.source === source_id).map((stored) => stored.entry);
}

describe("byte-for-byte relay", () => {
  for (const path of ["/mcp-json", "/mcp-plain"]) {
    it(`returns ${path === "/mcp-json" ? "JSON" : "SSE"} responses identical to the direct path, status and headers included`, async () => {
      const source = await observerSource(h, `${upstream.url}${path}`);
      const session = await rawSession(`${upstream.url}${path}`);
      const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
      for (const [i, [name, args]] of ([["echo", { text: "héllo ✓" }], ["big", { size: 300_000 }], ["fail", {}], ["rpc_error", {}]] as const).entries()) {
        const direct = await raw(`${upstream.url}${path}`, "POST", headers, toolCall(100 + i, name, args));
        const observed = await raw(source.observer_url, "POST", { ...headers, "x-bursar-observer-token": source.observer_token }, toolCall(100 + i, name, args));
        expect(observed.status).toBe(direct.status);
        expect(observed.bytes.equals(direct.bytes), `${name} body differs`).toBe(true);
        expect(observed.headers.get("content-type")).toBe(direct.headers.get("content-type"));
        expect(observed.headers.get("mcp-session-id")).toBe(session);
      }
      expect((await calls(source.id)).map((entry) => entry.body.tool)).toEqual(["echo", "big", "fail", "rpc_error"]);
    });
  }

  it("preserves DELETE and the status of an ended session", async () => {
    const session = await rawSession(`${upstream.url}/mcp-json`);
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
    expect((await raw(source.observer_url, "DELETE", headers)).status).toBe(200);
    const after = await raw(source.observer_url, "POST", headers, toolCall(5, "echo", {}));
    expect(after.status).toBe(404);
    expect(after.bytes.toString()).toContain("Session not found");
    expect(upstream.seen.filter((seen) => seen.method === "DELETE").at(-1)?.headers["mcp-session-id"]).toBe(session);
  });

  it("accepts the token in the path, forwarding the rest of the path", async () => {
    const source = await observerSource(h, upstream.url);
    const session = await rawSession(`${h.url}/observe/${source.observer_token}/mcp-json`);
    expect(upstream.seen.at(-1)?.path).toBe("/mcp-json");
    expect(session).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("reads the path as the router does: a percent-encoded observe segment (/%6Fbserve) takes the token and the rest as /observe does", async () => {
    const source = await observerSource(h, upstream.url);
    await rawSession(`${h.url}/%6Fbserve/${source.observer_token}/mcp-json`);
    expect(upstream.seen.at(-1)?.path).toBe("/mcp-json");
    await rawSession(`${h.url}/obs%65rve/mcp-json`, { "x-bursar-observer-token": source.observer_token });
    expect(upstream.seen.at(-1)?.path).toBe("/mcp-json");
  });

  it("reads a target in absolute form as its path: the token in it is taken, never forwarded", async () => {
    const source = await observerSource(h, upstream.url);
    const other = await observerSource(h, upstream.url);
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
    const post = (target: string, token?: string) =>
      rawRequest(
        h.url,
        [`POST ${target} HTTP/1.1`, "host: 127.0.0.1", ...(token ? [`x-bursar-observer-token: ${token}`] : []), "content-type: application/json", "accept: application/json, text/event-stream", `content-length: ${body.length}`, "connection: close", "", body].join("\r\n"),
      );
    for (const token of [undefined, source.observer_token]) {
      const before = upstream.seen.length;
      // The upstream's own answer (a ping outside a session), relayed.
      expect(await post(`http://example.test/observe/${source.observer_token}/mcp-json`, token)).toContain("Server not initialized");
      expect(upstream.seen.slice(before).map((seen) => seen.path)).toEqual(["/mcp-json"]);
    }
    const before = upstream.seen.length;
    expect(await post(`http://example.test/observe/${source.observer_token}/mcp-json`, other.observer_token)).toContain("token_conflict");
    expect(upstream.seen.length).toBe(before);
  });

  it("passes over empty and '.' segments before a token in the path, as the upstream URL drops them: the token is never forwarded", async () => {
    const source = await observerSource(h, upstream.url);
    const other = await observerSource(h, upstream.url);
    for (const lead of ["/", "/.", "/%2e", "/./"]) {
      for (const header of [{}, { "x-bursar-observer-token": source.observer_token }] as Array<Record<string, string>>) {
        await rawSession(`${h.url}/observe${lead}/${source.observer_token}/mcp-json`, header);
        expect(upstream.seen.at(-1)?.path, lead).toBe("/mcp-json");
      }
      const conflict = await raw(`${h.url}/observe${lead}/${source.observer_token}/mcp-json`, "POST", { "x-bursar-observer-token": other.observer_token }, toolCall(1, "echo", {}));
      expect(conflict.bytes.toString(), lead).toContain("token_conflict");
    }
    expect(upstream.seen.map((seen) => seen.path).join(" ")).not.toContain("bsr_obs_");
  });

  it("refuses a path that still names an observer token past the token's place, however it is written: the token is never forwarded", async () => {
    const source = await observerSource(h, upstream.url);
    const other = await observerSource(h, upstream.url);
    const before = upstream.seen.length;
    const cases: Array<[string, Record<string, string>]> = [
      [`/observe/x/../${other.observer_token}/mcp-json`, { "x-bursar-observer-token": source.observer_token }],
      [`/observe/x/%2e%2e/${source.observer_token}/mcp-json`, { "x-bursar-observer-token": source.observer_token }],
      [`/observe/x/..%2f${other.observer_token}/mcp-json`, { "x-bursar-observer-token": source.observer_token }],
      [`/observe/${source.observer_token}/x/../${other.observer_token.replace("_obs_", "%5Fobs%5F")}`, {}],
      [`/observe/${source.observer_token}/a%252F${other.observer_token}`, {}],
    ];
    for (const [path, headers] of cases) {
      const answer = await rawPath(h.url, path, headers);
      expect(answer.status, path).toBe(400);
      expect(answer.text, path).toContain("token_in_path");
    }
    expect(upstream.seen.length).toBe(before);
    // A tab or line break, which the URL parser drops from a path (Node's HTTP parser refuses them in a request line).
    expect(() => tokenAndRest(`/observe/${source.observer_token}/x/bsr_\tobs_${"b".repeat(32)}`, undefined)).toThrow(/names an observer token/);
  });

  it("sends a chunked DELETE body framed as chunked: its bytes never reach the upstream as a request of their own", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    const body = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
    const head = `DELETE /observe HTTP/1.1\r\nHost: 127.0.0.1\r\n${"x-bursar-observer-token"}: ${source.observer_token}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`;
    expect(await rawRequest(h.url, head + body)).toMatch(/^HTTP\/1\.1 \d{3}/);
    // Later requests reuse the kept-alive upstream socket the DELETE went on.
    for (let i = 0; i < 3; i++) await raw(source.observer_url, "POST", { "x-bursar-observer-token": source.observer_token }, toolCall(1, "echo", {}));
    expect(upstream.seen.map((seen) => seen.path)).not.toContain("/smuggled");
  });

  for (const method of ["DELETE", "GET", "OPTIONS"]) {
    it(`keeps the Content-Length of a ${method} body when the Connection header lists it: its bytes never reach the upstream as a request of their own`, async () => {
      const source = await observerSource(h, `${upstream.url}/mcp-json`);
      const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
      const head = `${method} /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nx-bursar-observer-token: ${source.observer_token}\r\nConnection: close, content-length\r\nContent-Length: ${smuggled.length}\r\n\r\n`;
      expect(await rawRequest(h.url, head + smuggled)).toMatch(/^HTTP\/1\.1 \d{3}/);
      expect(upstream.seen.at(-1)).toMatchObject({ method, path: "/mcp-json", headers: { "content-length": String(smuggled.length) } });
      for (let i = 0; i < 3; i++) await raw(source.observer_url, "POST", { "x-bursar-observer-token": source.observer_token }, toolCall(1, "echo", {}));
      expect(upstream.seen.map((seen) => seen.path)).not.toContain("/smuggled");
    });
  }

  for (const method of ["POST", "PUT", "PATCH"]) {
    it(`forwards a ${method} sent without framing (no body) without framing, as a direct request carries it`, async () => {
      const source = await observerSource(h, `${upstream.url}/mcp-json`);
      const head = `${method} /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nx-bursar-observer-token: ${source.observer_token}\r\nX-Repeated: a\r\nX-Repeated: b\r\nConnection: close\r\n\r\n`;
      expect(await rawRequest(h.url, head)).toMatch(/^HTTP\/1\.1 \d{3}/);
      const seen = upstream.seen.at(-1)!;
      expect(seen).toMatchObject({ method, path: "/mcp-json", headers: { "x-repeated": "a, b" } });
      expect(seen.headers).not.toHaveProperty("transfer-encoding");
      expect(seen.headers).not.toHaveProperty("content-length");
    });
  }

  for (const method of ["POST", "PUT", "PATCH"]) {
    it(`forwards a ${method} sent without framing (no body) with Expect: 100-continue without framing, as a direct request carries it`, async () => {
      const source = await observerSource(h, `${upstream.url}/mcp-json`);
      const head = `${method} /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nx-bursar-observer-token: ${source.observer_token}\r\nExpect: 100-continue\r\nX-Repeated: a\r\nX-Repeated: b\r\nConnection: close\r\n\r\n`;
      expect(await rawRequest(h.url, head)).toMatch(/^HTTP\/1\.1 \d{3}/);
      const seen = upstream.seen.at(-1)!;
      expect(seen).toMatchObject({ method, path: "/mcp-json", headers: { expect: "100-continue", "x-repeated": "a, b" } });
      expect(seen.headers).not.toHaveProperty("transfer-encoding");
      expect(seen.headers).not.toHaveProperty("content-length");
    });
  }

  it("forwards a request's transfer codings as they came, and records the call of a body whose bytes are UTF-8 JSON under either", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const body = JSON.stringify(toolCall(7, "echo", {}));
    for (const codings of ["gzip, chunked", "chunked"]) {
      const head = `POST /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nx-bursar-observer-token: ${source.observer_token}\r\ncontent-type: application/json\r\nTransfer-Encoding: ${codings}\r\nConnection: close\r\n\r\n`;
      expect(await rawRequest(h.url, `${head}${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`)).toMatch(/^HTTP\/1\.1 \d{3}/);
      expect(upstream.seen.at(-1)).toMatchObject({ method: "POST", path: "/mcp-json", headers: { "transfer-encoding": codings } });
    }
    // Both bodies' bytes are UTF-8 JSON, which the SDK's server reads whatever the coding named.
    expect((await calls(source.id)).map((entry) => entry.body.jsonrpc_id)).toEqual([7, 7]);
    const gaps = (await h.entries("system.evidence_gap")).map((gap) => gap.entry.body);
    expect(gaps.filter((gap) => gapCalls(gap, source.id) !== undefined)).toEqual([]);
  });

  it("relays a request whatever its Content-Type (missing, empty, malformed): the upstream answers it, not Bursar", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const body = JSON.stringify(toolCall(1, "echo", {}));
    for (const type of [undefined, "", " ", "json", "application/json, text/plain", ";;;"]) {
      const headers = { accept: "application/json, text/event-stream", ...(type === undefined ? {} : { "content-type": type }) };
      const direct = await fetch(`${upstream.url}/mcp-json`, { method: "POST", headers, body });
      const before = upstream.seen.length;
      const observed = await fetch(source.observer_url, { method: "POST", headers: { ...headers, "x-bursar-observer-token": source.observer_token }, body });
      expect(upstream.seen.length, `Content-Type ${JSON.stringify(type)}`).toBe(before + 1);
      expect(observed.status).toBe(direct.status);
      expect(await observed.text()).toBe(await direct.text());
    }
  });

  it("refuses a path that would leave the upstream URL's path, without forwarding", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const before = upstream.seen.length;
    for (const path of ["/observe/%2e%2e/%2e%2e/internal?x=1", "/observe/../mcp-plain", "/observe/a/%2E./%2e%2E/internal", "/observe/..\\internal", "/observe/..%2f..%2Finternal", "/observe/a/..%5C..%5cinternal", "/observe/..;/..;/internal", "/observe/%2e%2e;x/%2E%2E;/internal"]) {
      const answer = await rawPath(h.url, path, { "x-bursar-observer-token": source.observer_token });
      expect(answer.status, `${path}: ${answer.text}`).toBe(400);
      expect(answer.text, path).toContain("path_outside_upstream");
    }
    expect(upstream.seen.length).toBe(before);
    // An encoded slash with no way out is forwarded as it came.
    await rawPath(h.url, "/observe/a%2Fb..c;v=1", { "x-bursar-observer-token": source.observer_token });
    expect(upstream.seen.at(-1)?.path).toBe("/mcp-json/a%2Fb..c;v=1");
  });

  it("with the header, reads a token-shaped first path segment as a token: the same one is never forwarded, another is refused", async () => {
    const source = await observerSource(h, upstream.url);
    const other = await observerSource(h, upstream.url);
    await rawSession(`${h.url}/observe/${source.observer_token}/mcp-json`, { "x-bursar-observer-token": source.observer_token });
    expect(upstream.seen.at(-1)?.path).toBe("/mcp-json");
    const before = upstream.seen.length;
    const conflict = await raw(`${h.url}/observe/${source.observer_token}/mcp-json`, "POST", { "x-bursar-observer-token": other.observer_token }, toolCall(1, "echo", {}));
    expect(conflict.status).toBe(400);
    expect(conflict.bytes.toString()).toContain("token_conflict");
    expect(upstream.seen.length).toBe(before);
  });

  it("relays a request with two Authorization headers: they are the upstream's to judge (Bursar's own routes refuse such a request)", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const before = upstream.seen.length;
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
    const head = ["POST /observe HTTP/1.1", "host: 127.0.0.1", `x-bursar-observer-token: ${source.observer_token}`, "authorization: Bearer first", "Authorization: Bearer second"];
    const sent = [...head, "content-type: application/json", "accept: application/json, text/event-stream", `content-length: ${body.length}`, "connection: close", "", body].join("\r\n");
    const answer = await rawRequest(h.url, sent);
    expect(answer).not.toContain("more than one Authorization header");
    expect(upstream.seen.length).toBe(before + 1);
    expect(upstream.seen.at(-1)?.headers.authorization).toBe("Bearer first");
  });

  it("refuses a missing or wrong token without forwarding", async () => {
    const before = upstream.seen.length;
    expect((await raw(`${h.url}/observe`, "POST", {}, toolCall(1, "echo", {}))).status).toBe(401);
    expect((await raw(`${h.url}/observe`, "POST", { "x-bursar-observer-token": "bsr_obs_wrong" }, toolCall(1, "echo", {}))).status).toBe(401);
    expect(upstream.seen.length).toBe(before);
  });
});

describe("the SDK client through the observer", () => {
  it("passes session and resumption headers, strips the observer token and a Proxy-Authorization, records each call", async () => {
    const client = await sdkClient(sse.observer_url, { "x-bursar-observer-token": sse.observer_token, "proxy-authorization": "Basic Z2F0ZXdheTpzZWNyZXQ=" });
    try {
      expect((await client.listTools()).tools.map((tool) => tool.name)).toContain("echo");
      const echoed = await client.callTool({ name: "echo", arguments: { text: "hi", api_key: "sk-abcdefghijklmnopqrstu" } });
      expect(echoed.content).toEqual([{ type: "text", text: "hi" }]);
      const polled = await client.callTool({ name: "poll", arguments: {} });
      expect(polled.content).toEqual([{ type: "text", text: "polled" }]);
    } finally {
      await client.close();
    }
    const posts = upstream.seen.filter((seen) => seen.path === "/mcp" && seen.method === "POST");
    expect(posts.at(-1)?.headers["mcp-session-id"]).toBeTruthy();
    expect(posts.at(-1)?.headers["mcp-protocol-version"]).toBe(LATEST_PROTOCOL_VERSION);
    const resumed = upstream.seen.filter((seen) => seen.method === "GET" && seen.headers["last-event-id"]);
    expect(resumed.length).toBeGreaterThan(0);
    expect(upstream.seen.some((seen) => "x-bursar-observer-token" in seen.headers)).toBe(false);
    expect(upstream.seen.some((seen) => "proxy-authorization" in seen.headers)).toBe(false);

    const recorded = await calls(sse.id);
    const echo = recorded.find((entry) => entry.body.tool === "echo")!;
    expect(echo.body.outcome).toEqual({ type: "result", is_error: false });
    expect(echo.body.args).toEqual({ text: "hi", api_key: "[redacted]" });
    // Of the args as stored: a hash of the key scrubbing hid would let a short one be guessed.
    expect(echo.body.args_hash).toBe(canonicalSha256Hex({ text: "hi", api_key: "[redacted]" }));
    expect(echo.body.result_hash).toBe(canonicalSha256Hex({ content: [{ type: "text", text: "hi" }] }));
    expect(echo.body.upstream).toBe(new URL(upstream.url).origin);
    expect(echo.body.transport).toBe("sse");
    expect(typeof echo.body.duration_ms).toBe("number");
    const poll = recorded.find((entry) => entry.body.tool === "poll")!;
    expect(poll.body.transport).toBe("sse_get");
    expect(poll.body.outcome).toEqual({ type: "result", is_error: false });
  });

  it("records a tool error as isError and a JSON-RPC error as an error", async () => {
    const client = await sdkClient(sse.observer_url, { "x-bursar-observer-token": sse.observer_token });
    try {
      expect((await client.callTool({ name: "fail", arguments: {} })).isError).toBe(true);
      await expect(client.callTool({ name: "rpc_error", arguments: {} })).rejects.toThrow(/rpc_error always refuses/);
    } finally {
      await client.close();
    }
    const recorded = await calls(sse.id);
    expect(recorded.find((entry) => entry.body.tool === "fail")!.body.outcome).toEqual({ type: "result", is_error: true });
    expect(recorded.find((entry) => entry.body.tool === "rpc_error")!.body.outcome).toEqual({ type: "error", code: -32602, message: "MCP error -32602: rpc_error always refuses" });
  });

  it("records only the upstream's origin, never its path or query", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json?tenant=secret-tenant`);
    const client = await sdkClient(source.observer_url, { "x-bursar-observer-token": source.observer_token });
    await client.callTool({ name: "echo", arguments: { text: "x" } });
    await client.close();
    const text = JSON.stringify(await h.entries());
    expect(text).not.toContain("secret-tenant");
    expect(text).not.toContain("/mcp-json");
    expect((await calls(source.id))[0]!.body.upstream).toBe(new URL(upstream.url).origin);
  });
});

describe("shadow verdicts", () => {
  it("decides mapped tools with ALLOWLIST, R0, R5 and HOLD against the source's limits", async () => {
    const shadow = { tools: { charge: "create_order", echo: "not_a_money_tool" }, currency: "inr", per_call_cap: 50_000, approval_threshold: 20_000 };
    const source = await observerSource(h, `${upstream.url}/mcp-json`, shadow);
    const client = await sdkClient(source.observer_url, { "x-bursar-observer-token": source.observer_token });
    const cases: Array<[string, Record<string, unknown>]> = [
      ["charge", { amount: 10_000, currency: "INR" }],
      ["charge", { amount: 30_000, currency: "INR" }],
      ["charge", { amount: 60_000, currency: "INR" }],
      ["charge", { amount: 10_000, currency: "INR", transfers: [{ account: "acc_x" }] }],
      ["echo", { text: "x" }],
      ["fail", {}],
    ];
    for (const [name, args] of cases) await client.callTool({ name, arguments: args });
    await client.close();
    const verdicts = (await calls(source.id)).map((entry) => entry.body.shadow as { effect: string; rule: string } | null);
    expect(verdicts.map((verdict) => verdict && `${verdict.effect}:${verdict.rule}`)).toEqual(["ALLOW:ALLOW", "HOLD:HOLD", "BLOCK:R5", "BLOCK:R0", "BLOCK:ALLOWLIST", null]);
  });
});

describe("many sessions with open GET streams", () => {
  it("opens every session's stream and still relays a new call, past the pool's idle socket limit", async () => {
    const streams = upstream_sockets_idle_max + 4;
    const source = await observerSource(h, `${upstream.url}/mcp`);
    const aborts = new AbortController();
    const sessions = await Promise.all(Array.from({ length: streams }, () => rawSession(`${upstream.url}/mcp`)));
    const unanswered = (ms: number) => new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms).unref());
    try {
      // Each session's standalone SSE stream, held open through the observer as an MCP client does.
      const opened = await Promise.all(
        sessions.map((session) => {
          const headers = { accept: "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
          return Promise.race([fetch(source.observer_url, { headers, signal: aborts.signal }), unanswered(10_000)]);
        }),
      );
      expect(opened.every((response) => response.status === 200)).toBe(true);
      const headers = { "mcp-session-id": sessions[0]!, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
      const answer = await fetch(source.observer_url, {
        method: "POST",
        headers: { accept: "application/json, text/event-stream", "content-type": "application/json", ...headers },
        body: JSON.stringify(toolCall(1, "echo", { text: "past the streams" })),
        signal: AbortSignal.timeout(5_000),
      });
      expect(await answer.text()).toContain("past the streams");
    } finally {
      aborts.abort();
    }
  });
});

/** A GET whose path goes out exactly as written (fetch would resolve its dot segments first). */
function rawPath(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const request = httpRequest({ host: url.hostname, port: url.port, path, method: "GET", headers }, (response) => {
      let text = "";
      response.on("data", (chunk: Buffer) => (text += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text }));
    });
    request.on("error", reject);
    request.end();
  });
}
