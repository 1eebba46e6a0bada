// Provider look-ups per agent. fetch_order, fetch_payment and fetch_order_payments ask the provider and move nothing,
// so no money rule bounds them, yet each spends the merchant's provider API quota (Razorpay
// rate-limits per key): an agent looping on them could starve the gate's own money calls. Each
// agent gets a rolling one-minute window of look-ups, counted in this process.

export const lookups_per_minute_default = 60;
export const lookups_per_minute_max = 10_000;
const window_ms = 60_000;
/** Agents remembered at most; the one seen least recently is forgotten first. */
export const lookup_agents_max = 10_000;

export type LookupTake = { ok: true } | { ok: false; retry_after_s: number };

export class LookupBudget {
  /** Each agent's look-up times within the last minute, oldest first; most recently seen agent last. */
  private readonly recent = new Map<string, number[]>();

  /**
   * `per_minute` 0 leaves look-ups unlimited. `now_ms` is a monotonic clock in milliseconds
   * (default performance.now()), so a wall clock set back cannot lock an agent out; should it go
   * back anyway (an injected clock), times after now are forgotten.
   */
  constructor(
    readonly per_minute: number,
    private readonly now_ms: () => number = () => performance.now(),
  ) {
    if (!Number.isSafeInteger(per_minute) || per_minute < 0 || per_minute > lookups_per_minute_max) {
      throw new RangeError(`lookups_per_minute must be an integer from 0 to ${lookups_per_minute_max}`);
    }
  }

  /** Spends one look-up of the agent's minute, or says in how many seconds one is free again. */
  take(agent_id: string): LookupTake {
    if (this.per_minute === 0) return { ok: true };
    const now_ms = this.now_ms();
    const earlier = this.recent.get(agent_id) ?? [];
    this.recent.delete(agent_id);
    const times = earlier.length > 0 && (earlier[earlier.length - 1] as number) > now_ms ? [] : earlier;
    while (times.length > 0 && (times[0] as number) <= now_ms - window_ms) times.shift();
    const ok = times.length < this.per_minute;
    if (ok) times.push(now_ms);
    this.recent.set(agent_id, times);
    if (this.recent.size > lookup_agents_max) this.recent.delete(this.recent.keys().next().value as string);
    if (ok) return { ok: true };
    return { ok: false, retry_after_s: Math.max(1, Math.ceil(((times[0] as number) + window_ms - now_ms) / 1000)) };
  }
}
