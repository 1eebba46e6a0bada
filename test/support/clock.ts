// A clock tests move by hand.

export interface ManualClock {
  (): Date;
  advance(ms: number): void;
  set(at: Date | number): void;
  /** From now on every reading moves the clock on by `ms` after it is read (0 stops it). */
  tickPerRead(ms: number): void;
}

export function manualClock(start = Date.parse("2026-11-30T10:00:00.000Z")): ManualClock {
  let now_ms = start;
  let tick_ms = 0;
  const clock = (() => {
    const now = new Date(now_ms);
    now_ms += tick_ms;
    return now;
  }) as ManualClock;
  clock.advance = (ms: number) => {
    now_ms += ms;
  };
  clock.set = (at: Date | number) => {
    now_ms = typeof at === "number" ? at : at.getTime();
  };
  clock.tickPerRead = (ms: number) => {
    tick_ms = ms;
  };
  return clock;
}
