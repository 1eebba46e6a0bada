// A held call without its own key replays its approval's decision for five minutes after the
// decision, however long the approval waited. Before, a repeat more than five minutes after the
// first call (an operator rarely decides faster) was a fresh HOLD once the approval was decided:
// the amount was held a second time, and a second approve bought the same thing twice.

import { afterEach, describe, expect, it } from "vitest";
import { approve } from "../../src/gate/operator.js";
import { testLedger, type TestLedger } from "../support/ledger.js";

const derived_key_lifetime_ms = 300_000;
const minute_ms = 60_000;
let t: TestLedger | undefined;

afterEach(async () => {
  await t?.bursar.close();
  t = undefined;
});

type Structured = { effect?: string; approval_id?: string; replayed?: boolean; order?: { id: string } };

async function heldCall() {
  t = await testLedger({ approval_threshold: 10_000 });
  const ledger = t;
  // No idempotency_key: the key is derived from the money fields; the receipt is reworded each time.
  let asked = 0;
  const call = async () =>
    (await ledger.bursar.gate.callToolAs(ledger.agent_id, "create_order", { amount: 15_000, currency: "INR", receipt: `tv, ask ${++asked}` })).structuredContent as Structured;
  const held = await call();
  expect(held).toMatchObject({ effect: "HOLD", approval_id: expect.stringMatching(/^apr_/) });
  // The operator takes longer than the derived key's five minutes; the agent repeats meanwhile.
  ledger.clock.advance(6 * minute_ms);
  expect(await call()).toMatchObject({ effect: "HOLD", approval_id: held.approval_id, replayed: true });
  const block = async () => ledger.bursar.operator.getBlock(ledger.block_id);
  return { ledger, call, held, block };
}

describe("a held call repeated after its approval is decided", () => {
  it("approved: replays the forwarded order for five minutes after the approval, holding nothing more", async () => {
    const { ledger, call, held, block } = await heldCall();
    const approved = await approve(ledger.bursar.gate.gateContext, held.approval_id!);
    expect(approved).toMatchObject({ state: "approved" });

    ledger.clock.advance(minute_ms);
    const repeated = await call();
    expect(repeated).toMatchObject({ replayed: true, order: { id: expect.stringMatching(/^order_/) } });
    expect(repeated.effect).not.toBe("HOLD");
    expect(await block()).toMatchObject({ held: 15_000 });

    // Five minutes after the decision the derived key is spent: a new purchase asks anew.
    ledger.clock.advance(derived_key_lifetime_ms - minute_ms);
    const next = await call();
    expect(next).toMatchObject({ effect: "HOLD" });
    expect(next.approval_id).not.toBe(held.approval_id);
    expect(await block()).toMatchObject({ held: 30_000 });
  });

  it("denied: replays the denial for five minutes after it", async () => {
    const { ledger, call, held, block } = await heldCall();
    await ledger.bursar.ledger.deny(held.approval_id!);
    expect(await block()).toMatchObject({ held: 0 });

    ledger.clock.advance(derived_key_lifetime_ms - 1);
    expect(await call()).toMatchObject({ effect: "BLOCK", rule: "HOLD", approval_id: held.approval_id, approval_state: "denied", replayed: true });
    expect(await block()).toMatchObject({ held: 0 });

    ledger.clock.advance(1);
    expect(await call()).toMatchObject({ effect: "HOLD", approval_id: expect.not.stringMatching(held.approval_id!) });
  });
});
