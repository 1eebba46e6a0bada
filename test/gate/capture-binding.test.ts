// One payment, one reservation, whatever the provider does: a capture the provider may still
// carry out keeps its payment bound, so no second payment on the reservation is captured
// meanwhile; a bound payment that can no longer be captured is unbound (by the reservation check
// or the next capture decision); a capture answered with another payment settles nothing on
// anyone's block; a payment already bound to one reservation is refused on another (R3), with
// evidence; the reservation check records a capture of another payment than the bound one as its
// webhook would.

import { describe, expect, it } from "vitest";
import { checkReservation } from "../../src/gate/operator.js";
import { capture_unlanded_after_ms } from "../../src/ledger/complete.js";
import { createBursar, sequentialIds, type Bursar } from "../../src/index.js";
import type { Provider } from "../../src/provider/port.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";
import { expireInProcess, payInProcess, refundInProcess, replaceProvider } from "../support/inprocess.js";
import { expectBooksBalance } from "../support/ledger.js";
import { waitFor } from "../provider/support.js";

type Structured = Record<string, unknown>;

for (const backend of backends()) {
  describe(`${backend.name}: a capture binds one payment to one reservation`, () => {
    async function setup() {
      const db = await backend.db();
      const clock = manualClock();
      const b = await createBursar({ db, clock, ids: sequentialIds(), lease_ms: 60_000 });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const buyer = async (name: string) => {
        const agent = await b.operator.createAgent({ name });
        const { block_id } = await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
        const call = async (tool: string, args: Record<string, unknown>) => (await b.gate.callTool(agent.token, tool, args)).structuredContent as Structured;
        const order = async (amount: number, key: string) => ((await call("create_order", { amount, currency: "INR", idempotency_key: key })).order as { id: string }).id;
        const block = async () => (await b.operator.getBlock(block_id)) as unknown as Record<string, unknown>;
        return { agent, block_id, call, order, block };
      };
      const faults = () => b.simulator!.simulator.faults;
      const close = () => (isPostgresUrl(db) ? Promise.resolve() : b.close());
      return { b, clock, buyer, faults, close };
    }

    /** Agent "a" with one order of 9,000 paid twice at the checkout: two authorized payments on it. */
    async function twoPayments(t: Awaited<ReturnType<typeof setup>>) {
      const a = await t.buyer("a");
      const created = await a.call("create_order", { amount: 9_000, currency: "INR", idempotency_key: "order-1" });
      const order_id = (created.order as { id: string }).id;
      const reservation_id = created.reservation_id as string;
      return { a, reservation_id, first: await payInProcess(t.b, order_id), second: await payInProcess(t.b, order_id) };
    }

    /** A capture of `payment_id` that got a 5xx: nothing moved, and the payment stays bound. */
    async function bindByFailedCapture(t: Awaited<ReturnType<typeof setup>>, a: Awaited<ReturnType<typeof twoPayments>>["a"], payment_id: string) {
      t.faults().set({ error_5xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"] });
      expect(await a.call("capture_payment", { payment_id, amount: 9_000, currency: "INR" })).toMatchObject({ provider: "refused" });
      t.faults().reset();
    }

    /** `payment_id` is captured at the provider with the merchant's key, and its webhooks are lost. */
    async function capturedElsewhere(t: Awaited<ReturnType<typeof setup>>, payment_id: string) {
      t.faults().set({ webhook_drop_next: 10 });
      expect(await t.b.provider.capturePayment(payment_id, { amount: 9_000, currency: "INR" })).toMatchObject({ kind: "ok" });
    }

    /** The gate.settlement entries about `reservation_id` written since the log held `from` entries. */
    async function settlementsSince(b: Bursar, from: number, reservation_id: string): Promise<Array<Record<string, unknown>>> {
      const entries = await b.log.entries(from, await b.log.treeSize());
      const bodies = entries.filter((stored) => stored.entry.kind === "gate.settlement").map((stored) => stored.entry.body as Record<string, unknown>);
      return bodies.filter((body) => body.reservation_id === reservation_id);
    }

    it("a capture that got a 5xx keeps its payment bound: a second payment on the order is refused (R3), the first is captured on retry", async () => {
      const t = await setup();
      const { a, first, second } = await twoPayments(t);
      t.faults().set({ error_5xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"] });
      expect(await a.call("capture_payment", { payment_id: first, amount: 9_000, currency: "INR" })).toMatchObject({ provider: "refused" });
      const other = await a.call("capture_payment", { payment_id: second, amount: 9_000, currency: "INR" });
      expect(other).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the reservation is already bound to another payment" });
      expect(await a.call("capture_payment", { payment_id: first, amount: 9_000, currency: "INR" })).toMatchObject({ effect: "ALLOW", payment: { id: first, status: "captured" } });
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000 });
      await t.close();
    });

    it("a capture the provider refused (4xx) unbinds its payment: another payment on the order can be captured", async () => {
      const t = await setup();
      const { a, first, second } = await twoPayments(t);
      t.faults().set({ error_4xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"] });
      expect(await a.call("capture_payment", { payment_id: first, amount: 9_000, currency: "INR" })).toMatchObject({ provider: "refused" });
      expect(await a.call("capture_payment", { payment_id: second, amount: 9_000, currency: "INR" })).toMatchObject({ effect: "ALLOW", payment: { id: second } });
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000 });
      await t.close();
    });

    // The first capture hangs at the provider; while it is in flight, or once its lease has run
    // out (the next decision marks it outcome-unknown), it may still land. While it is in flight
    // no other capture of the reservation is even forwarded (IN_FLIGHT); once its lease has run
    // out one is, and the provider's refusal of it leaves the payment bound.
    for (const lease of ["live", "run out"] as const) {
      it(`a refused capture leaves the payment bound while an earlier capture of it, its lease ${lease}, may still land`, async () => {
        const t = await setup();
        const { a, first, second } = await twoPayments(t);
        const { release, captures } = holdFirstCapture(t.b);
        const slow = a.call("capture_payment", { payment_id: first, amount: 9_000, currency: "INR", idempotency_key: "slow" });
        await waitFor(() => captures() === 1, 5_000, "the first capture at the provider");
        if (lease === "run out") t.clock.advance(61_000);
        const fast = await a.call("capture_payment", { payment_id: first, amount: 9_000, currency: "INR", idempotency_key: "fast" });
        if (lease === "live") expect(fast).toMatchObject({ effect: "BLOCK", rule: "IN_FLIGHT" });
        else expect(fast).toMatchObject({ provider: "refused" });
        const other_payment = await a.call("capture_payment", { payment_id: second, amount: 9_000, currency: "INR" });
        expect(other_payment).toMatchObject({ effect: "BLOCK", rule: lease === "live" ? "IN_FLIGHT" : "R3" });
        expect(captures()).toBe(lease === "live" ? 1 : 2);
        release();
        expect(await slow).toMatchObject({ effect: "ALLOW", payment: { id: first, status: "captured" } });
        expect(await a.block()).toMatchObject({ held: 0, spent: 9_000 });
        await t.close();
      });
    }

    it("a capture whose error is followed by a webhook settling it tells the agent it was captured, and its key replays that", async () => {
      const t = await setup();
      const a = await t.buyer("a");
      const payment_id = await payInProcess(t.b, await a.order(9_000, "order-1"));
      let captured = false;
      let stale_answers = 1;
      const real = replaceProvider(t.b, {
        // The capture lands, its answer is lost, and the re-fetch still sees the payment authorized;
        // the payment.captured webhook arrives before the gate records the failure.
        capturePayment: async (id, input) => {
          await real.capturePayment(id, input);
          captured = true;
          await t.b.simulator!.simulator.deliverWebhooksNow();
          return { kind: "unknown", reason: "timeout" };
        },
        fetchPayment: async (id) => {
          const fetched = await real.fetchPayment(id);
          if (!captured || stale_answers-- <= 0 || fetched.kind !== "ok") return fetched;
          return { ...fetched, value: { ...fetched.value, status: "authorized" } };
        },
      });
      const args = { payment_id, amount: 9_000, currency: "INR", idempotency_key: "k1" };
      const answered = await a.call("capture_payment", args);
      expect(answered).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
      expect(await a.call("capture_payment", args)).toMatchObject({ effect: "ALLOW", replayed: true, payment: { id: payment_id } });
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000 });
      await t.close();
    });

    it("a capture answered with another agent's payment settles nothing and freezes no block: the outcome is unknown", async () => {
      const t = await setup();
      const a = await t.buyer("a");
      const b = await t.buyer("b");
      const a_payment = await payInProcess(t.b, await a.order(9_000, "order-a"));
      const b_payment = await payInProcess(t.b, await b.order(9_000, "order-b"));
      // b's payment is captured for real; its own webhook would settle b's reservation (rightly),
      // racing the checks below: it is dropped, so they see what the capture's answer did alone.
      t.faults().set({ webhook_drop_next: 10 });
      const real = replaceProvider(t.b, { capturePayment: (_payment_id, input) => real.capturePayment(b_payment, input) });
      const answered = await a.call("capture_payment", { payment_id: a_payment, amount: 9_000, currency: "INR" });
      expect(answered).toMatchObject({ effect: "ALLOW", provider: "unknown" });
      expect(String(answered.reason)).toContain(`the provider answered with payment ${b_payment}`);
      expect(await a.block()).toMatchObject({ held: 9_000, spent: 0, frozen: false });
      expect(await b.block()).toMatchObject({ held: 9_000, spent: 0, frozen: false });
      const inbox = await t.b.operator.inbox();
      expect(JSON.stringify(inbox)).toContain(String(answered.reservation_id));
      await t.close();
    });

    it("a payment bound to one reservation that the provider reports under another order is refused by R3, not a database error", async () => {
      const t = await setup();
      const a = await t.buyer("a");
      const first_order = await a.order(9_000, "order-1");
      const second_order = await a.order(9_000, "order-2");
      const payment_id = await payInProcess(t.b, first_order);
      // A 5xx leaves the payment bound to the first reservation.
      t.faults().set({ error_5xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"] });
      expect(await a.call("capture_payment", { payment_id, amount: 9_000, currency: "INR" })).toMatchObject({ provider: "refused" });
      const real = replaceProvider(t.b, {
        fetchPayment: async (id) => {
          const fetched = await real.fetchPayment(id);
          return fetched.kind === "ok" ? { ...fetched, value: { ...fetched.value, order_id: second_order } } : fetched;
        },
      });
      const refused = await a.call("capture_payment", { payment_id, amount: 9_000, currency: "INR", idempotency_key: "elsewhere" });
      expect(refused).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the payment is already bound to another reservation" });
      expect(refused.evidence).toMatchObject({ receipt: { kind: "gate.decision" } });
      expect(await a.block()).toMatchObject({ held: 18_000, spent: 0 });
      await t.close();
    });

    it("the check records a capture of another payment than the bound one as its webhook would: rejected, the block frozen, the money unreconciled once", async () => {
      const t = await setup();
      const { a, reservation_id, first, second } = await twoPayments(t);
      await bindByFailedCapture(t, a, first);
      await capturedElsewhere(t, second);
      const log_size = await t.b.log.treeSize();
      const checked = await checkReservation(t.b.gate.gateContext, reservation_id);
      expect(checked).toMatchObject({
        outcome: "rejected",
        reason: "captured payment differs from the bound payment",
        payment: { id: second, status: "captured" },
        settlements: [{ payment: { id: second }, outcome: "rejected" }],
      });
      expect(await a.block()).toMatchObject({ frozen: true, held: 9_000, spent: 0, unreconciled: 9_000, available: 1_000_000 - 18_000 });
      expect(await settlementsSince(t.b, log_size, reservation_id)).toEqual([
        expect.objectContaining({ action: "reject", via: "check", payment: expect.objectContaining({ id: second }), unreconciled: 9_000 }),
      ]);
      // Checked again, and its lost webhooks delivered after all: the payment is counted once.
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).toMatchObject({ outcome: "rejected" });
      const simulator = t.b.simulator!.simulator;
      const dropped = simulator.state.outbox().filter((entry) => entry.state === "dropped" && entry.body.includes(second));
      expect(dropped.map((entry) => entry.event)).toEqual(["payment.captured", "order.paid"]);
      t.faults().reset();
      const redelivered = dropped.map((entry) => simulator.redeliverWebhook(entry.event_id)?.seq);
      await simulator.deliverWebhooksNow();
      const answers = simulator.state.outbox().filter((entry) => redelivered.includes(entry.seq)).flatMap((entry) => entry.attempts.map((attempt) => attempt.status));
      expect(answers).toEqual([200, 200]);
      expect(await a.block()).toMatchObject({ frozen: true, held: 9_000, spent: 0, unreconciled: 9_000 });
      const already_counted = expect.objectContaining({ action: "reject", payment: expect.objectContaining({ id: second }), unreconciled: 0, already_counted: true });
      expect(await settlementsSince(t.b, log_size, reservation_id)).toEqual([expect.anything(), already_counted, already_counted, already_counted]);
      await expectBooksBalance(t.b);
      await t.close();
    });

    it("a payment counted as unreconciled that later settles its own reservation (the bound one ran out) moves from unreconciled to spent: counted once", async () => {
      const t = await setup();
      const { a, reservation_id, first, second } = await twoPayments(t);
      await bindByFailedCapture(t, a, first);
      await capturedElsewhere(t, second);
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).toMatchObject({ outcome: "rejected", reason: "captured payment differs from the bound payment" });
      expect(await a.block()).toMatchObject({ frozen: true, held: 9_000, spent: 0, unreconciled: 9_000 });
      // The bound payment's authorization runs out: one check weighs the other capture against
      // the binding (still a conflict, counted once), unbinds the dead payment and, in the same
      // run, finds the other payment the reservation's own capture.
      await expireInProcess(t.b, first);
      const log_size = await t.b.log.treeSize();
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).toMatchObject({
        outcome: "rejected",
        unbound_payment: { id: first },
        settlements: [
          { payment: { id: second }, outcome: "rejected" },
          { payment: { id: second }, outcome: "applied" },
        ],
      });
      expect(await a.block()).toMatchObject({ frozen: true, held: 0, spent: 9_000, unreconciled: 0, available: 1_000_000 - 9_000 });
      expect(await settlementsSince(t.b, log_size, reservation_id)).toEqual([
        expect.objectContaining({ action: "reject", via: "check", payment: expect.objectContaining({ id: second }), already_counted: true }),
        expect.objectContaining({ action: "payment.unbound", via: "check", payment_id: first }),
        expect.objectContaining({ action: "commit", via: "check", payment: expect.objectContaining({ id: second }), reconciled: 9_000 }),
      ]);
      // Its lost webhooks, delivered after all, are no-ops.
      t.faults().reset();
      const simulator = t.b.simulator!.simulator;
      for (const entry of simulator.state.outbox().filter((entry) => entry.state === "dropped" && entry.body.includes(second))) simulator.redeliverWebhook(entry.event_id);
      await simulator.deliverWebhooksNow();
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000, unreconciled: 0 });
      await expectBooksBalance(t.b);
      await t.close();
    });

    it("a capture of another payment while the dead one was bound is still a conflict to the check that unbinds: frozen, then settled, in one run", async () => {
      const t = await setup();
      const { a, reservation_id, first, second } = await twoPayments(t);
      await bindByFailedCapture(t, a, first);
      await capturedElsewhere(t, second);
      await expireInProcess(t.b, first);
      // No check ran while its webhooks were lost: this one alone sees the capture.
      const checked = await checkReservation(t.b.gate.gateContext, reservation_id);
      expect(checked).toMatchObject({ outcome: "rejected", reason: "captured payment differs from the bound payment", unbound_payment: { id: first } });
      expect(await a.block()).toMatchObject({ frozen: true, held: 0, spent: 9_000, unreconciled: 0 });
      await expectBooksBalance(t.b);
      await t.close();
    });

    it("the check settles a capture the merchant has refunded since (refunded, captured: true) as its lost webhook would", async () => {
      const t = await setup();
      const a = await t.buyer("a");
      const created = await a.call("create_order", { amount: 9_000, currency: "INR", idempotency_key: "order-1" });
      const reservation_id = created.reservation_id as string;
      const payment_id = await payInProcess(t.b, (created.order as { id: string }).id);
      // The capture lands, but its answer, the re-fetch and its webhooks are lost.
      t.faults().set({ webhook_drop_next: 10 });
      let captured = false;
      const real = replaceProvider(t.b, {
        capturePayment: async (id, input) => {
          await real.capturePayment(id, input);
          captured = true;
          return { kind: "unknown", reason: "timeout" };
        },
        fetchPayment: async (id) => (captured ? { kind: "unknown", reason: "timeout" } : real.fetchPayment(id)),
      });
      const args = { payment_id, amount: 9_000, currency: "INR", idempotency_key: "capture-1" };
      expect(await a.call("capture_payment", args)).toMatchObject({ provider: "unknown" });
      (t.b.gate.gateContext as { provider: Provider }).provider = real;
      await refundInProcess(t.b, payment_id);
      const checked = await checkReservation(t.b.gate.gateContext, reservation_id);
      expect(checked).toMatchObject({ outcome: "applied", payment: { id: payment_id, status: "refunded", captured: true } });
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000, unreconciled: 0, frozen: false });
      expect(await a.call("capture_payment", args)).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "refunded", captured: true } });
      await expectBooksBalance(t.b);
      await t.close();
    });

    it("a capture whose answer is lost, its payment refunded since (refunded, captured: true), is settled as a capture, not refused", async () => {
      const t = await setup();
      const a = await t.buyer("a");
      const payment_id = await payInProcess(t.b, await a.order(9_000, "order-1"));
      const real = replaceProvider(t.b, {
        capturePayment: async (id, input) => {
          await real.capturePayment(id, input);
          await refundInProcess(t.b, id);
          return { kind: "unknown", reason: "timeout" };
        },
      });
      const args = { payment_id, amount: 9_000, currency: "INR", idempotency_key: "capture-1" };
      expect(await a.call("capture_payment", args)).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "refunded", captured: true } });
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000, unreconciled: 0, frozen: false });
      await expectBooksBalance(t.b);
      await t.close();
    });

    it("the check unbinds a bound payment the provider refunded uncaptured (its authorization ran out): another payment on the order is then captured", async () => {
      const t = await setup();
      const { a, reservation_id, first, second } = await twoPayments(t);
      await bindByFailedCapture(t, a, first);
      await expireInProcess(t.b, first);
      const log_size = await t.b.log.treeSize();
      const checked = await checkReservation(t.b.gate.gateContext, reservation_id);
      expect(checked).toMatchObject({ outcome: "no_capture", unbound_payment: { id: first, status: "refunded" } });
      expect(await settlementsSince(t.b, log_size, reservation_id)).toEqual([
        expect.objectContaining({ action: "payment.unbound", via: "check", payment_id: first, payment_status: "refunded" }),
      ]);
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).not.toHaveProperty("unbound_payment");
      expect(await a.call("capture_payment", { payment_id: second, amount: 9_000, currency: "INR" })).toMatchObject({ effect: "ALLOW", payment: { id: second, status: "captured" } });
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000, frozen: false, unreconciled: 0 });
      await expectBooksBalance(t.b);
      await t.close();
    });

    for (const named of ["the refunded payment, then the other one", "the other payment at once"] as const) {
      it(`a capture naming ${named} unbinds a bound payment the provider refunded uncaptured, and the other payment is captured`, async () => {
        const t = await setup();
        const { a, reservation_id, first, second } = await twoPayments(t);
        await bindByFailedCapture(t, a, first);
        await expireInProcess(t.b, first);
        const log_size = await t.b.log.treeSize();
        if (named === "the refunded payment, then the other one") {
          const refused = await a.call("capture_payment", { payment_id: first, amount: 9_000, currency: "INR" });
          expect(refused).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the payment is refunded, not authorized" });
        }
        expect(await a.call("capture_payment", { payment_id: second, amount: 9_000, currency: "INR" })).toMatchObject({ effect: "ALLOW", payment: { id: second, status: "captured" } });
        expect(await settlementsSince(t.b, log_size, reservation_id)).toContainEqual(
          expect.objectContaining({ action: "payment.unbound", via: "capture", payment_id: first, payment_status: "refunded" }),
        );
        expect(await a.block()).toMatchObject({ held: 0, spent: 9_000, frozen: false });
        await expectBooksBalance(t.b);
        await t.close();
      });
    }

    // A capture of the bound payment hangs at the provider. While it is in flight the binding
    // stays, and any other capture of the reservation is refused as such. Once its lease has run
    // out its outcome is unknown; but it was of a payment no capture can land on any more
    // (refunded uncaptured), so it moved nothing: the next capture decision unbinds the payment,
    // resolves the unknown outcome, and forwards the other payment's capture.
    for (const lease of ["live", "run out"] as const) {
      it(`a bound payment refunded uncaptured, while a capture of it hangs with its lease ${lease}: ${lease === "live" ? "stays bound" : "is unbound"}`, async () => {
        const t = await setup();
        const { a, reservation_id, first, second } = await twoPayments(t);
        const { release, captures } = holdFirstCapture(t.b);
        const slow = a.call("capture_payment", { payment_id: first, amount: 9_000, currency: "INR", idempotency_key: "slow" });
        await waitFor(() => captures() === 1, 5_000, "the first capture at the provider");
        await expireInProcess(t.b, first);
        if (lease === "run out") t.clock.advance(61_000);
        const log_size = await t.b.log.treeSize();
        const other = await a.call("capture_payment", { payment_id: second, amount: 9_000, currency: "INR" });
        if (lease === "live") {
          const reason = "another capture of this payment's reservation is still in flight; retry shortly";
          expect(other).toMatchObject({ effect: "BLOCK", rule: "IN_FLIGHT", reason });
          expect(await checkReservation(t.b.gate.gateContext, reservation_id)).not.toHaveProperty("unbound_payment");
        } else {
          // Forwarded: this provider refuses every capture but the first (a 4xx).
          expect(other).toMatchObject({ provider: "refused" });
          const resolved = { action: "payment.unbound", via: "capture", payment_id: first, outcome_resolved: expect.objectContaining({ capture_keys_dropped: 1 }) };
          expect(await settlementsSince(t.b, log_size, reservation_id)).toContainEqual(expect.objectContaining(resolved));
        }
        const bound = lease === "live" ? first : null;
        expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ status: "held", payment_id: bound, outcome_unknown: 0 });
        release();
        expect(await slow).toMatchObject({ provider: "refused" });
        expect(await a.block()).toMatchObject({ held: 9_000, spent: 0 });
        await expectBooksBalance(t.b);
        await t.close();
      });
    }

    it("a capture resolved by the check while it still hung (its lease run out) does not mark the reservation unknown again when it ends unanswered", async () => {
      const t = await setup();
      const { a, reservation_id, first } = await twoPayments(t);
      let release: () => void = () => undefined;
      const held_back = new Promise<void>((resolve) => (release = resolve));
      let captures = 0;
      let fetches = 0;
      const real = replaceProvider(t.b, {
        capturePayment: async () => {
          captures++;
          await held_back;
          return { kind: "unknown", reason: "timeout" };
        },
        fetchPayment: async (id) => (++fetches === 1 ? real.fetchPayment(id) : { kind: "unknown", reason: "HTTP 503" }),
      });
      const args = { payment_id: first, amount: 9_000, currency: "INR", idempotency_key: "stalled" };
      const stalled = a.call("capture_payment", args);
      await waitFor(() => captures === 1, 5_000, "the capture at the provider");
      await expireInProcess(t.b, first);
      t.clock.advance(61_000);
      // The check asks for the order's payments, which this provider answers.
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).toMatchObject({ unbound_payment: { id: first } });
      release();
      expect(await stalled).toMatchObject({ provider: "unknown", reason: expect.stringContaining("moved nothing") });
      (t.b.gate.gateContext as { provider: Provider }).provider = real;
      expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ status: "held", payment_id: null, outcome_unknown: 0 });
      expect(await a.call("capture_payment", args)).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the payment is refunded, not authorized" });
      await expectBooksBalance(t.b);
      await t.close();
    });

    it("a late answer to the order's creation does not take a capture whose outcome is unknown out of the inbox", async () => {
      const t = await setup();
      const a = await t.buyer("a");
      let release: () => void = () => undefined;
      const held_back = new Promise<void>((resolve) => (release = resolve));
      let fetches = 0;
      const real = replaceProvider(t.b, {
        // The order is made at once; its answer stalls past the call's lease.
        createOrder: async (input) => {
          const made = await real.createOrder(input);
          await held_back;
          return made;
        },
        capturePayment: async () => ({ kind: "unknown", reason: "timeout" }),
        fetchPayment: async (id) => (++fetches === 1 ? real.fetchPayment(id) : { kind: "unknown", reason: "HTTP 503" }),
      });
      const created = a.call("create_order", { amount: 9_000, currency: "INR", idempotency_key: "late" });
      await waitFor(() => t.b.simulator!.simulator.state.orders().length > 0, 5_000, "the order at the provider");
      t.clock.advance(61_000);
      await t.b.ledger.sweep();
      const order = t.b.simulator!.simulator.state.orders()[0] as { id: string; receipt: string };
      const reservation_id = order.receipt;
      // The check finds the order by its receipt; the buyer pays; the capture goes unanswered.
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).toMatchObject({ order_id: order.id });
      const payment_id = await payInProcess(t.b, order.id);
      expect(await a.call("capture_payment", { payment_id, amount: 9_000, currency: "INR" })).toMatchObject({ provider: "unknown" });
      expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ payment_id, outcome_unknown: 1 });
      release();
      await created;
      expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ payment_id, outcome_unknown: 1 });
      (t.b.gate.gateContext as { provider: Provider }).provider = real;
      await expectBooksBalance(t.b);
      await t.close();
    });

    // A capture and its re-fetch both unanswered: the reservation is outcome-unknown, bound to its
    // payment. Once the provider refunds that payment uncaptured, the check resolves it.
    it("the check resolves a capture whose process died before asking the provider once it has been unknown for 10 minutes, the payment still authorized: out of the inbox, the key decided afresh", async () => {
      const t = await setup();
      const { a, reservation_id, first } = await twoPayments(t);
      const args = { payment_id: first, amount: 9_000, currency: "INR", idempotency_key: "died" };
      const fetched = await t.b.provider.fetchPayment(first);
      if (fetched.kind !== "ok") throw new Error("the simulator did not answer for the payment");
      const payment = { fetched: true as const, ...fetched.value, order_id: fetched.value.order_id as string };
      // Decided and bound, its key in flight; the process dies before the provider is asked.
      expect((await t.b.ledger.authorize({ agent_id: a.agent.agent_id, tool: "capture_payment", args, payment })).verdict.effect).toBe("ALLOW");
      t.clock.advance(t.b.ledger.context.lease_ms + 1);
      // Too soon to tell from a capture still on its way: kept, saying from when a check resolves it.
      const early = await checkReservation(t.b.gate.gateContext, reservation_id);
      expect(early).toMatchObject({ outcome: "no_capture", resolve_from: expect.any(String) });
      expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ payment_id: first, outcome_unknown: 1 });
      expect(await a.call("capture_payment", args)).toMatchObject({ provider: "unknown" });
      t.clock.advance(capture_unlanded_after_ms);
      const from = await t.b.log.treeSize();
      // It answered no_capture and changed nothing, however late: the key replayed "unknown" until the authorization lapsed.
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).toMatchObject({ outcome: "no_capture", capture_resolved: true });
      expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ payment_id: first, outcome_unknown: 0 });
      expect(await settlementsSince(t.b, from, reservation_id)).toEqual([
        expect.objectContaining({ action: "capture.unlanded", via: "check", payment_id: first, outcome_resolved: { was: expect.any(String), capture_keys_dropped: 1 } }),
      ]);
      expect((await t.b.ledger.inbox()).unknown_outcomes).toEqual([]);
      expect(await a.call("capture_payment", args)).toMatchObject({ effect: "ALLOW", payment: { id: first, status: "captured" } });
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000, frozen: false, unreconciled: 0 });
      await expectBooksBalance(t.b);
      await t.close();
    });

    it("the check resolves an unknown capture outcome once its payment is refunded uncaptured: unbound, out of the inbox, the key decided afresh", async () => {
      const t = await setup();
      const { a, reservation_id, first, second } = await twoPayments(t);
      let fetches = 0;
      const real = replaceProvider(t.b, {
        capturePayment: async () => ({ kind: "unknown", reason: "timeout" }),
        // The capture's own fetch of the payment is answered; the re-fetch after the capture is not.
        fetchPayment: async (id) => (++fetches === 1 ? real.fetchPayment(id) : { kind: "unknown", reason: "HTTP 503" }),
      });
      const args = { payment_id: first, amount: 9_000, currency: "INR", idempotency_key: "unanswered" };
      expect(await a.call("capture_payment", args)).toMatchObject({ provider: "unknown" });
      (t.b.gate.gateContext as { provider: Provider }).provider = real;
      expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ payment_id: first, outcome_unknown: 1 });
      // Still authorized: the capture may yet land, so nothing is resolved.
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).toMatchObject({ outcome: "no_capture" });
      expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ payment_id: first, outcome_unknown: 1 });
      await expireInProcess(t.b, first);
      expect(await checkReservation(t.b.gate.gateContext, reservation_id)).toMatchObject({ outcome: "no_capture", unbound_payment: { id: first, status: "refunded" } });
      expect(await t.b.ledger.reservation(reservation_id)).toMatchObject({ payment_id: null, outcome_unknown: 0 });
      // The key no longer replays "unknown": repeated, it is decided afresh.
      expect(await a.call("capture_payment", args)).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the payment is refunded, not authorized" });
      expect(await a.call("capture_payment", { payment_id: second, amount: 9_000, currency: "INR" })).toMatchObject({ effect: "ALLOW", payment: { id: second, status: "captured" } });
      expect(await a.block()).toMatchObject({ held: 0, spent: 9_000, frozen: false, unreconciled: 0 });
      await expectBooksBalance(t.b);
      await t.close();
    });

    it("a payment on a reservation still waiting for approval is refused under R3, not captured: the gate sent no order for it", async () => {
      const t = await setup();
      const a = await t.buyer("a");
      const held = await a.call("create_order", { amount: 300_000, currency: "INR", idempotency_key: "big" });
      expect(held).toMatchObject({ effect: "HOLD" });
      const reservation_id = (await t.b.ledger.approval(held.approval_id as string))!.reservation_id;
      // Someone holding the merchant's key makes an order on the reservation's receipt; it is paid,
      // and a check links it to the reservation.
      const made = await t.b.provider.createOrder({ amount: 300_000, currency: "INR", receipt: reservation_id });
      const payment_id = await payInProcess(t.b, made.kind === "ok" ? made.value.id : "");
      await checkReservation(t.b.gate.gateContext, reservation_id);
      const refused = await a.call("capture_payment", { payment_id, amount: 300_000, currency: "INR" });
      expect(refused).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the reservation still waits for an operator's approval: the gate has sent no order for it" });
      expect(await t.b.provider.fetchPayment(payment_id)).toMatchObject({ kind: "ok", value: { status: "authorized" } });
      expect(await a.block()).toMatchObject({ held: 300_000, spent: 0, frozen: false, unreconciled: 0 });
      await expectBooksBalance(t.b);
      await t.close();
    });
  });
}

/** The first capture hangs at the provider until released; every later one is refused outright (a 4xx). */
function holdFirstCapture(b: Bursar): { release: () => void; captures: () => number } {
  let release: () => void = () => undefined;
  const held_back = new Promise<void>((resolve) => (release = resolve));
  let captures = 0;
  const real = replaceProvider(b, {
    capturePayment: async (payment_id, input) => {
      if (++captures === 1) {
        await held_back;
        return real.capturePayment(payment_id, input);
      }
      return { kind: "refused", status: 400, error: { code: "BAD_REQUEST_ERROR", description: "try again later" } };
    },
  });
  return { release: () => release(), captures: () => captures };
}
