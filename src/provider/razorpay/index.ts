// The `razorpay` Provider: Razorpay's REST API (or the simulator, which speaks the same wire) over
// fetch. Checks its configuration at construction and refuses bad ids locally, before any request.

import {
  isNoSuchResource,
  isOrderId,
  isPaymentId,
  type CaptureInput,
  type CreateOrderInput,
  type Provider,
  type ProviderOutcome,
} from "../port.js";
import { provider_timeout_ms, razorpayCall, type FetchFunction, type RazorpayClientConfig } from "./client.js";
import {
  toProviderOrder,
  toProviderOrders,
  toProviderPayment,
  toProviderPayments,
  toWireCapture,
  toWireOrderCreate,
} from "./transformers.js";
import { parseRazorpayWebhook, verifyRazorpayWebhook } from "./webhook.js";

export { provider_timeout_ms } from "./client.js";
export { signWebhookBody, verifyRazorpayWebhook, parseRazorpayWebhook } from "./webhook.js";

export const razorpay_base_url_default = "https://api.razorpay.com";
/** A timeout beyond this is a configuration mistake, not patience. */
export const provider_timeout_max_ms = 120_000;
/** Razorpay's own limit on `receipt`. */
export const receipt_max_length = 40;

/** Named "ConfigError" so the CLI prints its one line and exits 2. */
export class ProviderConfigError extends Error {
  override name = "ConfigError";
}

export interface RazorpayProviderOptions {
  key_id: string;
  key_secret: string;
  base_url?: string;
  /** Undefined makes every webhook verification fail closed with `webhook_secret_missing` (503). */
  webhook_secret?: string;
  /** The webhook secret a rotation replaced, still accepted beside webhook_secret (RAZORPAY_WEBHOOK_SECRET_PREVIOUS). */
  webhook_secret_previous?: string;
  allow_live?: boolean;
  timeout_ms?: number;
  fetch?: FetchFunction;
}

function checkKeys(options: RazorpayProviderOptions): void {
  const key_id = options.key_id ?? "";
  const is_test = key_id.startsWith("rzp_test_");
  const is_live = key_id.startsWith("rzp_live_");
  if (!is_test && !is_live) {
    throw new ProviderConfigError("RAZORPAY_KEY_ID must be a Razorpay key id starting with rzp_test_ (or rzp_live_)");
  }
  if (is_live && !options.allow_live) {
    throw new ProviderConfigError("RAZORPAY_KEY_ID is a live key (rzp_live_); live keys are refused unless BURSAR_ALLOW_LIVE=1");
  }
  if (!options.key_secret?.trim()) throw new ProviderConfigError("RAZORPAY_KEY_SECRET must be set to the key id's secret");
  // A blank webhook secret would make an HMAC anyone can compute; undefined fails closed instead.
  if (options.webhook_secret !== undefined && options.webhook_secret.trim() === "") {
    throw new ProviderConfigError("RAZORPAY_WEBHOOK_SECRET: only whitespace; expected the secret itself");
  }
  if (options.webhook_secret_previous !== undefined) {
    if (options.webhook_secret_previous.trim() === "") throw new ProviderConfigError("RAZORPAY_WEBHOOK_SECRET_PREVIOUS: only whitespace; expected the secret itself");
    if (!options.webhook_secret) throw new ProviderConfigError("RAZORPAY_WEBHOOK_SECRET_PREVIOUS is set without RAZORPAY_WEBHOOK_SECRET: set the new secret there, and the one it replaced here");
  }
}

function checkBaseUrl(base_url: string): void {
  let url: URL;
  try {
    url = new URL(base_url);
  } catch {
    throw new ProviderConfigError("RAZORPAY_BASE_URL must be an http(s) URL, e.g. https://api.razorpay.com");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ProviderConfigError("RAZORPAY_BASE_URL must be an http(s) URL, e.g. https://api.razorpay.com");
  }
  // fetch refuses such a URL with a message repeating it, password and all; the key travels in RAZORPAY_KEY_ID/SECRET.
  if (url.username !== "" || url.password !== "") {
    throw new ProviderConfigError("RAZORPAY_BASE_URL: a URL with user:password@ is refused (the value is not shown)");
  }
  // Razorpay's own pages give https://api.razorpay.com/v1 as the API's address: taken as the base,
  // every request went to /v1/v1/…, which Razorpay answers 400, read as "no such order".
  if (/\/v1\/*$/i.test(url.pathname)) {
    throw new ProviderConfigError(`RAZORPAY_BASE_URL=${JSON.stringify(base_url)}: ends in /v1, which the client adds to every path (/v1/orders); give the base without it, e.g. ${razorpay_base_url_default}`);
  }
}

function checkTimeout(timeout_ms: number): void {
  if (!Number.isSafeInteger(timeout_ms) || timeout_ms <= 0 || timeout_ms > provider_timeout_max_ms) {
    throw new ProviderConfigError(`provider timeout must be an integer from 1 to ${provider_timeout_max_ms} ms`);
  }
}

/** A refusal decided here, without a request: the provider never saw it. */
function refuseLocally<T>(field: string, description: string): ProviderOutcome<T> {
  return { kind: "refused", status: 400, error: { code: "BAD_REQUEST_ERROR", description, field }, local: true };
}

function checkMoney<T>(input: { amount: number; currency: string }): ProviderOutcome<T> | undefined {
  if (!Number.isSafeInteger(input.amount) || input.amount <= 0) {
    return refuseLocally("amount", "amount must be a positive integer in minor units");
  }
  if (typeof input.currency !== "string" || !/^[A-Za-z]{3}$/.test(input.currency)) {
    return refuseLocally("currency", "currency must be three ASCII letters");
  }
  return undefined;
}

/** Statuses with which a lookup's answer is about the resource itself: it does not exist (Razorpay answers 400 "The id provided does not exist", or 404). */
/**
 * A lookup (fetch an order or a payment, list by receipt) refused for a reason that says nothing
 * about the resource — 401/403 (the key), 429 (rate limited: Razorpay asks for a retry with
 * backoff), any other 4xx — is an unknown answer, not "no such order": a caller that took it for
 * one would consume a captured payment's webhook, or tell an operator an order does not exist.
 * Requests that act (create, capture) keep every 4xx as a refusal: the provider did not act.
 */
async function lookup<T>(outcome: Promise<ProviderOutcome<T>>): Promise<ProviderOutcome<T>> {
  const answer = await outcome;
  if (answer.kind !== "refused" || answer.local || isNoSuchResource(answer)) return answer;
  return { kind: "unknown", reason: `HTTP ${answer.status} from provider: ${answer.error.description}` };
}

/**
 * An answer about something other than what was asked is no answer (a broken or hostile
 * provider, a misrouted proxy): taken at its word, a webhook could link a reservation to a
 * foreign order, or an agent read another agent's order under its own id. `wrong` names the
 * mismatch, or returns undefined when the answer is about what was asked.
 */
function about<T>(outcome: ProviderOutcome<T>, wrong: (value: T) => string | undefined): ProviderOutcome<T> {
  if (outcome.kind !== "ok") return outcome;
  const mismatch = wrong(outcome.value);
  return mismatch === undefined ? outcome : { kind: "unknown", reason: `the provider answered about ${mismatch}` };
}

export function createRazorpayProvider(options: RazorpayProviderOptions): Provider {
  checkKeys(options);
  const base_url = options.base_url ?? razorpay_base_url_default;
  checkBaseUrl(base_url);
  const timeout_ms = options.timeout_ms ?? provider_timeout_ms;
  checkTimeout(timeout_ms);
  const config: RazorpayClientConfig = {
    key_id: options.key_id,
    key_secret: options.key_secret,
    base_url,
    timeout_ms,
    fetch: options.fetch ?? globalThis.fetch,
  };
  const webhook_secret = options.webhook_secret;
  const webhook_secret_previous = options.webhook_secret_previous;

  return {
    name: "razorpay",

    async createOrder(input: CreateOrderInput) {
      const bad = checkMoney<never>(input);
      if (bad) return bad;
      if (typeof input.receipt !== "string" || input.receipt.length > receipt_max_length) {
        return refuseLocally("receipt", `receipt must be a string of at most ${receipt_max_length} characters`);
      }
      const created = await razorpayCall(config, { method: "POST", path: "/v1/orders", body: toWireOrderCreate(input) }, toProviderOrder);
      return about(created, (order) =>
        order.receipt === input.receipt && order.amount === input.amount && order.currency === input.currency.toUpperCase()
          ? undefined
          : `another order (receipt ${JSON.stringify(order.receipt)}, ${order.amount} ${order.currency}) than the one it was asked to create`,
      );
    },

    async capturePayment(payment_id: string, input: CaptureInput) {
      if (!isPaymentId(payment_id)) return refuseLocally("payment_id", "payment_id must match ^pay_[A-Za-z0-9]{1,40}$");
      const bad = checkMoney<never>(input);
      if (bad) return bad;
      const path = `/v1/payments/${encodeURIComponent(payment_id)}/capture`;
      return razorpayCall(config, { method: "POST", path, body: toWireCapture(input) }, toProviderPayment);
    },

    async fetchOrder(order_id: string) {
      if (!isOrderId(order_id)) return refuseLocally("order_id", "order_id must match ^order_[A-Za-z0-9]{1,40}$");
      const order = await lookup(razorpayCall(config, { method: "GET", path: `/v1/orders/${encodeURIComponent(order_id)}` }, toProviderOrder));
      return about(order, (found) => (found.id === order_id ? undefined : `order ${found.id} when asked for ${order_id}`));
    },

    async fetchPayment(payment_id: string) {
      if (!isPaymentId(payment_id)) return refuseLocally("payment_id", "payment_id must match ^pay_[A-Za-z0-9]{1,40}$");
      const path = `/v1/payments/${encodeURIComponent(payment_id)}`;
      const payment = await lookup(razorpayCall(config, { method: "GET", path }, toProviderPayment));
      return about(payment, (found) => (found.id === payment_id ? undefined : `payment ${found.id} when asked for ${payment_id}`));
    },

    async fetchOrderPayments(order_id: string) {
      if (!isOrderId(order_id)) return refuseLocally("order_id", "order_id must match ^order_[A-Za-z0-9]{1,40}$");
      const path = `/v1/orders/${encodeURIComponent(order_id)}/payments`;
      const payments = await lookup(razorpayCall(config, { method: "GET", path }, toProviderPayments));
      return about(payments, (found) => {
        const other = found.find((payment) => payment.order_id !== order_id);
        return other ? `payment ${other.id} of order ${String(other.order_id)} when asked for the payments of ${order_id}` : undefined;
      });
    },

    async findOrdersByReceipt(receipt: string) {
      if (typeof receipt !== "string" || receipt.length === 0 || receipt.length > receipt_max_length) {
        return refuseLocally("receipt", `receipt must be 1 to ${receipt_max_length} characters`);
      }
      const orders = await lookup(razorpayCall(config, { method: "GET", path: "/v1/orders", query: { receipt } }, toProviderOrders));
      return about(orders, (found) => {
        const other = found.find((order) => order.receipt !== receipt);
        return other ? `order ${other.id} with receipt ${JSON.stringify(other.receipt)} when asked for receipt ${JSON.stringify(receipt)}` : undefined;
      });
    },

    verifyWebhook(raw_body: Buffer, signature_header: string | undefined) {
      return verifyRazorpayWebhook(webhook_secret, raw_body, signature_header, webhook_secret_previous);
    },

    parseWebhook(raw_body: Buffer) {
      return parseRazorpayWebhook(raw_body);
    },
  };
}
