// An order whose creation's answer was lost is found again by its receipt (an operator check or
// a webhook): from then on its outcome is known. It leaves the inbox, the call's key answers with
// the order, and a derived key stops replaying once its five minutes are over. Before, the link
// only named the order: the reservation stayed outcome-unknown for good, its key kept answering
// "unknown", and a derived key collapsed every later purchase of that amount into it. Also: a
// capture answer that a webhook already settled is recorded (it left no entry).

import { afterEach, describe, expect, it } from "vitest";
import { checkReservation } from "../../src/gate/operator.js";
import { orderFound } from "../../src/ledger/complete.js";
import { settleCapture } from "../../src/ledger/settle.js";
import { testLedger, type TestLedger } from "../support/ledger.js";

const derived_key_lifetime_ms = 300_000;
let t: TestLedger | undefined;

afterEach(async () => {
  await t?.bursar.close();
  t = undefined;
});

type Structured = { provider?: string; reservation_id?: string; order?: { id: string }; replayed?: boolean };

async function setUp(): Promise<TestLedger & { call: (args: Record<string, unknown>) => Promise<Structured> }> {
  t = await testLedger();
  const ledger = t;
  const call = async (args: Record<string, unknown>) => (await ledger.bursar.gate.callToolAs(ledger.agent_id, "create_order", args)).structuredContent as Structured;
  return { ...ledger, call };
}

describe("an order found again by its receipt", () => {
  it("is known from then on: out of the inbox, its key answers with the order, a derived key expires", async () => {
    const { bursar, call, clock } = await setUp();
    bursar.simulator!.simulator.faults.set({ reset_next: 2, after_processing: true, only_routes: ["POST /v1/orders"] });
    const keyed = await call({ amount: 1_500, currency: "INR", idempotency_key: "buy-1" });
    const derived = await call({ amount: 2_500, currency: "INR" });
    for (const lost of [keyed, derived]) expect(lost).toMatchObject({ provider: "unknown" });
    expect((await bursar.ledger.inbox()).unknown_outcomes).toHaveLength(2);

    for (const lost of [keyed, derived]) {
      expect(await checkReservation(bursar.gate.gateContext, lost.reservation_id!)).toMatchObject({ outcome: "no_capture", order_id: expect.stringMatching(/^order_/) });
    }
    expect((await bursar.ledger.inbox()).unknown_outcomes).toEqual([]);
    const replayed = await call({ amount: 1_500, currency: "INR", idempotency_key: "buy-1" });
    expect(replayed).toMatchObject({ replayed: true, reservation_id: keyed.reservation_id, order: { id: expect.stringMatching(/^order_/) } });
    expect(replayed.provider).toBeUndefined();

    // Past its five minutes the derived key no longer replays: a new purchase is a new order.
    clock.advance(derived_key_lifetime_ms + 1);
    const later = await call({ amount: 2_500, currency: "INR" });
    expect(later.replayed).toBeUndefined();
    expect(later.reservation_id).not.toBe(derived.reservation_id);
    expect(later.order).toMatchObject({ id: expect.stringMatching(/^order_/) });
  });

  it("found while its own call still waits on the provider, it stays known when that call then hears nothing", async () => {
    const { bursar, agent_id } = await setUp();
    const decided = await bursar.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 1_700, currency: "INR", idempotency_key: "slow-1" } });
    const call = { agent_id, key: decided.key!.key, reservation_id: decided.reservation!.reservation_id };
    // An operator check (or a webhook) finds the order by its receipt meanwhile...
    const order = { id: "order_Found1", amount: 1_700, currency: "INR", status: "created" };
    await bursar.ledger.transaction((tx, context) => orderFound(tx, context, call.reservation_id, order));
    // ...and then the call's own request times out.
    await bursar.ledger.completeOrder(call, { kind: "unknown", reason: "no answer within 10000 ms" });
    expect((await bursar.ledger.inbox()).unknown_outcomes).toEqual([]);
    const replay = await bursar.gate.callToolAs(agent_id, "create_order", { amount: 1_700, currency: "INR", idempotency_key: "slow-1" });
    expect(replay.structuredContent).toMatchObject({ replayed: true, order: { id: "order_Found1" } });
  });

  it("a derived order key does not replay for good because a later capture on its order went unanswered", async () => {
    const { bursar, call, clock } = await setUp();
    const first = await call({ amount: 3_000, currency: "INR" });
    expect(first.order).toBeDefined();
    // The state a capture whose answer and re-fetch were both lost leaves behind.
    await bursar.ledger.transaction((tx) => tx.run("UPDATE reservations SET outcome_unknown = 1, unknown_reason = 'capture unanswered' WHERE reservation_id = ?", [first.reservation_id!]));
    expect(await call({ amount: 3_000, currency: "INR" })).toMatchObject({ replayed: true, reservation_id: first.reservation_id });
    clock.advance(derived_key_lifetime_ms + 1);
    const later = await call({ amount: 3_000, currency: "INR" });
    expect(later.replayed).toBeUndefined();
    expect(later.reservation_id).not.toBe(first.reservation_id);
  });
});

describe("a capture's answer after a webhook settled it", () => {
  it("is recorded as capture.duplicate, and settles nothing twice", async () => {
    const { bursar, call, agent_id, block_id } = await setUp();
    const order = await call({ amount: 4_000, currency: "INR" });
    const payment = { id: "pay_Dup1", order_id: order.order!.id, amount: 4_000, currency: "INR", status: "captured" };
    // The webhook wins the race: the reservation is committed before the capture's answer lands.
    await bursar.ledger.transaction((tx, context) => settleCapture(tx, context, payment, "webhook"));
    const completed = await bursar.ledger.completeCapture({ agent_id, key: "capture-key", reservation_id: order.reservation_id! }, payment);
    expect(completed).toMatchObject({ outcome: "noop", reason: "already settled", evidence: { seq: expect.any(Number) } });
    const [entry] = await bursar.log.entries(completed.evidence!.seq, completed.evidence!.seq + 1);
    expect(entry!.entry.body).toMatchObject({ action: "capture.duplicate", via: "capture", reservation_id: order.reservation_id, block_id, payment: { id: "pay_Dup1" } });
    expect(await bursar.operator.getBlock(block_id)).toMatchObject({ spent: 4_000, held: 0 });
  });
});
