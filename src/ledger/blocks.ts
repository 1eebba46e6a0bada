// Creating spending blocks: defaults from DESIGN.md and validation that names the field and limit.

import { HttpError } from "../errors.js";
import { rfc3339Problem } from "../evidence/entry.js";
import {
  amount_max_minor,
  amount_min_minor,
  block_lifetime_max_seconds,
  currencyProblem,
  reserved_max_minor,
} from "../policy/index.js";
import { velocity_window_max_seconds } from "./authorize.js";
import type { BlockRow } from "./rows.js";

export const block_defaults = Object.freeze({
  reserved: 1_000_000,
  per_call_cap: 500_000,
  approval_threshold: 200_000,
  velocity: Object.freeze({ max_calls: 10, window_seconds: 60 }),
  ttl_seconds: 30 * 24 * 3600,
});

export interface CreateBlockInput {
  agent_id: string;
  currency: string;
  reserved?: number;
  expires_at?: string;
  ttl_seconds?: number;
  per_call_cap?: number;
  approval_threshold?: number;
  velocity?: { max_calls?: number; window_seconds?: number };
}

/** Each whole-number field of a block, as [least, most]: checked here, and by `bursar block create` before it sends. */
export const block_field_ranges = Object.freeze({
  reserved: [amount_min_minor, reserved_max_minor],
  per_call_cap: [amount_min_minor, amount_max_minor],
  approval_threshold: [0, reserved_max_minor],
  ttl_seconds: [1, block_lifetime_max_seconds],
  "velocity.max_calls": [1, 1_000_000],
  "velocity.window_seconds": [1, velocity_window_max_seconds],
} as const satisfies Record<string, readonly [number, number]>);

type RangedField = keyof typeof block_field_ranges;

function invalid(field: string, message: string): HttpError {
  return new HttpError(422, "validation_failed", `${field}: ${message}`, { field });
}

function integerIn(field: RangedField, value: unknown): number {
  const [min, max] = block_field_ranges[field];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(field, `must be a whole number from ${min} to ${max}, got ${typeof value === "number" ? value : JSON.stringify(value)}`);
  }
  return value;
}

function expiry(input: CreateBlockInput, now_ms: number): number {
  if (input.expires_at !== undefined && input.ttl_seconds !== undefined) {
    throw invalid("expires_at", "give expires_at or ttl_seconds, not both");
  }
  let expires_at_ms: number;
  if (input.expires_at !== undefined) {
    // RFC 3339 with its offset only: Date.parse also takes "2026-12-01 10:00" or an offset-less
    // time, read in the server's time zone, so the block's expiry would depend on the host.
    // Not a string at all reads as the empty one: "must be an RFC 3339 time with an offset, e.g. …".
    const problem = rfc3339Problem(typeof input.expires_at === "string" ? input.expires_at : "");
    if (problem !== undefined) throw invalid("expires_at", problem);
    expires_at_ms = Date.parse(input.expires_at);
  } else {
    const ttl = input.ttl_seconds ?? block_defaults.ttl_seconds;
    expires_at_ms = now_ms + integerIn("ttl_seconds", ttl) * 1000;
  }
  if (expires_at_ms <= now_ms) throw invalid("expires_at", "must be in the future");
  if (expires_at_ms - now_ms > block_lifetime_max_seconds * 1000) {
    throw invalid("expires_at", `a block's lifetime is at most 90 days (${block_lifetime_max_seconds} s)`);
  }
  return expires_at_ms;
}

/** Validates a block request and fills the reference defaults; throws a 422 naming the field. */
export function newBlockRow(input: CreateBlockInput, block_id: string, now_ms: number): BlockRow {
  // An active ISO 4217 code, as R0 takes it: a block in "ZZZ" could only ever refuse.
  const currency_problem = currencyProblem(input.currency);
  if (currency_problem !== undefined) throw invalid("currency", currency_problem);
  const reserved = integerIn("reserved", input.reserved ?? block_defaults.reserved);
  const per_call_cap = integerIn("per_call_cap", input.per_call_cap ?? block_defaults.per_call_cap);
  const approval_threshold = integerIn("approval_threshold", input.approval_threshold ?? block_defaults.approval_threshold);
  const velocity = input.velocity ?? {};
  return {
    block_id,
    agent_id: input.agent_id,
    currency: input.currency.toUpperCase(),
    reserved,
    spent: 0,
    held: 0,
    unreconciled: 0,
    per_call_cap,
    approval_threshold,
    velocity_max_calls: integerIn("velocity.max_calls", velocity.max_calls ?? block_defaults.velocity.max_calls),
    velocity_window_seconds: integerIn("velocity.window_seconds", velocity.window_seconds ?? block_defaults.velocity.window_seconds),
    created_at_ms: now_ms,
    expires_at_ms: expiry(input, now_ms),
    revoked_at_ms: null,
    frozen_at_ms: null,
    freeze_reason: null,
  };
}
