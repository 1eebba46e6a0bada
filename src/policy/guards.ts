// The guard table: every rule and guard as a small named predicate, in the order DESIGN.md
// gives. The first guard that returns a verdict decides; passing them all is ALLOW.

import { argumentProblem, sentKeyProblem } from "./arguments.js";
import { money_tools, type BlockState, type CaptureState, type Guard, type PolicyCall, type PolicyState, type Verdict } from "./types.js";

const block = (rule: Verdict["rule"], reason: string): Verdict => ({ effect: "BLOCK", rule, reason });

/** An unreadable block is a bug or corruption: throwing here makes FAIL_CLOSED refuse. */
export function assertReadableBlock(state: BlockState): void {
  const integers = [
    state.reserved,
    state.spent,
    state.held,
    state.unreconciled,
    state.expires_at_ms,
    state.per_call_cap,
    state.approval_threshold,
    state.velocity.max_calls,
    state.velocity.window_seconds,
  ];
  if (!integers.every((value) => Number.isSafeInteger(value) && value >= 0)) {
    throw new Error(`block ${state.block_id} is unreadable: a limit is not a non-negative integer`);
  }
  if (typeof state.currency !== "string" || state.currency.length !== 3) {
    throw new Error(`block ${state.block_id} is unreadable: bad currency`);
  }
}

function amountOf(call: PolicyCall): number {
  // Only reached after R0 proved args.amount is a safe integer.
  return (call.args as { amount: number }).amount;
}

function requireBlock(state: PolicyState): BlockState {
  if (!state.block) throw new Error("guard reached without a block; R4 must run first");
  return state.block;
}

const failClosed: Guard = {
  id: "FAIL_CLOSED",
  rule: "FAIL_CLOSED",
  description: "any exception inside the decision is a BLOCK, never an ALLOW (wraps every other guard)",
  check: () => undefined,
};

const allowlist: Guard = {
  id: "ALLOWLIST",
  rule: "ALLOWLIST",
  description: "only the declared money tools exist; any other tool name is refused",
  check: (call) =>
    (money_tools as readonly string[]).includes(call.tool)
      ? undefined
      : block("ALLOWLIST", `tool ${JSON.stringify(call.tool.slice(0, 64))} is not a declared money tool`),
};

/** How a payment or order that is not the caller's is answered, whether it is another agent's,
 *  made outside the gate or unknown to the provider: the answer does not tell which ids exist. */
export const not_among_callers_orders = "not found among the orders this agent created through the gate";

/**
 * A capture's payment that is on none of the caller's orders: on another agent's reservation, on
 * an order the gate holds no reservation for, or one the provider has no such payment for. All
 * three are answered alike (fetch_payment answers them so too): told apart, they would tell an
 * agent which payment ids exist and which are another agent's.
 */
function notCallersPayment(agent_id: string, capture: CaptureState): boolean {
  if (capture.reservation) return capture.reservation.agent_id !== agent_id;
  return capture.payment.fetched || capture.payment.not_found === true;
}

const caller: Guard = {
  id: "CALLER",
  rule: "CALLER",
  description: "the block, reservation and payment are the authenticated caller's own; no agent can name another's, nor learn whether one exists",
  check: (call, state) => {
    if (!call.agent_id) return block("CALLER", "no authenticated agent");
    if (state.block && state.block.agent_id !== call.agent_id) {
      return block("CALLER", "the block belongs to another agent");
    }
    if (state.capture && notCallersPayment(call.agent_id, state.capture)) {
      // Only a well-formed payment_id is looked up, so the id is one R0 passes.
      return block("CALLER", `payment ${String((call.args as { payment_id?: unknown }).payment_id)} ${not_among_callers_orders}`);
    }
    return undefined;
  },
};

const keyConflict: Guard = {
  id: "R7",
  rule: "R7",
  description: "the same idempotency key with different parameters is refused",
  check: (call, state) =>
    state.idempotency.status !== "none" && state.idempotency.params_hash !== call.params_hash
      ? block("R7", "idempotency key was already used with different parameters")
      : undefined,
};

const inFlight: Guard = {
  id: "IN_FLIGHT",
  rule: "IN_FLIGHT",
  description: "a call whose idempotency key is still executing is refused, not run twice; retry later",
  check: (_call, state) =>
    state.idempotency.status === "in_flight"
      ? block("IN_FLIGHT", "a call with this idempotency key is still in flight; retry shortly")
      : undefined,
};

const replay: Guard = {
  id: "REPLAY",
  rule: "R7",
  description: "the same key with the same parameters replays the stored result (counts for nothing)",
  check: (call, state) =>
    state.idempotency.status === "stored" && state.idempotency.params_hash === call.params_hash
      ? { effect: state.idempotency.effect, rule: "R7", reason: "replay of the result stored under this idempotency key", replay: true }
      : undefined,
};

const revoked: Guard = {
  id: "R4",
  rule: "R4",
  description: "a revoked or frozen block (or none at all) refuses every money call",
  check: (_call, state) => {
    if (!state.block) return block("R4", "this agent has no spending block");
    assertReadableBlock(state.block);
    if (state.block.revoked) return block("R4", "the spending block is revoked");
    if (state.block.frozen) return block("R4", "the spending block is frozen pending reconciliation");
    return undefined;
  },
};

const expired: Guard = {
  id: "R2",
  rule: "R2",
  description: "now must be before the block's expires_at",
  check: (_call, state, now_ms) =>
    now_ms >= requireBlock(state).expires_at_ms ? block("R2", "the spending block has expired") : undefined,
};

const velocity: Guard = {
  id: "R6",
  rule: "R6",
  description: "at most max_calls money calls (allowed and refused) per rolling window_seconds",
  check: (_call, state) => {
    const { max_calls, window_seconds } = requireBlock(state).velocity;
    return state.calls_in_window >= max_calls
      ? block("R6", `velocity limit: ${max_calls} money calls per ${window_seconds} s already reached`)
      : undefined;
  },
};

const argumentShape: Guard = {
  id: "R0",
  rule: "R0",
  description: "amount is an integer of 100..1,000,000,000 minor units in the block's currency; no undeclared argument; an idempotency_key sent as well-formed text",
  check: (call, state) => {
    const problem = argumentProblem(call.tool, call.args, requireBlock(state).currency) ?? sentKeyProblem(call.idempotency_key_sent);
    return problem ? block("R0", problem) : undefined;
  },
};

const perCallCap: Guard = {
  id: "R5",
  rule: "R5",
  description: "amount must not exceed the block's per-call cap",
  check: (call, state) => {
    const cap = requireBlock(state).per_call_cap;
    const amount = amountOf(call);
    return amount > cap ? block("R5", `amount ${amount} exceeds the per-call cap ${cap}`) : undefined;
  },
};

function captureProblem(call: PolicyCall, state: PolicyState): string | undefined {
  const capture = state.capture;
  if (!capture) throw new Error("capture_payment decided without capture state");
  if (!capture.payment.fetched) {
    if (capture.payment.asked === false) return `the payment was not looked up (${capture.payment.reason}); retry`;
    // Only a provider that did not answer is worth asking again; a refusal (no such payment, which
    // CALLER answers first unless the table lacks it) is final.
    return `the provider did not confirm the payment (${capture.payment.reason})${capture.payment.unanswered ? "; retry" : ""}`;
  }
  const payment = capture.payment;
  const reservation = capture.reservation;
  // Reached only in a table without CALLER (a mutant): CALLER answers such a payment first.
  if (!reservation) return "no reservation held by this gate for the payment's order";
  if (reservation.status !== "held") return `the reservation is already ${reservation.status}`;
  // Its order can only have been made outside the gate: nothing is forwarded before approval.
  if (reservation.approval_pending) return "the reservation still waits for an operator's approval: the gate has sent no order for it";
  if (reservation.payment_id && reservation.payment_id !== payment.id) {
    return "the reservation is already bound to another payment";
  }
  if (capture.payment_bound_elsewhere) return "the payment is already bound to another reservation";
  if (payment.currency !== reservation.currency) return "the payment's currency differs from the reservation's";
  if (payment.amount > reservation.amount) {
    return `the payment amount ${payment.amount} exceeds the reservation's ${reservation.amount}`;
  }
  if (amountOf(call) !== payment.amount) {
    return `capture amount must equal the authorized payment amount ${payment.amount}`;
  }
  if (payment.status !== "authorized") return `the payment is ${payment.status}, not authorized`;
  return undefined;
}

/**
 * Each capture with its own key would otherwise be forwarded: two keys capturing one reservation
 * at once both pass R3 (the reservation is bound to the very payment they name), and the provider
 * is asked to capture it twice. A capture whose lease ran out is no longer in flight: its outcome
 * is unknown, and a capture with another key may then ask the provider again.
 */
const captureInFlight: Guard = {
  id: "CAPTURE_IN_FLIGHT",
  rule: "IN_FLIGHT",
  description: "a capture of a reservation that another call is still capturing is refused, not forwarded twice; retry later",
  check: (call, state) =>
    call.tool === "capture_payment" && state.capture?.other_capture_in_flight
      ? block("IN_FLIGHT", "another capture of this payment's reservation is still in flight; retry shortly")
      : undefined,
};

const reservationBound: Guard = {
  id: "R3",
  rule: "R3",
  description: "a capture names a reservation this gate holds for this caller, for no more than its amount, in its currency, unbound to another payment, with a payment unbound to another reservation",
  check: (call, state) => {
    if (call.tool !== "capture_payment") return undefined;
    const problem = captureProblem(call, state);
    return problem ? block("R3", problem) : undefined;
  },
};

const blockCap: Guard = {
  id: "R1",
  rule: "R1",
  description: "spent + held + unreconciled + amount must not exceed reserved",
  check: (call, state) => {
    if (call.tool !== "create_order") return undefined;
    const current = requireBlock(state);
    const available = current.reserved - current.spent - current.held - current.unreconciled;
    const amount = amountOf(call);
    // Shown as get_block shows it: unreconciled money can take the sum below 0, and nothing is available then.
    return amount > available ? block("R1", `amount ${amount} exceeds the block's available ${Math.max(0, available)}`) : undefined;
  },
};

const approval: Guard = {
  id: "HOLD",
  rule: "HOLD",
  description: "an amount above the approval threshold is held until an operator approves it",
  check: (call, state) => {
    if (call.tool !== "create_order") return undefined;
    const threshold = requireBlock(state).approval_threshold;
    const amount = amountOf(call);
    return amount > threshold
      ? { effect: "HOLD", rule: "HOLD", reason: `amount ${amount} is above the approval threshold ${threshold}` }
      : undefined;
  },
};

/** Every guard, in decision order. Production always uses this frozen table. */
export const guard_table: readonly Guard[] = Object.freeze([
  failClosed,
  allowlist,
  caller,
  keyConflict,
  inFlight,
  replay,
  revoked,
  expired,
  velocity,
  argumentShape,
  perCallCap,
  captureInFlight,
  reservationBound,
  blockCap,
  approval,
]);
