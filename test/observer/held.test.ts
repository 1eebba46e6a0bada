// What a call holds while it waits, pending its answer or queued for the log: its args and result
// as canonical JSON text, counted in its bytes, never the parsed values (parsed JSON takes up to
// ~20 times its text's bytes in the heap, so the byte bounds would not bound memory). The entry
// is built from that text only for its batch, and is the one the parsed values would give.

import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canonicalJson, scrub, sha256Hex, type AppendInput } from "../../src/evidence/index.js";
import { buildEntry } from "../../src/evidence/entry.js";
import { callEvidence, CallEntry, heldArguments, heldId, type PendingCall } from "../../src/observer/calls.js";
import { batch_bytes_max, Recorder, type DeferredInput } from "../../src/observer/recorder.js";
import type { ObserverSource } from "../../src/sources/store.js";
import { harness, type Harness } from "../ingest/support.js";
import { waitFor } from "../provider/support.js";
import { observerSource, raw, toolCall } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

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

/** What a value holds, walked deeply: how many objects and arrays, and the UTF-8 bytes of its strings. */
function holdings(value: unknown, seen = new Set<object>()): { objects: number; string_bytes: number } {
  if (typeof value === "string") return { objects: 0, string_bytes: Buffer.byteLength(value) };
  if (value === null || typeof value !== "object" || seen.has(value)) return { objects: 0, string_bytes: 0 };
  seen.add(value);
  const held = { objects: 1, string_bytes: 0 };
  for (const item of Object.values(value)) {
    const inner = holdings(item, seen);
    held.objects += inner.objects;
    held.string_bytes += inner.string_bytes;
  }
  return held;
}

/** A pending call's holdings, without its source (shared by all its calls, and held by the source cache anyway). */
const pendingHoldings = (call: PendingCall) => holdings({ ...call, source: null });

const shadow = { tools: { slow: "create_order" }, currency: "INR", per_call_cap: 50_000, approval_threshold: 20_000 };
const many = (objects: number) => Array.from({ length: objects }, () => ({}));

describe("a pending call", () => {
  it("holds its args as their canonical text, counted in its bytes; what it holds does not grow with the objects the args parse to", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-stateless-json`, shadow);
    const headers = { "x-bursar-observer-token": source.observer_token };
    const sent = [10, 3_000].map((objects) => ({ items: many(objects), delay_ms: 500 }));
    const answers = sent.map((args, id) => raw(source.observer_url, "POST", headers, toolCall(id, "slow", args)));
    const correlator = h.evidence.observer.correlator;
    await waitFor(() => correlator.size === 2, 5_000, "both calls to be pending");
    const pending = correlator.drainAll().sort((a, b) => Number(a.id.key.split(":")[1]) - Number(b.id.key.split(":")[1]));
    for (const answer of await Promise.all(answers)) expect(answer.status).toBe(200);

    for (const [id, call] of pending.entries()) {
      expect(call.args.text).toBe(canonicalJson(sent[id]));
      expect(call.args.bytes).toBe(Buffer.byteLength(call.args.text!));
      expect(call.args.fields).toEqual({ args_hash: sha256Hex(call.args.text!) });
      expect(call.shadow).toMatchObject({ as_tool: "create_order", rule: "R0" });
      expect(pendingHoldings(call).string_bytes).toBeLessThanOrEqual(call.bytes);
    }
    expect(pendingHoldings(pending[1]!).objects).toBe(pendingHoldings(pending[0]!).objects);
  });
});

const source: ObserverSource = { source_id: "src_held", upstream: new URL("http://upstream.test:8080/mcp"), shadow };
const started_at = new Date("2025-01-02T03:04:05.678Z");

function pendingCall(args: unknown, id = 1): PendingCall {
  return { source, session: "", exchange: 1, id: heldId(id), ...heldArguments(source, "slow", args, started_at), started_at, started_ms: 0, bytes: 0 };
}

/** The queued evidence for a call with `args` answered with `result` (both as parsed). */
function queued(args: unknown, result: unknown) {
  return callEvidence(pendingCall(args), { type: "result", is_error: false, result }, 12.5, "json");
}

describe("a queued call", () => {
  it("holds its args and result as text, counted in its bytes; what it holds does not grow with the objects they parse to", () => {
    const small = queued({ items: many(10) }, { items: many(10) });
    const large = queued({ items: many(3_000) }, { items: many(3_000) });
    for (const evidence of [small, large]) {
      expect(evidence.input).toBeInstanceOf(CallEntry);
      expect(holdings(evidence.input).string_bytes).toBeLessThanOrEqual(evidence.bytes);
    }
    const entry = large.input as CallEntry;
    expect(entry.args.text).toBe(canonicalJson({ items: many(3_000) }));
    expect(entry.result!.text).toBe(canonicalJson({ items: many(3_000) }));
    expect(holdings(large.input).objects).toBe(holdings(small.input).objects);
  });

  it("counts text with a character past U+00FF at two bytes a unit, as the heap holds it, not at its UTF-8 bytes", () => {
    const ascii = "a".repeat(60_000);
    const plain = pendingCall({ note: ascii });
    expect(plain.args.bytes).toBe(Buffer.byteLength(plain.args.text!));
    const wide = pendingCall({ note: `${ascii}\u4e00` });
    expect(wide.args.bytes).toBe(2 * wide.args.text!.length);
    expect(wide.args.bytes).toBeGreaterThan(Buffer.byteLength(wide.args.text!));
  });

  it("builds the entry the parsed values give: the same scrubbed text, hashed as stored (any JSON)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (args, result) => {
        const body = (queued(args, result).input as CallEntry).build().body;
        for (const [name, value] of [["args", args] as const, ["result", result] as const]) {
          const text = canonicalJson(scrub(value));
          // Of the value as stored: a hash of a secret scrubbing hid would give a guessable one away.
          expect(body[`${name}_hash`]).toBe(sha256Hex(text));
          expect(canonicalJson(body[name])).toBe(text);
        }
      }),
    );
  });

  it("hashes args and a result as the entry stores them, however deep they nest (scrubbing stops as deep in the entry)", () => {
    for (let depth = 58; depth <= 68; depth++) {
      let value: unknown = { text: "deep" };
      for (let level = 0; level < depth; level++) value = { level: value };
      // The body as the log stores it: buildEntry scrubs it whole.
      const body = buildEntry((queued(value, [value]).input as CallEntry).build(), 0, started_at.toISOString()).entry.body as Record<string, unknown>;
      expect(body.args_hash, `depth ${depth}`).toBe(sha256Hex(canonicalJson(body.args)));
      expect(body.result_hash, `depth ${depth}`).toBe(sha256Hex(canonicalJson(body.result)));
    }
  });

  it("keeps secrets scrubbed in the built entry, and a value with no canonical form with those parts replaced, said so", () => {
    // Parsed, as the observer gets them: "__proto__" is then a key of its own.
    const args = JSON.parse('{"text":"hi","api_key":"sk-abcdefghijklmnopqrstuvwx","__proto__":{"card":"4111 1111 1111 1111"}}') as unknown;
    const body = (queued(args, JSON.parse('{"big":1e400}')).input as CallEntry).build().body;
    expect(canonicalJson(scrub(body.args))).toBe('{"__proto__":{"card":"[redacted]"},"api_key":"[redacted]","text":"hi"}');
    const stand_in = { big: "[not a finite number]" };
    expect(body).toMatchObject({ result: stand_in, result_hash: sha256Hex(canonicalJson(stand_in)), result_replaced: "not_canonical_json" });
    expect(body).not.toHaveProperty("result_omitted");
    // Beside a lone surrogate, the amount stays bound: hashed and stored.
    const amount = (queued(JSON.parse('{"amount":999999,"memo":"\\ud800"}'), {}).input as CallEntry).build().body;
    expect(amount).toMatchObject({ args: { amount: 999999, memo: "\uFFFD" }, args_hash: expect.stringMatching(/^[0-9a-f]{64}$/), args_replaced: "not_canonical_json" });
  });
});

describe("the recorder's batches", () => {
  async function batches(entries_bytes: readonly number[]): Promise<number[]> {
    const sizes: number[] = [];
    const recorder = new Recorder({ sink: { append: async (inputs) => void sizes.push(inputs.length) }, clock: () => started_at, flush_delay_ms: 0 });
    const input: DeferredInput = { build: () => ({ kind: "observer.call", source: source.source_id, body: { tool: "echo" } }) };
    for (const bytes of entries_bytes) recorder.enqueue(input, bytes, source.source_id);
    expect(await recorder.drain()).toBe(true);
    return sizes;
  }

  it(`take entries up to ${batch_bytes_max} counted bytes, and an entry past it alone`, async () => {
    expect(await batches([batch_bytes_max / 2, batch_bytes_max / 2, 1])).toEqual([2, 1]);
    expect(await batches([batch_bytes_max / 2, batch_bytes_max / 2 + 1, 1])).toEqual([1, 2]);
    expect(await batches([batch_bytes_max + 1, 1])).toEqual([1, 1]);
  });

  it("build a deferred entry only when its batch is written", async () => {
    let builds = 0;
    const deferred: DeferredInput = {
      build: () => {
        builds += 1;
        return { kind: "observer.call", source: source.source_id, body: { tool: "echo" } };
      },
    };
    const written: AppendInput[] = [];
    const recorder = new Recorder({ sink: { append: async (inputs) => void written.push(...inputs) }, clock: () => started_at, flush_delay_ms: 0 });
    recorder.enqueue(deferred, 1024, source.source_id);
    expect(builds).toBe(0);
    expect(await recorder.drain()).toBe(true);
    expect(builds).toBe(1);
    expect(written).toEqual([{ kind: "observer.call", source: source.source_id, body: { tool: "echo" } }]);
  });
});
