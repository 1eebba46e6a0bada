// Edges of the batched decision path (PostgreSQL) that the differential property in
// decision-batch.test.ts does not reach, found by mutation testing: a derived key's lifetime
// and the velocity window's length (that property never moves the clock), an order id named by
// two transactions at once, an overflow batch whose every block is held, and a HOLD repeated
// inside one batch.

import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/index.js";
import { sequentialIds } from "../../src/ids.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { order_taken_told } from "../../src/ledger/complete.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";

const pg_server = postgresServerUrl();
const signingKey = generateSigningKeyPem();
const cleanup: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function world(batch_decisions = true) {
  const schema = await freshSchema(pg_server as string);
  const clock = manualClock();
  const bursar: Bursar = await createBursar({ db: schema.url, signingKey, clock, ids: sequentialIds(), pg_batch_decisions: batch_decisions });
  cleanup.push(async () => {
    await bursar.close();
    await schema.drop();
  });
  const agent = async (name: string) => {
    const { agent_id } = await bursar.operator.createAgent({ name });
    const { block_id } = await bursar.operator.createBlock({ agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400, velocity: { max_calls: 1_000, window_seconds: 60 } });
    return { agent_id, block_id };
  };
  return { bursar, clock, url: schema.url, agent };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!pg_server)("the batched decision path", () => {
  for (const batched of [true, false]) {
    it(`a derived key past its lifetime no longer replays: the same purchase later is a new order (${batched ? "batched" : "one by one"})`, async () => {
      const { bursar, clock, agent } = await world(batched);
      const { agent_id } = await agent("buyer");
      const args = { amount: 2_500, currency: "INR" };
      const first = await bursar.ledger.authorize({ agent_id, tool: "create_order", args });
      expect(first.verdict.effect).toBe("ALLOW");
      const reservation_id = first.reservation?.reservation_id as string;
      await bursar.ledger.completeOrder(
        { agent_id, key: first.key?.key as string, reservation_id },
        { kind: "ok", value: { id: "order_Derived1", amount: 2_500, currency: "INR", status: "created" } as never },
      );
      expect((await bursar.ledger.authorize({ agent_id, tool: "create_order", args })).verdict.replay).toBe(true);
      clock.advance(bursar.ledger.context.derived_key_lifetime_ms + 1);
      const later = await bursar.ledger.authorize({ agent_id, tool: "create_order", args });
      expect(later.verdict.replay).toBeFalsy();
      expect(later.verdict.effect).toBe("ALLOW");
      expect(later.reservation?.reservation_id).not.toBe(reservation_id);
      expect((await bursar.ledger.agentBlock(agent_id))?.held).toBe(5_000);
    });
  }

  it("an order id another transaction names at the same moment on another block: the later runs again and records it as taken, not a 23505", async () => {
    const { bursar, url, agent } = await world();
    const a = await agent("order-race-a");
    const b = await agent("order-race-b");
    const order = (agent_id: string) => bursar.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 1_000, currency: "INR", idempotency_key: "race" } });
    const [first, second] = [await order(a.agent_id), await order(b.agent_id)];
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("UPDATE reservations SET order_id = 'order_Dup1' WHERE reservation_id = $1", [first.reservation?.reservation_id]);
      const completing = bursar.ledger.completeOrder(
        { agent_id: b.agent_id, key: second.key?.key as string, reservation_id: second.reservation?.reservation_id as string },
        { kind: "ok", value: { id: "order_Dup1", amount: 1_000, currency: "INR", status: "created" } as never },
      );
      const settled = completing.then(
        () => undefined,
        () => undefined,
      );
      // Its UPDATE waits on the unique index for the holder's row (had it not started yet, it
      // would find the order taken at once, and answer the same).
      await pause(300);
      await holder.query("COMMIT");
      await settled;
      const completion = await completing;
      expect(completion.result).toMatchObject({ provider: "unknown", reason: order_taken_told });
      expect(completion.reservation.order_id).toBeNull();
      expect(completion.reservation.outcome_unknown).toBe(1);
    } finally {
      await holder.end();
    }
  });

  it("an overflow batch whose only block is held leaves its call out at once: a call on a free block is decided while the stalled batch still waits", async () => {
    const { bursar, url, agent } = await world();
    const [held_a, held_b, free] = [await agent("held-a"), await agent("held-b"), await agent("free")];
    const holders = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })];
    await Promise.all(holders.map((holder) => holder.connect()));
    const order = (agent_id: string, key: string) => bursar.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: key } });
    const pending: Array<Promise<unknown>> = [];
    try {
      for (const [holder, block_id] of [
        [holders[0], held_a.block_id],
        [holders[1], held_b.block_id],
      ] as const) {
        await holder!.query("BEGIN");
        await holder!.query("SELECT 1 FROM blocks WHERE block_id = $1 FOR UPDATE", [block_id]);
      }
      // The main lane's batch waits for held_a's block and stalls.
      let a_done = false;
      pending.push(order(held_a.agent_id, "overflow-a").finally(() => (a_done = true)).catch(() => undefined));
      await pause(400);
      // An overflow batch of held_b's call alone: every block it needs is held.
      pending.push(order(held_b.agent_id, "overflow-b").catch(() => undefined));
      await pause(100);
      // Waiting on held_b's block, the overflow lane would hold this call back until the stall
      // ended (a statement timeout later), by when held_a's call would be done too.
      const free_call = await order(free.agent_id, "overflow-free");
      expect(free_call.verdict.effect).toBe("ALLOW");
      expect(a_done).toBe(false);
    } finally {
      for (const holder of holders) await holder.query("COMMIT").catch(() => undefined);
      await Promise.all(pending);
      await Promise.all(holders.map((holder) => holder.end()));
    }
  }, 40_000);

  it("a HOLD repeated with its key in the same batch replays with its approval, and records it, as one after another does", async () => {
    const entries = async (batched: boolean) => {
      const { bursar } = await world(batched);
      const { agent_id } = await bursar.operator.createAgent({ name: "holder" });
      await bursar.operator.createBlock({ agent_id, currency: "INR", reserved: 100_000, approval_threshold: 3_000 });
      const call = { agent_id, tool: "create_order", args: { amount: 3_500, currency: "INR", idempotency_key: "hold-twice" } };
      const results = batched
        ? await Promise.all([bursar.ledger.authorize(call), bursar.ledger.authorize(call)])
        : [await bursar.ledger.authorize(call), await bursar.ledger.authorize(call)];
      const log = await bursar.driver.read((tx) => tx.all<{ entry_text: string }>("SELECT entry_text FROM log_entries WHERE kind = 'gate.decision' ORDER BY seq"));
      return {
        results: results.map((result) => ({ effect: result.verdict.effect, replay: result.verdict.replay ?? false, approval: result.approval?.state ?? null })),
        log: log.map((row) => row.entry_text),
      };
    };
    const serial = await entries(false);
    expect(serial.results).toEqual([
      { effect: "HOLD", replay: false, approval: "pending" },
      { effect: "HOLD", replay: true, approval: "pending" },
    ]);
    expect(await entries(true)).toEqual(serial);
  });

  /** An agent whose block allows 2 money calls per 60 s, which has made both (at the clock's start). */
  async function twoCallsMade(batched: boolean) {
    const { bursar, clock } = await world(batched);
    const { agent_id } = await bursar.operator.createAgent({ name: "velocity" });
    await bursar.operator.createBlock({ agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400, velocity: { max_calls: 2, window_seconds: 60 } });
    const order = (key: string) => bursar.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 1_000, currency: "INR", idempotency_key: key } });
    for (const key of ["first", "second"]) expect((await order(key)).verdict.effect).toBe("ALLOW");
    return { clock, order };
  }

  // readState's window in seconds read as milliseconds (60 ms), or its > as >=, passed every other test here.
  for (const batched of [true, false]) {
    const how = batched ? "batched" : "one by one";

    it(`a window of 2 calls per 60 s is still full 30 s and 59.999 s after two calls: refused under R6 (${how})`, async () => {
      const { clock, order } = await twoCallsMade(batched);
      clock.advance(30_000);
      expect((await order("third")).verdict).toMatchObject({ effect: "BLOCK", rule: "R6" });
      clock.advance(29_999);
      expect((await order("fourth")).verdict).toMatchObject({ effect: "BLOCK", rule: "R6" });
    });

    it(`60 s after both calls the window has rolled: the next is allowed (${how})`, async () => {
      const { clock, order } = await twoCallsMade(batched);
      clock.advance(60_000);
      expect((await order("third")).verdict.effect).toBe("ALLOW");
    });
  }
});
