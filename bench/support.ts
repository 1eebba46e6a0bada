// Shared by the benchmarks: a block no benchmark call can exhaust, hold or rate-limit, so
// every measured decision is an ALLOW through the whole path; and the one parser of their
// BENCH_* knobs, which refuses a bad value before any work (the README's Benchmarks table).

export const unbounded_block = Object.freeze({
  currency: "INR",
  reserved: 1_000_000_000_000,
  per_call_cap: 1_000_000,
  approval_threshold: 1_000_000,
  velocity: Object.freeze({ max_calls: 1_000_000, window_seconds: 1 }),
});

/** A numeric knob's limits: whole numbers or any number, from `min` (or above it, when `above_min`) to `max`. */
export interface KnobLimits {
  min: number;
  max: number;
  whole: boolean;
  above_min?: boolean;
}

function expected(limits: KnobLimits): string {
  if (limits.whole) return `a whole number from ${limits.min} to ${limits.max}`;
  return limits.above_min ? `a number above ${limits.min}, at most ${limits.max}` : `a number from ${limits.min} to ${limits.max}`;
}

/**
 * Stops a benchmark before any work: one line on stderr naming what was wrong, exit 2, as a
 * bursar command refuses a bad variable. `bench` names it: `bench:gate`.
 */
export function refuse(bench: string, line: string): never {
  process.stderr.write(`${bench}: ${line}\n`);
  process.exit(2);
}

/**
 * The knob `name` from the environment: `fallback` when unset; a value set but empty, not a
 * plain decimal number (no sign, exponent or hex), not whole when it must be, or outside its
 * limits stops the benchmark (refuse) with the variable, its value and its limits. Number()
 * took "abc" for NaN and "" for 0, and a run printed "0/s NaN".
 */
export function numberKnob(bench: string, name: string, fallback: number, limits: KnobLimits): number {
  const raw = process.env[name];
  if (raw === undefined) return fallback;
  const value = Number(raw);
  const shape = limits.whole ? /^\d+$/ : /^\d+(\.\d+)?$/;
  const below = limits.above_min ? value <= limits.min : value < limits.min;
  if (!shape.test(raw) || !Number.isFinite(value) || below || value > limits.max) {
    refuse(bench, `${name}=${JSON.stringify(raw)}: expected ${expected(limits)}`);
  }
  return value;
}

/** The knob `name`, one of `allowed` (the first when unset); anything else, empty included, stops the benchmark (refuse). */
export function choiceKnob<const T extends string>(bench: string, name: string, allowed: readonly [T, ...T[]]): T {
  const raw = process.env[name];
  if (raw === undefined) return allowed[0];
  if (!(allowed as readonly string[]).includes(raw)) refuse(bench, `${name}=${JSON.stringify(raw)}: expected one of ${allowed.join(", ")}`);
  return raw as T;
}
