// A block counts at most unreconciled_max_minor as unreconciled, whatever the provider reports.
// Two conflicting captures of 2^53 - 1 each took the block's sum past what a JavaScript number
// holds exactly: on SQLite its next call was refused as unreadable for good, and on PostgreSQL
// reading the block failed, and with it every operator inbox. Now the count stops at the bound.

import { describe, expect, it } from "vitest";
import type { ReservationRow } from "../../src/ledger/rows.js";
import { unreconciled_max_minor } from "../../src/policy/limits.js";
import { backends } from "../support/backends.js";
import { backendLedger, expectBooksBalance, fresh } from "../support/ledger.js";

for (const backend of backends()) {
  describe(backend.name, () => {
    it("counts conflicting captures up to the bound, and the block and the inbox still read", async () => {
      const t = await backendLedger(backend);
      const created = await t.order({ amount: 10_000, currency: "INR", idempotency_key: "order-huge" });
      const reservation = created.reservation as ReservationRow;
      const call = { agent_id: t.agent_id, key: created.key?.key as string, reservation_id: reservation.reservation_id };
      await t.bursar.ledger.completeOrder(call, { kind: "ok", value: { id: "order_Huge1", amount: 10_000, currency: "INR", status: "created" } });
      const huge = { order_id: "order_Huge1", amount: Number.MAX_SAFE_INTEGER, currency: "INR", status: "captured" };
      expect(await t.bursar.ledger.settle({ ...huge, id: "pay_Huge1" }, "webhook")).toMatchObject({ outcome: "rejected" });
      expect(await t.bursar.ledger.settle({ ...huge, id: "pay_Huge2" }, "webhook")).toMatchObject({ outcome: "rejected" });
      // Reported again at the bound: counted before, not a new conflict.
      expect(await t.bursar.ledger.settle({ ...huge, id: "pay_Huge2" }, "webhook")).toMatchObject({ outcome: "rejected" });

      expect(await t.bursar.operator.getBlock(t.block_id)).toMatchObject({ unreconciled: unreconciled_max_minor, held: 10_000, frozen: true });
      expect((await t.bursar.operator.inbox()).frozen_blocks).toHaveLength(1);
      await expectBooksBalance(t.bursar);
      // The block is still decided on: frozen, so refused by its rule, not as unreadable.
      await t.bursar.operator.unfreeze(t.block_id);
      expect((await t.order(fresh({ amount: 100, currency: "INR" }))).verdict).toMatchObject({ effect: "BLOCK", rule: "R1" });
    });
  });
}
