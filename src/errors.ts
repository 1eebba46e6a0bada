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

/** 401 for a missing, bad or expired bearer token: its answer names the scheme (WWW-Authenticate: Bearer, RFC 9110 §11.6.1). */
export class BearerRequired extends HttpError {
  constructor(message: string, code = "unauthorized") {
    super(401, code, message);
  }
}
