// The policy's vocabulary: a call, the ledger snapshot it is decided against, and the verdict.

export const money_tools = ["create_order", "capture_payment"] as const;
export type MoneyTool = (typeof money_tools)[number];

export type Effect = "ALLOW" | "HOLD" | "BLOCK";

export type RuleId =
  | "ALLOW"
  | "HOLD"
  | "R0"
  | "R1"
  | "R2"
  | "R3"
  | "R4"
  | "R5"
  | "R6"
  | "R7"
  | "ALLOWLIST"
  | "CALLER"
  | "IN_FLIGHT"
  | "FAIL_CLOSED";

export interface Verdict {
  effect: Effect;
  rule: RuleId;
  reason: string;
  /** Set when the verdict replays a result stored under the call's idempotency key. */
  replay?: true;
}

/** A money call as the agent made it: any argument shape may arrive here. */
export interface PolicyCall {
  tool: string;
  args: unknown;
  /** The authenticated caller; never taken from a request field. */
  agent_id: string | null;
  /** Hash of the arguments the idempotency key binds (all of them for an explicit key). */
  params_hash: string;
  /** The idempotency_key as sent, when it had no JSON form and `args` carries a stand-in (a lone
   *  surrogate became U+FFFD): R0 refuses the call. Absent for every other call. */
  idempotency_key_sent?: unknown;
}

export interface BlockState {
  block_id: string;
  agent_id: string;
  currency: string;
  reserved: number;
  spent: number;
  held: number;
  /** Money the provider reported as moved in a conflict; never cleared by unfreeze. */
  unreconciled: number;
  expires_at_ms: number;
  per_call_cap: number;
  approval_threshold: number;
  velocity: { max_calls: number; window_seconds: number };
  revoked: boolean;
  frozen: boolean;
}

export type IdempotencyState =
  | { status: "none" }
  | { status: "in_flight"; params_hash: string }
  | { status: "stored"; params_hash: string; effect: "ALLOW" | "HOLD" };

/** What the provider reported for the payment a capture names (fetched before the decision). */
export type PaymentState =
  /** `unanswered`: the provider did not answer (a timeout, a 5xx), so asking again may succeed.
   *  `asked: false`: the gate did not ask, because every block the caller could capture on
   *  refused the call before its payment mattered (asking again, should that change, may succeed).
   *  `not_found`: the provider has no such payment (it answered 400 or 404), or the payment is on
   *  no order: either way on none of the caller's orders. */
  | { fetched: false; reason: string; unanswered?: boolean; asked?: false; not_found?: true }
  | { fetched: true; id: string; order_id: string; amount: number; currency: string; status: string };

export interface ReservationState {
  reservation_id: string;
  agent_id: string;
  amount: number;
  currency: string;
  status: "held" | "committed" | "released";
  payment_id: string | null;
  /** Its HOLD waits for an operator's approval: the gate has sent no order for it. */
  approval_pending?: true;
}

export interface CaptureState {
  payment: PaymentState;
  /** The gate's reservation for the payment's order, whoever holds it; null when the gate has none. */
  reservation: ReservationState | null;
  /** Another of the gate's reservations is already bound to this payment. */
  payment_bound_elsewhere: boolean;
  /** Another call's capture of the reservation is executing (its key in flight, its lease not
   *  run out): the reservation found by the payment's order or, when the payment was not fetched,
   *  the caller's held reservation bound to the named payment. */
  other_capture_in_flight: boolean;
}

export interface PolicyState {
  /** The caller's block: the active one, else the latest; for a capture, its reservation's block. */
  block: BlockState | null;
  /** The caller's money calls with timestamp in (now − window, now], counted up to max_calls
   *  (all the velocity guard needs to know). */
  calls_in_window: number;
  idempotency: IdempotencyState;
  capture?: CaptureState;
}

/** A guard's own name; REPLAY is the step that returns a stored result under rule R7. */
export type GuardId = Exclude<RuleId, "ALLOW"> | "REPLAY" | "CAPTURE_IN_FLIGHT";

export interface Guard {
  id: GuardId;
  rule: Exclude<RuleId, "ALLOW">;
  description: string;
  /** Returns a verdict to stop at this guard, or undefined to pass the call on. */
  check(call: PolicyCall, state: PolicyState, now_ms: number): Verdict | undefined;
}
