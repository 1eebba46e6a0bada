// Deliveries take turns to be decoded, validated and stored: a few at once per process, the rest
// waiting in arrival order with only their raw bytes, and a bounded number waiting.
//
// Why: parsing and validating a 2 MiB delivery of large `args` takes ~0.5 s of the main thread and
// ~100 MB, and nothing bounded how many ran at once: 44 deliveries pushed at once by one API-key
// holder kept /healthz waiting 23 s (and any MCP call as long) and took the process past 3 GB.

import { Permits } from "../ledger/permits.js";

/** Deliveries decoded, validated and stored at once in one process, across the ingest routes. */
export const deliveries_in_progress_max = 2;
/** Deliveries waiting their turn (each holding its body, ≤ 2 MiB); a delivery past them is refused. */
export const deliveries_waiting_max = 32;
/** What a sender refused because too many deliveries are waiting is told to wait before it delivers again. */
export const deliveries_busy_retry_after_seconds = 5;

export interface DeliveryTurnsGauge {
  /** Deliveries holding a turn: being decoded, validated or stored. */
  in_progress: number;
  /** Deliveries admitted and waiting for a turn. */
  waiting: number;
}

/** One turn of the event loop (its I/O polled): requests that came meanwhile are read and answered. */
function eventLoopTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export class DeliveryTurns {
  private readonly permits: Permits;
  private in_progress = 0;
  private waiting = 0;

  constructor(
    readonly in_progress_max = deliveries_in_progress_max,
    readonly waiting_max = deliveries_waiting_max,
  ) {
    if (!Number.isInteger(in_progress_max) || in_progress_max < 1) throw new Error(`in_progress_max must be a positive integer, not ${in_progress_max}`);
    if (!Number.isInteger(waiting_max) || waiting_max < 0) throw new Error(`waiting_max must be a non-negative integer, not ${waiting_max}`);
    this.permits = new Permits(in_progress_max);
  }

  /** True when a delivery would have to wait and `waiting_max` are waiting already: `run` refuses it. */
  get full(): boolean {
    // A delivery handed a turn is counted as waiting until it resumes, so the sum is exact.
    return this.in_progress + this.waiting >= this.in_progress_max + this.waiting_max;
  }

  /** What the turns hold now (read-only; for metrics and tests). */
  gauge(): DeliveryTurnsGauge {
    return { in_progress: this.in_progress, waiting: this.waiting };
  }

  /**
   * Runs `work` in its turn, first come first served, and gives the turn back however `work`
   * ends. The caller checks `full` first (and answers the sender); a call while full is a bug.
   * Each turn starts with a turn of the event loop, so one delivery's synchronous parse never
   * follows the last one's without the requests that came meanwhile getting the thread.
   */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.full) throw new Error(`a delivery was admitted past ${this.waiting_max} waiting`);
    this.waiting++;
    let release: () => void;
    try {
      release = await this.permits.take();
    } finally {
      this.waiting--;
    }
    this.in_progress++;
    try {
      await eventLoopTurn();
      return await work();
    } finally {
      this.in_progress--;
      release();
    }
  }
}

/** The process's turns, shared by the three ingest routes of every server in it (they share its CPU). */
export const delivery_turns = new DeliveryTurns();
