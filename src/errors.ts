// The one error type with a status and a snake_case code; the server maps it to
// `{"error": {code, message, details}}`, the CLI to a one-line message.

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "HttpError";
  }
}
