// A hold whose order was never made is released by the reservation check, and only then: the
// creation went unanswered (a 5xx or a timeout before the provider acted, or the process died),
// the provider lists no order with the reservation's receipt, and that has stayed so for
// order_absent_after_ms since. Before, such a hold stayed held for good (the check said
// "not_found" and nothing could release it). A lookup the provider refused is not "no order";
// a call still waiting for the provider keeps the hold; a late order on the receipt cannot be
// captured through the gate.

import { describe, expect, it } from "vitest";
import { approve, checkReservation } from "../../src/gate/operator.js";
import { createBursar, sequentialIds, type Bursar } from "../../src/index.js";
import { renderStored } from "../../src/gate/replay.js";
import { order_absent_after_ms, order_absent_reason } from "../../src/ledger/complete.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";
import type { Provider } from "../../src/provider/port.js";
import { payInProcess } from "../support/inprocess.js";
import { expectBooksBalance } from "../support/ledger.js";

type Structured = Record<string, unknown>;
const lease_ms = 60_000;

for (const backend of backends()) {
  describe(`${backend.name}: a hold whose order was never made`, () => {
    async function setup(block: Record<string, unknown> = {}) {
      const db = await backend.db();
      const clock = manualClock();
      const b = await createBursar({ db, clock, ids: sequentialIds(), lease_ms });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const agent = await b.operator.createAgent({ name: "buyer" });
      const { block_id } = await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400, ...block });
      const call = async (tool: string, args: Record<string, unknown>) => (await b.gate.callTool(agent.token, tool, args)).structuredContent as Structured;
      const check = (reservation_id: string) => checkReservation(b.gate.gateContext, reservation_id);
      const held = async () => (await b.operator.getBlock(block_id)).held;
      const faults = b.simulator!.simulator.faults;
      /** An order whose creation got a 5xx before the provider acted, released by a check once the wait is over. */
      const released = async (amount: number): Promise<string> => {
        faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/orders"] });
        const reservation_id = (await call("create_order", { amount, currency: "INR" })).reservation_id as string;
        clock.advance(order_absent_after_ms);
        expect(await check(reservation_id)).toMatchObject({ outcome: "released" });
        return reservation_id;
      };
      /** The provider makes the order after all, on the released reservation's receipt (a request stuck somewhere). */
      const lateOrder = async (reservation_id: string, amount: number): Promise<string> => {
        const late = await b.provider.createOrder({ amount, currency: "INR", receipt: reservation_id });
        expect(late.kind).toBe("ok");
        return late.kind === "ok" ? late.value.id : "";
      };
      return { b, clock, agent, block_id, call, check, held, faults, released, lateOrder };
    }

    /** The release entries the log holds for a reservation. */
    async function releases(b: Bursar, reservation_id: string): Promise<Array<Record<string, unknown>>> {
      const entries = await b.log.entries(0, await b.log.treeSize());
      return entries.map((stored) => stored.entry.body as Record<string, unknown>).filter((body) => body.action === "release" && body.reservation_id === reservation_id);
    }

    it("is released by a check once the provider has listed no order for the whole wait, and the same call is then decided again", async () => {
      const { b, clock, call, check, held, faults } = await setup();
      faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/orders"] });
      const args = { amount: 4_000, currency: "INR", idempotency_key: "lost-1" };
      const lost = await call("create_order", args);
      expect(lost).toMatchObject({ provider: "unknown" });
      const reservation_id = lost.reservation_id as string;

      const early = await check(reservation_id);
      expect(early).toMatchObject({ reservation_id, outcome: "not_found", release_from: new Date(clock().getTime() + order_absent_after_ms).toISOString() });
      expect(early.reason).toContain("the provider has no order for this reservation");
      expect(await held()).toBe(4_000);
      expect(await call("create_order", args)).toMatchObject({ replayed: true, provider: "unknown", reservation_id });

      clock.advance(order_absent_after_ms);
      const released = await check(reservation_id);
      expect(released).toMatchObject({ reservation_id, outcome: "released" });
      expect(await held()).toBe(0);
      expect((await b.ledger.reservation(reservation_id))?.status).toBe("released");
      expect((await b.ledger.inbox()).unknown_outcomes).toEqual([]);
      expect(await releases(b, reservation_id)).toEqual([expect.objectContaining({ amount: 4_000, reason: released.reason })]);

      // The key was dropped with the hold: the same call creates the order it asked for, once.
      const again = await call("create_order", args);
      expect(again).toMatchObject({ effect: "ALLOW", order: { amount: 4_000, receipt: again.reservation_id } });
      expect(again.reservation_id).not.toBe(reservation_id);
      expect(await call("create_order", args)).toMatchObject({ replayed: true, reservation_id: again.reservation_id });
      expect(await held()).toBe(4_000);

      // A second check changes nothing: it writes only the record of what the provider answered.
      const size = await b.log.treeSize();
      expect(await check(reservation_id)).toMatchObject({ outcome: "not_found", reason: expect.stringContaining("the reservation is released") });
      expect(await b.log.treeSize()).toBe(size + 1);
      const [asked] = await b.log.entries(size, size + 1);
      expect(asked!.entry).toMatchObject({ kind: "gate.operator", body: { action: "reservation.check", reservation_id, outcome: "not_found" } });
      await expectBooksBalance(b);
    });

    it("is kept while its call still waits for the provider, and released only a full wait after the lease ran out", async () => {
      const { b, clock, agent, check, held } = await setup();
      // Decided and held, its key in flight: the process then stops before the provider answers.
      const decided = await b.ledger.authorize({ agent_id: agent.agent_id, tool: "create_order", args: { amount: 2_000, currency: "INR", idempotency_key: "died" } });
      const reservation_id = decided.reservation!.reservation_id;
      expect(await check(reservation_id)).toMatchObject({ outcome: "not_found", reason: expect.stringContaining("still waiting for the provider") });

      clock.advance(lease_ms + 1);
      await b.ledger.sweep();
      const marked = await check(reservation_id);
      expect(marked).toMatchObject({ outcome: "not_found", release_from: new Date(clock().getTime() + order_absent_after_ms).toISOString() });
      clock.advance(order_absent_after_ms - 1);
      expect(await check(reservation_id)).toMatchObject({ outcome: "not_found" });
      expect(await held()).toBe(2_000);
      clock.advance(1);
      expect(await check(reservation_id)).toMatchObject({ outcome: "released" });
      expect(await held()).toBe(0);
      await expectBooksBalance(b);
    });

    it("an approved call whose forwarding went unanswered: the approval records the outcome", async () => {
      const { b, clock, call, check, held, faults } = await setup({ approval_threshold: 5_000 });
      const hold = await call("create_order", { amount: 8_000, currency: "INR", idempotency_key: "big" });
      expect(hold).toMatchObject({ effect: "HOLD" });
      const approval_id = hold.approval_id as string;
      const reservation_id = (await b.ledger.approval(approval_id))!.reservation_id;
      expect(await check(reservation_id)).toMatchObject({ outcome: "not_found", reason: expect.stringContaining("waits for an operator's approval") });

      faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/orders"] });
      expect(await approve(b.gate.gateContext, approval_id)).toMatchObject({ state: "approved", result: { provider: "unknown" } });
      clock.advance(order_absent_after_ms);
      expect(await check(reservation_id)).toMatchObject({ outcome: "released" });
      expect(await held()).toBe(0);
      expect(await call("get_approval", { approval_id })).toMatchObject({ state: "approved", result: { provider: "no_order", reservation_id } });
      await expectBooksBalance(b);
    });

    it("a refused lookup is not proof: the check says unknown and keeps the hold", async () => {
      const { clock, call, check, held, faults } = await setup();
      faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/orders"] });
      const lost = await call("create_order", { amount: 3_000, currency: "INR" });
      clock.advance(order_absent_after_ms);
      faults.set({ error_4xx_next: 1, only_routes: ["GET /v1/orders"] });
      expect(await check(lost.reservation_id as string)).toMatchObject({ outcome: "unknown", reason: expect.stringContaining("refused the order lookup") });
      expect(await held()).toBe(3_000);
    });

    it("a call that stalled past its lease and makes its order after the release is told the order is unusable, not ALLOW", async () => {
      const { b, clock, call, check, held } = await setup();
      // The process stalls between the decision and the provider request (a pause, a frozen VM).
      const context = b.gate.gateContext as { provider: Provider };
      const real = context.provider;
      let entered: () => void = () => undefined;
      const stalled = new Promise<void>((resolve) => (entered = resolve));
      let resume: () => void = () => undefined;
      const resumed = new Promise<void>((resolve) => (resume = resolve));
      context.provider = Object.assign(Object.create(real) as Provider, {
        createOrder: async (input: Parameters<Provider["createOrder"]>[0]) => {
          entered();
          await resumed;
          return real.createOrder(input);
        },
      });
      const args = { amount: 6_000, currency: "INR", idempotency_key: "stalled" };
      const late = call("create_order", args);
      await stalled;
      clock.advance(lease_ms + 1);
      await b.ledger.sweep();
      clock.advance(order_absent_after_ms);
      const reservation_id = (await b.ledger.inbox()).unknown_outcomes[0]!.reservation_id;
      expect(await check(reservation_id)).toMatchObject({ outcome: "released" });
      resume();
      const answer = await late;
      context.provider = real;
      expect(answer).toMatchObject({ effect: "ALLOW", provider: "late_order", reservation_id, order: { id: expect.stringMatching(/^order_/), receipt: reservation_id } });
      const order_id = (answer.order as { id: string }).id;
      // Named on its released reservation, with its own entry; never capturable through the gate.
      expect(await b.ledger.reservation(reservation_id)).toMatchObject({ status: "released", order_id });
      const entries = (await b.log.entries(0, await b.log.treeSize())).map((stored) => stored.entry.body as Record<string, unknown>);
      expect(entries.filter((body) => body.reservation_id === reservation_id).map((body) => body.action)).toEqual(
        expect.arrayContaining(["outcome_unknown", "release", "order.after_release"]),
      );
      const payment_id = await payInProcess(b, order_id);
      expect(await call("capture_payment", { payment_id, amount: 6_000, currency: "INR" })).toMatchObject({ effect: "BLOCK", rule: "R3" });
      // The same call, repeated, is a new purchase under a new hold.
      const again = await call("create_order", args);
      expect(again).toMatchObject({ effect: "ALLOW", order: { amount: 6_000 } });
      expect(again.reservation_id).not.toBe(reservation_id);
      expect(await held()).toBe(6_000);
      await expectBooksBalance(b);
    });

    it("a call that stalled past its lease and hears no answer after its key went to a new call leaves the new call's key alone", async () => {
      const { b, clock, call, check, held } = await setup();
      // Each order creation waits until the test answers it, as unanswered (a stalled process).
      const context = b.gate.gateContext as { provider: Provider };
      const real = context.provider;
      const waiting = [0, 1].map(() => {
        const stall = { enter: () => {}, answer: () => {} };
        const entered = new Promise<void>((resolve) => (stall.enter = resolve));
        const answered = new Promise<void>((resolve) => (stall.answer = resolve));
        return { ...stall, entered, answered };
      });
      let calls = 0;
      context.provider = Object.assign(Object.create(real) as Provider, {
        createOrder: async () => {
          const stall = waiting[calls++]!;
          stall.enter();
          await stall.answered;
          return { kind: "unknown" as const, reason: "the provider did not answer in time" };
        },
      });
      const args = { amount: 6_000, currency: "INR", idempotency_key: "stalled" };
      const first = call("create_order", args);
      await waiting[0]!.entered;
      clock.advance(lease_ms + 1);
      await b.ledger.sweep();
      clock.advance(order_absent_after_ms);
      const released_id = (await b.ledger.inbox()).unknown_outcomes[0]!.reservation_id;
      expect(await check(released_id)).toMatchObject({ outcome: "released" });
      // The same call again: a new hold under the same key, its creation still in flight.
      const second = call("create_order", args);
      await waiting[1]!.entered;
      waiting[0]!.answer();
      expect(await first).toMatchObject({ effect: "ALLOW", provider: "unknown", reservation_id: released_id, released: true, reason: expect.stringContaining("the hold was released first") });
      // The key is still the second call's, in flight: a repeat is refused, not answered with the first's outcome.
      expect(await call("create_order", args)).toMatchObject({ effect: "BLOCK", rule: "IN_FLIGHT" });
      // The second call's process dies: its lease runs out and its hold reaches the inbox, not stuck.
      clock.advance(lease_ms + 1);
      await b.ledger.sweep();
      const unknown = (await b.ledger.inbox()).unknown_outcomes.map((row) => row.reservation_id);
      expect(unknown).toHaveLength(1);
      expect(unknown[0]).not.toBe(released_id);
      expect(await held()).toBe(6_000);
      waiting[1]!.answer();
      expect(await second).toMatchObject({ provider: "unknown", reservation_id: unknown[0] });
      context.provider = real;
      await expectBooksBalance(b);
    });

    it("a late order's capture elsewhere is a conflict by its payment.captured webhook alone", async () => {
      const { b, block_id, faults, released, lateOrder } = await setup();
      const reservation_id = await released(3_000);
      const order_id = await lateOrder(reservation_id, 3_000);
      // Every webhook is lost but payment.captured, which names the order but not its receipt.
      faults.set({ webhook_drop_next: 100 });
      const payment_id = await payInProcess(b, order_id);
      expect(await b.provider.capturePayment(payment_id, { amount: 3_000, currency: "INR" })).toMatchObject({ kind: "ok" });
      const simulator = b.simulator!.simulator;
      const captured = simulator.state.outbox().find((entry) => entry.event === "payment.captured" && entry.body.includes(payment_id));
      faults.reset();
      simulator.redeliverWebhook(captured!.event_id);
      await simulator.deliverWebhooksNow();
      expect(await b.operator.getBlock(block_id)).toMatchObject({ held: 0, spent: 0, unreconciled: 3_000, frozen: true });
      expect(await b.ledger.reservation(reservation_id)).toMatchObject({ status: "released", order_id });
      await expectBooksBalance(b);
    });

    it("a HOLD whose approved call's hold was released: its key, repeated, asks for a new approval; a replay racing the release says so", async () => {
      const { b, clock, call, check, faults } = await setup({ approval_threshold: 5_000 });
      const args = { amount: 8_000, currency: "INR", idempotency_key: "big-again" };
      const hold = await call("create_order", args);
      const approval_id = hold.approval_id as string;
      faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/orders"] });
      await approve(b.gate.gateContext, approval_id);
      clock.advance(order_absent_after_ms);
      const reservation_id = (await b.ledger.approval(approval_id))!.reservation_id;
      expect(await check(reservation_id)).toMatchObject({ outcome: "released" });
      const again = await call("create_order", args);
      expect(again).toMatchObject({ effect: "HOLD" });
      expect(again.approval_id).not.toBe(approval_id);
      // A replay that read the key before the release and the approval after it renders the
      // approval's outcome (it fell through to an order that is not there: a TypeError).
      const block = { reserved: 1_000_000, spent: 0, held: 0, available: 1_000_000, currency: "INR", expires_at: "2026-12-30T10:00:00.000Z" };
      const raced = renderStored({ provider: "no_order", reservation_id, reason: order_absent_reason }, block, undefined, true);
      expect(raced).toMatchObject({ isError: true, structuredContent: { effect: "ALLOW", provider: "no_order", reservation_id, replayed: true } });
    });

    it("an order made on the receipt after the release is never captured through the gate", async () => {
      const { b, block_id, call, held, released, lateOrder } = await setup();
      const reservation_id = await released(6_000);
      const order_id = await lateOrder(reservation_id, 6_000);
      const payment_id = await payInProcess(b, order_id);
      const capture = await call("capture_payment", { payment_id, amount: 6_000, currency: "INR" });
      expect(capture).toMatchObject({ effect: "BLOCK" });
      const payment = await b.provider.fetchPayment(payment_id);
      expect(payment).toMatchObject({ kind: "ok", value: { status: "authorized" } });
      expect(await held()).toBe(0);
      // Captured elsewhere (the provider's dashboard), its webhook is a conflict: money moved
      // that no hold covers freezes the block and counts as unreconciled.
      expect(await b.provider.capturePayment(payment_id, { amount: 6_000, currency: "INR" })).toMatchObject({ kind: "ok" });
      await b.simulator!.simulator.deliverWebhooksNow();
      expect(await b.operator.getBlock(block_id)).toMatchObject({ held: 0, spent: 0, unreconciled: 6_000, frozen: true });
      await expectBooksBalance(b);
    });
  });
}
