// The error type (defined in src/errors.ts so the ledger can throw it) and the response body shape.

import { visibleText } from "../policy/arguments.js";

export { BearerRequired, HttpError } from "../errors.js";

export interface ErrorBody {
  error: { code: string; message: string; details?: unknown };
}

/** An error answer. Its message may quote what the request sent (an id from the path, say): any
 *  control or invisible character in it is written as an escape, so a client that prints the
 *  message shows the characters rather than obeying them. */
export function errorBody(code: string, text: string, details?: unknown): ErrorBody {
  const message = visibleText(text);
  return details === undefined ? { error: { code, message } } : { error: { code, message, details } };
}
