// Razorpay-shaped error answers for the simulator: `{"error": {code, description, source, step,
// reason, metadata, field?}}`, the body the real API sends and the client maps to `refused`.

export interface RazorpayErrorBody {
  error: {
    code: string;
    description: string;
    source: string;
    step: string;
    reason: string;
    metadata: Record<string, string>;
    field?: string;
  };
}

/** What a simulator operation answers: a status and a JSON body. */
export interface SimAnswer {
  status: number;
  body: unknown;
}

export function badRequest(description: string, field?: string, metadata: Record<string, string> = {}): SimAnswer {
  const error: RazorpayErrorBody["error"] = {
    code: "BAD_REQUEST_ERROR",
    description,
    source: "business",
    step: "payment_initiation",
    reason: "input_validation_failed",
    metadata,
  };
  if (field !== undefined) error.field = field;
  return { status: 400, body: { error } satisfies RazorpayErrorBody };
}

/** An error raised outside any payment step (authentication, the rate limiter, a failure of
 *  Razorpay's own): source, step and reason are "NA". */
function outsideStep(status: number, code: string, description: string): SimAnswer {
  const error = { code, description, source: "NA", step: "NA", reason: "NA", metadata: {} };
  return { status, body: { error } satisfies RazorpayErrorBody };
}

export function unauthorized(description: string): SimAnswer {
  return outsideStep(401, "BAD_REQUEST_ERROR", description);
}

export function serverError(status: number): SimAnswer {
  return outsideStep(status, "SERVER_ERROR", "The server encountered an error. The incident has been reported to admins.");
}

/** Razorpay's rate limiter: 429 with its usual error envelope (it asks for a retry with backoff). */
export function tooManyRequests(): SimAnswer {
  return outsideStep(429, "BAD_REQUEST_ERROR", "Too many requests");
}

export function ok(body: unknown): SimAnswer {
  return { status: 200, body };
}

/** Razorpay's own strings, so a client's handling of them is tested against the real words. */
export const messages = {
  id_not_found: "The id provided does not exist",
  url_not_found: "The requested URL was not found on the server.",
  api_key_missing: "Please provide your api key for authentication purposes.",
  api_key_invalid: "The api key provided is invalid",
  capture_amount_mismatch: "Capture amount must be equal to the amount authorized",
  capture_currency_mismatch: "Capture request currency must be same as payment currency",
  capture_already_captured: "This payment has already been captured",
  capture_only_authorized: "Only payments which have been authorized and not yet captured can be captured",
  // The simulator's own control route; Razorpay has no such request.
  expire_only_authorized: "Only payments which have been authorized and not yet captured can expire",
  refund_only_captured: "Only a captured payment that has not been refunded can be refunded here",
  order_amount_due_exceeded: "Payment amount is greater than the amount due for order",
  order_already_paid: "Payment already done for this order.",
  notes_not_dictionary: "Notes should be provided as a dictionary",
  notes_too_many_keys: "Number of fields in notes should be less than or equal to 15",
  notes_value_array: "Notes values themselves should not be an array",
  notes_key_too_large: "Notes key cannot be greater 255 characters",
  notes_value_too_large: "Notes value cannot be greater 255 characters",
  card_not_legitimate: "The card number provided is not a legitimate one.",
  card_declined: "Payment processing declined. The card issuing bank has prevented the payment from being authorized.",
} as const;

export function notRequired(field: string): SimAnswer {
  return badRequest(`${field} is/are not required and should not be sent`, field);
}

export function fieldRequired(field: string): SimAnswer {
  return badRequest(`The ${field} field is required.`, field);
}
