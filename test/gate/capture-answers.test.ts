// What the gate does with the provider's answer about a capture: an answer for another amount or
// currency than was asked (the capture's own, its re-fetch's, the pre-capture look-up's, or an
// order's payment list in the reservation check) settles nothing and releases nothing: the money
// stays held until a webhook or a check proves the capture. A capture answered 200 with a payment
// that is not captured is asked about again, never reported as captured, and freezes no block.

import { describe, expect, it } from "vitest";
import { checkReservation } from "../../src/gate/operator.js";
import { createBursar, sequentialIds } from "../../src/index.js";
import type { ProviderPayment } from "../../src/provider/port.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";
import { payInProcess, replaceProvider, restoreProvider } from "../support/inprocess.js";
import { expectBooksBalance } from "../support/ledger.js";

type Structured = Record<string, unknown>;

/** The inbox's reason for the test's reservation among the outcome-unknown ones, if listed. */
async function inboxReason(t: { b: { operator: { inbox(): Promise<unknown> } }; reservation_id: string }): Promise<string | undefined> {
  const inbox = (await t.b.operator.inbox()) as { unknown_outcomes: Array<{ reservation_id: string; unknown_reason?: string | null }> };
  return inbox.unknown_outcomes.find((row) => row.reservation_id === t.reservation_id)?.unknown_reason ?? undefined;
}

for (const backend of backends()) {
  describe(`${backend.name}: the provider's answer about a capture`, () => {
    async function setup(amount: number) {
      const db = await backend.db();
      const b = await createBursar({ db, clock: manualClock(), ids: sequentialIds(), lease_ms: 60_000 });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const agent = await b.operator.createAgent({ name: "buyer" });
      const { block_id } = await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: amount, ttl_seconds: 86_400 });
      const call = async (tool: string, args: Record<string, unknown>) => {
        const result = await b.gate.callTool(agent.token, tool, args);
        return { structured: result.structuredContent as Structured, text: (result.content as Array<{ text: string }>)[0]?.text ?? "" };
      };
      const created = (await call("create_order", { amount, currency: "INR", idempotency_key: "order-1" })).structured;
      const order_id = (created.order as { id: string }).id;
      const reservation_id = created.reservation_id as string;
      const payment_id = await payInProcess(b, order_id);
      const block = async () => (await b.operator.getBlock(block_id)) as unknown as Structured;
      // Webhooks are lost: what the gate does is what the provider's answers alone made it do.
      b.simulator!.simulator.faults.set({ webhook_drop_next: 10 });
      const close = () => (isPostgresUrl(db) ? Promise.resolve() : b.close());
      return { b, call, order_id, reservation_id, payment_id, block, close };
    }

    /** The answer's payment altered as `lie` says. */
    const told = (payment: ProviderPayment, lie: Partial<ProviderPayment>): ProviderPayment => ({ ...payment, ...lie });

    /** No money committed, none released: the whole order still held and nothing else. */
    async function expectStillHeld(t: Awaited<ReturnType<typeof setup>>, amount: number) {
      expect(await t.block()).toMatchObject({ held: amount, spent: 0, unreconciled: 0, frozen: false, available: 0 });
      // Nothing of the block can be spent again meanwhile (R1).
      expect((await t.call("create_order", { amount: 100, currency: "INR", idempotency_key: "again" })).structured).toMatchObject({ effect: "BLOCK", rule: "R1" });
    }

    const lies: Array<[string, Partial<ProviderPayment>]> = [
      ["amount 0", { amount: 0 }],
      ["a lower amount", { amount: 100 }],
      ["a higher amount", { amount: 150_000 }],
      ["another currency", { currency: "USD" }],
    ];

    for (const [what, lie] of lies) {
      it(`a capture answered with ${what} (the provider really captured all of it) commits nothing and releases nothing: outcome unknown, in the inbox, a check settles it`, async () => {
        const t = await setup(100_000);
        const real = replaceProvider(t.b, {
          capturePayment: async (id, input) => {
            const captured = await real.capturePayment(id, input);
            return captured.kind === "ok" ? { ...captured, value: told(captured.value, lie) } : captured;
          },
        });
        const answered = await t.call("capture_payment", { payment_id: t.payment_id, amount: 100_000, currency: "INR" });
        expect(answered.structured).toMatchObject({ effect: "ALLOW", provider: "unknown", reservation_id: t.reservation_id });
        expect(String(answered.structured.reason)).toContain(`when asked to capture 100000 INR`);
        expect(answered.text).toMatch(/^UNKNOWN/);
        await expectStillHeld(t, 100_000);
        expect(JSON.stringify(await t.b.operator.inbox())).toContain(t.reservation_id);
        // The check asks the provider, which lists the capture as it is: held becomes spent.
        restoreProvider(t.b, real);
        expect(await checkReservation(t.b.gate.gateContext, t.reservation_id)).toMatchObject({ outcome: "applied", payment: { id: t.payment_id, amount: 100_000 } });
        expect(await t.block()).toMatchObject({ held: 0, spent: 100_000, frozen: false });
        await expectBooksBalance(t.b);
        await t.close();
      });
    }

    it("a capture that went unanswered and whose re-fetch says captured for 0 commits nothing: outcome unknown", async () => {
      const t = await setup(100_000);
      let captured = false;
      const real = replaceProvider(t.b, {
        capturePayment: async (id, input) => {
          await real.capturePayment(id, input);
          captured = true;
          return { kind: "unknown", reason: "timeout" };
        },
        fetchPayment: async (id) => {
          const fetched = await real.fetchPayment(id);
          return captured && fetched.kind === "ok" ? { ...fetched, value: told(fetched.value, { amount: 0 }) } : fetched;
        },
      });
      const answered = await t.call("capture_payment", { payment_id: t.payment_id, amount: 100_000, currency: "INR" });
      expect(answered.structured).toMatchObject({ effect: "ALLOW", provider: "unknown" });
      await expectStillHeld(t, 100_000);
      await t.close();
    });

    it("a payment captured outside the gate that the look-up before a capture reports for 0 is not settled for 0", async () => {
      const t = await setup(100_000);
      expect(await t.b.provider.capturePayment(t.payment_id, { amount: 100_000, currency: "INR" })).toMatchObject({ kind: "ok" });
      const real = replaceProvider(t.b, {
        fetchPayment: async (id) => {
          const fetched = await real.fetchPayment(id);
          return fetched.kind === "ok" ? { ...fetched, value: told(fetched.value, { amount: 0 }) } : fetched;
        },
      });
      expect((await t.call("capture_payment", { payment_id: t.payment_id, amount: 100_000, currency: "INR" })).structured).toMatchObject({ effect: "BLOCK", rule: "R3" });
      await expectStillHeld(t, 100_000);
      // Listed, not left held outside every list an operator watches.
      expect(await inboxReason(t)).toContain(`payment ${t.payment_id} captured for 0 INR, not the 100000 INR held`);
      await t.close();
    });

    for (const bound of [false, true]) {
      it(`the reservation check does not settle a capture listed for 0 (payment ${bound ? "bound by an unanswered capture" : "not bound"}): outcome unknown, the money held`, async () => {
        const t = await setup(100_000);
        if (bound) {
          t.b.simulator!.simulator.faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"], webhook_drop_next: 10 });
          expect((await t.call("capture_payment", { payment_id: t.payment_id, amount: 100_000, currency: "INR" })).structured).toMatchObject({ provider: "refused" });
        }
        // Captured with the merchant's key; its webhooks are lost.
        expect(await t.b.provider.capturePayment(t.payment_id, { amount: 100_000, currency: "INR" })).toMatchObject({ kind: "ok" });
        const real = replaceProvider(t.b, {
          fetchOrderPayments: async (order_id) => {
            const listed = await real.fetchOrderPayments(order_id);
            return listed.kind === "ok" ? { ...listed, value: listed.value.map((payment) => told(payment, { amount: 0 })) } : listed;
          },
        });
        const checked = await checkReservation(t.b.gate.gateContext, t.reservation_id);
        expect(checked).toMatchObject({ outcome: "unknown", order_id: t.order_id });
        expect(String(checked.reason)).toContain(`payment ${t.payment_id} captured for 0 INR, not the 100000 INR held`);
        await expectStillHeld(t, 100_000);
        expect(await inboxReason(t)).toContain(`payment ${t.payment_id} captured for 0 INR, not the 100000 INR held`);
        restoreProvider(t.b, real);
        expect(await checkReservation(t.b.gate.gateContext, t.reservation_id)).toMatchObject({ outcome: "applied" });
        expect(await t.block()).toMatchObject({ held: 0, spent: 100_000, frozen: false });
        await expectBooksBalance(t.b);
        await t.close();
      });
    }

    for (const status of ["authorized", "failed"] as const) {
      it(`a capture answered 200 with the payment ${status} (nothing captured) is not reported captured and freezes nothing; repeated, it captures`, async () => {
        const t = await setup(9_000);
        const real = replaceProvider(t.b, {
          capturePayment: async (id) => {
            const fetched = await real.fetchPayment(id);
            return fetched.kind === "ok" ? { ...fetched, value: told(fetched.value, { status, captured: false }) } : fetched;
          },
        });
        const args = { payment_id: t.payment_id, amount: 9_000, currency: "INR", idempotency_key: "capture-1" };
        const answered = await t.call("capture_payment", args);
        expect(answered.text).toMatch(/^NOT CAPTURED/);
        expect(answered.structured.provider).not.toBe("captured");
        expect(answered.structured.payment).toBeUndefined();
        expect(await t.block()).toMatchObject({ held: 9_000, spent: 0, unreconciled: 0, frozen: false });
        // The key was not stored with a capture: repeated against an honest provider, it captures.
        restoreProvider(t.b, real);
        expect((await t.call("capture_payment", args)).structured).toMatchObject({ effect: "ALLOW", payment: { id: t.payment_id, status: "captured" } });
        expect(await t.block()).toMatchObject({ held: 0, spent: 9_000, frozen: false });
        await expectBooksBalance(t.b);
        await t.close();
      });
    }

    it("a capture answered 200 with the payment authorized, though it landed, settles by the re-fetch", async () => {
      const t = await setup(9_000);
      const real = replaceProvider(t.b, {
        capturePayment: async (id, input) => {
          const captured = await real.capturePayment(id, input);
          return captured.kind === "ok" ? { ...captured, value: told(captured.value, { status: "authorized", captured: false }) } : captured;
        },
      });
      const answered = await t.call("capture_payment", { payment_id: t.payment_id, amount: 9_000, currency: "INR" });
      expect(answered.structured).toMatchObject({ effect: "ALLOW", payment: { id: t.payment_id, status: "captured" } });
      expect(await t.block()).toMatchObject({ held: 0, spent: 9_000, frozen: false });
      await t.close();
    });
  });
}
