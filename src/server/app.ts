// Fastify assembly: logging without secrets, body limits, the error mapping and graceful
// shutdown. Routes come from plugins registered by the features; no business logic here.

import Fastify, { type FastifyError, type FastifyInstance, type FastifyServerOptions } from "fastify";
import { bursar_token_pattern } from "../evidence/scrub.js";
import { HttpError, errorBody } from "./errors.js";

/** Default body limit for JSON routes; routes that take more (ingest) set their own. */
export const body_limit_default_bytes = 1_048_576;

export type RoutePlugin = (app: FastifyInstance) => void | Promise<void>;

export interface ServerOptions {
  logger?: FastifyServerOptions["logger"] | false;
  plugins?: readonly RoutePlugin[];
  /** Called once on close, after the listener stops accepting. */
  onClose?: () => Promise<void>;
}

/**
 * The segment after an `observe` segment, in any case and after repeated or encoded slashes:
 * such paths do not route (404) but are logged all the same.
 */
const observe_path_token = /(\/observe(?:\/|%2f)+)[^/?]+/gi;
/** Catches what the path rule cannot (e.g. `/%6Fbserve/{token}`, which does route to the observer). */
const bursar_tokens = new RegExp(bursar_token_pattern.source, "g");

/** After percent-decoding: an `observe` path segment followed by one not yet redacted, or a token anywhere. */
const decoded_suspect = new RegExp(`/observe/+(?!\\[redacted\\])[^/?]|${bursar_token_pattern.source.replace("\\b", "")}`, "i");
/** Rounds of percent-decoding before looking again: `%252F` is `/` after two. */
const decode_rounds_max = 4;

/** Percent-decodes byte by byte, tolerating malformed escapes, until stable or out of rounds. */
function percentDecoded(url: string): string {
  let text = url;
  for (let round = 0; round < decode_rounds_max && text.includes("%"); round++) {
    const next = text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (next === text) break;
    text = next;
  }
  return text;
}

/**
 * URLs are written to access logs (and 404 answers) with path tokens and Bursar's own tokens
 * redacted. A URL that hides either behind percent-encoding (`/%6Fbserve%2F…`, `%252F`, `%62sr_…`)
 * is written as "[redacted]" whole.
 */
export function redactUrl(url: string): string {
  const redacted = url.replace(observe_path_token, "$1[redacted]").replace(bursar_tokens, "[redacted]");
  if (!url.includes("%")) return redacted;
  return decoded_suspect.test(percentDecoded(redacted)) ? "[redacted]" : redacted;
}

export const log_redact_paths = [
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-bursar-observer-token"]',
  'req.headers["x-razorpay-signature"]',
  'req.headers["bursar-signature"]',
];

export function loggerOptions(level = process.env.BURSAR_LOG_LEVEL ?? "info"): FastifyServerOptions["logger"] {
  return {
    level,
    redact: { paths: log_redact_paths, censor: "[redacted]" },
    serializers: {
      req(request: { method: string; url: string; ip?: string }) {
        return { method: request.method, url: redactUrl(request.url), remoteAddress: request.ip };
      },
    },
  };
}

export async function buildServer(options: ServerOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger === undefined ? loggerOptions() : options.logger,
    bodyLimit: body_limit_default_bytes,
    return503OnClosing: true,
  });

  app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
    if (error instanceof HttpError) {
      return reply.status(error.status).send(errorBody(error.code, error.message, error.details));
    }
    const status = error.statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: { message: error.message, code: error.code } }, "request failed");
      return reply.status(500).send(errorBody("internal", "internal error"));
    }
    const code =
      status === 413 ? "body_too_large" : status === 415 ? "unsupported_media_type" : status === 400 ? "malformed" : "error";
    return reply.status(status).send(errorBody(code, error.message));
  });

  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send(errorBody("not_found", `no route ${request.method} ${redactUrl(request.url)}`)),
  );

  app.get("/healthz", async () => ({ ok: true }));

  for (const plugin of options.plugins ?? []) await plugin(app);

  if (options.onClose) {
    const onClose = options.onClose;
    app.addHook("onClose", async () => onClose());
  }
  return app;
}

/** Closes the server on SIGINT/SIGTERM: stop accepting, finish in-flight requests, then exit. */
export function closeOnSignals(app: FastifyInstance, grace_ms = 10_000): void {
  let closing = false;
  const close = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, "shutting down");
    const timer = setTimeout(() => process.exit(1), grace_ms);
    timer.unref();
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGINT", () => close("SIGINT"));
  process.once("SIGTERM", () => close("SIGTERM"));
}
