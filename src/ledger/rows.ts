// Row shapes as stored, and their translation to the policy's snapshot and the public views.

import type { BlockState, ReservationState } from "../policy/index.js";

export interface BlockRow {
  block_id: string;
  agent_id: string;
  currency: string;
  reserved: number;
  spent: number;
  held: number;
  unreconciled: number;
  per_call_cap: number;
  approval_threshold: number;
  velocity_max_calls: number;
  velocity_window_seconds: number;
  created_at_ms: number;
  expires_at_ms: number;
  revoked_at_ms: number | null;
  frozen_at_ms: number | null;
  freeze_reason: string | null;
}

export interface ReservationRow {
  reservation_id: string;
  block_id: string;
  agent_id: string;
  amount: number;
  currency: string;
  status: "held" | "committed" | "released";
  outcome_unknown: number;
  unknown_reason: string | null;
  order_id: string | null;
  payment_id: string | null;
  captured_amount: number | null;
  release_reason: string | null;
  created_at_ms: number;
  updated_at_ms: number;
  /** Which provider named the order (migration 14); null when none is, or it was named before. */
  order_made_by?: string | null;
}

export interface IdempotencyRow {
  agent_id: string;
  key: string;
  derived: number;
  tool: string;
  params_hash: string;
  status: "in_flight" | "stored";
  effect: "ALLOW" | "HOLD" | null;
  reservation_id: string | null;
  approval_id: string | null;
  result_json: string | null;
  first_at_ms: number;
  lease_expires_at_ms: number | null;
}

export type ApprovalStateName = "pending" | "forwarding" | "approved" | "denied" | "expired";

export interface ApprovalRow {
  approval_id: string;
  reservation_id: string;
  agent_id: string;
  block_id: string;
  idempotency_key: string;
  tool: string;
  args_json: string;
  state: ApprovalStateName;
  created_at_ms: number;
  expires_at_ms: number;
  decided_at_ms: number | null;
  result_json: string | null;
}

/**
 * An approval as the operator sees it: its row, with the amount and currency its held call would
 * move as fields of their own (its reservation's). The call's arguments (`args_json`) are the
 * agent's own text in the agent's own key order, notes and receipt included: an agent can write
 * "amount 100" there, and put the real amount thousands of characters in.
 */
export type ApprovalView = ApprovalRow & { amount: number; currency: string };

/** The block as `get_block` and the operator API show it. */
export interface BlockView {
  block_id: string;
  agent_id: string;
  currency: string;
  reserved: number;
  spent: number;
  held: number;
  unreconciled: number;
  available: number;
  expires_at: string;
  per_call_cap: number;
  approval_threshold: number;
  velocity: { max_calls: number; window_seconds: number };
  revoked: boolean;
  frozen: boolean;
  freeze_reason?: string;
}

/** The short balance summary every money result carries. */
export interface BlockSummary {
  reserved: number;
  spent: number;
  held: number;
  available: number;
  currency: string;
  expires_at: string;
}

export function availableOf(row: BlockRow): number {
  return Math.max(0, row.reserved - row.spent - row.held - row.unreconciled);
}

export function blockView(row: BlockRow): BlockView {
  const view: BlockView = {
    block_id: row.block_id,
    agent_id: row.agent_id,
    currency: row.currency,
    reserved: row.reserved,
    spent: row.spent,
    held: row.held,
    unreconciled: row.unreconciled,
    available: availableOf(row),
    expires_at: new Date(row.expires_at_ms).toISOString(),
    per_call_cap: row.per_call_cap,
    approval_threshold: row.approval_threshold,
    velocity: { max_calls: row.velocity_max_calls, window_seconds: row.velocity_window_seconds },
    revoked: row.revoked_at_ms !== null,
    frozen: row.frozen_at_ms !== null,
  };
  if (row.freeze_reason) view.freeze_reason = row.freeze_reason;
  return view;
}

export function blockSummary(row: BlockRow): BlockSummary {
  return {
    reserved: row.reserved,
    spent: row.spent,
    held: row.held,
    available: availableOf(row),
    currency: row.currency,
    expires_at: new Date(row.expires_at_ms).toISOString(),
  };
}

export function blockState(row: BlockRow): BlockState {
  return {
    block_id: row.block_id,
    agent_id: row.agent_id,
    currency: row.currency,
    reserved: row.reserved,
    spent: row.spent,
    held: row.held,
    unreconciled: row.unreconciled,
    expires_at_ms: row.expires_at_ms,
    per_call_cap: row.per_call_cap,
    approval_threshold: row.approval_threshold,
    velocity: { max_calls: row.velocity_max_calls, window_seconds: row.velocity_window_seconds },
    revoked: row.revoked_at_ms !== null,
    frozen: row.frozen_at_ms !== null,
  };
}

export function reservationState(row: ReservationRow): ReservationState {
  return {
    reservation_id: row.reservation_id,
    agent_id: row.agent_id,
    amount: row.amount,
    currency: row.currency,
    status: row.status,
    payment_id: row.payment_id,
  };
}

/** Whether a stored result (a key's or an approval's) says the provider's outcome is unknown. */
export function resultUnknown(result_json: string | null): boolean {
  return (JSON.parse(result_json ?? "{}") as { provider?: unknown }).provider === "unknown";
}
