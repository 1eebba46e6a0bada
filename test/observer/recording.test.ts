// What each observed call is recorded as: its own result, even when two clients of a server
// without sessions both use JSON-RPC id 1; and always an entry the log can write (names and
// messages cut between code points, lone surrogates replaced), where an entry the log refuses
// anyway costs only itself, never the batch written with it. A request body that writes a key
// twice in one object is relayed untouched, and its calls' entries say so: JSON.parse kept the
// last value, as the SDK's server and the entry do, but a server reading the first acted on
// other arguments than the entry shows.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppendInput } from "../../src/evidence/index.js";
import { tool_name_chars_max } from "../../src/observer/calls.js";
import type { DeferredInput } from "../../src/observer/recorder.js";
import { harness, type Harness } from "../ingest/support.js";
import { gapCalls, LATEST_PROTOCOL_VERSION, observerSource, raw, rawSession, recorded as recordedCalls, toolCall } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";
import { waitUntil } from "../support/wait.js";

let h: Harness;
let upstream: Upstream;

beforeAll(async () => {
  upstream = await startUpstream();
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await upstream.close();
});

const recorded = (source_id: string) => recordedCalls(h, source_id);

describe("without an MCP session id", () => {
  for (const path of ["/mcp-stateless-json", "/mcp-stateless"]) {
    it(`records each of two concurrent calls with the same JSON-RPC id with its own result (${path.endsWith("json") ? "JSON" : "SSE"})`, async () => {
      const source = await observerSource(h, `${upstream.url}${path}`);
      const headers = { "x-bursar-observer-token": source.observer_token };
      // Each call waits at the upstream's barrier for its group's second arrival, which the test
      // sends straight to the upstream (past the observer) when that call is to be answered.
      // (Group names without long digit runs: the observer redacts card-number-like text.)
      const group = { A: `same-id${path}-A`, B: `same-id${path}-B` };
      const arrived = () => upstream.seen.filter((request) => request.method === "POST" && request.path === path).length;
      const release = (who: "A" | "B") => raw(`${upstream.url}${path}`, "POST", {}, toolCall(99, "slow", { wait_for: 2, group: group[who] }));
      const seen_before = arrived();
      const a = raw(source.observer_url, "POST", headers, toolCall(1, "slow", { who: "A", wait_for: 2, group: group.A }));
      await waitUntil("A to reach the upstream", () => arrived() >= seen_before + 1);
      const b = raw(source.observer_url, "POST", headers, toolCall(1, "slow", { who: "B", wait_for: 2, group: group.B }));
      await waitUntil("B to reach the upstream", () => arrived() >= seen_before + 2);
      // Both are pending at once. A is answered first, while B (sent after A, same id) is still pending.
      await release("A");
      const a_answer = await a;
      expect(a_answer.bytes.toString()).toContain('\\"who\\":\\"A\\"');
      await release("B");
      const b_answer = await b;
      expect(b_answer.bytes.toString()).toContain('\\"who\\":\\"B\\"');

      const bodies = await recorded(source.id);
      expect(bodies).toHaveLength(2);
      for (const body of bodies) {
        const who = (body.args as { who: string }).who;
        expect(body.outcome, who).toEqual({ type: "result", is_error: false });
        const text = (body.result as { content: Array<{ text: string }> }).content[0]!.text;
        expect(JSON.parse(text), who).toMatchObject({ who });
      }
    });
  }

  it("records a call whose SSE stream ended unanswered as no_response at once: without a session nothing can resume it", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-stateless`);
    const headers = { "x-bursar-observer-token": source.observer_token, "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
    const polled = await raw(source.observer_url, "POST", headers, toolCall(7, "poll", {}));
    expect(polled.status).toBe(200);
    expect(polled.bytes.toString()).not.toContain("polled");
    const bodies = await recorded(source.id);
    expect(bodies.map((body) => body.outcome)).toEqual([{ type: "no_response", reason: "stream_ended" }]);
    expect(bodies[0]!.transport).toBe("sse");
  });
});

describe("evidence canonical JSON cannot write as received", () => {
  it("records every call: names and messages are cut between code points, lone surrogates replaced", async () => {
    const shadow = { tools: { charge: "create_order" }, currency: "INR", per_call_cap: 50_000, approval_threshold: 20_000 };
    const source = await observerSource(h, `${upstream.url}/mcp-json`, shadow);
    const session = await rawSession(`${upstream.url}/mcp-json`);
    const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
    // The upstream refuses unknown tools with "MCP error -32601: no tool <name>": this name puts
    // an emoji across the 1,024th character of that message.
    const message_prefix = "MCP error -32601: no tool ";
    const names = ["echo", "a".repeat(tool_name_chars_max - 1) + "💸", "b".repeat(1023 - message_prefix.length) + "💸", "lone \ud800 surrogate"];
    for (const [i, name] of names.entries()) {
      expect((await raw(source.observer_url, "POST", headers, toolCall(i + 1, name, { text: "x" }))).status).toBe(200);
    }
    // A lone surrogate in an argument name reaches the shadow verdict's reason (R0 names the argument).
    await raw(source.observer_url, "POST", headers, toolCall(9, "charge", { amount: 100, currency: "INR", "\udc00": 1 }));

    const bodies = await recorded(source.id);
    expect(bodies.map((body) => body.tool)).toEqual(["echo", "a".repeat(tool_name_chars_max - 1), "b".repeat(tool_name_chars_max), "lone \ufffd surrogate", "charge"]);
    const cut = bodies[2]!.outcome as { type: string; message: string };
    expect(cut.type).toBe("error");
    expect(cut.message).toBe(message_prefix + "b".repeat(1023 - message_prefix.length));
    const verdict = bodies[4]!.shadow as { rule: string; reason: string };
    expect(verdict.rule).toBe("R0");
    expect(verdict.reason).toContain("\ufffd");
    expect(await h.entries("system.evidence_gap")).toEqual([]);
  });

  it("looks the whole tool name up for the shadow verdict, cutting it only for the entry: a longer name is not the mapped tool", async () => {
    const mapped = "c".repeat(tool_name_chars_max);
    const shadow = { tools: { [mapped]: "create_order" }, currency: "INR", per_call_cap: 50_000, approval_threshold: 20_000 };
    const source = await observerSource(h, `${upstream.url}/mcp-json`, shadow);
    const session = await rawSession(`${upstream.url}/mcp-json`);
    const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": source.observer_token };
    for (const [i, name] of [mapped, `${mapped}_refund_everything`].entries()) {
      expect((await raw(source.observer_url, "POST", headers, toolCall(i + 1, name, { amount: 100, currency: "INR" }))).status).toBe(200);
    }
    const bodies = await recorded(source.id);
    expect(bodies.map((body) => [body.tool, (body.shadow as { as_tool: string } | null)?.as_tool ?? null])).toEqual([
      [mapped, "create_order"],
      [mapped, null],
    ]);
  });

  it("drops only the entry the log refuses and counts it, writing the rest of its batch", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const call = (text: string): DeferredInput => ({ build: (): AppendInput => ({ kind: "observer.call", source: source.id, body: { tool: "echo", args: { text } } }) });
    const recorder = h.evidence.observer.recorder;
    // Enqueued together, so they are written as one batch; the third has no JSON form.
    for (const text of ["one", "two", "lone \ud800", "four", "five"]) recorder.enqueue(call(text), 1024, source.id);

    expect((await recorded(source.id)).map((body) => (body.args as { text: string }).text)).toEqual(["one", "two", "four", "five"]);
    const gaps = await h.entries("system.evidence_gap");
    expect(gaps.map((gap) => gap.entry.body)).toMatchObject([{ unrecorded_calls: 1, reasons: ["unrecordable"], by_source: [{ source_id: source.id, calls: 1 }] }]);
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toContain('bursar_evidence_gap_calls_total{reason="unrecordable"} 1');
  });
});

describe("a call's arguments", () => {
  it("are recorded as sent, null and a list too; a call without any is recorded as calling with {}", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const token = { "x-bursar-observer-token": source.observer_token };
    const headers = { ...token, "mcp-session-id": await rawSession(source.observer_url, token), "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
    const sent: Array<[number, Record<string, unknown>]> = [
      [1, { name: "echo", arguments: null }],
      [2, { name: "echo", arguments: [1, 2] }],
      [3, { name: "echo" }],
    ];
    for (const [id, params] of sent) expect((await raw(source.observer_url, "POST", headers, { jsonrpc: "2.0", id, method: "tools/call", params })).status).toBe(200);
    const bodies = await recorded(source.id);
    expect(bodies.map((body) => [body.jsonrpc_id, body.args])).toEqual([
      [1, null],
      [2, [1, 2]],
      [3, {}],
    ]);
  });
});

describe("a request body that writes a key twice", () => {
  it("is relayed as sent, and each of its calls' entries names the first key written twice; a body without one has no such field", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const token = { "x-bursar-observer-token": source.observer_token };
    const headers = { ...token, "mcp-session-id": await rawSession(source.observer_url, token), "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
    const twice = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","arguments":{"amount":100,"amount":9000}}}';
    const answer = await raw(source.observer_url, "POST", headers, new TextEncoder().encode(twice));
    expect(answer.status).toBe(200);
    // The SDK's server read the last amount, as JSON.parse does.
    expect(answer.bytes.toString()).toContain("charged 9000");
    const plain = await raw(source.observer_url, "POST", headers, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "charge", arguments: { amount: 100 } } });
    expect(plain.status).toBe(200);

    const bodies = await recorded(source.id);
    expect(bodies.map((body) => [body.jsonrpc_id, body.args, body.key_written_twice])).toEqual([
      [1, { amount: 9000 }, "params.arguments.amount"],
      [2, { amount: 100 }, undefined],
    ]);
    expect(bodies[1]).not.toHaveProperty("key_written_twice");
  });

  it("counts in the gap the tools/calls written in a body that JSON.parse does not see: \"method\" written twice", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const token = { "x-bursar-observer-token": source.observer_token };
    const headers = { ...token, "mcp-session-id": await rawSession(source.observer_url, token), "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
    // JSON.parse reads a ping; a server that reads the first "method" runs a tools/call.
    const twice = '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"charge","arguments":{"amount":900000}},"method":"ping"}';
    expect((await raw(source.observer_url, "POST", headers, new TextEncoder().encode(twice))).status).toBe(200);
    expect(await recorded(source.id)).toEqual([]);
    const gaps = (await h.entries("system.evidence_gap")).map((stored) => stored.entry.body).filter((body) => gapCalls(body, source.id) !== undefined);
    expect(gaps.map((body) => [gapCalls(body, source.id), body.reasons])).toEqual([[1, ["keys_written_twice"]]]);
  });
});
