// The operator inbox (its list and its count) and the lease sweeper read through partial indexes
// that hold only the rows they look for (migration 7), so an ordinary create_order writes no entry
// into either index.

import type Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { SqliteDriver } from "../../src/ledger/sqlite.js";
import { createBursar } from "../../src/index.js";

/** The SQL texts `work` prepares on the connection, in order. */
async function preparedDuring(db: Database.Database, work: () => Promise<unknown>): Promise<string[]> {
  const prepare = db.prepare.bind(db);
  const seen: string[] = [];
  db.prepare = ((sql: string) => {
    seen.push(sql);
    return prepare(sql);
  }) as typeof db.prepare;
  try {
    await work();
  } finally {
    db.prepare = prepare;
  }
  return seen;
}

function plan(db: Database.Database, sql: string): string {
  const params = Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 0);
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((row) => row.detail).join("\n");
}

/** Entries in an index, counted off its leaf pages. */
function indexEntries(db: Database.Database, index: string): number {
  return (db.prepare("SELECT coalesce(sum(ncell), 0) AS n FROM dbstat WHERE name = ? AND pagetype = 'leaf'").get(index) as { n: number }).n;
}

describe("partial indexes for the inbox and the lease sweeper", () => {
  it("the inbox and the sweeper's lease query use them; allowed orders leave no entry in them", async () => {
    const bursar = await createBursar({ db: ":memory:" });
    const agent = await bursar.operator.createAgent({ name: "buyer" });
    await bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
    for (let index = 0; index < 3; index++) {
      const result = await bursar.gate.callTool(agent.token, "create_order", { amount: 1_000, currency: "INR", idempotency_key: `order-${index}` });
      expect(result.structuredContent).toMatchObject({ effect: "ALLOW" });
    }
    const db = (bursar.driver as SqliteDriver).db;
    const inbox_sql = (await preparedDuring(db, () => bursar.ledger.inbox())).filter((sql) => sql.includes("outcome_unknown"));
    const sweep_sql = (await preparedDuring(db, () => bursar.ledger.sweep())).filter((sql) => sql.includes("in_flight"));
    // The inbox reads the outcome-unknown reservations and counts them: both through the index.
    expect(inbox_sql).toHaveLength(2);
    expect(sweep_sql).toHaveLength(1);
    for (const sql of inbox_sql) expect(plan(db, sql)).toMatch(/USING (COVERING )?INDEX reservations_unknown/);
    expect(plan(db, sweep_sql[0] as string)).toContain("USING INDEX idempotency_leases");
    expect(indexEntries(db, "reservations_unknown")).toBe(0);
    expect(indexEntries(db, "idempotency_leases")).toBe(0);
    expect(indexEntries(db, "reservations_by_block")).toBe(3);
    await bursar.close();
  });
});

describe("the approvals listing's indexes (migration 9)", () => {
  it("pages one state or every state from an index in its own order, with no sort of the table", async () => {
    const bursar = await createBursar({ db: ":memory:" });
    const db = (bursar.driver as SqliteDriver).db;
    const listing = async (state?: "pending") =>
      (await preparedDuring(db, () => bursar.ledger.approvals(state, { limit: 2, after: { created_at_ms: 0, approval_id: "apr_0" } }))).filter((sql) =>
        sql.includes("FROM approvals"),
      );
    const [pending] = await listing("pending");
    const [all] = await listing();
    expect(plan(db, pending as string)).toMatch(/USING (COVERING )?INDEX approvals_by_state_created/);
    expect(plan(db, all as string)).toMatch(/USING (COVERING )?INDEX approvals_by_created/);
    for (const sql of [pending, all]) expect(plan(db, sql as string)).not.toContain("TEMP B-TREE");
    await bursar.close();
  });
});
