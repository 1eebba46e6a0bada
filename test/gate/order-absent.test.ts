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
import { order_absent_after_ms } from "../../src/ledger/complete.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";
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
      return { b, clock, agent, block_id, call, check, held, faults };
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

      // A second check changes nothing and writes nothing.
      const size = await b.log.treeSize();
      expect(await check(reservation_id)).toMatchObject({ outcome: "not_found", reason: expect.stringContaining("the reservation is released") });
      expect(await b.log.treeSize()).toBe(size);
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

    it("an order made on the receipt after the release is never captured through the gate", async () => {
      const { b, clock, block_id, call, check, held, faults } = await setup();
      faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/orders"] });
      const lost = await call("create_order", { amount: 6_000, currency: "INR" });
      const reservation_id = lost.reservation_id as string;
      clock.advance(order_absent_after_ms);
      expect(await check(reservation_id)).toMatchObject({ outcome: "released" });
      // The provider makes the order after all (a request stuck somewhere for ten minutes).
      const late = await b.provider.createOrder({ amount: 6_000, currency: "INR", receipt: reservation_id });
      expect(late.kind).toBe("ok");
      const order_id = late.kind === "ok" ? late.value.id : "";
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
