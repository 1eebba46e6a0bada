// Shared by the benchmarks: a block no benchmark call can exhaust, hold or rate-limit, so
// every measured decision is an ALLOW through the whole path.

export const unbounded_block = Object.freeze({
  currency: "INR",
  reserved: 1_000_000_000_000,
  per_call_cap: 1_000_000,
  approval_threshold: 1_000_000,
  velocity: Object.freeze({ max_calls: 1_000_000, window_seconds: 1 }),
});
