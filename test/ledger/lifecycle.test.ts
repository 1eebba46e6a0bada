// Lifecycle edges: reading, deciding or revoking while an approval or a lease has silently
// expired, the host's clock stepping back, an approved call whose forwarding process died, a
// capture settled by its webhook while the call's own answer was lost (on SQLite and PostgreSQL),
// and closing the database with a group commit still open.

import { describe, expect, it } from "vitest";
import { monotonicClock } from "../../src/clock.js";
import type { ReservationRow } from "../../src/ledger/rows.js";
import { SqliteDriver } from "../../src/ledger/sqlite.js";
import { forwarding_expired_reason } from "../../src/ledger/sweep.js";
import { backends } from "../support/backends.js";
import { backendLedger, fresh, type TestLedger } from "../support/ledger.js";

for (const backend of backends()) {
  describe(backend.name, () => {
    const testLedger = (block: Record<string, unknown> = {}) => backendLedger(backend, block);

    /** A ledger whose agent has one call of 15,000 held for approval (threshold 1,000). */
    async function heldForApproval(): Promise<{ t: TestLedger; approval_id: string }> {
      const t = await testLedger({ approval_threshold: 1_000 });
      const held = await t.order(fresh({ amount: 15_000, currency: "INR" }));
      expect(held.verdict.effect).toBe("HOLD");
      return { t, approval_id: held.approval?.approval_id as string };
    }

    describe("revocation and expired approvals", () => {
      it("revokes even when a pending approval is past its lifetime and not yet swept", async () => {
        const { t, approval_id } = await heldForApproval();
        t.clock.advance(t.bursar.ledger.context.approval_lifetime_ms + 1);
        const revoked = await t.bursar.operator.revoke(t.block_id);
        expect(revoked).toMatchObject({ revoked: true, held: 0 });
        expect((await t.bursar.ledger.approval(approval_id))?.state).toBe("expired");
        expect((await t.order(fresh({ amount: 1_000, currency: "INR" }))).verdict.rule).toBe("R4");
      });
    });

    describe("reading an approval whose lifetime ran out before the sweep", () => {
      it("get_approval says expired and get_block no longer counts its hold", async () => {
        const { t, approval_id } = await heldForApproval();
        const read = async (tool: string, args: Record<string, unknown> = {}) =>
          (await t.bursar.gate.callToolAs(t.agent_id, tool, args)).structuredContent as Record<string, unknown>;
        expect(await read("get_block")).toMatchObject({ held: 15_000 });
        t.clock.advance(t.bursar.ledger.context.approval_lifetime_ms - 1);
        expect(await read("get_approval", { approval_id })).toMatchObject({ state: "pending" });
        t.clock.advance(1);
        expect(await read("get_block")).toMatchObject({ held: 0 });
        expect(await read("get_approval", { approval_id })).toMatchObject({ state: "expired" });
        expect((await t.bursar.ledger.approval(approval_id))?.state).toBe("expired");
      });

      it("a money decision expires it too, before deciding: the next call on the block does not count its hold", async () => {
        const t = await testLedger({ reserved: 20_000, per_call_cap: 20_000, approval_threshold: 1_000 });
        const first = await t.order(fresh({ amount: 15_000, currency: "INR" }));
        expect(first.verdict.effect).toBe("HOLD");
        t.clock.advance(t.bursar.ledger.context.approval_lifetime_ms);
        // No sweep has run: counted still, the 15,000 held would refuse this under R1.
        const second = await t.order(fresh({ amount: 10_000, currency: "INR" }));
        expect(second.verdict).toMatchObject({ effect: "HOLD" });
        expect(second.block).toMatchObject({ held: 10_000 });
        expect((await t.bursar.ledger.approval(first.approval?.approval_id as string))?.state).toBe("expired");
      });

      it("a money decision ends a lease that ran out first: the same call repeated replays its unknown outcome, not 'in flight'", async () => {
        const t = await testLedger();
        const args = { amount: 5_000, currency: "INR", idempotency_key: "lease-ran-out" };
        expect((await t.order(args)).verdict.effect).toBe("ALLOW");
        expect((await t.order(args)).verdict.rule).toBe("IN_FLIGHT");
        t.clock.advance(t.bursar.ledger.context.lease_ms);
        const repeated = await t.order(args);
        expect(repeated.verdict).toMatchObject({ replay: true });
        expect(JSON.parse(String(repeated.stored?.result_json))).toMatchObject({ provider: "unknown", reason: expect.stringMatching(/^this call's lease ran out/) });
        expect(repeated.reservation).toMatchObject({ status: "held", outcome_unknown: 1 });
      });

      it("get_approval alone expires it too", async () => {
        const { t, approval_id } = await heldForApproval();
        t.clock.advance(t.bursar.ledger.context.approval_lifetime_ms);
        const answer = await t.bursar.gate.callToolAs(t.agent_id, "get_approval", { approval_id });
        expect(answer.structuredContent).toMatchObject({ state: "expired" });
        expect((await t.bursar.ledger.getBlock(t.block_id)).held).toBe(0);
      });
    });

    describe("the host's clock stepping back", () => {
      it("calls stamped after the stepped-back now still count toward velocity (R6)", async () => {
        const t = await testLedger({ velocity: { max_calls: 3, window_seconds: 60 } });
        for (let call = 0; call < 3; call++) expect((await t.order(fresh({ amount: 100, currency: "INR" }))).verdict.effect).toBe("ALLOW");
        expect((await t.order(fresh({ amount: 100, currency: "INR" }))).verdict.rule).toBe("R6");
        t.clock.advance(-1_000);
        expect((await t.order(fresh({ amount: 100, currency: "INR" }))).verdict.rule).toBe("R6");
        // The window still ends: 60 s after the calls (by the clock that stepped back), they stop counting.
        t.clock.advance(61_000);
        expect((await t.order(fresh({ amount: 100, currency: "INR" }))).verdict.effect).toBe("ALLOW");
      });
    });

    describe("deciding an approval whose lifetime ran out", () => {
      it("approve and deny answer 409, and the expiry they found stays recorded with its hold released", async () => {
        const { t, approval_id } = await heldForApproval();
        t.clock.advance(t.bursar.ledger.context.approval_lifetime_ms);
        const size = await t.bursar.log.treeSize();
        await expect(t.bursar.ledger.beginApproval(approval_id)).rejects.toMatchObject({ status: 409, code: "approval_expired" });
        expect((await t.bursar.ledger.approval(approval_id))?.state).toBe("expired");
        expect((await t.bursar.ledger.getBlock(t.block_id)).held).toBe(0);
        expect(await t.bursar.log.treeSize()).toBeGreaterThan(size);
        // Expired already, by this call or by the sweep: still approval_expired, not "decided".
        await expect(t.bursar.ledger.deny(approval_id)).rejects.toMatchObject({ status: 409, code: "approval_expired" });
        await expect(t.bursar.ledger.beginApproval(approval_id)).rejects.toMatchObject({ status: 409, code: "approval_expired" });
      });

      it("an approval the sweep expired first is answered approval_expired too", async () => {
        const { t, approval_id } = await heldForApproval();
        t.clock.advance(t.bursar.ledger.context.approval_lifetime_ms);
        await t.bursar.ledger.sweep();
        expect((await t.bursar.ledger.approval(approval_id))?.state).toBe("expired");
        await expect(t.bursar.ledger.beginApproval(approval_id)).rejects.toMatchObject({
          status: 409,
          code: "approval_expired",
          message: `approval ${approval_id} expired before it was decided`,
        });
        await expect(t.bursar.ledger.deny(approval_id)).rejects.toMatchObject({ status: 409, code: "approval_expired" });
      });

      it("revoke denies an approval whose lifetime runs out while the revoke runs, and still revokes", async () => {
        // A few milliseconds before the approval expires, and every reading of the clock moves it
        // on, so that for some start the lifetime runs out between two steps of the revoke.
        for (let early_ms = 1; early_ms <= 12; early_ms++) {
          const { t, approval_id } = await heldForApproval();
          t.clock.advance(t.bursar.ledger.context.approval_lifetime_ms - early_ms);
          t.clock.tickPerRead(1);
          const revoked = await t.bursar.operator.revoke(t.block_id);
          t.clock.tickPerRead(0);
          expect(revoked, `${early_ms} ms early`).toMatchObject({ revoked: true, held: 0 });
          expect(["denied", "expired"]).toContain((await t.bursar.ledger.approval(approval_id))?.state);
          await t.bursar.close();
        }
      });
    });

    describe("an approved call whose forwarding died", () => {
      it("becomes outcome-unknown after the lease, in the inbox, and the approval says so", async () => {
        const t = await testLedger({ approval_threshold: 1_000 });
        const held = await t.order({ amount: 15_000, currency: "INR", idempotency_key: "big" });
        const approval_id = held.approval?.approval_id as string;
        const grant = await t.bursar.ledger.beginApproval(approval_id);
        expect("refused" in grant).toBe(false);
        // The process dies here: the provider is never asked and completeOrder never runs.
        await t.bursar.ledger.sweep();
        expect((await t.bursar.ledger.approval(approval_id))?.state).toBe("forwarding");
        t.clock.advance(t.bursar.ledger.context.lease_ms);
        await t.bursar.ledger.sweep();
        const approval = await t.bursar.ledger.approval(approval_id);
        expect(approval?.state).toBe("approved");
        expect(JSON.parse(approval?.result_json as string)).toMatchObject({ provider: "unknown" });
        // Recorded under the approval's id, as its approve was.
        const size = await t.bursar.log.treeSize();
        const operator = (await t.bursar.log.entries(0, size)).filter((stored) => stored.entry.kind === "gate.operator").map((stored) => stored.entry.body);
        expect(operator.slice(-2)).toEqual([
          expect.objectContaining({ action: "approval.approve", approval_id }),
          { action: "approval.forward_expired", approval_id, reservation_id: held.reservation?.reservation_id, block_id: t.block_id, reason: forwarding_expired_reason },
        ]);
        const inbox = await t.bursar.operator.inbox();
        expect(inbox.unknown_outcomes.map((row) => row.reservation_id)).toContain(held.reservation?.reservation_id);
        expect((await t.bursar.ledger.getBlock(t.block_id)).held).toBe(15_000);

        // The provider's answer arrives after all: the order is known, on the approval and the reservation.
        const call = { agent_id: t.agent_id, key: held.key?.key as string, reservation_id: held.reservation?.reservation_id as string, approval_id };
        await t.bursar.ledger.completeOrder(call, { kind: "ok", value: { id: "order_Late1", amount: 15_000, currency: "INR", status: "created" } });
        expect(JSON.parse((await t.bursar.ledger.approval(approval_id))?.result_json as string)).toMatchObject({ order: { id: "order_Late1" } });
        const later = await t.bursar.operator.inbox();
        expect(later.unknown_outcomes.map((row) => row.reservation_id)).not.toContain(held.reservation?.reservation_id);
      });
    });

    describe("an order whose provider answer arrives after its lease ran out", () => {
      it("is known again: the reservation leaves the inbox and the key replays the order", async () => {
        const t = await testLedger();
        const created = await t.order({ amount: 5_000, currency: "INR", idempotency_key: "slow-order" });
        const reservation_id = created.reservation?.reservation_id as string;
        t.clock.advance(t.bursar.ledger.context.lease_ms);
        await t.bursar.ledger.sweep();
        expect((await t.bursar.operator.inbox()).unknown_outcomes.map((row) => row.reservation_id)).toContain(reservation_id);
        const call = { agent_id: t.agent_id, key: created.key?.key as string, reservation_id };
        await t.bursar.ledger.completeOrder(call, { kind: "ok", value: { id: "order_Slow1", amount: 5_000, currency: "INR", status: "created" } });
        expect((await t.bursar.operator.inbox()).unknown_outcomes.map((row) => row.reservation_id)).not.toContain(reservation_id);
        const again = await t.order({ amount: 5_000, currency: "INR", idempotency_key: "slow-order" });
        expect(JSON.parse(again.stored?.result_json ?? "null")).toMatchObject({ order: { id: "order_Slow1" } });
        expect((await t.bursar.ledger.getBlock(t.block_id)).held).toBe(5_000);
      });
    });

    describe("a capture whose answer and re-fetch were lost while a webhook settled it", () => {
      /** An order created at the provider and paid: the capture call is authorized and in flight. */
      async function captureInFlight(t: TestLedger, payment_id: string) {
        const created = await t.order({ amount: 10_000, currency: "INR", idempotency_key: `order-${payment_id}` });
        const reservation = created.reservation as ReservationRow;
        const order_call = { agent_id: t.agent_id, key: created.key?.key as string, reservation_id: reservation.reservation_id };
        const order_id = `order_${payment_id}`;
        await t.bursar.ledger.completeOrder(order_call, { kind: "ok", value: { id: order_id, amount: 10_000, currency: "INR", status: "created" } });
        const payment = { id: payment_id, order_id, amount: 10_000, currency: "INR" };
        const args = { payment_id, amount: 10_000, currency: "INR", idempotency_key: `capture-${payment_id}` };
        const capture = await t.bursar.ledger.authorize({
          agent_id: t.agent_id,
          tool: "capture_payment",
          args,
          payment: { fetched: true, ...payment, status: "authorized" },
        });
        expect(capture.verdict.effect).toBe("ALLOW");
        const call = { agent_id: t.agent_id, key: capture.key?.key as string, reservation_id: reservation.reservation_id };
        const replay = async () => {
          const again = await t.bursar.ledger.authorize({ agent_id: t.agent_id, tool: "capture_payment", args, payment: { fetched: true, ...payment, status: "captured" } });
          return JSON.parse(again.stored?.result_json ?? "null") as Record<string, unknown>;
        };
        return { call, captured: { ...payment, status: "captured" }, replay };
      }

      it("the webhook first: the capture's unknown outcome does not overwrite the settled key", async () => {
        const t = await testLedger();
        const { call, captured, replay } = await captureInFlight(t, "pay_WebhookFirst1");
        expect(await t.bursar.ledger.settle(captured, "webhook")).toMatchObject({ outcome: "applied" });
        const outcome = await t.bursar.ledger.captureUnknown(call, "no answer within 10000 ms");
        expect(outcome).toMatchObject({ kind: "settled", payment: { id: "pay_WebhookFirst1" } });
        expect(await replay()).toMatchObject({ payment: { id: "pay_WebhookFirst1", status: "captured" } });
        expect(await t.bursar.ledger.getBlock(t.block_id)).toMatchObject({ spent: 10_000, held: 0 });
      });

      it("the unknown outcome first: the webhook completes the key with the payment", async () => {
        const t = await testLedger();
        const { call, captured, replay } = await captureInFlight(t, "pay_UnknownFirst1");
        expect(await t.bursar.ledger.captureUnknown(call, "no answer within 10000 ms")).toMatchObject({ kind: "unknown" });
        expect(await replay()).toMatchObject({ provider: "unknown" });
        expect(await t.bursar.ledger.settle(captured, "webhook")).toMatchObject({ outcome: "applied" });
        expect(await replay()).toMatchObject({ payment: { id: "pay_UnknownFirst1", status: "captured" } });
        expect(await t.bursar.ledger.getBlock(t.block_id)).toMatchObject({ spent: 10_000, held: 0 });
      });
    });

    describe("a capture whose answer conflicts with its reservation", () => {
      it("stores the conflict, so the key replays it rather than a plain capture", async () => {
        const t = await testLedger();
        const created = await t.order({ amount: 10_000, currency: "INR", idempotency_key: "order-conflict" });
        const reservation = created.reservation as ReservationRow;
        const order_call = { agent_id: t.agent_id, key: created.key?.key as string, reservation_id: reservation.reservation_id };
        await t.bursar.ledger.completeOrder(order_call, { kind: "ok", value: { id: "order_Conflict1", amount: 10_000, currency: "INR", status: "created" } });
        const payment = { id: "pay_Conflict1", order_id: "order_Conflict1", amount: 10_000, currency: "INR" };
        const args = { payment_id: payment.id, amount: 10_000, currency: "INR", idempotency_key: "capture-conflict" };
        const capture = await t.bursar.ledger.authorize({ agent_id: t.agent_id, tool: "capture_payment", args, payment: { fetched: true, ...payment, status: "authorized" } });
        const call = { agent_id: t.agent_id, key: capture.key?.key as string, reservation_id: reservation.reservation_id };
        // The provider reports more captured than the reservation holds.
        const completion = await t.bursar.ledger.completeCapture(call, { ...payment, amount: 12_000, status: "captured" });
        expect(completion.outcome).toBe("rejected");
        const again = await t.bursar.ledger.authorize({ agent_id: t.agent_id, tool: "capture_payment", args, payment: { fetched: true, ...payment, status: "captured" } });
        expect(JSON.parse(again.stored?.result_json ?? "null")).toMatchObject({ reconciliation: "rejected", payment: { amount: 12_000 } });
      });
    });
  });
}

describe("the system clock", () => {
  it("holds still until the host's clock catches up", () => {
    const readings = [1_000, 5_000, 2_000, 4_999, 5_000, 7_000];
    const clock = monotonicClock(() => readings.shift() as number);
    expect(Array.from({ length: 6 }, () => clock().getTime())).toEqual([1_000, 5_000, 5_000, 5_000, 5_000, 7_000]);
  });
});

describe("closing with a group commit open", () => {
  it("commits the queued transactions before closing, so none is lost or left hanging", async () => {
    const driver = new SqliteDriver({ path: ":memory:" });
    await driver.transaction((tx) => tx.run("CREATE TABLE t (v INTEGER)"));
    const writes = [1, 2, 3].map((v) => driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (?)", [v])));
    const rows = driver.read((tx) => tx.all<{ v: number }>("SELECT v FROM t ORDER BY v"));
    await Promise.all(writes);
    expect((await rows).map((row) => row.v)).toEqual([1, 2, 3]);
    const late = driver.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (4)"));
    const closing = driver.close();
    await expect(late).resolves.toMatchObject({ changes: 1 });
    await closing;
  });
});
