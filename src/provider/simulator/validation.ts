// Request-body validation for the simulator's Razorpay routes, with Razorpay's field-by-field error
// descriptions. A parameter the simulator does not model is refused by name, in Razorpay's words
// for an unknown one, though Razorpay itself takes some (`transfers`, `partial_payment`, ...): a
// money-moving field is never silently accepted and then ignored.

import { badRequest, fieldRequired, messages, notRequired, type SimAnswer } from "./errors.js";

export const receipt_max_length = 40;
export const notes_keys_max = 15;
export const notes_text_max_length = 255;
/** The smallest order Razorpay takes: 1.00 in a two-decimal currency. */
export const order_amount_min_minor = 100;
/** Keeps every sum a safe integer; far above any real single order. */
export const order_amount_max_minor = 1_000_000_000_000;
export const supported_currencies: readonly string[] = ["INR", "USD", "EUR", "GBP", "SGD", "AED", "MYR", "AUD", "CAD"];

export type CaptureMode = "manual" | "automatic";

export interface ValidOrderInput {
  amount: number;
  currency: string;
  receipt: string | null;
  notes: Record<string, string>;
  capture: CaptureMode;
}

export interface ValidCaptureInput {
  amount: number;
  currency: string;
}

type Checked<T> = { ok: true; value: T } | SimAnswer;

const order_keys_allowed = ["amount", "currency", "receipt", "notes", "payment"];
const payment_keys_allowed = ["capture", "capture_options"];
const capture_option_keys_allowed = ["automatic_expiry_period", "manual_expiry_period", "refund_speed"];
const capture_keys_allowed = ["amount", "currency"];

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function firstUnknownKey(object: Record<string, unknown>, allowed: readonly string[]): string | undefined {
  return Object.keys(object).find((key) => !allowed.includes(key));
}

function checkAmount(body: Record<string, unknown>): Checked<number> {
  if (body.amount === undefined || body.amount === null) return fieldRequired("amount");
  const amount = body.amount;
  if (typeof amount !== "number" || !Number.isInteger(amount)) return badRequest("The amount must be an integer.", "amount");
  return { ok: true, value: amount };
}

function checkCurrency(body: Record<string, unknown>): Checked<string> {
  if (body.currency === undefined || body.currency === null) return fieldRequired("currency");
  const currency = body.currency;
  if (typeof currency !== "string" || !supported_currencies.includes(currency)) {
    return badRequest("The currency is invalid.", "currency");
  }
  return { ok: true, value: currency };
}

function checkReceipt(receipt: unknown): Checked<string | null> {
  if (receipt === undefined || receipt === null) return { ok: true, value: null };
  if (typeof receipt !== "string") return badRequest("The receipt must be a string.", "receipt");
  if (receipt.length > receipt_max_length) {
    return badRequest(`The receipt may not be greater than ${receipt_max_length} characters.`, "receipt");
  }
  return { ok: true, value: receipt };
}

export function checkNotes(notes: unknown): Checked<Record<string, string>> {
  if (notes === undefined || notes === null) return { ok: true, value: {} };
  if (Array.isArray(notes) && notes.length === 0) return { ok: true, value: {} };
  if (!isPlainObject(notes)) return badRequest(messages.notes_not_dictionary, "notes");
  const entries = Object.entries(notes);
  if (entries.length > notes_keys_max) return badRequest(messages.notes_too_many_keys, "notes");
  const out: Record<string, string> = {};
  for (const [key, value] of entries) {
    if (typeof value === "object" && value !== null) return badRequest(messages.notes_value_array, "notes");
    if (key.length > notes_text_max_length) return badRequest(messages.notes_key_too_large, "notes");
    const text = value === null ? "" : String(value);
    if (text.length > notes_text_max_length) return badRequest(messages.notes_value_too_large, "notes");
    Object.defineProperty(out, key, { value: text, enumerable: true, writable: true, configurable: true });
  }
  return { ok: true, value: out };
}

function checkCaptureOptions(options: unknown): SimAnswer | undefined {
  if (options === undefined) return undefined;
  if (!isPlainObject(options)) return badRequest("The payment.capture_options must be an object.", "payment.capture_options");
  const unknown = firstUnknownKey(options, capture_option_keys_allowed);
  if (unknown) return notRequired(`payment.capture_options.${unknown}`);
  const speed = options.refund_speed;
  if (speed !== undefined && speed !== "normal" && speed !== "optimum") {
    return badRequest("The selected payment.capture_options.refund_speed is invalid.", "payment.capture_options.refund_speed");
  }
  return undefined;
}

/** Without `payment.capture`, Razorpay applies the account default, which is automatic capture. */
function checkPayment(payment: unknown): Checked<CaptureMode> {
  if (payment === undefined) return { ok: true, value: "automatic" };
  if (!isPlainObject(payment)) return badRequest("The payment must be an object.", "payment");
  const unknown = firstUnknownKey(payment, payment_keys_allowed);
  if (unknown) return notRequired(`payment.${unknown}`);
  const capture = payment.capture ?? "automatic";
  if (capture !== "manual" && capture !== "automatic") {
    return badRequest("The selected payment.capture is invalid.", "payment.capture");
  }
  const options_error = checkCaptureOptions(payment.capture_options);
  return options_error ?? { ok: true, value: capture };
}

function checkOrderAmountRange(amount: number, currency: string): SimAnswer | undefined {
  if (amount < order_amount_min_minor) return badRequest(`The amount must be atleast ${currency} 1.00`, "amount");
  if (amount > order_amount_max_minor) {
    return badRequest(`The amount may not be greater than ${order_amount_max_minor}.`, "amount");
  }
  return undefined;
}

export function validateCreateOrder(body: unknown): Checked<ValidOrderInput> {
  if (!isPlainObject(body)) return badRequest("The request body must be a JSON object.");
  const unknown = firstUnknownKey(body, order_keys_allowed);
  if (unknown) return notRequired(unknown);
  const amount = checkAmount(body);
  if (!("ok" in amount)) return amount;
  const currency = checkCurrency(body);
  if (!("ok" in currency)) return currency;
  const range_error = checkOrderAmountRange(amount.value, currency.value);
  if (range_error) return range_error;
  const receipt = checkReceipt(body.receipt);
  if (!("ok" in receipt)) return receipt;
  const notes = checkNotes(body.notes);
  if (!("ok" in notes)) return notes;
  const capture = checkPayment(body.payment);
  if (!("ok" in capture)) return capture;
  return {
    ok: true,
    value: { amount: amount.value, currency: currency.value, receipt: receipt.value, notes: notes.value, capture: capture.value },
  };
}

export function validateCapture(body: unknown): Checked<ValidCaptureInput> {
  const object = body === undefined || body === null ? {} : body;
  if (!isPlainObject(object)) return badRequest("The request body must be a JSON object.");
  const unknown = firstUnknownKey(object, capture_keys_allowed);
  if (unknown) return notRequired(unknown);
  const amount = checkAmount(object);
  if (!("ok" in amount)) return amount;
  if (object.currency === undefined || object.currency === null) return fieldRequired("currency");
  if (typeof object.currency !== "string") return badRequest("The currency is invalid.", "currency");
  return { ok: true, value: { amount: amount.value, currency: object.currency } };
}

/** Luhn check: the test checkout refuses digit strings that are not card numbers at all. */
export function isLuhnValid(digits: string): boolean {
  let sum = 0;
  for (let index = 0; index < digits.length; index++) {
    let digit = Number(digits[digits.length - 1 - index]);
    if (index % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}
