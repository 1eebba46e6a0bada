// Reconciling from signed provider webhooks: verify the signature over the raw bytes before
// any parsing, deduplicate the event id atomically, and settle through the same transaction
// as the capture tool. Every webhook, duplicates included, writes one evidence entry.

import { HttpError } from "../errors.js";
import { hasLoneSurrogate, sha256Hex } from "../evidence/canonical.js";
import { record, type LedgerContext, type SqlTx, type SettleOutcome } from "../ledger/index.js";
import { order_absent_reason, order_absent_watch_ms, orderFound } from "../ledger/complete.js";
import { rejectOnReservation, settleCapture } from "../ledger/settle.js";
import { lockedReservation, reservationByPayment } from "../ledger/statements.js";
import type { ParsedWebhook, ProviderOrder, ProviderPayment } from "../provider/port.js";
import { paymentView, type WebhookContext } from "./context.js";
import { orderView } from "./money.js";

export const event_id_length_max = 128;

export interface WebhookAnswer {
  outcome: "applied" | "noop" | "rejected" | "duplicate";
  reason: string;
}

type Parsed = Exclude<ParsedWebhook, { type: "unsupported" }> | Extract<ParsedWebhook, { type: "unsupported" }>;

function capturedPayment(parsed: Parsed): ProviderPayment | undefined {
  if (parsed.type === "payment.captured" || parsed.type === "order.paid") return parsed.payment;
  return undefined;
}

/**
 * Before anyone asks the provider: whether a delivery's order is one no reservation has yet.
 * Undefined when there is nothing to look up: a reservation has the order, or the delivery is a
 * redelivery (`apply` records the duplicate). Otherwise `awaiting_order` says whether some
 * reservation could still own an order Bursar does not know by id: it holds money with no order
 * recorded (its creation timed out, or is in flight) and is not waiting for an approval (its
 * order is only sent once approved); or a check released it because the provider had no order
 * for it (orderAbsent), within order_absent_watch_ms, since a creation stalled somewhere may
 * still have made one, whose capture elsewhere is then a conflict. Any other released
 * reservation without an order never had one: a proven refusal or an approval never granted.
 */
async function unlinkedOrder(tx: SqlTx, context: LedgerContext, delivery: Delivery, order_id: string): Promise<{ awaiting_order: boolean } | undefined> {
  if (await tx.get("SELECT 1 AS one FROM reservations WHERE order_id = ?", [order_id])) return undefined;
  if (await redelivery(tx, delivery)) return undefined;
  const awaiting = await tx.get(
    `SELECT 1 AS one FROM reservations r WHERE r.order_id IS NULL AND (
       (r.status = 'held' AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.reservation_id = r.reservation_id AND a.state = 'pending'))
       OR (r.status = 'released' AND r.release_reason = ? AND r.updated_at_ms > ?)) LIMIT 1`,
    [order_absent_reason, context.clock().getTime() - order_absent_watch_ms],
  );
  return { awaiting_order: awaiting !== undefined };
}

type FoundOrder = { kind: "found"; order: ProviderOrder | null } | { kind: "unknown"; reason: string };

/**
 * An order Bursar does not know by id, with its receipt (Bursar's reservation id): from the
 * event, or from the provider only when a reservation could own the order; `unknown` when the
 * provider's answer is (a timeout, a reset, a 5xx).
 */
async function orderOf(context: WebhookContext, parsed: Parsed, order_id: string, awaiting_order: boolean): Promise<FoundOrder> {
  if (parsed.type === "order.paid" && parsed.order.receipt) return { kind: "found", order: parsed.order };
  if (!awaiting_order) return { kind: "found", order: null };
  const order = await context.provider.fetchOrder(order_id);
  if (order.kind === "unknown") return { kind: "unknown", reason: order.reason };
  return { kind: "found", order: order.kind === "ok" ? order.value : null };
}

/** A reservation the order's receipt names, which has another order: its captures are conflicts there. */
interface ClaimedBy {
  reservation_id: string;
  reason: string;
}

/**
 * An order whose creation timed out is unknown by id; its receipt names the reservation to link.
 * When that reservation already has another order (the provider answered its creation with an
 * id other than the order it made), the order is not linked: the reservation is answered, for
 * `apply` to reject a capture on the order there rather than forget its money.
 */
async function linkByReceipt(context: WebhookContext, order: ProviderOrder, receipt: string): Promise<ClaimedBy | undefined> {
  return context.ledger.transaction(async (tx, ledger_context) => {
    const reservation = await lockedReservation(tx, receipt);
    if (!reservation) return undefined;
    if (reservation.order_id !== null && reservation.order_id !== order.id) {
      const reason = `a capture on order ${order.id}, whose receipt names this reservation, which has order ${reservation.order_id}`;
      return { reservation_id: reservation.reservation_id, reason };
    }
    await orderFound(tx, ledger_context, reservation.reservation_id, orderView(order));
    return undefined;
  });
}

/**
 * Why a payment.failed event changes nothing for a payment the ledger committed as captured, or
 * undefined for any other event or payment. Razorpay fails a payment its bank has not answered in
 * time and authorizes it when the bank answers late (a late authorization, then captured), and
 * delivers a failed webhook again for up to a day: such an event is stale, not a conflict, and
 * freezing the block for it would stop the agent for nothing. It is recorded for what it is
 * (before, "no money moved", which a committed capture contradicts).
 */
async function failedAfterCapture(tx: SqlTx, parsed: Parsed): Promise<string | undefined> {
  if (parsed.type !== "payment.failed") return undefined;
  const reservation = await reservationByPayment(tx, parsed.payment.id);
  if (reservation?.status !== "committed") return undefined;
  return `payment ${parsed.payment.id} is committed as captured on reservation ${reservation.reservation_id}: a failed report about it is stale (a payment failed for a late bank answer is authorized and captured after), and changes nothing`;
}

/** One delivery: its event id (not signed) and the hex SHA-256 of its signed bytes. */
interface Delivery {
  event_id: string;
  body_sha256: string;
}

/**
 * Whether this delivery's event id was processed before with the same bytes (or before bytes
 * were recorded, migration 16): the provider delivering an event again. A used id with other
 * signed bytes is not one: event ids are not signed, and such an event is settled as any other.
 */
async function redelivery(tx: SqlTx, delivery: Delivery): Promise<boolean> {
  const first = await tx.get<{ body_sha256: string | null }>("SELECT body_sha256 FROM webhook_events WHERE event_id = ?", [delivery.event_id]);
  return first !== undefined && (first.body_sha256 === null || first.body_sha256 === delivery.body_sha256);
}

async function apply(tx: SqlTx, context: LedgerContext, delivery: Delivery, parsed: Parsed, claimed: ClaimedBy | undefined): Promise<WebhookAnswer> {
  const { event_id, body_sha256 } = delivery;
  // The delivered bytes' hash: a redelivery under a used event id with other bytes shows as such.
  const event = parsed.type === "unsupported" ? parsed.event : parsed.type;
  const detail: Record<string, unknown> = { event_id, event, body_sha256 };
  const reported = "payment" in parsed ? paymentView(parsed.payment) : null;
  const inserted = await tx.run(
    "INSERT INTO webhook_events (event_id, event, payment_id, outcome, received_at_ms, body_sha256) VALUES (?, ?, ?, 'pending', ?, ?) ON CONFLICT (event_id) DO NOTHING",
    [event_id, event, "payment" in parsed ? parsed.payment.id : null, context.clock().getTime(), body_sha256],
  );
  if (inserted.changes === 0) {
    if (await redelivery(tx, delivery)) {
      await record(tx, context, "gate.settlement", { action: "webhook.duplicate", ...detail, payment: reported });
      return { outcome: "duplicate", reason: "event id already processed" };
    }
    // Other signed bytes under a used id: settled (idempotently, on the signed payment id), not
    // dropped with the capture it may carry. The id's row stays the first delivery's.
    return settle(tx, context, { ...detail, event_id_reused: true }, parsed, claimed, reported);
  }
  const answer = await settle(tx, context, detail, parsed, claimed, reported);
  await tx.run("UPDATE webhook_events SET outcome = ? WHERE event_id = ?", [answer.outcome, event_id]);
  return answer;
}

/** What one event changes, and its entry: a settlement, a stale failure, or an audited no-op. */
async function settle(
  tx: SqlTx,
  context: LedgerContext,
  detail: Record<string, unknown>,
  parsed: Parsed,
  claimed: ClaimedBy | undefined,
  reported: ReturnType<typeof paymentView> | null,
): Promise<WebhookAnswer> {
  const payment = capturedPayment(parsed);
  const stale = await failedAfterCapture(tx, parsed);
  let answer: WebhookAnswer;
  if (stale) {
    answer = { outcome: "noop", reason: stale };
    await record(tx, context, "gate.settlement", { action: "webhook.noop", reason: stale, ...detail, payment: reported });
  } else if (payment && payment.order_id) {
    const view = { ...paymentView(payment), order_id: payment.order_id };
    let settled: SettleOutcome = await settleCapture(tx, context, view, "webhook", detail);
    // No reservation has the order, but its receipt names one that has another: the money moved
    // on that reservation's receipt, so it is a conflict there (counted, the block frozen).
    if (settled.outcome === "noop" && settled.reservation_id === undefined && claimed) {
      settled = await rejectOnReservation(tx, context, claimed.reservation_id, view, "webhook", claimed.reason, detail);
    }
    answer = { outcome: settled.outcome, reason: settled.reason };
    // The payment goes with it: money that moved on an order no reservation knows (made around
    // the gate, or forgotten by a database restored from an older copy) is on record.
    if (settled.outcome === "noop") await record(tx, context, "gate.settlement", { action: "webhook.noop", reason: settled.reason, ...detail, payment: view });
  } else {
    // A capture without an order names no reservation: recorded as such, not as "no money moved".
    const reason = parsed.type === "unsupported" ? "unsupported event" : payment ? "a captured payment with no order: no reservation to settle" : "no money moved";
    answer = { outcome: "noop", reason };
    await record(tx, context, "gate.settlement", { action: "webhook.noop", reason: answer.reason, ...detail, payment: reported });
  }
  return answer;
}

/** Before a new event about an order no reservation names yet: finds the order's receipt and
 *  links it (503, so the provider delivers again, when the provider's answer is unknown). */
async function linkUnlinkedOrder(context: WebhookContext, delivery: Delivery, parsed: Parsed, order_id: string): Promise<ClaimedBy | undefined> {
  const unlinked = await context.ledger.driver.read((tx) => unlinkedOrder(tx, context.ledger.context, delivery, order_id));
  if (!unlinked) return undefined;
  const found = await orderOf(context, parsed, order_id, unlinked.awaiting_order);
  if (found.kind === "unknown") {
    // Not a no-op: the event id stays unspent, so the provider's retry asks again.
    context.observer?.webhook("deferred");
    throw new HttpError(503, "provider_unavailable", `the provider's answer about this event's order is unknown (${found.reason}); deliver it again`);
  }
  return found.order?.receipt ? linkByReceipt(context, found.order, found.order.receipt) : undefined;
}

/** Handles one delivery. Throws HttpError for the 4xx/503 rows of the webhook table. */
export function handleWebhook(
  context: WebhookContext,
  raw_body: Buffer,
  headers: { signature: string | undefined; event_id: string | undefined },
): Promise<WebhookAnswer> {
  return context.work.run(() => settleWebhook(context, raw_body, headers));
}

async function settleWebhook(
  context: WebhookContext,
  raw_body: Buffer,
  headers: { signature: string | undefined; event_id: string | undefined },
): Promise<WebhookAnswer> {
  const check = context.provider.verifyWebhook(raw_body, headers.signature);
  if (!check.ok) throw new HttpError(check.error.status, check.error.code, check.error.message);
  const event_id = headers.event_id;
  if (!event_id || event_id.length > event_id_length_max) {
    throw new HttpError(400, "event_id_missing", `x-razorpay-event-id is required (at most ${event_id_length_max} characters)`);
  }
  const parsed = context.provider.parseWebhook(raw_body);
  if ("error" in parsed) throw new HttpError(400, "malformed_event", parsed.error);
  // An unsupported event is recorded by name: one the log cannot write would fail every redelivery with a 500.
  if (parsed.type === "unsupported" && hasLoneSurrogate(parsed.event)) throw new HttpError(400, "malformed_event", "the event name holds a lone surrogate");
  // order.paid is linked by its order's receipt and settled by its payment's order: they must be one order.
  if (parsed.type === "order.paid" && parsed.order.id !== parsed.payment.order_id) {
    throw new HttpError(400, "malformed_event", `order.paid names order ${parsed.order.id}, but its payment is on order ${parsed.payment.order_id ?? "(none)"}`);
  }
  // The atomic dedupe is apply's INSERT; reading first spares a redelivery any provider call.
  const delivery: Delivery = { event_id, body_sha256: sha256Hex(raw_body) };
  const order_id = "payment" in parsed ? parsed.payment.order_id : null;
  const claimed = order_id !== null ? await linkUnlinkedOrder(context, delivery, parsed, order_id) : undefined;
  const answer = await context.ledger.transaction((tx, ledger_context) => apply(tx, ledger_context, delivery, parsed, claimed));
  context.observer?.webhook(answer.outcome);
  return answer;
}
