// A clock tests move by hand.

export interface ManualClock {
  (): Date;
  advance(ms: number): void;
  set(at: Date | number): void;
}

export function manualClock(start = Date.parse("2026-11-30T10:00:00.000Z")): ManualClock {
  let now_ms = start;
  const clock = (() => new Date(now_ms)) as ManualClock;
  clock.advance = (ms: number) => {
    now_ms += ms;
  };
  clock.set = (at: Date | number) => {
    now_ms = typeof at === "number" ? at : at.getTime();
  };
  return clock;
}
