// A block held past statement_timeout by something other than Bursar (a psql session, a long
// transaction) costs only its own agent's calls. Before, the batch that waited for it timed out,
// and its calls were then decided again one after another, each waiting out the timeout anew,
// with every later call of the process, on any block, queued behind them: a call on a free block
// waited minutes in production settings. Now the calls that waited fail with the timeout once,
// and the others are decided.

import { describe, expect, it } from "vitest";
import { expectBooksBalance } from "../support/ledger.js";
import { lockWaiter, postgresServerUrl } from "../support/backends.js";
import { lockedLedger } from "../support/locked-ledger.js";

const pg_server = postgresServerUrl();

describe.skipIf(!pg_server)("a block held past statement_timeout by another session", () => {
  // 2 s: long enough that a loaded machine does not time out a wait the test lets go of.
  const t = lockedLedger(pg_server, 2_000);
  const { agent, order } = t;
  /** Another session, in a transaction that holds the block's row lock until it ends. */
  const hold = (block_id: string) => t.session("SELECT 1 FROM blocks WHERE block_id = $1 FOR UPDATE", [block_id]);

  async function expectHeld(a: { block_id: string }, b: { block_id: string }): Promise<void> {
    // Nothing was held for the calls that failed; the free block holds its one call.
    expect(await t.bursar.operator.getBlock(a.block_id)).toMatchObject({ held: 0 });
    expect(await t.bursar.operator.getBlock(b.block_id)).toMatchObject({ held: 100 });
    await expectBooksBalance(t.bursar);
  }

  it("fails that block's waiting calls with the timeout once, and decides another agent's call", async () => {
    const a = await agent("held-a");
    const b = await agent("free-b");
    const holder = await hold(a.block_id);
    const waitedOn = await lockWaiter(holder);
    // Settled as they come: they fail while the free call is still being awaited.
    const held = Promise.allSettled(Array.from({ length: 10 }, (_, index) => order(a.agent_id, `a-${index}`)));
    // A's calls were skipped once, and their next batch now waits for A's block: B's call
    // comes in behind it.
    await waitedOn("a batch to wait for the held block");
    expect((await order(b.agent_id, "b-1")).verdict).toMatchObject({ effect: "ALLOW" });
    for (const outcome of await held) expect(outcome).toMatchObject({ status: "rejected", reason: { code: "57014" } });
    // One wait for the whole batch, not one more for each of its calls decided alone after it.
    expect(t.timedOut()).toBe(1);
    await holder.query("ROLLBACK");
    await expectHeld(a, b);
  });

  it("decides a call whose block the timed-out batch waited for and got: only the block still held fails its calls", async () => {
    // The batch locks blocks in block id order, as the database sorts them: b's comes first, so
    // it is waited for (and let go) before the wait for a's, which never ends.
    const pair = [await agent("first-in-order"), await agent("second-in-order")];
    const sorted = await t.bursar.driver.read((tx) => tx.all<{ block_id: string }>("SELECT block_id FROM blocks WHERE block_id IN (?, ?) ORDER BY block_id", pair.map((one) => one.block_id)));
    const [b, a] = sorted.map((row) => pair.find((one) => one.block_id === row.block_id)!) as [(typeof pair)[0], (typeof pair)[0]];
    const holder_a = await hold(a.block_id);
    const holder_b = await hold(b.block_id);
    const waitedOnB = await lockWaiter(holder_b);
    // Both blocks held: the batch waits for both; B's is let go as soon as it does.
    const decided = Promise.allSettled([order(a.agent_id, "a-1"), order(b.agent_id, "b-1")]);
    await waitedOnB("the batch to wait for both blocks");
    await holder_b.query("ROLLBACK");
    const [on_a, on_b] = await decided;
    expect(on_a).toMatchObject({ status: "rejected", reason: { code: "57014" } });
    expect(on_b).toMatchObject({ status: "fulfilled", value: { verdict: { effect: "ALLOW" } } });
    expect(t.timedOut()).toBe(1);
    await holder_a.query("ROLLBACK");
    await expectHeld(a, b);
  });
});
