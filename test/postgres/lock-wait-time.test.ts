// A decision on PostgreSQL may wait for its block's row lock while another transaction holds it.
// Its time is read once it holds the lock: a call that waited past its block's expiry is refused
// under R2 (decided at the time it started waiting, it was allowed on an expired block), and its
// call is counted at the time it was decided. One decision at a time and batched decisions alike.

import pg from "pg";
import { describe, expect, it } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/index.js";
import { sequentialIds } from "../../src/ids.js";
import { createBursar } from "../../src/index.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";

const pg_server = postgresServerUrl();
const block_ttl_seconds = 60;
const lock_wait_poll_ms = 10;
const lock_wait_timeout_ms = 10_000;

/** Resolves once a session of the server waits for a lock that `holder_pid`'s session holds. */
async function someoneWaitsFor(observer: pg.Client, holder_pid: number): Promise<void> {
  const deadline = Date.now() + lock_wait_timeout_ms;
  while (Date.now() < deadline) {
    const { rows } = await observer.query<{ waiting: string }>("SELECT count(*) AS waiting FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", [holder_pid]);
    if (Number(rows[0]?.waiting) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, lock_wait_poll_ms));
  }
  throw new Error(`no decision waited for the block's lock within ${lock_wait_timeout_ms} ms`);
}

describe.skipIf(!pg_server)("a decision that waits for its block's lock on PostgreSQL", () => {
  for (const batched of [false, true]) {
    it(`is decided at the time it holds the lock, not when it began waiting (${batched ? "batched" : "one at a time"})`, async () => {
      const schema = await freshSchema(pg_server as string);
      const clock = manualClock();
      const bursar = await createBursar({ db: schema.url, signingKey: generateSigningKeyPem(), clock, ids: sequentialIds(), pg_batch_decisions: batched });
      const holder = new pg.Client({ connectionString: schema.url });
      const observer = new pg.Client({ connectionString: schema.url });
      try {
        await Promise.all([holder.connect(), observer.connect()]);
        const { agent_id } = await bursar.operator.createAgent({ name: "waits" });
        const block = await bursar.operator.createBlock({ agent_id, currency: "INR", reserved: 100_000, ttl_seconds: block_ttl_seconds });
        const holder_pid = (await holder.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid as number;
        await holder.query("BEGIN");
        await holder.query("SELECT 1 FROM blocks WHERE block_id = $1 FOR UPDATE", [block.block_id]);
        const args = { amount: 1_000, currency: "INR", idempotency_key: "waited" };
        const decided = bursar.ledger.authorize({ agent_id, tool: "create_order", args });
        await someoneWaitsFor(observer, holder_pid);
        clock.advance((block_ttl_seconds + 1) * 1000);
        await holder.query("COMMIT");
        const { verdict } = await decided;
        expect(verdict).toMatchObject({ effect: "BLOCK", rule: "R2" });
        const { rows } = await observer.query<{ at_ms: string }>("SELECT at_ms FROM money_calls WHERE agent_id = $1", [agent_id]);
        expect(rows.map((row) => Number(row.at_ms))).toEqual([clock().getTime()]);
        expect((await bursar.ledger.getBlock(block.block_id)).held).toBe(0);
      } finally {
        await Promise.all([holder.end(), observer.end()]);
        await bursar.close();
        await schema.drop();
      }
    });
  }
});
