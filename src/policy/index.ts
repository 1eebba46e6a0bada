// The pure policy: rules and guards as one table, and decide(call, state, now) -> Verdict.

export { decide, withoutGuard, allow_verdict } from "./decide.js";
export { guard_table, assertReadableBlock, not_among_callers_orders } from "./guards.js";
export {
  argument_values_max,
  argumentProblem,
  checkAmount,
  checkCurrency,
  control_characters,
  holdsMoreValues,
  isPlainObject,
  nameCharacterProblem,
  unread_arguments,
} from "./arguments.js";
export * from "./limits.js";
export * from "./types.js";
