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
    // A reading that is no time (NaN) is passed over: kept, it would stay the latest for good.
    const reading = now();
    if (Number.isFinite(reading)) last_ms = Math.max(last_ms, reading);
    return new Date(last_ms);
  };
}

/** How far the log's newest entry may be ahead of the clock at start before the start is refused. */
export const clock_floor_ahead_max_ms = 3_600_000;

/**
 * The log's newest entry is further ahead of the clock than clock_floor_ahead_max_ms: starting
 * from it, time would stand still that long (nothing expiring, no velocity window moving on), and
 * starting from the clock could let a block an earlier process saw expire take money again.
 */
export class ClockBehindLogError extends Error {
  constructor(
    readonly floor_ms: number,
    readonly clock_ms: number,
  ) {
    const hours = ((floor_ms - clock_ms) / 3_600_000).toFixed(1);
    super(
      `the log's newest entry was received at ${new Date(floor_ms).toISOString()}, ${hours} h ahead of the clock (${new Date(clock_ms).toISOString()}): ` +
        "started from that entry, time would stand still until then (nothing expiring, no velocity window moving on); fix the clock, or, if the clock is right and that entry was dated by a wrong one, " +
        "start on the clock as it reads (BURSAR_CLOCK_FROM_HOST=1; the library's clock_from_host), knowing that a block that expired by that entry's time may take money again until the clock passes its expiry",
    );
    this.name = "ClockBehindLogError";
  }
}

export const systemClock: Clock = monotonicClock();
