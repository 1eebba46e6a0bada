// The error type (defined in src/errors.ts so the ledger can throw it) and the response body shape.

export { HttpError } from "../errors.js";

export interface ErrorBody {
  error: { code: string; message: string; details?: unknown };
}

export function errorBody(code: string, message: string, details?: unknown): ErrorBody {
  return details === undefined ? { error: { code, message } } : { error: { code, message, details } };
}
