// A secret scrubbing hides from a decision's entry cannot be recovered from the entry's hashes.
// A plain SHA-256 of the unscrubbed call gave a guessable one away to whoever reads the log
// (an auditor, an export): a CVV in 1,000 tries. The entry's body_sha256 and its key's
// params_hash are now of the call as stored; R7 still tells two calls apart by what they sent.

import { afterEach, describe, expect, it } from "vitest";
import { canonicalJson, scrub, sha256Hex } from "../../src/evidence/index.js";
import { testLedger, type TestLedger } from "../support/ledger.js";

let t: TestLedger | undefined;
afterEach(async () => {
  await t?.bursar.close();
  t = undefined;
});

type Decision = { args: Record<string, unknown>; key: { params_hash: string }; tool: string };

const args = (cvv: string) => ({ amount: 1_370, currency: "INR", idempotency_key: "k-137", notes: { sku: "lamp", cvv, upi_pin: "4821" } });

describe("a guessable secret in a decided call", () => {
  it("is not in its entry's hashes: no candidate matches them, while the stored body reproduces them", async () => {
    t = await testLedger();
    const called = await t.bursar.gate.callToolAs(t.agent_id, "create_order", args("739"));
    const seq = (called.structuredContent as { evidence: { seq: number } }).evidence.seq;
    const [page] = await t.bursar.log.entries(seq, seq + 1);
    const entry = page!.entry;
    const body = entry.body as Decision;
    expect(body.args.notes).toEqual({ sku: "lamp", cvv: "[redacted]", upi_pin: "[redacted]" });
    // Both hashes are of what is stored: whoever holds the original reproduces them by scrubbing it.
    expect(entry.body_sha256).toBe(sha256Hex(canonicalJson(body)));
    expect(body.key.params_hash).toBe(sha256Hex(canonicalJson(scrub({ tool: "create_order", args: args("739") }))));
    // Trying every CVV beside the known PIN finds nothing.
    for (let guess = 0; guess < 1_000; guess++) {
      const cvv = String(guess).padStart(3, "0");
      const original = { ...body, args: { ...body.args, notes: { sku: "lamp", cvv, upi_pin: "4821" } } };
      expect(sha256Hex(canonicalJson(original))).not.toBe(entry.body_sha256);
      expect(sha256Hex(canonicalJson({ tool: "create_order", args: args(cvv) }))).not.toBe(body.key.params_hash);
    }
  });

  it("still tells two calls apart by what they sent: the same key with another CVV is refused under R7", async () => {
    t = await testLedger();
    expect((await t.bursar.gate.callToolAs(t.agent_id, "create_order", args("739"))).structuredContent).toMatchObject({ effect: "ALLOW" });
    expect((await t.bursar.gate.callToolAs(t.agent_id, "create_order", args("739"))).structuredContent).toMatchObject({ replayed: true });
    expect((await t.bursar.gate.callToolAs(t.agent_id, "create_order", args("740"))).structuredContent).toMatchObject({ effect: "BLOCK", rule: "R7" });
  });
});
