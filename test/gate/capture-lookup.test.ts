// capture_payment asks the provider for the payment only when the payment can change the
// verdict. A capture refused before R3 on every block its caller could capture on (revoked, past
// the velocity limit, malformed, over the per-call cap) or replayed is decided without a provider
// request, so a refused agent looping on captures cannot make the gate call the provider.

import { describe, expect, it } from "vitest";
import { createBursar, sequentialIds, withoutGuard, type Bursar } from "../../src/index.js";
import { payment_not_asked } from "../../src/ledger/index.js";
import type { Guard } from "../../src/policy/index.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";
import { decisionBody, payInProcess } from "../support/inprocess.js";

type Result = Awaited<ReturnType<Bursar["gate"]["callTool"]>>;

for (const backend of backends()) {
  describe(`${backend.name}: capture_payment looks the payment up only when it matters`, () => {
    async function setup(block: Record<string, unknown> = {}, guards?: readonly Guard[]) {
      const db = await backend.db();
      const clock = manualClock();
      const b = await createBursar({ db, clock, ids: sequentialIds(), guards });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const agent = await b.operator.createAgent({ name: "buyer" });
      const created = await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400, ...block });
      const call = (tool: string, args: Record<string, unknown>) => b.gate.callTool(agent.token, tool, args);
      /** An order created through the gate and paid by card at the simulator: its payment id. */
      const paidOrder = async (amount: number, key: string): Promise<string> => {
        const order = (await call("create_order", { amount, currency: "INR", idempotency_key: key })).structuredContent.order as { id: string };
        return payInProcess(b, order.id);
      };
      const providerRequests = () => b.simulator!.simulator.state.apiRequests();
      const close = () => (isPostgresUrl(db) ? Promise.resolve() : b.close());
      return { b, clock, agent, block_id: created.block_id, call, paidOrder, providerRequests, close };
    }

    it("a revoked block's capture is refused by R4 without a provider request, and the entry says the payment was not asked", async () => {
      const t = await setup();
      const payment_id = await t.paidOrder(5_000, "order-1");
      await t.b.operator.revoke(t.block_id);
      const before = t.providerRequests();
      const refused = await t.call("capture_payment", { payment_id, amount: 5_000, currency: "INR" });
      expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R4" });
      expect(t.providerRequests()).toBe(before);
      expect((await decisionBody(t.b, refused)).body.payment).toEqual({ ...payment_not_asked });
      await t.close();
    });

    it("past the velocity limit, malformed or over the cap: refused by R6, R0, R5 with no provider request", async () => {
      const t = await setup({ per_call_cap: 10_000, velocity: { max_calls: 4, window_seconds: 60 } });
      const payment_id = await t.paidOrder(5_000, "order-1");
      const before = t.providerRequests();
      expect((await t.call("capture_payment", { payment_id, amount: "5000", currency: "INR" })).structuredContent).toMatchObject({ rule: "R0" });
      expect((await t.call("capture_payment", { payment_id, amount: 20_000, currency: "INR" })).structuredContent).toMatchObject({ rule: "R5" });
      expect(t.providerRequests()).toBe(before);
      // Four money calls in the window now (the order and the two refusals, then this one): the fifth is R6.
      const allowed = await t.call("capture_payment", { payment_id, amount: 5_000, currency: "INR" });
      expect(allowed.structuredContent).toMatchObject({ effect: "ALLOW" });
      const after_capture = t.providerRequests();
      for (let attempt = 0; attempt < 5; attempt++) {
        const limited = await t.call("capture_payment", { payment_id, amount: 5_000, currency: "INR", idempotency_key: `again-${attempt}` });
        expect(limited.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R6" });
      }
      expect(t.providerRequests()).toBe(after_capture);
      await t.close();
    });

    it("a replayed capture answers from the stored result without a provider request", async () => {
      const t = await setup();
      const payment_id = await t.paidOrder(5_000, "order-1");
      const args = { payment_id, amount: 5_000, currency: "INR", idempotency_key: "capture-1" };
      const first = await t.call("capture_payment", args);
      expect(first.structuredContent).toMatchObject({ effect: "ALLOW" });
      const before = t.providerRequests();
      const replayed = await t.call("capture_payment", args);
      expect(replayed.structuredContent).toMatchObject({ effect: "ALLOW", replayed: true, payment: { id: payment_id, status: "captured" } });
      expect(t.providerRequests()).toBe(before);
      await t.close();
    });

    it("an agent whose block is revoked still has a capture on its new block's reservation looked up and allowed", async () => {
      const t = await setup();
      await t.b.operator.revoke(t.block_id);
      await t.b.operator.createBlock({ agent_id: t.agent.agent_id, currency: "INR", reserved: 100_000, ttl_seconds: 86_400 });
      const payment_id = await t.paidOrder(40_000, "order-2");
      const captured = await t.call("capture_payment", { payment_id, amount: 40_000, currency: "INR" });
      expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
      await t.close();
    });

    it("a capture refused on the agent's new block without asking says so, since its reservation may be on the older one", async () => {
      const t = await setup();
      const payment_id = await t.paidOrder(150_000, "order-1");
      await t.b.operator.revoke(t.block_id);
      await t.b.operator.createBlock({ agent_id: t.agent.agent_id, currency: "INR", reserved: 1_000_000, per_call_cap: 100_000, ttl_seconds: 86_400 });
      const before = t.providerRequests();
      const refused = await t.call("capture_payment", { payment_id, amount: 150_000, currency: "INR" });
      expect(refused.structuredContent).toMatchObject({
        effect: "BLOCK",
        rule: "R5",
        reason:
          "amount 150000 exceeds the per-call cap 100000 (decided on the agent's current block without asking the provider for the payment; on any other block of the agent the capture is refused as revoked or expired)",
      });
      expect(t.providerRequests()).toBe(before);
      // Looked up (the amount is within the new cap), the capture is decided on its reservation's block.
      expect((await t.call("capture_payment", { payment_id, amount: 90_000, currency: "INR" })).structuredContent).toMatchObject({ effect: "BLOCK", rule: "R4" });
      await t.close();
    });

    it("captures sent all at once count each other toward the velocity limit: past it they wait their turn and are refused without fetching", async () => {
      const t = await setup({ velocity: { max_calls: 3, window_seconds: 3_600 } });
      const payment_id = await t.paidOrder(5_000, "order-1");
      const before = t.providerRequests();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, index) => t.call("capture_payment", { payment_id, amount: 5_000, currency: "INR", idempotency_key: `burst-${index}` })),
      );
      const effects = results.map((result) => `${String(result.structuredContent.effect)} ${String(result.structuredContent.rule ?? "")}`.trim());
      // The order took one of the 3 calls; the two captures ahead of the rest look the payment up
      // and are decided: the first captures it; the second is refused, as IN_FLIGHT while the
      // first is at the provider, or under R3 (already committed) once it has settled. The rest
      // are R6.
      expect(effects.filter((effect) => effect === "ALLOW")).toHaveLength(1);
      expect(effects.filter((effect) => effect === "BLOCK IN_FLIGHT" || effect === "BLOCK R3")).toHaveLength(1);
      expect(effects.filter((effect) => effect === "BLOCK R6")).toHaveLength(18);
      expect((await t.b.ledger.getBlock(t.block_id)).spent).toBe(5_000);
      // At most two look-ups and one capture request: the payment is captured once.
      expect(t.providerRequests() - before).toBeLessThanOrEqual(3);
      await t.close();
    });

    it("two captures that fit the velocity limit exactly are both allowed, the second sent while the first is being decided", async () => {
      const t = await setup({ velocity: { max_calls: 4, window_seconds: 3_600 } });
      const first_payment = await t.paidOrder(5_000, "order-1");
      const second_payment = await t.paidOrder(5_000, "order-2");
      // The second capture starts while the first one's decision is running (its velocity row
      // already written in the open transaction): it must not count the first one twice.
      const ledger = t.b.ledger;
      const authorize = ledger.authorize.bind(ledger);
      let second: Promise<Result> | undefined;
      ledger.authorize = (input) => {
        const decided = authorize(input);
        if (input.tool === "capture_payment" && !second) {
          second = t.call("capture_payment", { payment_id: second_payment, amount: 5_000, currency: "INR", idempotency_key: "capture-2" });
        }
        return decided;
      };
      const first = await t.call("capture_payment", { payment_id: first_payment, amount: 5_000, currency: "INR", idempotency_key: "capture-1" });
      expect(first.structuredContent).toMatchObject({ effect: "ALLOW" });
      expect((await second)?.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: second_payment, status: "captured" } });
      await t.close();
    });

    it("a replayed capture shows the block it captured on, not the agent's new block", async () => {
      const t = await setup();
      const payment_id = await t.paidOrder(5_000, "order-1");
      const args = { payment_id, amount: 5_000, currency: "INR", idempotency_key: "capture-1" };
      expect((await t.call("capture_payment", args)).structuredContent).toMatchObject({ effect: "ALLOW" });
      await t.b.operator.revoke(t.block_id);
      await t.b.operator.createBlock({ agent_id: t.agent.agent_id, currency: "INR", reserved: 77_000, ttl_seconds: 86_400 });
      const replayed = await t.call("capture_payment", args);
      expect(replayed.structuredContent).toMatchObject({ effect: "ALLOW", replayed: true, block: { reserved: 1_000_000, spent: 5_000 } });
      await t.close();
    });

    it("an in-flight key whose lease ran out has the payment looked up: the decision settles the lease first", async () => {
      const t = await setup();
      const payment_id = await t.paidOrder(5_000, "order-1");
      const args = { payment_id, amount: 5_000, currency: "INR", idempotency_key: "capture-1" };
      const fetched = await t.b.provider.fetchPayment(payment_id);
      if (fetched.kind !== "ok") throw new Error("the simulator did not answer for the payment");
      const payment = { fetched: true as const, ...fetched.value, order_id: fetched.value.order_id as string };
      // A capture decided and never completed (its process died): its key stays in flight.
      const started = await t.b.ledger.authorize({ agent_id: t.agent.agent_id, tool: "capture_payment", args, payment });
      expect(started.verdict.effect).toBe("ALLOW");
      t.clock.advance(t.b.ledger.context.lease_ms + 1);
      const before = t.providerRequests();
      await t.call("capture_payment", args);
      expect(t.providerRequests()).toBeGreaterThan(before);
      await t.close();
    });

    it("with a guard table without R4 (a mutant), a revoked block's capture is looked up as that table decides it", async () => {
      const t = await setup({}, withoutGuard("R4"));
      const payment_id = await t.paidOrder(5_000, "order-1");
      await t.b.operator.revoke(t.block_id);
      const before = t.providerRequests();
      const result = await t.call("capture_payment", { payment_id, amount: 5_000, currency: "INR" });
      expect(t.providerRequests()).toBeGreaterThan(before);
      expect(result.structuredContent).toMatchObject({ effect: "ALLOW" });
      await t.close();
    });

    it("should the block change between the check and the decision, R3 refuses the unlooked-up payment and says retry", async () => {
      const t = await setup();
      const payment_id = await t.paidOrder(5_000, "order-1");
      const decided = await t.b.ledger.authorize({
        agent_id: t.agent.agent_id,
        tool: "capture_payment",
        args: { payment_id, amount: 5_000, currency: "INR" },
        payment: payment_not_asked,
      });
      expect(decided.verdict).toMatchObject({ effect: "BLOCK", rule: "R3" });
      expect(decided.verdict.reason).toMatch(/^the payment was not looked up \(.+\); retry$/);
      await t.close();
    });
  });
}
