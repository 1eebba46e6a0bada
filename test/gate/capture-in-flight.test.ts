// While a capture of a reservation is in flight, no other capture of it is forwarded: whatever
// key it comes under (another explicit key, another currency spelling, none at all), it is
// refused as IN_FLIGHT before any provider request. A capture whose lease ran out is
// outcome-unknown, not in flight, and a failed capture leaves nothing in flight: both may be
// followed by another capture. On SQLite and on PostgreSQL, with and without batched decisions.

import { describe, expect, it } from "vitest";
import { createBursar, sequentialIds, type Bursar } from "../../src/index.js";
import type { Provider } from "../../src/provider/port.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";
import { payInProcess } from "../support/inprocess.js";
import { expectBooksBalance } from "../support/ledger.js";
import { waitFor } from "../provider/support.js";

type Structured = Record<string, unknown>;

const lease_ms = 60_000;

/** The other captures of the one payment, each under a key of its own (the reviewer's four calls less the first). */
const other_captures: Array<[string, Record<string, unknown>]> = [
  ["another explicit key, currency in lower case", { idempotency_key: "c2", currency: "inr" }],
  ["no key, currency INR", { currency: "INR" }],
  ["no key, currency inr", { currency: "inr" }],
];

for (const backend of backends()) {
  const variants = backend.name === "postgres" ? [true, false] : [false];
  for (const batched of variants) {
    const name = backend.name === "postgres" ? `postgres, ${batched ? "batched decisions" : "one decision per transaction"}` : backend.name;
    describe(`${name}: one capture of a reservation at a time`, () => {
      async function setup() {
        const db = await backend.db();
        const clock = manualClock();
        const b = await createBursar({ db, clock, ids: sequentialIds(), lease_ms, pg_batch_decisions: batched });
        if (isPostgresUrl(db)) closeAfterTest(b);
        const agent = await b.operator.createAgent({ name: "buyer" });
        const { block_id } = await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
        const created = await b.gate.callTool(agent.token, "create_order", { amount: 10_000, currency: "INR", idempotency_key: "order-1" });
        const payment_id = await payInProcess(b, (created.structuredContent.order as { id: string }).id);
        const captureResult = (extra: Record<string, unknown>) =>
          b.gate.callTool(agent.token, "capture_payment", { payment_id, amount: 10_000, currency: "INR", ...extra });
        const capture = async (extra: Record<string, unknown>) => (await captureResult(extra)).structuredContent as Structured;
        const block = async () => (await b.operator.getBlock(block_id)) as unknown as Structured;
        const close = () => (isPostgresUrl(db) ? Promise.resolve() : b.close());
        return { b, clock, capture, captureResult, payment_id, block, close };
      }

      it("four captures of one payment at once under four keys: one is forwarded, three are refused IN_FLIGHT", async () => {
        const t = await setup();
        const provider = countRequests(t.b);
        let answered = 0;
        // Every capture the provider is asked for waits until each call has either been answered or
        // reached the provider, so all four are decided while the first is in flight.
        provider.holdCapturesUntil(() => answered + provider.captures() >= 4);
        const calls = [{ idempotency_key: "c1" }, ...other_captures.map(([, args]) => args)].map(async (args) => {
          const result = await t.capture(args);
          answered++;
          provider.check();
          return result;
        });
        const results = await Promise.all(calls);
        expect(results.filter((result) => result.effect === "ALLOW")).toHaveLength(1);
        const refused = results.filter((result) => result.effect === "BLOCK");
        expect(refused).toHaveLength(3);
        for (const result of refused) expect(result).toMatchObject({ rule: "IN_FLIGHT" });
        expect(provider.captures()).toBe(1);
        expect(await t.block()).toMatchObject({ spent: 10_000, held: 0 });
        await expectBooksBalance(t.b);
        await t.close();
      });

      describe("while a capture under key c1 is at the provider", () => {
        for (const [what, args] of other_captures) {
          it(`${what} → IN_FLIGHT, without a provider request; once c1 is settled → R3`, async () => {
            const t = await setup();
            const provider = countRequests(t.b);
            // Only c1's capture waits; any other would go straight through (and be counted).
            provider.holdCapturesUntil(() => false, 1);
            const first = t.capture({ idempotency_key: "c1" });
            await waitFor(() => provider.captures() === 1, 5_000, "the first capture at the provider");
            const requests = provider.requests();
            const refused = await t.captureResult(args);
            expect(refused.structuredContent).toMatchObject({
              effect: "BLOCK",
              rule: "IN_FLIGHT",
              reason: "another capture of this payment's reservation is still in flight; retry shortly",
              evidence: { receipt: { kind: "gate.decision" } },
            });
            // Transient: the agent is told to repeat the same call later, not to mint a new key.
            expect(refused.content[0]?.text).toContain("Repeat this same call, with the same idempotency_key, later");
            expect(provider.requests()).toBe(requests);
            provider.release();
            expect(await first).toMatchObject({ effect: "ALLOW", payment: { id: t.payment_id, status: "captured" } });
            expect(await t.capture(args)).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the reservation is already committed" });
            expect(provider.captures()).toBe(1);
            await t.close();
          });
        }
      });

      it("a capture whose lease ran out is outcome-unknown, not in flight: a capture under another key is forwarded", async () => {
        const t = await setup();
        const provider = countRequests(t.b);
        provider.holdCapturesUntil(() => provider.captures() >= 2, 1);
        const first = t.capture({ idempotency_key: "c1" });
        await waitFor(() => provider.captures() === 1, 5_000, "the first capture at the provider");
        t.clock.advance(lease_ms + 1);
        expect(await t.capture({ idempotency_key: "c2" })).toMatchObject({ effect: "ALLOW", payment: { id: t.payment_id, status: "captured" } });
        expect(provider.captures()).toBe(2);
        provider.release();
        await first;
        expect(await t.block()).toMatchObject({ spent: 10_000, held: 0 });
        await expectBooksBalance(t.b);
        await t.close();
      });

      it("a capture that failed (a 5xx, nothing moved) leaves nothing in flight: a capture under another key is forwarded", async () => {
        const t = await setup();
        t.b.simulator!.simulator.faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"] });
        expect(await t.capture({ idempotency_key: "c1" })).toMatchObject({ provider: "refused" });
        t.b.simulator!.simulator.faults.reset();
        expect(await t.capture({ idempotency_key: "c2" })).toMatchObject({ effect: "ALLOW", payment: { id: t.payment_id, status: "captured" } });
        await t.close();
      });

      it("a webhook that settles the payment while its capture is in flight completes that key: another capture is then R3, not IN_FLIGHT", async () => {
        const t = await setup();
        const provider = countRequests(t.b);
        // The capture lands at the provider and its webhook is delivered; its answer waits.
        provider.holdCapturesUntil(() => false, 0, true);
        const first = t.capture({ idempotency_key: "c1" });
        await waitFor(() => provider.captures() === 1, 5_000, "the first capture at the provider");
        await t.b.simulator!.simulator.deliverWebhooksNow();
        expect(await t.block()).toMatchObject({ spent: 10_000, held: 0 });
        expect(await t.capture({ idempotency_key: "c2" })).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the reservation is already committed" });
        provider.release();
        expect(await first).toMatchObject({ effect: "ALLOW", payment: { id: t.payment_id } });
        await expectBooksBalance(t.b);
        await t.close();
      });
    });
  }
}

/**
 * Wraps the gate's provider: counts every request (fetches and captures) and holds captures
 * back until `until()` holds (checked on each capture and on `check()`) or `release()`. Captures
 * past the first `hold_first` (all when 0) go straight through; `forward_first` sends a held
 * capture to the provider before it waits (it lands; only its answer is late).
 */
function countRequests(b: Bursar) {
  const context = b.gate.gateContext as { provider: Provider };
  const real = context.provider;
  let captures = 0;
  let requests = 0;
  let released: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (released = resolve));
  let until: () => boolean = () => true;
  let hold_first = 0;
  let forward_first = false;
  const check = () => {
    if (until()) released();
  };
  context.provider = Object.assign(Object.create(real) as Provider, {
    fetchPayment: (payment_id: string) => {
      requests++;
      return real.fetchPayment(payment_id);
    },
    capturePayment: async (payment_id: string, input: { amount: number; currency: string }) => {
      requests++;
      const index = ++captures;
      if (hold_first > 0 && index > hold_first) return real.capturePayment(payment_id, input);
      if (forward_first) {
        const outcome = await real.capturePayment(payment_id, input);
        check();
        await held;
        return outcome;
      }
      check();
      await held;
      return real.capturePayment(payment_id, input);
    },
  } satisfies Partial<Provider>);
  return {
    captures: () => captures,
    requests: () => requests,
    check,
    release: () => released(),
    holdCapturesUntil(condition: () => boolean, first = 0, forward = false) {
      until = condition;
      hold_first = first;
      forward_first = forward;
    },
  };
}
