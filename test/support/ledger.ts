// A real in-memory Bursar (SQLite :memory:) with a manual clock, and small call helpers.

import { expect } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { sequentialIds } from "../../src/ids.js";
import type { AuthorizeResult } from "../../src/ledger/index.js";
import type { Guard } from "../../src/policy/index.js";
import { closeAfterTest, isPostgresUrl, type Backend } from "./backends.js";
import { manualClock, type ManualClock } from "./clock.js";

export interface TestLedger {
  bursar: Bursar;
  clock: ManualClock;
  agent_id: string;
  block_id: string;
  order(args: Record<string, unknown>, agent_id?: string): Promise<AuthorizeResult>;
}

export async function testLedger(
  block: Record<string, unknown> = {},
  options: { guards?: readonly Guard[]; db?: string } = {},
): Promise<TestLedger> {
  const clock = manualClock();
  const bursar = await createBursar({ db: options.db ?? ":memory:", clock, ids: sequentialIds(), guards: options.guards });
  const agent = await bursar.operator.createAgent({ name: "buyer" });
  const created = await bursar.operator.createBlock({
    agent_id: agent.agent_id,
    currency: "INR",
    reserved: 1_000_000,
    ttl_seconds: 86_400,
    velocity: { max_calls: 1000, window_seconds: 60 },
    ...block,
  });
  return {
    bursar,
    clock,
    agent_id: agent.agent_id,
    block_id: created.block_id,
    order: (args, agent_id = agent.agent_id) => bursar.ledger.authorize({ agent_id, tool: "create_order", args }),
  };
}

/** testLedger on a fresh database of `backend`, closed after the test on PostgreSQL. */
export async function backendLedger(backend: Backend, block: Record<string, unknown> = {}, options: { guards?: readonly Guard[] } = {}): Promise<TestLedger> {
  const db = await backend.db();
  const t = await testLedger(block, { ...options, db });
  if (isPostgresUrl(db)) closeAfterTest(t.bursar);
  return t;
}

let counter = 0;
/** Arguments with a fresh explicit key, so calls never replay one another. */
export function fresh(args: Record<string, unknown>): Record<string, unknown> {
  counter++;
  return { idempotency_key: `test-${counter}`, ...args };
}

/**
 * The books of every block balance: spent + held <= reserved, held is the sum of its held
 * reservations, and unreconciled is the sum of its unreconciled payments in its own currency
 * (each counted once; one in another currency is listed but adds nothing).
 */
export async function expectBooksBalance(bursar: Bursar): Promise<void> {
  const rows = await bursar.driver.read((tx) =>
    tx.all<Record<string, unknown>>(
      `SELECT b.block_id, b.reserved, b.spent, b.held, b.unreconciled,
         (SELECT COALESCE(SUM(r.amount), 0) FROM reservations r WHERE r.block_id = b.block_id AND r.status = 'held') AS held_reservations,
         (SELECT COALESCE(SUM(u.amount), 0) FROM unreconciled_payments u WHERE u.block_id = b.block_id AND u.currency = b.currency) AS unreconciled_payments
       FROM blocks b`,
    ),
  );
  expect(rows.length).toBeGreaterThan(0);
  for (const row of rows) {
    // PostgreSQL answers bigint sums as strings.
    const [reserved, spent, held, unreconciled, held_reservations, unreconciled_payments] = [
      row.reserved, row.spent, row.held, row.unreconciled, row.held_reservations, row.unreconciled_payments,
    ].map(Number) as [number, number, number, number, number, number];
    expect(spent + held, `block ${String(row.block_id)}: spent + held <= reserved`).toBeLessThanOrEqual(reserved);
    expect(held, `block ${String(row.block_id)}: held`).toBe(held_reservations);
    expect(unreconciled, `block ${String(row.block_id)}: unreconciled`).toBe(unreconciled_payments);
  }
}
