// What the gate reports for operations (metrics), kept free of any metrics library.

import type { Verdict } from "../policy/index.js";

/** The ledger's two steps of a money call: the decision with its hold, and the provider's answer recorded. */
export type LedgerStep = "decide" | "complete";

export interface GateObserver {
  decision(tool: string, verdict: Verdict): void;
  providerCall(operation: string, outcome: "ok" | "refused" | "unknown", seconds: number): void;
  unknownOutcome(tool: string): void;
  webhook(outcome: string): void;
  /** A webhook delivery answered with an error (bad signature, no event id, too large, …), by its HTTP status. */
  webhookRejected(status: number): void;
  /** A read tool answered rate_limited instead of asking the provider. */
  lookupLimited(tool: string): void;
  /** How long a ledger step of a money call took, including any wait for the disk flush. */
  ledgerStep(tool: string, step: LedgerStep, seconds: number): void;
  /** How long one flush of SQLite's WAL to disk took (none on PostgreSQL, whose server flushes). */
  walFlush(seconds: number): void;
}

/** Runs one ledger step of a money call and reports how long it took, whether or not it failed. */
export async function timedStep<T>(observer: GateObserver | undefined, tool: string, step: LedgerStep, run: () => Promise<T>): Promise<T> {
  if (!observer) return run();
  const start = process.hrtime.bigint();
  try {
    return await run();
  } finally {
    observer.ledgerStep(tool, step, Number(process.hrtime.bigint() - start) / 1e9);
  }
}
