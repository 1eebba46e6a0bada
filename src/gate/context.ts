// What the gate's steps share: the ledger, the provider, and block summaries.

import type { BlockSummary, BlockView, Ledger } from "../ledger/index.js";
import type { Provider } from "../provider/port.js";
import type { LookupBudget } from "./lookups.js";
import type { GateObserver } from "./observer.js";

export interface GateContext {
  ledger: Ledger;
  provider: Provider;
  observer?: GateObserver;
  /** Each agent's provider look-ups (fetch_order, fetch_payment, fetch_order_payments) per minute. */
  lookups: LookupBudget;
  /** Each agent's captures in this process between their look-up check and their decision. */
  undecided_captures: Map<string, Set<Promise<unknown>>>;
  /** Tool calls, approvals, checks and webhooks under way: closing waits for them. */
  work: WorkInFlight;
  /** Set when the provider is the simulator `bursar serve` mounts in this process (src/server/start.ts). */
  mounted_simulator?: MountedSimulator;
}

/**
 * The simulator mounted in this process keeps orders and payments in its memory only, takes
 * orders only from this process's own client, and forgets none while it runs: an order another
 * process's mounted simulator named, that this one reports as not existing, was lost with that
 * process, and nothing can be paid or captured on it (src/gate/lost-orders.ts).
 */
export interface MountedSimulator {
  /** The stamp this process puts on the orders it names (LedgerContext.order_made_by). */
  stamp: string;
}

/** What webhook settlement needs of the gate: no agent makes these calls, so no look-up budget. */
export type WebhookContext = Pick<GateContext, "ledger" | "provider" | "observer" | "work">;

/**
 * The gate's work under way. A graceful stop waits for it before the database closes: an HTTP
 * request ends for the server when its client goes away, but its money call goes on (the order
 * may be at the provider already), and its answer must be recorded, not cut off by the close.
 */
export class WorkInFlight {
  private count = 0;
  private waiters: Array<() => void> = [];

  async run<T>(work: () => Promise<T>): Promise<T> {
    this.count++;
    try {
      return await work();
    } finally {
      this.count--;
      if (this.count === 0) {
        const waiters = this.waiters;
        this.waiters = [];
        for (const resolve of waiters) resolve();
      }
    }
  }

  /** Resolves once no work is under way. */
  idle(): Promise<void> {
    return this.count === 0 ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve));
  }
}

export function summary(view: BlockView): BlockSummary {
  return {
    reserved: view.reserved,
    spent: view.spent,
    held: view.held,
    available: view.available,
    currency: view.currency,
    expires_at: view.expires_at,
  };
}

export async function blockSummary(context: GateContext, block_id: string): Promise<BlockSummary> {
  return summary(await context.ledger.getBlock(block_id));
}

/**
 * The provider payment as results and evidence show it: only the fields that matter, and for a
 * refunded payment whether it was captured first (then its money moved: see isCapture).
 */
export function paymentView(payment: { id: string; order_id: string | null; amount: number; currency: string; status: string; captured?: boolean }) {
  const view = { id: payment.id, order_id: payment.order_id ?? "", amount: payment.amount, currency: payment.currency, status: payment.status };
  return payment.status === "refunded" && payment.captured !== undefined ? { ...view, captured: payment.captured } : view;
}
