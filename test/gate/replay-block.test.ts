// A replayed create_order answers with, and records, the block its reservation is on: once that
// block expired and a new one was issued, the agent's current block holds none of the call's money.

import { describe, expect, it } from "vitest";
import { createBursar, sequentialIds } from "../../src/index.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";
import { decisionBody } from "../support/inprocess.js";

for (const backend of backends()) {
  describe(`${backend.name}: a replayed create_order shows its reservation's block`, () => {
    async function setup() {
      const db = await backend.db();
      const clock = manualClock();
      const b = await createBursar({ db, clock, ids: sequentialIds() });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const agent = await b.operator.createAgent({ name: "buyer" });
      const first = await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, approval_threshold: 200_000, ttl_seconds: 60 });
      const call = (args: Record<string, unknown>) => b.gate.callTool(agent.token, "create_order", args);
      /** The first block runs out and a smaller one is issued. */
      const replaceBlock = async () => {
        clock.advance(61_000);
        return b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 5_000, ttl_seconds: 86_400 });
      };
      const close = () => (isPostgresUrl(db) ? Promise.resolve() : b.close());
      return { b, call, first_block: first.block_id, replaceBlock, close };
    }

    it("an allowed order, under its own key or a derived one: the expired block where its 1,000 is held, in the answer and in the entry", async () => {
      const t = await setup();
      const keyed = { amount: 1_000, currency: "INR", idempotency_key: "order-1" };
      const derived = { amount: 2_000, currency: "INR" };
      const orders = [await t.call(keyed), await t.call(derived)];
      for (const order of orders) expect(order.structuredContent).toMatchObject({ effect: "ALLOW" });
      const second = await t.replaceBlock();
      for (const [index, args] of [keyed, derived].entries()) {
        const replayed = await t.call(args);
        // Before: the new block, { reserved: 5000, held: 0 }, beside the old block's reservation.
        expect(replayed.structuredContent).toMatchObject({
          effect: "ALLOW",
          replayed: true,
          reservation_id: orders[index]!.structuredContent.reservation_id,
          block: { reserved: 1_000_000, held: 3_000 },
        });
        const { body } = await decisionBody(t.b, replayed);
        expect(body).toMatchObject({ block_id: t.first_block, reservation_id: orders[index]!.structuredContent.reservation_id });
      }
      // A new order is decided on the new block.
      const fresh = await t.call({ amount: 1_000, currency: "INR", idempotency_key: "order-2" });
      expect(fresh.structuredContent).toMatchObject({ effect: "ALLOW", block: { reserved: 5_000, held: 1_000 } });
      expect((await decisionBody(t.b, fresh)).body.block_id).toBe(second.block_id);
      await t.close();
    });

    it("a held call still waiting for approval: its own block, where its amount is held", async () => {
      const t = await setup();
      const args = { amount: 300_000, currency: "INR", idempotency_key: "big-1" };
      expect((await t.call(args)).structuredContent).toMatchObject({ effect: "HOLD" });
      // The block runs out within the approval's 15 minutes: the approval is still pending.
      await t.replaceBlock();
      const replayed = await t.call(args);
      expect(replayed.structuredContent).toMatchObject({ effect: "HOLD", replayed: true, block: { reserved: 1_000_000, held: 300_000 } });
      expect((await decisionBody(t.b, replayed)).body.block_id).toBe(t.first_block);
      await t.close();
    });
  });
}
