// Waiting on a condition instead of sleeping: poll until it holds, and fail loudly (naming what
// was awaited) if it never does within a generous deadline. The deadline only turns a hang into
// a clear failure; it never decides whether a test passes.

import { setTimeout as sleep } from "node:timers/promises";

export const wait_deadline_ms_default = 20_000;

/**
 * Resolves with the first truthy value `probe` returns (a sync or async check), polled every
 * `interval_ms`; throws once `timeout_ms` has passed without one.
 */
export async function waitUntil<T>(
  what: string,
  probe: () => T | Promise<T>,
  options: { timeout_ms?: number; interval_ms?: number } = {},
): Promise<NonNullable<T>> {
  const timeout_ms = options.timeout_ms ?? wait_deadline_ms_default;
  const interval_ms = options.interval_ms ?? 5;
  const deadline = performance.now() + timeout_ms;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeout_ms} ms waiting for ${what}`);
    await sleep(interval_ms);
  }
}

/** A promise the test resolves by hand: a barrier one side waits on and the other opens. */
export function signal<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((res) => (resolve = res));
  return { promise, resolve };
}

/** `promise`, or a loud failure naming `what` if it has not settled within `timeout_ms`. */
export async function within<T>(what: string, promise: Promise<T>, timeout_ms = wait_deadline_ms_default): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeout_ms} ms waiting for ${what}`)), timeout_ms);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}
