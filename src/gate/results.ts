// Tool results in DESIGN.md's shapes: structuredContent for programs, one line of text for
// models, isError on refusals and unknown outcomes, and the evidence the result was logged as.

import type { BlockSummary, BlockView, EvidenceRef } from "../ledger/index.js";
import type { Verdict } from "../policy/index.js";

export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: "text"; text: string }>;
  structuredContent: Record<string, unknown>;
  isError?: boolean;
}

export interface EvidenceView {
  seq: number;
  leaf_hash: string;
  receipt: unknown;
}

export function evidenceView(ref: EvidenceRef | undefined): EvidenceView | undefined {
  return ref ? { seq: ref.seq, leaf_hash: ref.leaf_hash, receipt: ref.receipt } : undefined;
}

function result(text: string, structured: Record<string, unknown>, isError: boolean): ToolResult {
  const out: ToolResult = { content: [{ type: "text", text }], structuredContent: structured };
  if (isError) out.isError = true;
  return out;
}

function withEvidence(structured: Record<string, unknown>, evidence: EvidenceRef | undefined): Record<string, unknown> {
  const view = evidenceView(evidence);
  return view ? { ...structured, evidence: view } : structured;
}

/** A reason that ends by inviting a retry: IN_FLIGHT, and R3 when the provider did not confirm the payment or it was not looked up. */
const retry_invited = /; retry( shortly)?$/;

/**
 * A refusal, with one line of advice for the model. Where the refusal is transient the advice
 * is to repeat the same call: a model told not to retry unchanged mints a new idempotency key,
 * and one purchase becomes two.
 */
export function refusal(verdict: Pick<Verdict, "rule" | "reason">, evidence?: EvidenceRef, extra: Record<string, unknown> = {}): ToolResult {
  const structured = withEvidence({ effect: "BLOCK", rule: verdict.rule, reason: verdict.reason, ...extra }, evidence);
  const advice = retry_invited.test(verdict.reason)
    ? "Repeat this same call, with the same idempotency_key, later; never with a new key."
    : "Do not retry this call unchanged.";
  return result(`BLOCKED by ${verdict.rule}: ${verdict.reason}. ${advice}`, structured, true);
}

export function orderAllowed(
  order: Record<string, unknown>,
  reservation_id: string,
  block: BlockSummary,
  evidence: EvidenceRef | undefined,
  replayed: boolean,
): ToolResult {
  const structured: Record<string, unknown> = { effect: "ALLOW", order, reservation_id, block };
  if (replayed) structured.replayed = true;
  return result(
    `ALLOWED: order ${String(order.id)} for ${String(order.amount)} ${String(order.currency)} created${replayed ? " (replayed)" : ""}; available ${block.available} ${block.currency}.`,
    withEvidence(structured, evidence),
    false,
  );
}

export function held(
  verdict: Pick<Verdict, "reason">,
  approval: { approval_id: string; expires_at_ms: number; state?: string },
  block: BlockSummary,
  evidence: EvidenceRef | undefined,
  replayed: boolean,
): ToolResult {
  const structured: Record<string, unknown> = {
    effect: "HOLD",
    rule: "HOLD",
    reason: verdict.reason,
    approval_id: approval.approval_id,
    approval_expires_at: new Date(approval.expires_at_ms).toISOString(),
    block,
  };
  if (replayed) structured.replayed = true;
  // Approved and being forwarded, its order may exist at the provider already (a gate killed
  // while forwarding leaves it so for a lease): only a pending call has certainly sent none.
  const sent = approval.state === "forwarding" ? "its order is being created and may already exist at the provider; the money stays held" : "the gate has sent no order for it and charged nothing";
  return result(
    `HELD for human approval (${verdict.reason}). Check later with get_approval ${approval.approval_id}; ${sent}.`,
    withEvidence(structured, evidence),
    false,
  );
}

export function captureAllowed(
  payment: Record<string, unknown>,
  block: BlockSummary,
  evidence: EvidenceRef | undefined,
  replayed: boolean,
): ToolResult {
  const structured: Record<string, unknown> = { effect: "ALLOW", payment, block };
  if (replayed) structured.replayed = true;
  return result(
    `ALLOWED: payment ${String(payment.id)} captured for ${String(payment.amount)} ${String(payment.currency)}; available ${block.available} ${block.currency}.`,
    withEvidence(structured, evidence),
    false,
  );
}

/** The provider captured, but reconciliation rejected it (the block is now frozen). */
export function captureConflict(
  payment: Record<string, unknown>,
  reason: string,
  block: BlockSummary,
  evidence: EvidenceRef | undefined,
  replayed = false,
): ToolResult {
  const structured: Record<string, unknown> = { effect: "ALLOW", provider: "captured", reconciliation: "rejected", reason, payment, block };
  if (replayed) structured.replayed = true;
  return result(
    `CAPTURED BUT NOT RECONCILED: ${reason}. The block is frozen for an operator; do not retry.`,
    withEvidence(structured, evidence),
    true,
  );
}

export function outcomeUnknown(reservation_id: string, reason: string, evidence: EvidenceRef | undefined, replayed: boolean): ToolResult {
  const structured: Record<string, unknown> = { effect: "ALLOW", provider: "unknown", reservation_id, reason };
  if (replayed) structured.replayed = true;
  return result(
    `UNKNOWN: the provider did not answer (${reason}). The money stays held and an operator will reconcile it; do not assume success and do not retry with a new key.`,
    withEvidence(structured, evidence),
    true,
  );
}

/**
 * The provider did not answer, and by then the call's hold had been released (the call stalled
 * past its lease and a check proved no order then): nothing is held for it, and an order the
 * provider made late could be captured only as a conflict. Repeating the call decides it afresh.
 */
export function unknownAfterRelease(reservation_id: string, reason: string, evidence: EvidenceRef | undefined): ToolResult {
  const structured: Record<string, unknown> = { effect: "ALLOW", provider: "unknown", reservation_id, reason, released: true };
  return result(
    `UNKNOWN, HOLD RELEASED: the provider did not answer (${reason}). Nothing is held for this call any more, so any order the provider made late cannot be paid through the gate; do not give it to a buyer. Repeat this same call to have it decided afresh.`,
    withEvidence(structured, evidence),
    true,
  );
}

/** What a refused money call's result holds for programs: the provider's error and its description as the reason. */
function refusedContent(reservation_id: string, error: { code: string; description: string }, evidence: EvidenceRef | undefined, block?: BlockSummary): Record<string, unknown> {
  const structured: Record<string, unknown> = {
    effect: "ALLOW",
    provider: "refused",
    reservation_id,
    reason: error.description,
    error,
  };
  if (block) structured.block = block;
  return withEvidence(structured, evidence);
}

export function providerRefused(
  reservation_id: string,
  error: { code: string; description: string },
  evidence: EvidenceRef | undefined,
  block?: BlockSummary,
): ToolResult {
  // The provider's own text often ends in a full stop already ("The currency is invalid.").
  const description = error.description.replace(/\.+$/, "");
  return result(`REFUSED by the provider: ${description}. Nothing was charged.`, refusedContent(reservation_id, error, evidence, block), true);
}

/**
 * A capture the provider did not answer (a timeout, a reset, a 5xx) whose payment the re-fetch
 * reports not captured: nothing has moved yet. Shaped as a refusal (`provider: "refused"`,
 * `capture_failed`), since what the agent does is the same: repeat the capture. The text says
 * what is true of it: while the payment is still authorized the capture may yet land (its webhook
 * then settles it, the payment bound to the order meanwhile); otherwise it no longer can.
 */
export function captureUnanswered(reservation_id: string, still_authorized: boolean, reason: string, evidence: EvidenceRef | undefined, block?: BlockSummary): ToolResult {
  const content = refusedContent(reservation_id, { code: "capture_failed", description: reason }, evidence, block);
  const what_next = still_authorized
    ? "The payment is still authorized and not captured, so nothing has been charged yet, but the capture may still land: its webhook then settles it. Repeat the capture to try again."
    : "The payment can no longer be captured. Nothing was charged.";
  return result(`NOT CAPTURED: the capture got no definite answer (${reason}). ${what_next}`, content, true);
}

/**
 * The call's hold was released because the provider made no order for it (a reservation check
 * proved it): nothing was charged, and the same call, repeated, is decided again (an approved
 * one above the approval threshold is held for a new approval).
 */
export function orderNeverMade(reservation_id: string, reason: string, evidence: EvidenceRef | undefined, replayed: boolean): ToolResult {
  const structured: Record<string, unknown> = { effect: "ALLOW", provider: "no_order", reservation_id, reason };
  if (replayed) structured.replayed = true;
  return result(
    `RELEASED: ${reason}. Its hold is released and nothing was charged; repeat this same call, with the same idempotency_key, to have it decided again (above the approval threshold it is held for a new approval).`,
    withEvidence(structured, evidence),
    true,
  );
}

/**
 * The provider made the order only after the call's hold was released (the call stalled past its
 * lease and a check proved no order then): the order cannot be paid through the gate, and the
 * agent must not hand it to a buyer. Repeating the call creates a new order under a new hold.
 */
export function orderAfterRelease(order: Record<string, unknown>, reservation_id: string, reason: string, evidence: EvidenceRef | undefined): ToolResult {
  const structured: Record<string, unknown> = { effect: "ALLOW", provider: "late_order", reservation_id, reason, order };
  return result(
    `NOT USABLE: order ${String(order.id)} was created after this call's hold was released (${reason}); it cannot be paid through the gate, so do not give it to a buyer. Nothing was charged; repeat this same call to create a new order.`,
    withEvidence(structured, evidence),
    true,
  );
}

/**
 * A replayed HOLD whose approval was denied or expired. Its text says what the gate did (no
 * order, no charge), not that no money moved: an order made with the provider's keys under the
 * call's reservation id may have been paid (the block then froze, and the re-check names it). `refusal` is the re-check's rule and
 * reason when the approval was denied by the check an operator's approve runs (the block
 * revoked, frozen or expired meanwhile, the agent disabled), not by the operator.
 */
export function approvalDecided(approval_id: string, state: string, evidence: EvidenceRef | undefined, refusal?: { rule: string; reason: string }): ToolResult {
  const rule = refusal?.rule ?? "HOLD";
  const reason = refusal?.reason ?? `the approval was ${state}`;
  const structured = withEvidence({ effect: "BLOCK", rule, reason, approval_id, approval_state: state, replayed: true }, evidence);
  const why = refusal ? `could not be granted (${refusal.reason})` : `was ${state}`;
  return result(`NOT APPROVED: approval ${approval_id} ${why}. The gate sent no order for it and charged nothing.`, structured, true);
}

/**
 * What an approval's stored result says, for get_approval's text: how the approved call ended
 * (an order, the provider's refusal, an unknown outcome with the money still held, no order),
 * or why a re-check denied it. Empty when there is nothing to add.
 */
export function approvalOutcomeText(state: string, stored: Record<string, unknown> | undefined): string {
  // Approved, its order not answered yet (forwarding): no order can be assumed to exist.
  if (!stored) return state === "approved" ? " Its order is being created: the money stays held, and no order is known yet; ask again shortly." : "";
  const reason = typeof stored.reason === "string" ? stored.reason : "";
  if (state === "denied") return reason ? ` It could not be granted: ${reason}. The gate sent no order for it and charged nothing.` : "";
  if (state !== "approved") return "";
  if (stored.provider === "unknown") return ` The provider's answer is unknown (${reason}): the money stays held; do not assume an order exists.`;
  if (stored.provider === "refused") {
    const error = stored.error as { description?: unknown } | undefined;
    return ` The provider refused the order (${String(error?.description ?? "refused")}): nothing was charged and the hold was released.`;
  }
  if (stored.provider === "no_order") return ` The provider made no order (${reason}): nothing was charged and the hold was released.`;
  const order = stored.order as { id?: unknown } | undefined;
  return typeof order?.id === "string" ? ` Order ${order.id} was created.` : "";
}

/** Results of the read-only tools carry no evidence entry: they move nothing. */
export function readResult(text: string, structured: Record<string, unknown>): ToolResult {
  return result(text, structured, false);
}

export function readError(code: string, message: string, details?: Record<string, unknown>): ToolResult {
  return result(message, { error: details ? { code, message, details } : { code, message } }, true);
}

export function blockForAgent(view: BlockView): Record<string, unknown> {
  const shown: Record<string, unknown> = {
    block_id: view.block_id,
    currency: view.currency,
    reserved: view.reserved,
    spent: view.spent,
    held: view.held,
    unreconciled: view.unreconciled,
    available: view.available,
    expires_at: view.expires_at,
    per_call_cap: view.per_call_cap,
    approval_threshold: view.approval_threshold,
    velocity: view.velocity,
    revoked: view.revoked,
    frozen: view.frozen,
  };
  if (view.freeze_reason) shown.freeze_reason = view.freeze_reason;
  return shown;
}
