// What every ledger operation needs besides its transaction: time, ids, the guard table,
// the evidence writer and the lifetimes of leases, approvals and derived keys.

import type { Clock } from "../clock.js";
import type { IdSource } from "../ids.js";
import type { Guard } from "../policy/index.js";
import type { SqlTx } from "./driver.js";

export interface EvidenceRef {
  seq: number;
  leaf_hash: string;
  receipt: unknown;
}

export interface EvidenceInput {
  kind: string;
  source: string;
  body: Record<string, unknown>;
  occurred_at?: string;
}

/** The evidence log as the ledger sees it: appends inside the caller's transaction. */
export interface EvidenceWriter {
  append(tx: SqlTx, input: EvidenceInput): Promise<EvidenceRef>;
  /**
   * Appends in order under one take of the sequence lock, each entry with its own receipt. With
   * `last`, the transaction runs nothing after it (the final INSERT goes with the COMMIT).
   */
  appendMany(tx: SqlTx, inputs: readonly EvidenceInput[], options?: { last?: boolean }): Promise<Array<Omit<EvidenceRef, "receipt"> & { receipt?: unknown }>>;
}

export interface LedgerContext {
  clock: Clock;
  ids: IdSource;
  guards: readonly Guard[];
  evidence: EvidenceWriter | null;
  /** An in-flight key's lease: three times the provider timeout (a capture binds, captures, then may re-fetch). */
  lease_ms: number;
  approval_lifetime_ms: number;
  derived_key_lifetime_ms: number;
  /**
   * What names the orders this process's provider makes, stamped on each reservation when its
   * order is named (reservations.order_made_by): `mounted_simulator:<id of this process>` for the
   * simulator `bursar serve` mounts, `razorpay` otherwise; unset (no stamp) in the library.
   */
  order_made_by?: string;
}

export const ledger_defaults = Object.freeze({
  lease_ms: 30_000,
  approval_lifetime_ms: 15 * 60_000,
  derived_key_lifetime_ms: 300_000,
});

/** The longest a ledger takes: a lease of an hour (serve's is at most 360 s), an approval of 90
 *  days (a block's longest life). A lifetime must be a whole number of milliseconds in range:
 *  "900000" (text) was added to a time as text, and Infinity never ran out, each leaving a hold
 *  that nothing released. */
export const lifetime_ms_max = Object.freeze({ lease_ms: 3_600_000, approval_lifetime_ms: 90 * 86_400_000, derived_key_lifetime_ms: 86_400_000 });

export function checkLifetimes(context: Pick<LedgerContext, keyof typeof lifetime_ms_max>): void {
  for (const [name, max] of Object.entries(lifetime_ms_max) as Array<[keyof typeof lifetime_ms_max, number]>) {
    const value: unknown = context[name];
    if (!Number.isSafeInteger(value) || (value as number) < 1 || (value as number) > max) {
      throw new RangeError(`${name} must be a whole number of milliseconds from 1 to ${max}, not ${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
    }
  }
}

export async function record(
  tx: SqlTx,
  context: LedgerContext,
  kind: string,
  body: Record<string, unknown>,
): Promise<EvidenceRef | undefined> {
  return context.evidence ? context.evidence.append(tx, { kind, source: "gate", body }) : undefined;
}
