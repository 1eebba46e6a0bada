// A provider's refusal that arrives late (after its lease ran out, a reservation check proved no
// order and released the hold, and the agent used the same key for a new call) drops only its
// own call's row under the key: the new call's row, and so its one hold, stays.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { orderAbsent } from "../../src/ledger/complete.js";
import { lockBlock } from "../../src/ledger/statements.js";

let bursar: Bursar | undefined;
let dir: string | undefined;
afterEach(async () => {
  await bursar?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a late refusal of an order", () => {
  it("leaves the row a newer call under the same key wrote", async () => {
    let now_ms = Date.parse("2026-12-01T10:00:00Z");
    dir = mkdtempSync(join(tmpdir(), "bursar-late-refusal-"));
    bursar = await createBursar({ db: join(dir, "bursar.db"), clock: () => new Date(now_ms), lease_ms: 20_000 });
    const ledger = bursar.ledger;
    const agent = await ledger.createAgent({ name: "late" });
    const block = await ledger.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, per_call_cap: 500_000, approval_threshold: 500_000 });
    const args = { amount: 50_000, currency: "INR", idempotency_key: "K" };
    const keyRow = () => ledger.driver.read((tx) => tx.get<{ reservation_id: string }>("SELECT reservation_id FROM idempotency_keys WHERE agent_id = ? AND key = ?", [agent.agent_id, "k:K"]));

    const first = await ledger.authorize({ agent_id: agent.agent_id, tool: "create_order", args });
    expect(first.verdict.effect).toBe("ALLOW");
    const first_reservation = first.reservation!.reservation_id;
    // The provider call stalls past its lease; a check then finds no order and releases the hold (and the key).
    now_ms += 25_000;
    await ledger.sweep();
    now_ms += 11 * 60_000;
    const absent = await ledger.transaction(async (tx, context) => {
      await lockBlock(tx, block.block_id);
      return orderAbsent(tx, context, first_reservation);
    });
    expect(absent.kind).not.toBe("unknown");
    // The agent sends the same key again: a new call, a new hold.
    const second = await ledger.authorize({ agent_id: agent.agent_id, tool: "create_order", args });
    expect(second.verdict).toMatchObject({ effect: "ALLOW" });
    expect(second.verdict.replay).toBeFalsy();
    const second_reservation = second.reservation!.reservation_id;
    expect(await keyRow()).toEqual({ reservation_id: second_reservation });

    // The first call's 4xx arrives now.
    await ledger.completeOrder(
      { agent_id: agent.agent_id, key: "k:K", reservation_id: first_reservation, block_id: block.block_id },
      { kind: "refused", status: 400, error: { code: "BAD_REQUEST_ERROR", description: "late" } },
    );
    expect(await keyRow()).toEqual({ reservation_id: second_reservation });
    // So the key still names the second call, still in flight: repeating it is not a third hold.
    const third = await ledger.authorize({ agent_id: agent.agent_id, tool: "create_order", args });
    expect(third.verdict).toMatchObject({ effect: "BLOCK", rule: "IN_FLIGHT" });
    expect(third.reservation).toBeUndefined();
    expect((await ledger.getBlock(block.block_id))?.held).toBe(50_000);
  });
});
