// Stalls found with three instances on one database: a stall while nothing was queued shut a
// process's overflow lane for good; a lock on the whole blocks table made every call wait the
// statement timeout again (the "which blocks are held?" probe waited on the lock too); and a
// database's default lock_timeout reached Bursar's connections.

import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decision_stall_ms, DecisionQueue } from "../../src/ledger/authorize-batch.js";
import type { AuthorizeInput, AuthorizeResult } from "../../src/ledger/authorize.js";
import { PostgresDriver } from "../../src/ledger/postgres.js";
import { lockWaiter, postgresServerUrl } from "../support/backends.js";
import { lockedLedger } from "../support/locked-ledger.js";
import { waitUntil, within } from "../support/wait.js";

const pg_server = postgresServerUrl();

describe("DecisionQueue's overflow lane", () => {
  const result = (name: string) => ({ name }) as unknown as AuthorizeResult;
  const of = (agent_id: string, name: string): AuthorizeInput => ({ agent_id, tool: "create_order", args: { name } });
  const nameOf = (input: AuthorizeInput) => (input.args as { name: string }).name;
  const stall_ms = 20;

  it("opens again at a later stall after a stall that fired while nothing was queued", async () => {
    const releases = new Map<string, () => void>();
    const queue = new DecisionQueue(
      async (inputs) => {
        // x's calls wait for x's block, held elsewhere until the test lets go.
        for (const input of inputs) if (input.agent_id === "agt_x") await new Promise<void>((resolve) => releases.set(nameOf(input), resolve));
        return inputs.map((input) => result(nameOf(input)));
      },
      async () => {
        throw new Error("not decided one by one");
      },
      undefined,
      stall_ms,
    );
    // The first stall finds nothing queued behind its batch.
    const x1 = queue.decide(of("agt_x", "x1"));
    await waitUntil("x1's batch to wait", () => releases.has("x1"));
    await sleep(stall_ms * 5);
    releases.get("x1")!();
    expect(await x1).toEqual(result("x1"));
    // The second stall has a call on another block behind it: it is decided beside the stall.
    const x2 = queue.decide(of("agt_x", "x2"));
    await waitUntil("x2's batch to wait", () => releases.has("x2"));
    await sleep(stall_ms * 5);
    expect(await within("y1 decided beside the stalled batch", queue.decide(of("agt_y", "y1")), 2_000)).toEqual(result("y1"));
    releases.get("x2")!();
    expect(await x2).toEqual(result("x2"));
  });
});

describe.skipIf(!pg_server)("stalls on a database another session locks", () => {
  const statement_timeout_ms = 2_000;
  const t = lockedLedger(pg_server, statement_timeout_ms);
  const { agent, session, order } = t;

  it("after a stall that fired while nothing was queued, a later stall still decides another agent's call beside it", async () => {
    const a = await agent("stalled-a");
    const b = await agent("free-b");
    const hold = async () => {
      const holder = await session("SELECT 1 FROM blocks WHERE block_id = $1 FOR UPDATE", [a.block_id]);
      return { holder, waitedOn: await lockWaiter(holder) };
    };
    const first = await hold();
    const a1 = order(a.agent_id, "a-1");
    await first.waitedOn("a-1's batch to wait for a's block");
    await sleep(decision_stall_ms * 2); // the stall fires with nothing queued behind it
    await first.holder.query("ROLLBACK");
    expect((await a1).verdict).toMatchObject({ effect: "ALLOW" });

    const second = await hold();
    const a2 = order(a.agent_id, "a-2");
    await second.waitedOn("a-2's batch to wait for a's block");
    await sleep(decision_stall_ms * 2);
    // Before, b's call waited behind a-2's batch until it timed out (statement_timeout).
    const b1 = await within("b's call decided beside the stalled batch", order(b.agent_id, "b-1"), statement_timeout_ms / 2);
    expect(b1.verdict).toMatchObject({ effect: "ALLOW" });
    await second.holder.query("ROLLBACK");
    expect((await a2).verdict).toMatchObject({ effect: "ALLOW" });
    expect(t.timedOut()).toBe(0);
  });

  it("under a lock on the whole blocks table, a timed-out batch fails its calls once instead of each waiting the timeout again", async () => {
    const a = await agent("table-a");
    const b = await agent("table-b");
    const holder = await session("LOCK TABLE blocks IN ACCESS EXCLUSIVE MODE");
    const decided = await Promise.allSettled([order(a.agent_id, "a-1"), order(b.agent_id, "b-1")]);
    for (const outcome of decided) expect(outcome).toMatchObject({ status: "rejected", reason: { code: "57014" } });
    // One wait for the batch; the probe asking which blocks are held does not wait on the lock.
    expect(t.timedOut()).toBe(1);
    await holder.query("ROLLBACK");
    expect((await order(a.agent_id, "a-2")).verdict).toMatchObject({ effect: "ALLOW" });
  });

  it("counts as held the blocks whose probe would wait on a table lock queued behind the held row", async () => {
    const a = await agent("row-then-table-a");
    const row = await session("SELECT 1 FROM blocks WHERE block_id = $1 FOR UPDATE", [a.block_id]);
    const waitedOn = await lockWaiter(row);
    const a1 = order(a.agent_id, "a-1");
    await waitedOn("a-1's batch to wait for a's block");
    // A table lock queued behind the row's holder (and the batch): the probe's lock on the
    // table would queue behind it in turn.
    const table = await t.connect();
    await table.query("BEGIN");
    const locked = table.query("LOCK TABLE blocks IN ACCESS EXCLUSIVE MODE");
    await waitUntil("the table lock to queue", async () => {
      const waiting = await row.query("SELECT 1 FROM pg_locks WHERE locktype = 'relation' AND relation = 'blocks'::regclass AND mode = 'AccessExclusiveLock' AND NOT granted");
      return waiting.rowCount === 1;
    });
    await expect(a1).rejects.toMatchObject({ code: "57014" });
    // Before, the probe waited out its own timeout, answered "none held", and a-1 was decided
    // again alone, waiting out a third.
    expect(t.timedOut()).toBe(1);
    await row.query("ROLLBACK");
    await locked;
    await table.query("ROLLBACK");
  });
});

describe.skipIf(!pg_server)("a database's default lock_timeout", () => {
  const database = `bursar_test_${randomBytes(6).toString("hex")}`;
  const url = new URL(pg_server ?? "postgres://unused");
  url.pathname = `/${database}`;
  let admin: pg.Client | undefined;
  beforeAll(async () => {
    admin = new pg.Client({ connectionString: pg_server, connectionTimeoutMillis: 5_000 });
    await admin.connect();
    // A database of this test's own: a default set on a shared one would reach everyone's sessions.
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.query(`ALTER DATABASE ${database} SET lock_timeout = '5ms'`);
  });
  afterAll(async () => {
    await admin?.query(`DROP DATABASE IF EXISTS ${database}`);
    await admin?.end();
  });

  it("does not reach Bursar's connections: statement_timeout alone bounds their waits", async () => {
    const plain = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5_000 });
    await plain.connect();
    try {
      expect((await plain.query("SHOW lock_timeout")).rows[0]).toEqual({ lock_timeout: "5ms" });
    } finally {
      await plain.end();
    }
    const driver = new PostgresDriver({ url: url.toString() });
    try {
      expect(await driver.read((tx) => tx.get("SHOW lock_timeout"))).toEqual({ lock_timeout: "0" });
      expect(await driver.transaction((tx) => tx.get("SHOW lock_timeout"))).toEqual({ lock_timeout: "0" });
    } finally {
      await driver.close();
    }
  });
});
