// Razorpay wire JSON <-> our port types. Each wire shape is a zod schema; anything that does not
// fit is reported as unparseable (the caller turns that into `unknown`), never guessed at.

import { z } from "zod";
import { representable } from "../../evidence/canonical.js";
import { isSecretKeyName, isSecretValue, redacted, scrub, withoutSecretKeys } from "../../evidence/scrub.js";
import {
  order_id_pattern,
  payment_id_pattern,
  type CreateOrderInput,
  type ProviderError,
  type ProviderOrder,
  type ProviderPayment,
} from "../port.js";

/**
 * The provider's text is outside input like any other: it reaches tool results, stored results,
 * release reasons and evidence. Scrubbed as the evidence log scrubs (a provider that echoes the
 * request can answer with our key secret or Authorization header), then cut to this many
 * characters, with lone surrogates (which no evidence entry can hold) replaced by U+FFFD.
 * Razorpay's own limits are far below it (receipt 40, a note 256 characters).
 */
export const provider_text_chars_max = 1_024;
/** Razorpay allows 15 notes; an answer with more than this many is not a Razorpay answer. */
export const provider_notes_max = 64;

export function providerText(text: string): string {
  // Scrubbed before the cut, so a secret across it is seen whole; and after, for a cut that made one.
  const scrubbed = scrub(text);
  const cut = scrubbed.length > provider_text_chars_max ? scrub(`${scrubbed.slice(0, provider_text_chars_max)}…`) : scrubbed;
  return representable(cut) as string;
}

const wire_text = z.string().transform(providerText);

/**
 * Razorpay serialises empty notes as `[]` (a PHP quirk) and otherwise as an object. Notes are
 * scrubbed as the gate scrubs the notes it sends (gate/money.ts providerNotes): a note whose key
 * holds a secret is left out (scrubbing would replace all the notes), a note under a secret's
 * name ("auth", "api_key") keeps its name and loses its value, and the rest is provider text.
 */
const wire_notes = z
  .union([z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])), z.array(z.never()).max(0)])
  .nullish()
  .refine((notes) => !notes || Object.keys(notes).length <= provider_notes_max, `more than ${provider_notes_max} notes`)
  .transform((notes): Record<string, string> => {
    if (!notes || Array.isArray(notes)) return {};
    const out: Record<string, string> = {};
    for (const [key, value] of Object.entries(withoutSecretKeys(notes))) {
      out[providerText(key)] = value === null ? "" : isSecretKeyName(key) ? redacted : providerText(String(value));
    }
    return out;
  });

/** An id that holds a secret (a known key secret fits in 40 base62 characters) is no id: the
 *  answer is unparseable, rather than the secret shown or stored as an order or payment id. */
const not_secret = (id: string) => !isSecretValue(id);
const wire_order_id = z.string().regex(order_id_pattern).refine(not_secret, "an id that holds a secret");
const wire_payment_id = z.string().regex(payment_id_pattern).refine(not_secret, "an id that holds a secret");

const minor_amount = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const unix_seconds = z.number().int().nonnegative();

export const wire_order_schema = z.object({
  id: wire_order_id,
  entity: z.literal("order"),
  amount: minor_amount,
  amount_paid: minor_amount.optional().default(0),
  currency: z.string().regex(/^[A-Z]{3}$/),
  receipt: wire_text.nullable().optional().default(null),
  status: z.enum(["created", "attempted", "paid"]),
  notes: wire_notes,
  created_at: unix_seconds,
});

export const wire_payment_schema = z.object({
  id: wire_payment_id,
  entity: z.literal("payment"),
  amount: minor_amount,
  currency: z.string().regex(/^[A-Z]{3}$/),
  status: z.enum(["created", "authorized", "captured", "failed", "refunded"]),
  order_id: wire_order_id.nullable().optional().default(null),
  captured: z.boolean(),
  method: wire_text.nullable().optional(),
  error_code: wire_text.nullable().optional(),
  error_description: wire_text.nullable().optional(),
  created_at: unix_seconds,
});

/** `metadata` etc. are kept out of our type: we take only what a refusal needs to be explained.
 *  Every text is provider text (scrubbed), kept in our type or not: none can carry a secret on. */
export const wire_error_schema = z.object({
  error: z.object({
    code: z.string().min(1).pipe(wire_text),
    description: wire_text,
    field: wire_text.nullable().optional(),
    source: wire_text.nullable().optional(),
    step: wire_text.nullable().optional(),
    reason: wire_text.nullable().optional(),
  }),
});

/** A collection page: we never ask for more than one page of orders by receipt. */
export const collection_items_max = 100;
const wire_collection_schema = z.object({
  entity: z.literal("collection"),
  count: z.number().int().nonnegative(),
  items: z.array(z.unknown()).max(collection_items_max),
});

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

/** The first issue, in words; its path holds the provider's keys, so it is provider text too. */
function describeIssues(error: z.ZodError): string {
  const first = error.issues[0];
  return first ? providerText(`${first.path.join(".") || "(root)"}: ${first.message}`) : "invalid";
}

export function toProviderOrder(json: unknown): Parsed<ProviderOrder> {
  const parsed = wire_order_schema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: `unexpected order shape (${describeIssues(parsed.error)})` };
  const wire = parsed.data;
  return {
    ok: true,
    value: {
      id: wire.id,
      amount: wire.amount,
      amount_paid: wire.amount_paid,
      currency: wire.currency,
      receipt: wire.receipt,
      status: wire.status,
      notes: wire.notes,
      created_at: wire.created_at,
    },
  };
}

export function toProviderPayment(json: unknown): Parsed<ProviderPayment> {
  const parsed = wire_payment_schema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: `unexpected payment shape (${describeIssues(parsed.error)})` };
  const wire = parsed.data;
  const payment: ProviderPayment = {
    id: wire.id,
    order_id: wire.order_id,
    amount: wire.amount,
    currency: wire.currency,
    status: wire.status,
    captured: wire.captured,
    created_at: wire.created_at,
  };
  if (wire.method) payment.method = wire.method;
  if (wire.error_code) payment.error_code = wire.error_code;
  if (wire.error_description) payment.error_description = wire.error_description;
  return { ok: true, value: payment };
}

/** A Razorpay collection `{entity: "collection", count, items}` of one item type. */
function toCollection<T>(json: unknown, item: (json: unknown) => Parsed<T>): Parsed<T[]> {
  const parsed = wire_collection_schema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: `unexpected collection shape (${describeIssues(parsed.error)})` };
  const items: T[] = [];
  for (const raw of parsed.data.items) {
    const one = item(raw);
    if (!one.ok) return one;
    items.push(one.value);
  }
  return { ok: true, value: items };
}

export function toProviderOrders(json: unknown): Parsed<ProviderOrder[]> {
  return toCollection(json, toProviderOrder);
}

export function toProviderPayments(json: unknown): Parsed<ProviderPayment[]> {
  return toCollection(json, toProviderPayment);
}

export function toProviderError(json: unknown): Parsed<ProviderError> {
  const parsed = wire_error_schema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: "not a Razorpay error body" };
  const { code, description, field } = parsed.data.error;
  return { ok: true, value: field ? { code, description, field } : { code, description } };
}

/**
 * The create-order request body. Manual capture always: a paid order only authorizes, and money
 * moves when a capture passes the gate. `refund_speed` is sent because Razorpay's capture_options
 * documents it alongside `capture`; "normal" avoids instant-refund fees.
 */
export function toWireOrderCreate(input: CreateOrderInput): Record<string, unknown> {
  const body: Record<string, unknown> = {
    amount: input.amount,
    currency: input.currency.toUpperCase(),
    receipt: input.receipt,
    payment: { capture: "manual", capture_options: { refund_speed: "normal" } },
  };
  if (input.notes && Object.keys(input.notes).length > 0) body.notes = input.notes;
  return body;
}

export function toWireCapture(input: { amount: number; currency: string }): Record<string, unknown> {
  return { amount: input.amount, currency: input.currency.toUpperCase() };
}
