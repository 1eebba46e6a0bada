// Time is passed in, never read inside policy or ledger logic.

export type Clock = () => Date;

/**
 * A clock that never goes backwards: each reading is the later of `now()` and the last reading,
 * and never earlier than `floor_ms` (a server passes its log's newest entry, so this holds across
 * a restart too). When the host's clock steps back (an NTP correction), time stands still until
 * it catches up, so leases, approval lifetimes and velocity windows are not stretched by the
 * step, and a block that expired stays expired. PostgreSQL's database clock does the same
 * (postgres.ts).
 */
export function monotonicClock(now: () => number = Date.now, floor_ms = -Infinity): Clock {
  let last_ms = floor_ms;
  return () => {
    last_ms = Math.max(last_ms, now());
    return new Date(last_ms);
  };
}

export const systemClock: Clock = monotonicClock();
