// The Provider port: what the gate needs from a payment provider, as typed three-way outcomes.
// Implementations (razorpay/) never throw for operating errors; the simulator is reached through razorpay/.

/** Agent-supplied provider ids must match these before they go anywhere near a URL path. */
export const order_id_pattern = /^order_[A-Za-z0-9]{1,40}$/;
export const payment_id_pattern = /^pay_[A-Za-z0-9]{1,40}$/;

export function isOrderId(value: unknown): value is string {
  return typeof value === "string" && order_id_pattern.test(value);
}

export function isPaymentId(value: unknown): value is string {
  return typeof value === "string" && payment_id_pattern.test(value);
}

export type ProviderName = "razorpay";

export interface ProviderError {
  code: string;
  description: string;
  field?: string;
}

/**
 * `refused` is a proven refusal (an HTTP 4xx carrying the provider's error body, or a local refusal
 * with `local: true` when no request was sent). `unknown` means the outcome is not known: the
 * provider may or may not have acted (timeout, reset, 5xx, unreadable answer).
 */
export type ProviderOutcome<T> =
  | { kind: "ok"; value: T }
  | { kind: "refused"; status: number; error: ProviderError; local?: true }
  | { kind: "unknown"; reason: string };

/** The statuses of a look-up's refusal that say the provider has no such order or payment
 *  (Razorpay answers 400 "does not exist", or 404). A look-up refuses for no other reason: the
 *  razorpay client takes any other 4xx to a look-up as no answer (unknown). */
const no_such_resource_statuses: ReadonlySet<number> = new Set([400, 404]);

/** True when a look-up's answer is that the provider has no such order or payment. */
export function isNoSuchResource(outcome: ProviderOutcome<unknown>): boolean {
  return outcome.kind === "refused" && no_such_resource_statuses.has(outcome.status);
}

export type OrderStatus = "created" | "attempted" | "paid";
export type PaymentStatus = "created" | "authorized" | "captured" | "failed" | "refunded";

/** Timestamps are the provider's unix seconds. Amounts are integer minor units. */
export interface ProviderOrder {
  id: string;
  amount: number;
  amount_paid: number;
  currency: string;
  receipt: string | null;
  status: OrderStatus;
  notes: Record<string, string>;
  created_at: number;
}

export interface ProviderPayment {
  id: string;
  order_id: string | null;
  amount: number;
  currency: string;
  status: PaymentStatus;
  captured: boolean;
  method?: string;
  error_code?: string;
  error_description?: string;
  created_at: number;
}

/**
 * A payment in a final state without a capture: declined (`failed`), or refunded before it was
 * ever captured (Razorpay refunds an authorization not captured in time). No capture of it can
 * land any more. A payment captured and then refunded is not one: its money moved.
 */
export function cannotBeCaptured(payment: Pick<ProviderPayment, "status" | "captured">): boolean {
  return payment.status === "failed" || (payment.status === "refunded" && !payment.captured);
}

export interface CreateOrderInput {
  amount: number;
  currency: string;
  receipt: string;
  notes?: Record<string, string>;
}

export interface CaptureInput {
  amount: number;
  currency: string;
}

/** Each failed step of webhook verification is its own typed error, checked in this order. */
export type WebhookVerifyError =
  | { step: "secret"; code: "webhook_secret_missing"; status: 503; message: string }
  | { step: "header"; code: "signature_missing"; status: 401; message: string }
  | { step: "format"; code: "signature_malformed"; status: 401; message: string }
  | { step: "signature"; code: "signature_mismatch"; status: 401; message: string };

export type WebhookCheck = { ok: true } | { ok: false; error: WebhookVerifyError };

export type PaymentEventName = "payment.authorized" | "payment.captured" | "payment.failed";

export type ParsedWebhook =
  | { type: PaymentEventName; payment: ProviderPayment; account_id: string | null; created_at: number }
  | { type: "order.paid"; order: ProviderOrder; payment: ProviderPayment; account_id: string | null; created_at: number }
  | { type: "unsupported"; event: string; account_id: string | null; created_at: number };

export interface Provider {
  readonly name: ProviderName;
  /** Always sends `payment: {capture: "manual"}`: a paid order only authorizes. */
  createOrder(input: CreateOrderInput): Promise<ProviderOutcome<ProviderOrder>>;
  capturePayment(payment_id: string, input: CaptureInput): Promise<ProviderOutcome<ProviderPayment>>;
  fetchOrder(order_id: string): Promise<ProviderOutcome<ProviderOrder>>;
  fetchPayment(payment_id: string): Promise<ProviderOutcome<ProviderPayment>>;
  /** The payments made on an order (GET /v1/orders/{id}/payments), newest first. */
  fetchOrderPayments(order_id: string): Promise<ProviderOutcome<ProviderPayment[]>>;
  /** Finds orders created with this receipt (Bursar's reservation id), newest first. */
  findOrdersByReceipt(receipt: string): Promise<ProviderOutcome<ProviderOrder[]>>;
  /** Checks the signature over the exact raw bytes; call before any parsing. */
  verifyWebhook(raw_body: Buffer, signature_header: string | undefined): WebhookCheck;
  /** Parses a verified body; events we do not act on come back as `unsupported`. */
  parseWebhook(raw_body: Buffer): ParsedWebhook | { error: string };
}
