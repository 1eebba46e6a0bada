// Razorpay webhook verification in named steps (secret, header, format, signature) and parsing of
// the verified event envelope. The signature is HMAC-SHA256 over the exact raw bytes, hex encoded.

import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import type { ParsedWebhook, PaymentEventName, WebhookCheck, WebhookVerifyError } from "../port.js";
import { scrub } from "../../evidence/scrub.js";
import { toProviderOrder, toProviderPayment } from "./transformers.js";
import { firstDuplicateKeyPath } from "../../ingest/duplicate-keys.js";

export const signature_header_name = "x-razorpay-signature";
export const event_id_header_name = "x-razorpay-event-id";
/** SHA-256 is 32 bytes: exactly 64 hex characters. */
export const signature_hex_length = 64;
/** The webhook route's body limit (413 before parsing), checked again here: larger bodies are never parsed. */
export const webhook_body_max_bytes = 1_048_576;

export function signWebhookBody(secret: string, raw_body: Buffer | string): string {
  return createHmac("sha256", secret).update(raw_body).digest("hex");
}

function fail(error: WebhookVerifyError): WebhookCheck {
  return { ok: false, error };
}

/** Step 1. A server with no secret cannot tell a real event from a forged one: fail closed. */
function checkSecret(secret: string | undefined): WebhookCheck {
  if (secret) return { ok: true };
  return fail({ step: "secret", code: "webhook_secret_missing", status: 503, message: "webhook secret is not configured" });
}

/** Step 2. */
function checkHeaderPresent(header: string | undefined): WebhookCheck {
  if (header !== undefined && header.length > 0) return { ok: true };
  return fail({ step: "header", code: "signature_missing", status: 401, message: "X-Razorpay-Signature header is missing" });
}

/** Step 3. Only 64 hex characters can be a signature; anything else is refused before comparing. */
function checkHeaderFormat(header: string): WebhookCheck {
  if (header.length === signature_hex_length && /^[0-9a-fA-F]+$/.test(header)) return { ok: true };
  return fail({
    step: "format",
    code: "signature_malformed",
    status: 401,
    message: `X-Razorpay-Signature must be ${signature_hex_length} hex characters`,
  });
}

/**
 * Step 4. Equal-length buffers compared in constant time: no early exit leaks a prefix. Every
 * secret is compared (the current one, and the previous one during a rotation), whichever matches.
 */
function checkSignature(secrets: readonly string[], raw_body: Buffer, header: string): WebhookCheck {
  const received = Buffer.from(header, "hex");
  let matched = false;
  for (const secret of secrets) {
    const expected = Buffer.from(signWebhookBody(secret, raw_body), "hex");
    if (received.length === expected.length && timingSafeEqual(received, expected)) matched = true;
  }
  if (matched) return { ok: true };
  return fail({ step: "signature", code: "signature_mismatch", status: 401, message: "signature does not match the body" });
}

/**
 * `previous`: the secret a rotation replaced, still accepted: Razorpay signs an event's retries
 * (for up to 24 hours) with the secret it was first sent under.
 */
export function verifyRazorpayWebhook(
  secret: string | undefined,
  raw_body: Buffer,
  signature_header: string | undefined,
  previous?: string,
): WebhookCheck {
  const secret_check = checkSecret(secret);
  if (!secret_check.ok || !secret) return secret_check;
  const header_check = checkHeaderPresent(signature_header);
  if (!header_check.ok || signature_header === undefined) return header_check;
  const format_check = checkHeaderFormat(signature_header);
  if (!format_check.ok) return format_check;
  return checkSignature(previous === undefined ? [secret] : [secret, previous], raw_body, signature_header);
}

const entity_wrapper = z.object({ entity: z.unknown() });

const envelope_schema = z.object({
  entity: z.literal("event"),
  account_id: z.string().nullish(),
  event: z.string().min(1).max(100),
  contains: z.array(z.string()).optional(),
  payload: z.record(z.string(), z.unknown()),
  created_at: z.number().int().nonnegative(),
});

const payment_events: readonly PaymentEventName[] = ["payment.authorized", "payment.captured", "payment.failed"];

function isPaymentEvent(event: string): event is PaymentEventName {
  return (payment_events as readonly string[]).includes(event);
}

function entityOf(payload: Record<string, unknown>, name: string): unknown {
  const wrapper = entity_wrapper.safeParse(payload[name]);
  return wrapper.success ? wrapper.data.entity : undefined;
}

/** Parses a body whose signature has already been verified. */
export function parseRazorpayWebhook(raw_body: Buffer): ParsedWebhook | { error: string } {
  if (raw_body.length > webhook_body_max_bytes) return { error: `body over ${webhook_body_max_bytes} bytes` };
  const text = raw_body.toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { error: "body is not JSON" };
  }
  // JSON.parse keeps the last of two equal keys ("status":"failed",…,"status":"captured"), a
  // reader of the same signed bytes may take the first: which payment they report is not clear.
  const twice = firstDuplicateKeyPath(text, json);
  if (twice !== undefined) return { error: `body writes the key ${twice} twice in one object` };
  const envelope = envelope_schema.safeParse(json);
  if (!envelope.success) return { error: "body is not a Razorpay event envelope" };
  const { event, payload, created_at } = envelope.data;
  const account_id = envelope.data.account_id ?? null;
  const is_payment_event = isPaymentEvent(event);
  // An unsupported event's name is the provider's text, recorded as it is: scrubbed, as the log
  // scrubs it (its lone surrogates are kept, for the gate to refuse it as malformed).
  if (!is_payment_event && event !== "order.paid") return { type: "unsupported", event: scrub(event), account_id, created_at };
  const payment = toProviderPayment(entityOf(payload, "payment"));
  if (!payment.ok) return { error: `${event}: ${payment.reason}` };
  if (is_payment_event) return { type: event, payment: payment.value, account_id, created_at };
  const order = toProviderOrder(entityOf(payload, "order"));
  if (!order.ok) return { error: `${event}: ${order.reason}` };
  return { type: "order.paid", order: order.value, payment: payment.value, account_id, created_at };
}
