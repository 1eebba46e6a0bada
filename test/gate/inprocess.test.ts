// The gate in-process through createBursar: the Razorpay client reaches the embedded
// simulator by the same wire format, and webhooks come back signed. A refused call cannot make
// the log store what it sent: arguments and tool names past the decision entry's limits are
// recorded by size and SHA-256, still bound by the entry's hash.

import { afterEach, describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/evidence/canonical.js";
import { createBursar, sequentialIds, type Bursar } from "../../src/index.js";
import { decision_args_bytes_max, decision_tool_bytes_max, refused_args_bytes_max } from "../../src/ledger/authorize.js";
import { manualClock } from "../support/clock.js";
import { decisionBody, payInProcess } from "../support/inprocess.js";

let bursar: Bursar | undefined;
afterEach(async () => {
  await bursar?.close();
  bursar = undefined;
});

async function setup(block: Record<string, unknown> = {}) {
  bursar = await createBursar({ db: ":memory:", clock: manualClock(), ids: sequentialIds() });
  const agent = await bursar.operator.createAgent({ name: "buyer" });
  await bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400, ...block });
  return { b: bursar, token: agent.token };
}

describe("gate in-process", () => {
  it("a receipt and a note value of 255 characters reach the provider and make an order; 256 are refused under R0 before any hold", async () => {
    const { b, token } = await setup();
    const at_limit = await b.gate.callTool(token, "create_order", { amount: 1_000, currency: "INR", receipt: "r".repeat(255), notes: { gift: "n".repeat(255) } });
    expect(at_limit.isError).toBeUndefined();
    expect(at_limit.structuredContent).toMatchObject({ effect: "ALLOW", order: { amount: 1_000, notes: { gift: "n".repeat(255), buyer_receipt: "r".repeat(255) } } });
    for (const [key, over] of [["receipt-256", { receipt: "r".repeat(256) }], ["note-256", { notes: { gift: "n".repeat(256) } }]] as const) {
      const refused = await b.gate.callTool(token, "create_order", { amount: 1_000, currency: "INR", idempotency_key: key, ...over });
      expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0" });
    }
    expect((await b.gate.callTool(token, "get_block", {})).structuredContent).toMatchObject({ held: 1_000 });
  });


  it("create → pay → capture settles held into spent, with evidence on every result", async () => {
    const { b, token } = await setup();
    const created = await b.gate.callTool(token, "create_order", { amount: 50_000, currency: "inr", receipt: "basket-1" });
    expect(created.isError).toBeUndefined();
    const order = created.structuredContent.order as { id: string; amount: number; currency: string };
    expect(order).toMatchObject({ amount: 50_000, currency: "INR" });
    expect(created.structuredContent.block).toMatchObject({ held: 50_000, available: 950_000 });
    expect(created.structuredContent.evidence).toMatchObject({ seq: expect.any(Number), leaf_hash: expect.stringMatching(/^[0-9a-f]{64}$/) });

    const payment_id = await payInProcess(b, order.id);
    const captured = await b.gate.callTool(token, "capture_payment", { payment_id, amount: 50_000, currency: "INR" });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
    expect(captured.structuredContent.block).toMatchObject({ spent: 50_000, held: 0, available: 950_000 });

    await b.simulator!.simulator.deliverWebhooksNow();
    const block = await b.gate.callTool(token, "get_block", {});
    expect(block.structuredContent).toMatchObject({ spent: 50_000, held: 0 });
    // DESIGN.md's get_block shape, and unreconciled (docs/gate.md).
    expect(block.structuredContent).toEqual({
      block_id: expect.stringMatching(/^blk_/),
      currency: "INR",
      reserved: 1_000_000,
      spent: 50_000,
      held: 0,
      unreconciled: 0,
      available: 950_000,
      expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      per_call_cap: expect.any(Number),
      approval_threshold: expect.any(Number),
      velocity: { max_calls: expect.any(Number), window_seconds: expect.any(Number) },
      revoked: false,
      frozen: false,
    });
  });
});


describe("decision entries past their size limits", () => {
  it("1 MB of undeclared arguments: R0, the entry keeps their size and hash, not them", async () => {
    const { b, token } = await setup();
    const args = { amount: 1000, currency: "INR", idempotency_key: "big-1", junk: "x".repeat(1_000_000) };
    const result = await b.gate.callTool(token, "create_order", args);
    expect(result.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0" });
    const { body, text } = await decisionBody(b, result);
    expect(text.length).toBeLessThan(4_000);
    const canonical = canonicalJson(args);
    expect(body).toMatchObject({ tool: "create_order", args_omitted: { bytes: canonical.length, sha256: sha256Hex(canonical) } });
    // Only the short top-level arguments stay: the amount, currency and key, not the junk.
    expect(body.args).toEqual({ amount: 1000, currency: "INR", idempotency_key: "big-1" });
  });

  it("arguments whose canonical JSON is exactly the limit are stored whole; one byte more is not", async () => {
    const { b, token } = await setup();
    const base = { amount: 1000, currency: "INR", idempotency_key: "edge" };
    const overhead = canonicalJson({ ...base, junk: "" }).length;
    const at_limit = { ...base, junk: "y".repeat(refused_args_bytes_max - overhead) };
    expect(canonicalJson(at_limit).length).toBe(refused_args_bytes_max);
    const stored = await decisionBody(b, await b.gate.callTool(token, "create_order", at_limit));
    expect(stored.body).toMatchObject({ args: at_limit });
    expect(stored.body.args_omitted).toBeUndefined();

    const over = { ...base, idempotency_key: "edgf", junk: `${at_limit.junk}y` };
    const omitted = await decisionBody(b, await b.gate.callTool(token, "create_order", over));
    expect(omitted.body).toMatchObject({ args: { amount: 1000, currency: "INR", idempotency_key: "edgf" }, args_omitted: { bytes: refused_args_bytes_max + 1 } });
    expect(omitted.body.args).not.toHaveProperty("junk");
  });

  it("an allowed call keeps arguments past the refused limit; its replay, and refused by R6 (before R0) the same call, keep their size and hash", async () => {
    const { b, token } = await setup({ velocity: { max_calls: 1, window_seconds: 60 } });
    const notes = Object.fromEntries(Array.from({ length: 14 }, (_, index) => [`note_${String(index).padStart(58, "k")}`, "v".repeat(255)]));
    const allowed_args = { amount: 1000, currency: "INR", idempotency_key: "big-notes-1", notes };
    expect(canonicalJson(allowed_args).length).toBeGreaterThan(refused_args_bytes_max);
    const allowed = await b.gate.callTool(token, "create_order", allowed_args);
    expect(allowed.structuredContent).toMatchObject({ effect: "ALLOW" });
    const recorded = (await decisionBody(b, allowed)).body;
    expect(recorded).toMatchObject({ args: { notes } });
    // Its replay is bound to it by params_hash and capped as a refusal is: R6 does not count replays.
    const replay = await b.gate.callTool(token, "create_order", allowed_args);
    expect(replay.structuredContent).toMatchObject({ effect: "ALLOW", replayed: true });
    const replayed = await decisionBody(b, replay);
    expect(replayed.text.length).toBeLessThan(4_000);
    expect(replayed.body).toMatchObject({
      args: { amount: 1000, currency: "INR", idempotency_key: "big-notes-1" },
      args_omitted: { bytes: canonicalJson(allowed_args).length, sha256: sha256Hex(canonicalJson(allowed_args)) },
      key: recorded.key,
    });

    const refused_args = { amount: 1000, currency: "INR", idempotency_key: "big-receipt", receipt: "r".repeat(60_000) };
    const refused = await b.gate.callTool(token, "create_order", refused_args);
    expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R6" });
    const { body, text } = await decisionBody(b, refused);
    expect(text.length).toBeLessThan(4_000);
    const canonical = canonicalJson(refused_args);
    expect(body).toMatchObject({ args_omitted: { bytes: canonical.length, sha256: sha256Hex(canonical) } });
    expect(body.args).toEqual({ amount: 1000, currency: "INR", idempotency_key: "big-receipt" });
  });

  it("escaped characters count as the bytes canonical JSON writes for them", async () => {
    const { b, token } = await setup();
    // 12,000 control characters are 72,000 bytes once escaped, though only 12,000 characters.
    const args = { amount: 1000, currency: "INR", idempotency_key: "ctl", junk: "\u0001".repeat(12_000) };
    const { body } = await decisionBody(b, await b.gate.callTool(token, "create_order", args));
    expect(body).toMatchObject({ args: { amount: 1000, currency: "INR", idempotency_key: "ctl" }, args_omitted: { bytes: canonicalJson(args).length } });
    expect(canonicalJson(args).length).toBeGreaterThan(decision_args_bytes_max);
  });

  it("a 1 MB tool name: ALLOWLIST, recorded by size and hash; a valid call's entry is unchanged", async () => {
    const { b, token } = await setup();
    const name = "t".repeat(1_000_000);
    const refused = await b.gate.callTool(token, name, { amount: 1000 });
    expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "ALLOWLIST" });
    const { body, text } = await decisionBody(b, refused);
    expect(text.length).toBeLessThan(2_000);
    expect(body).toMatchObject({ tool: null, tool_omitted: { bytes: canonicalJson(name).length, sha256: sha256Hex(canonicalJson(name)) } });
    expect(canonicalJson(name).length).toBeGreaterThan(decision_tool_bytes_max);

    const allowed = await b.gate.callTool(token, "create_order", { amount: 1000, currency: "INR", receipt: "r-1" });
    expect(allowed.isError).toBeUndefined();
    const valid = await decisionBody(b, allowed);
    expect(valid.body).toMatchObject({ tool: "create_order", args: { amount: 1000, currency: "INR", receipt: "r-1" } });
    expect(valid.body.tool_omitted).toBeUndefined();
    expect(valid.body.args_omitted).toBeUndefined();
  });

  it("an undeclared argument with a 1 MB name is refused with a reason of bounded length", async () => {
    const { b, token } = await setup();
    const result = await b.gate.callTool(token, "create_order", { amount: 1000, currency: "INR", ["k".repeat(1_000_000)]: 1 });
    expect(result.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0" });
    const reason = result.structuredContent.reason as string;
    expect(reason).toMatch(/^argument "k{64}…" \(1000000 UTF-16 code units\) is not declared for create_order/);
    expect(reason.length).toBeLessThan(200);
  });

  it("a long argument name is never cut inside a surrogate pair: the refusal is still recorded", async () => {
    const { b, token } = await setup();
    const name = `${"a".repeat(63)}😀${"b".repeat(10)}`;
    const result = await b.gate.callTool(token, "create_order", { amount: 1000, currency: "INR", [name]: 1 });
    expect(result.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0" });
    expect(result.structuredContent.reason).toMatch(/^argument "a{63}…" \(75 UTF-16 code units\) is not declared/);
    const { body } = await decisionBody(b, result);
    expect(body).toMatchObject({ verdict: { rule: "R0" }, args: { [name]: 1 } });
  });
});
