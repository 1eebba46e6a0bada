// An idempotency_key the log cannot write as sent (a lone UTF-16 surrogate, which the gate
// records as U+FFFD; a number JSON cannot carry, recorded as "[not a finite number]") is refused
// under R0, and is looked up under a key derived from what was sent: it never replays, nor
// conflicts with, the key its stand-in spells, nor another such key. On SQLite and on
// PostgreSQL, with and without batched decisions.

import { describe, expect, it } from "vitest";
import { createBursar, sequentialIds } from "../../src/index.js";
import { callKey } from "../../src/ledger/keys.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";
import { decisionBody } from "../support/inprocess.js";

type Row = [what: string, key: unknown, amount: number, expected: { effect: string; rule?: string; replayed?: true }];

/** One agent's calls, in order: each decided after the ones above it. */
const calls: Row[] = [
  ["a well-formed key holding U+FFFD", "buy\uFFFD", 1_000, { effect: "ALLOW" }],
  ["a lone high surrogate where that key has U+FFFD, same amount", "buy\uD800", 1_000, { effect: "BLOCK", rule: "R0" }],
  ["another lone high surrogate, another amount", "buy\uD801", 2_000, { effect: "BLOCK", rule: "R0" }],
  ["a lone low surrogate, same amount", "buy\uDFFF", 1_000, { effect: "BLOCK", rule: "R0" }],
  ["a key that is one lone surrogate", "\uD800", 1_000, { effect: "BLOCK", rule: "R0" }],
  ["a surrogate pair (well-formed)", "buy\uD83D\uDE00", 1_000, { effect: "ALLOW" }],
  ["the well-formed U+FFFD key again", "buy\uFFFD", 1_000, { effect: "ALLOW", replayed: true }],
  ["the text a non-finite number is recorded as", "[not a finite number]", 3_000, { effect: "ALLOW" }],
  ["a non-finite number (1e400 parses to Infinity), same amount", Infinity, 3_000, { effect: "BLOCK", rule: "R0" }],
];

const reasons: Record<string, string> = {
  string: "idempotency_key must be well-formed text: it has a lone UTF-16 surrogate (recorded as U+FFFD)",
  number: "idempotency_key must be a non-empty string",
};

describe("keys as sent", () => {
  it("two keys differing only in a lone surrogate are two keys, neither the U+FFFD one; control characters are hashed the same way", () => {
    const key = (sent: string) => callKey("agt_1", "create_order", { amount: 1_000, currency: "INR", idempotency_key: sent.replace(/[\uD800-\uDFFF]/g, "\uFFFD") }, { idempotency_key_sent: sent }).key;
    const keys = ["buy\uD800", "buy\uD801", "buy\uDFFF", "buy\n"].map(key);
    expect(new Set(keys).size).toBe(4);
    for (const made of keys) expect(made).toMatch(/^k#[0-9a-f]{64}$/);
    expect(callKey("agt_1", "create_order", { idempotency_key: "buy\uFFFD" }).key).toBe("k:buy\uFFFD");
  });
});

for (const backend of backends()) {
  const variants = backend.name === "postgres" ? [true, false] : [false];
  for (const batched of variants) {
    const name = backend.name === "postgres" ? `postgres, ${batched ? "batched decisions" : "one decision per transaction"}` : backend.name;
    describe(`${name}: an idempotency_key with no JSON form as sent`, () => {
      it("is refused under R0, and never replays or conflicts with another key", async () => {
        const db = await backend.db();
        const b = await createBursar({ db, clock: manualClock(), ids: sequentialIds(), pg_batch_decisions: batched });
        if (isPostgresUrl(db)) closeAfterTest(b);
        const agent = await b.operator.createAgent({ name: "buyer" });
        await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
        for (const [what, key, amount, expected] of calls) {
          const result = await b.gate.callTool(agent.token, "create_order", { amount, currency: "INR", idempotency_key: key });
          const { effect, rule, replayed } = result.structuredContent;
          expect({ effect, rule, replayed }, what).toEqual({ effect: expected.effect, rule: expected.rule, replayed: expected.replayed });
          if (expected.rule === "R0") {
            expect(result.structuredContent.reason, what).toBe(reasons[typeof key]);
            // The evidence records the stand-in the log can write, and the refusal.
            const { body } = await decisionBody(b, result);
            expect((body.args as { idempotency_key: unknown }).idempotency_key, what).toBe(typeof key === "string" ? key.replace(/[\uD800-\uDFFF]/g, "\uFFFD") : "[not a finite number]");
          }
        }
        // Only the three allowed calls hold money: nothing was stored under a refused key.
        const rows = await b.driver.read((tx) => tx.all<{ key: string }>("SELECT key FROM idempotency_keys WHERE key NOT LIKE 'k:order%' ORDER BY key"));
        expect(rows.map((row) => row.key).sort()).toEqual(["k:[not a finite number]", "k:buy\uD83D\uDE00", "k:buy\uFFFD"].sort());
        if (!isPostgresUrl(db)) await b.close();
      });
    });
  }
}
