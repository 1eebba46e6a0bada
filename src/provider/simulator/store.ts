// The simulator's in-memory account: orders and payments, their state transitions (checkout,
// capture) and their Razorpay wire serialisation. Every change that Razorpay would announce calls
// `emit`, which the webhook outbox turns into a signed delivery.

import { randomInt } from "node:crypto";
import type { Clock } from "../../clock.js";
import { badRequest, messages, ok, type SimAnswer } from "./errors.js";
import type { CaptureMode, ValidCaptureInput, ValidOrderInput } from "./validation.js";

/** Memory bound: a simulator that runs for weeks must not grow without limit. */
export const orders_max = 100_000;
export const payments_per_order_max = 20;
/** Razorpay ids carry 14 base62 characters after the prefix. */
export const id_length = 14;

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

export function randomBase62Id(): string {
  let id = "";
  for (let index = 0; index < id_length; index++) id += base62[randomInt(base62.length)];
  return id;
}

export interface SimOrder {
  id: string;
  amount: number;
  amount_paid: number;
  currency: string;
  receipt: string | null;
  status: "created" | "attempted" | "paid";
  attempts: number;
  notes: Record<string, string>;
  capture: CaptureMode;
  created_at: number;
}

export interface SimPayment {
  id: string;
  order_id: string;
  amount: number;
  currency: string;
  status: "created" | "authorized" | "captured" | "failed" | "refunded";
  captured: boolean;
  card_last4: string;
  error: { code: string; description: string; source: string; step: string; reason: string } | null;
  created_at: number;
}

export type SimEventName = "payment.authorized" | "payment.captured" | "payment.failed" | "order.paid";
export type Emit = (event: SimEventName, payment: SimPayment, order?: SimOrder) => void;

/** Razorpay's order entity, as the API and webhooks show it. Empty notes are `[]`, as Razorpay sends them. */
export function wireOrder(order: SimOrder): Record<string, unknown> {
  return {
    id: order.id,
    entity: "order",
    amount: order.amount,
    amount_paid: order.amount_paid,
    amount_due: order.amount - order.amount_paid,
    currency: order.currency,
    receipt: order.receipt,
    offer_id: null,
    status: order.status,
    attempts: order.attempts,
    notes: Object.keys(order.notes).length === 0 ? [] : { ...order.notes },
    created_at: order.created_at,
  };
}

export function wirePayment(payment: SimPayment): Record<string, unknown> {
  return {
    id: payment.id,
    entity: "payment",
    amount: payment.amount,
    currency: payment.currency,
    status: payment.status,
    order_id: payment.order_id,
    invoice_id: null,
    international: false,
    method: "card",
    // Only a whole payment is ever refunded here: an expired authorization, or a refunded capture.
    amount_refunded: payment.status === "refunded" ? payment.amount : 0,
    refund_status: payment.status === "refunded" ? "full" : null,
    captured: payment.captured,
    description: null,
    card_id: `card_${payment.id.slice("pay_".length)}`,
    bank: null,
    wallet: null,
    vpa: null,
    email: "buyer@example.com",
    contact: "+919000090000",
    notes: [],
    fee: payment.captured ? Math.floor(payment.amount * 0.02) : null,
    tax: payment.captured ? 0 : null,
    error_code: payment.error?.code ?? null,
    error_description: payment.error?.description ?? null,
    error_source: payment.error?.source ?? null,
    error_step: payment.error?.step ?? null,
    error_reason: payment.error?.reason ?? null,
    acquirer_data: {},
    created_at: payment.created_at,
  };
}

export class SimStore {
  readonly orders = new Map<string, SimOrder>();
  readonly payments = new Map<string, SimPayment>();

  constructor(
    private readonly clock: Clock,
    private readonly ids: () => string,
    private readonly emit: Emit,
  ) {}

  private nowSeconds(): number {
    return Math.floor(this.clock().getTime() / 1000);
  }

  private newId(prefix: "order_" | "pay_"): string {
    const suffix = this.ids();
    // The id source is ours (tests pass one): a bad id is a bug, not an operating error.
    if (!/^[A-Za-z0-9]{1,40}$/.test(suffix)) throw new Error(`simulator ids() returned a non-base62 id: ${suffix}`);
    const id = prefix + suffix;
    if (this.orders.has(id) || this.payments.has(id)) throw new Error(`simulator ids() repeated an id: ${id}`);
    return id;
  }

  createOrder(input: ValidOrderInput): SimAnswer {
    if (this.orders.size >= orders_max) return badRequest(`The simulator holds at most ${orders_max} orders.`);
    const order: SimOrder = {
      id: this.newId("order_"),
      amount: input.amount,
      amount_paid: 0,
      currency: input.currency,
      receipt: input.receipt,
      status: "created",
      attempts: 0,
      notes: input.notes,
      capture: input.capture,
      created_at: this.nowSeconds(),
    };
    this.orders.set(order.id, order);
    return ok(wireOrder(order));
  }

  paymentsOf(order_id: string): SimPayment[] {
    return [...this.payments.values()].filter((payment) => payment.order_id === order_id);
  }

  /** The test checkout: one card payment attempt on an order, authorized or failed. */
  pay(order: SimOrder, card_number: string, declined: boolean): SimAnswer {
    if (order.status === "paid") return badRequest(messages.order_already_paid, undefined, { order_id: order.id });
    if (order.attempts >= payments_per_order_max) return badRequest("Too many payment attempts on this order.");
    const payment: SimPayment = {
      id: this.newId("pay_"),
      order_id: order.id,
      amount: order.amount,
      currency: order.currency,
      status: declined ? "failed" : "authorized",
      captured: false,
      card_last4: card_number.slice(-4),
      error: declined
        ? { code: "BAD_REQUEST_ERROR", description: messages.card_declined, source: "bank", step: "payment_authorization", reason: "payment_declined" }
        : null,
      created_at: this.nowSeconds(),
    };
    this.payments.set(payment.id, payment);
    order.attempts += 1;
    order.status = "attempted";
    if (declined) {
      this.emit("payment.failed", payment);
      const metadata = { payment_id: payment.id, order_id: order.id };
      const answer = badRequest(messages.card_declined, undefined, metadata);
      const error = (answer.body as { error: Record<string, unknown> }).error;
      Object.assign(error, { source: "bank", step: "payment_authorization", reason: "payment_declined" });
      return answer;
    }
    this.emit("payment.authorized", payment);
    // Automatic-capture orders (not Bursar's) capture at once, as Razorpay does.
    if (order.capture === "automatic") this.settleCapture(payment, order);
    return ok({ razorpay_payment_id: payment.id, razorpay_order_id: order.id, payment: wirePayment(payment) });
  }

  /** Razorpay's capture rules, checked in the order the real API reports them. */
  capture(payment: SimPayment, input: ValidCaptureInput): SimAnswer {
    if (payment.status === "captured") return badRequest(messages.capture_already_captured);
    if (payment.status !== "authorized") return badRequest(messages.capture_only_authorized);
    if (input.currency !== payment.currency) return badRequest(messages.capture_currency_mismatch, "currency");
    if (input.amount !== payment.amount) return badRequest(messages.capture_amount_mismatch, "amount");
    const order = this.orders.get(payment.order_id);
    if (!order) throw new Error(`payment ${payment.id} names a missing order`);
    if (order.amount_paid + payment.amount > order.amount) return badRequest(messages.order_amount_due_exceeded, "amount");
    this.settleCapture(payment, order);
    return ok(wirePayment(payment));
  }

  /**
   * An authorization that was never captured runs out: Razorpay refunds it (`refunded`, still
   * `captured: false`), and it can no longer be captured. A test control: the real account does
   * this after the order's manual expiry period. No webhook is emitted (Razorpay announces it
   * with refund events, which the simulator does not model).
   */
  expireAuthorization(payment: SimPayment): SimAnswer {
    if (payment.status !== "authorized") return badRequest(messages.expire_only_authorized);
    payment.status = "refunded";
    return ok(wirePayment(payment));
  }

  /**
   * The merchant refunds a captured payment in full (from the dashboard, say): it reads
   * `refunded` with `captured: true`, as Razorpay shows it; the order stays paid. A test control
   * like expireAuthorization, with no webhook (refund.* events are not modelled).
   */
  refundCapture(payment: SimPayment): SimAnswer {
    if (payment.status !== "captured") return badRequest(messages.refund_only_captured);
    payment.status = "refunded";
    return ok(wirePayment(payment));
  }

  private settleCapture(payment: SimPayment, order: SimOrder): void {
    payment.status = "captured";
    payment.captured = true;
    order.amount_paid += payment.amount;
    if (order.amount_paid >= order.amount) order.status = "paid";
    this.emit("payment.captured", payment);
    if (order.status === "paid") this.emit("order.paid", payment, order);
  }
}
