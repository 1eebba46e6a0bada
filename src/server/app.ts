// Fastify assembly: logging without secrets, body limits, the error mapping and graceful
// shutdown. Routes come from plugins registered by the features; no business logic here.

import { EventEmitter } from "node:events";
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { symbols as pino_symbols } from "pino";
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from "fastify";
import { signalExitCode } from "../cli/command.js";
import { errorCode } from "../datadir.js";
import { within } from "../deadline.js";
import { bursar_token_pattern, bursar_token_source } from "../evidence/scrub.js";
import { signature_header_name } from "../provider/razorpay/webhook.js";
import { percentDecoded, unreservedDecoded } from "../url-text.js";
import { BearerRequired, HttpError, errorBody, type ErrorBody } from "./errors.js";
import { message_bytes_max } from "./jsonrpc.js";

/** Default body limit for JSON routes, /mcp's messages among them; routes that take more (ingest) set their own. */
export const body_limit_default_bytes = message_bytes_max;

/**
 * How long a request may take to arrive whole, headers and body: Node's own default, which
 * Fastify turns off (0), so a body trickled in could hold its connection for ever. Responses
 * are not bounded by it (an SSE stream runs on once its request has arrived); the only bodies
 * that are not a few MiB at most are the observer's relayed uploads, and 5 minutes is far past
 * any MCP message. Node checks it every 30 s, so a request is cut between 5 and 5.5 minutes.
 */
export const request_timeout_ms = 300_000;

/**
 * How long a new connection may take to bring its first request's head. Node bounds a request
 * only once its first byte has come (headers, then the whole request), and a kept-alive
 * connection only after an answer: a connection that never sends a byte stayed open for good,
 * and a few thousand of them (7 KiB each, no credential needed) used up the process's file
 * descriptors, so every later caller was reset.
 */
export const first_request_timeout_ms = 30_000;

/**
 * Answers one connection may have unfinished (requests pipelined ahead of their answers); one
 * more closes it. Node reads and answers every request a client writes ahead, read or not: one
 * write of 100,000 GET /healthz held 150 MB and 100,000 database reads. Above the observer's own
 * bound on requests waiting behind a relayed stream (src/observer/proxy.ts), which is the tighter.
 */
export const pipelined_answers_open_max = 64;

/**
 * How long a connection whose client has half-closed it (sent its FIN after a whole request: legal,
 * and socat and some proxies do it) stays open for its answers. Node keeps it while they are sent
 * and closes it after the last; a client that closed outright looks the same, and an answer that
 * never ends (an observer's relayed SSE stream from a quiet upstream) would hold the connection,
 * and its upstream, for good. Longer than any money call's answer (the provider timeout is at most
 * 120 s).
 */
export const half_closed_timeout_ms = 300_000;

export type RoutePlugin = (app: FastifyInstance) => void | Promise<void>;

export interface ServerOptions {
  logger?: FastifyServerOptions["logger"] | false;
  plugins?: readonly RoutePlugin[];
  /** Called once on close, after the listener stops accepting. */
  onClose?: () => Promise<void>;
  /** A cheap database read: /healthz answers 503 when it fails or takes over health_timeout_ms. */
  health?: () => Promise<void>;
  /** How long a GracefulStop waits for in-flight requests (default shutdown_grace_ms_default). */
  shutdown_grace_ms?: number;
  /** How long a new connection may take to bring its first request's head (default first_request_timeout_ms). */
  first_request_timeout_ms?: number;
  /** How long a connection its client half-closed stays open for its answers (default half_closed_timeout_ms). */
  half_closed_timeout_ms?: number;
}

/** /healthz gives the database this long before it answers 503. */
export const health_timeout_ms = 2_000;
export const shutdown_grace_ms_default = 10_000;

interface Shutdown {
  grace_ms: number;
  in_flight(): number;
}
/** What GracefulStop needs to know about a server buildServer made. */
const shutdowns = new WeakMap<FastifyInstance, Shutdown>();

/**
 * The segment after an `observe` segment, in any case and after repeated or encoded slashes:
 * such paths do not route (404) but are logged all the same.
 */
const observe_path_token = /(\/observe(?:\/|%2f)+)[^/?]+/gi;
/** Catches what the path rule cannot (e.g. `/%6Fbserve/{token}`, which does route to the observer). */
const bursar_tokens = new RegExp(bursar_token_pattern.source, "g");

/** After percent-decoding: an `observe` path segment followed by one not yet redacted, or a token anywhere. */
const decoded_suspect = new RegExp(`/observe/+(?!\\[redacted\\])[^/?]|${bursar_token_source}`, "i");

/** A URL to the observer, percent-decoded: its query is the upstream's, where a gateway may put
 *  credentials. The router ends a path at a "#" too (such a request is refused, but logged first). */
const observe_url = /^\/+observe(?:[/?#]|$)/i;

/** The query's parameter names kept, their values (or a part with no `=`, whole) redacted. */
function queryValuesRedacted(url: string): string {
  const start = url.indexOf("?");
  if (start < 0) return url;
  const parts = url.slice(start + 1).split("&").map((part) => {
    const equals = part.indexOf("=");
    if (equals >= 0) return `${part.slice(0, equals + 1)}[redacted]`;
    return part === "" ? part : "[redacted]";
  });
  return `${url.slice(0, start)}?${parts.join("&")}`;
}

/**
 * URLs are written to access logs (and 404 answers) with path tokens and Bursar's own tokens
 * redacted, and an observer URL's query values too (a hosted MCP server may take `?api_key=`).
 * A URL that hides a token behind percent-encoding (`/%6Fbserve%2F…`, `%252F`, `%62sr_…`) is
 * written as "[redacted]" whole.
 */
export function redactUrl(url: string): string {
  let redacted = url.replace(observe_path_token, "$1[redacted]").replace(bursar_tokens, "[redacted]");
  const decoded = url.includes("%") ? percentDecoded(redacted) : redacted;
  if (observe_url.test(decoded)) redacted = queryValuesRedacted(redacted);
  if (!url.includes("%")) return redacted;
  return decoded_suspect.test(decoded) ? "[redacted]" : redacted;
}

export const log_redact_paths = [
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-bursar-observer-token"]',
  `req.headers["${signature_header_name}"]`,
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

/**
 * Why `app.listen` failed, as one line naming the settings that chose the address (`host` and
 * `address` name them, `who` says what else may hold the port); undefined for an error that is
 * not about the address.
 */
export function listenFailure(error: unknown, names: { address: string; host: string; who: string }): string | undefined {
  const code = errorCode(error);
  if (code === "EADDRINUSE") return `${names.address}: the address is already in use (${names.who}?)`;
  if (code === "EACCES") return `${names.address}: permission denied (ports below 1024 need privileges)`;
  if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_NONAME") {
    return `${names.host}: cannot listen on this address (${(error as Error).message})`;
  }
  return undefined;
}

/** Whether the request's route relays it untouched (the observer's: see routes/observe.ts). */
function isRelayed(request: FastifyRequest): boolean {
  return (request.routeOptions.config as { relayed?: boolean } | undefined)?.relayed === true;
}

/** How many Authorization headers a request carries, in any letter case (rawHeaders lists names and values in turn). */
function authorizationHeaders(raw: readonly string[]): number {
  let count = 0;
  for (let at = 0; at < raw.length; at += 2) if (raw[at]!.length === 13 && raw[at]!.toLowerCase() === "authorization") count++;
  return count;
}

/**
 * A body over its route's limit, answered naming the limit (Fastify's own message names none).
 * routeOptions.bodyLimit is the limit the body was read under: the route's own, or the server's
 * when the route sets none.
 */
function bodyTooLarge(request: FastifyRequest): ErrorBody {
  const limit = request.routeOptions.bodyLimit;
  return errorBody("body_too_large", `the request body is larger than ${limit} bytes`, { limit });
}

export async function buildServer(options: ServerOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    // Every hook, route and log line reads the request target as its path (see originForm).
    rewriteUrl: (request) => originForm(request.url ?? "/"),
    logger: options.logger === undefined ? loggerOptions() : options.logger,
    bodyLimit: body_limit_default_bytes,
    requestTimeout: request_timeout_ms,
    return503OnClosing: true,
    clientErrorHandler,
    frameworkErrors,
  });
  shutdowns.set(app, { grace_ms: options.shutdown_grace_ms ?? shutdown_grace_ms_default, in_flight: countInFlight(app) });
  // Every header is kept (the header bytes stay bounded, 16 KiB): past Node's default of 2,000
  // header lines it dropped the rest unseen, yet still framed the body by a dropped Content-Length
  // or Transfer-Encoding, so a check of the headers saw no body (the observer relayed those bytes
  // unframed, as a request of their own upstream), and a dropped Origin read as none.
  app.server.maxHeadersCount = 0;

  app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
    if (error instanceof HttpError) {
      if (error instanceof BearerRequired) reply.header("www-authenticate", "Bearer");
      return reply.status(error.status).send(errorBody(error.code, error.message, error.details));
    }
    const status = error.statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: { message: error.message, code: error.code } }, "request failed");
      return reply.status(500).send(errorBody("internal", "internal error"));
    }
    if (status === 413) return reply.status(413).send(bodyTooLarge(request));
    const code = status === 415 ? "unsupported_media_type" : status === 400 ? "malformed" : "error";
    return reply.status(status).send(errorBody(code, error.message));
  });

  guardConnections(app.server, options.first_request_timeout_ms ?? first_request_timeout_ms);
  // A request read past its connection's cap on pipelined answers is never run: Node goes on
  // parsing what the closed connection had sent, and Fastify on routing it. (A callback hook: it
  // runs for every request, and an async one costs a promise each.)
  app.addHook("onRequest", (request, reply, done) => {
    if (over_pipelined.has(request.raw)) reply.hijack();
    // Node keeps the first of two Authorization headers, where a gateway in front may read the
    // last: the two would take the request for two principals. RFC 9110 allows one. (Answered
    // here, the hook does not go on.) The observer's routes relay them untouched: Bursar takes
    // no principal from them there.
    else if (!isRelayed(request) && authorizationHeaders(request.raw.rawHeaders) > 1) {
      return void reply.status(400).send(errorBody("malformed", "the request has more than one Authorization header; send one credential"));
    }
    // The router ends the path at a "#", where code reading the target (the observer's relay, the
    // log's redaction) would read on: the two must not disagree on where the path ends.
    else if (request.url.includes("#")) {
      return void reply.status(400).send(errorBody("malformed", 'the request target holds a "#": a fragment is never part of an HTTP request (RFC 9112, section 3.2); send the path and query alone'));
    }
    done();
  });
  answerHalfClosed(app, options.half_closed_timeout_ms ?? half_closed_timeout_ms);
  // A routed answer says it closes the connection (guardConnections closes it) under its route's own limit.
  app.addHook("onSend", (request, reply, payload, done) => {
    route_limits.set(request.raw, request.routeOptions.bodyLimit);
    if (bodyLeftUnbounded(request.raw, request.routeOptions.bodyLimit)) reply.header("connection", "close");
    done(null, payload);
  });

  // An empty body with Content-Type: application/json (many clients send the header on every
  // POST) is no body on /api/v1, as without the header: Fastify's JSON parser answered 400 with
  // its own words where an action route takes no body.
  app.addHook("onRequest", async (request) => {
    if (request.headers["content-length"] === "0" && underApi(request)) delete request.headers["content-type"];
  });

  // Several /api/v1 answers show a secret once (an agent's or auditor's token, a source's keys):
  // no cache (a browser's, a proxy's) may keep any of them. A route that sets its own keeps it.
  app.addHook("onSend", (request, reply, payload, done) => {
    if (!reply.hasHeader("cache-control") && underApi(request)) reply.header("cache-control", "no-store");
    done(null, payload);
  });

  const routes = routeMethods(app);
  app.setNotFoundHandler((request, reply) => {
    // A path some route answers, asked with another method: 405 naming the methods it takes.
    const allowed = routes.allowedOn(request.url);
    if (allowed.length > 0) {
      const message = `${request.method} is not allowed on ${redactUrl(request.url.split("?")[0] ?? "")}; it takes ${allowed.join(", ")}`;
      return reply.status(405).header("allow", allowed.join(", ")).send(errorBody("method_not_allowed", message, { allow: allowed }));
    }
    return reply.status(404).send(errorBody("not_found", `no route ${request.method} ${redactUrl(request.url)}`));
  });

  // A NUL names nothing here (no id, token or path holds one), and PostgreSQL cannot even take
  // it as a parameter: refused before any route looks an id up.
  app.addHook("onRequest", async (request, reply) => {
    if (request.url.includes("%00")) return reply.status(400).send(errorBody("malformed", "the URL may not contain a NUL character (%00)"));
  });

  const health = options.health;
  app.get("/healthz", async (request, reply) => {
    if (!health) return { ok: true };
    try {
      await withTimeout(health(), health_timeout_ms);
      return { ok: true };
    } catch (error) {
      request.log.warn({ err: { message: (error as Error).message } }, "health check: the database did not answer");
      return reply.status(503).send({ ok: false, database: "unavailable" });
    }
  });

  for (const plugin of options.plugins ?? []) await plugin(app);

  if (options.onClose) {
    const onClose = options.onClose;
    app.addHook("onClose", async () => onClose());
  }
  return app;
}

/**
 * The methods the app's routes take, by route path, as they are added (onRoute): for a request no
 * route took, those of the paths it matches. A route path's `:param` matches one path segment and
 * a `*` the rest, as the router reads them.
 */
function routeMethods(app: FastifyInstance): { allowedOn(url: string): string[] } {
  const paths = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  app.addHook("onRoute", (route) => {
    let known = paths.get(route.url);
    if (!known) {
      const source = route.url
        .split("/")
        .map((segment) => (segment.startsWith(":") ? "[^/]+" : segment === "*" ? ".*" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("/");
      known = { pattern: new RegExp(`^${source}$`), methods: new Set() };
      paths.set(route.url, known);
    }
    for (const method of [route.method].flat()) known.methods.add(method);
  });
  return {
    allowedOn(url) {
      // As the router reads it: "%61pi" is "api" (no route path holds an escape of its own).
      const path = unreservedDecoded(url.split("?")[0] ?? "");
      const allowed = new Set<string>();
      for (const { pattern, methods } of paths.values()) if (pattern.test(path)) for (const method of methods) allowed.add(method);
      return [...allowed].sort();
    },
  };
}

/**
 * The request target as a path: a target in absolute form (`POST http://host/mcp`, which an
 * HTTP/1.1 server must take, RFC 9112 section 3.2.2) without its scheme and authority, as the
 * router reads it. Code that reads the target as text (the observer's relay, the log's redaction,
 * the 405 answer) would otherwise take "http:" for its first segment.
 */
export function originForm(url: string): string {
  if (url.startsWith("/")) return url;
  const authority = absolute_form_authority.exec(url);
  if (!authority) return url;
  const rest = url.slice(authority[0].length);
  return rest.startsWith("/") ? rest : `/${rest}`;
}

const absolute_form_authority = /^https?:\/\/[^/?#]*/i;

const api_prefix = "/api/v1";

/** Whether the route (or, for a request no route took, the path as sent) is under /api/v1. */
function underApi(request: FastifyRequest): boolean {
  const path = request.routeOptions.url ?? request.url;
  return path === api_prefix || path.startsWith(`${api_prefix}/`) || path.startsWith(`${api_prefix}?`);
}

/**
 * Whether `request` is answered before its body has arrived, and that body is chunked or declared
 * over `limit`. Node discards an unread body after the answer so that the next request on a
 * kept-alive connection can be read, for as long as the client sends it: a 404, a 401 from an
 * onRequest hook or a GET route given such a body would keep a core draining it for ever. The
 * connection is closed instead, as Fastify closes it after a 413; a body declared within the limit
 * keeps it, since discarding that is bounded (per request: a client may send many). A request whose
 * body has arrived whole (`complete`, whether or not anything read it) leaves nothing on the wire.
 */
function bodyLeftUnbounded(request: IncomingMessage, limit: number): boolean {
  // Only an IncomingMessage off a socket has `complete`; an injected request (light-my-request)
  // has no wire to drain, and leaves it undefined.
  if (request.complete !== false) return false;
  if (request.headers["transfer-encoding"] !== undefined) return true;
  // Node's parser refuses a Content-Length that is not a number; were one to pass, NaN closes.
  return !(Number(request.headers["content-length"] ?? 0) <= limit);
}

/** The body limit of each request's route, for answers that went through onSend (the others have the default). */
const route_limits = new WeakMap<IncomingMessage, number>();

interface ConnectionState {
  /** Answers on the connection not yet finished (pipelined, streaming, or not begun). */
  open: Set<ServerResponse>;
  /** The last request read on it, and its answer. */
  last: IncomingMessage;
  last_answer: ServerResponse;
}

const connections = new WeakMap<Socket, ConnectionState>();

/** Requests read past pipelined_answers_open_max on their connection, which is closed: none is run. */
const over_pipelined = new WeakSet<IncomingMessage>();

/**
 * Closes the connection (closeUnread) once an answer is sent with its body left unbounded: by its
 * route's limit, or the server's default for the answers Fastify's hooks never see (Fastify's 400
 * to a URL it cannot decode and 414 to an over-long path parameter, hijacked replies such as the
 * observer's relay when the upstream answers first). Node's own 417 to an unknown Expect is
 * answered here instead, closing. Also keeps what `answerBegun` reads.
 */
function guardConnections(server: Server, first_request_ms: number): void {
  // Cleared by the first request's head (or the close), not by the socket's first bytes: a
  // "data" listener would take the socket off the parser's fast path for every connection.
  const awaiting_first_request = new WeakMap<Socket, NodeJS.Timeout>();
  server.on("connection", (socket: Socket) => {
    // Each answer in progress listens for its connection's close (whenAnswerOver): up to the cap
    // of pipelined answers, and a few of Node's own, without Node's warning past 10.
    socket.setMaxListeners(pipelined_answers_open_max + 16);
    const timer = setTimeout(() => socket.destroy(), first_request_ms);
    timer.unref();
    awaiting_first_request.set(socket, timer);
    socket.once("close", () => clearTimeout(timer));
  });
  server.prependListener("request", (request: IncomingMessage, response: ServerResponse) => {
    clearTimeout(awaiting_first_request.get(request.socket));
    awaiting_first_request.delete(request.socket);
    const state = connections.get(request.socket) ?? { open: new Set(), last: request, last_answer: response };
    connections.set(request.socket, state);
    state.open.add(response);
    if (state.open.size > pipelined_answers_open_max) {
      over_pipelined.add(request);
      return void request.socket.destroy();
    }
    state.last = request;
    state.last_answer = response;
    response.once("close", () => state.open.delete(response));
    response.once("finish", () => {
      if (bodyLeftUnbounded(request, route_limits.get(request) ?? body_limit_default_bytes)) closeUnread(request.socket);
    });
  });
  // Without a listener Node answers an unknown Expect 417 itself and keeps the connection,
  // discarding the body after it.
  server.on("checkExpectation", (_request: IncomingMessage, response: ServerResponse) => {
    const body = JSON.stringify(errorBody("expectation_failed", "only Expect: 100-continue is supported"));
    response.writeHead(417, { connection: "close", "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
    response.end(body);
  });
}

/**
 * The routes whose answer a client that half-closed its connection still gets: the gate's /mcp
 * (server/mcp.ts), where a money call runs once its request has arrived whatever the client does
 * next, so its answer must reach the client. Elsewhere a client's FIN still ends the connection at
 * once, as by Node's default: it is how the server learns that a client left, which frees what
 * its answer held (an observer's upstream exchange, an evidence page's place), the client being
 * unable to say otherwise until the server writes to it (and not then, behind backpressure).
 */
const half_close_answered_route = /^\/mcp$/;

/**
 * Answers a client that half-closes its connection after a whole request to a route in
 * half_close_answered_route. Node's default (httpAllowHalfOpen false) ended the connection on the
 * client's FIN before the answer was written: the client got 0 bytes, though an order was made
 * and recorded. Node then closes the connection once its last answer is sent (or at once, with
 * none pending); half_closed_ms bounds how long the answers may take to let it.
 */
function answerHalfClosed(app: FastifyInstance, half_closed_ms: number): void {
  // Not in @types/node, but read by Node's HTTP server on each client FIN (lib/_http_server.js).
  (app.server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  const answered = new WeakSet<IncomingMessage>();
  app.addHook("onRequest", async (request) => {
    if (half_close_answered_route.test(request.routeOptions.url ?? "")) answered.add(request.raw);
  });
  app.server.on("connection", (socket: Socket) => {
    socket.once("end", () => {
      if (socket.destroyed) return;
      // An answer for any other route (or a request not yet routed) ends the connection, as before.
      const open = connections.get(socket)?.open ?? new Set<ServerResponse>();
      for (const answer of open) if (!answered.has(answer.req)) return void socket.destroy();
      const timer = setTimeout(() => socket.destroy(), half_closed_ms);
      timer.unref();
      socket.once("close", () => clearTimeout(timer));
    });
  });
}

/** How long a connection closed with its request's body unread lingers for the client to read the answer. */
export const unread_close_linger_ms = 2_000;

/**
 * Closes a connection whose answer is sent while its request's body is still coming: stops
 * reading (nothing more is drained), sends the answer's end (FIN), and destroys the socket once
 * the client closes or unread_close_linger_ms pass. Destroying it at once would reset the
 * connection with the client's bytes unread, and a reset can discard answer bytes the client had
 * not read yet (an upstream's answer relayed by the observer, say, while the upload goes on).
 */
function closeUnread(socket: Socket): void {
  socket.pause();
  socket.end();
  setTimeout(() => socket.destroy(), unread_close_linger_ms).unref();
}

/**
 * Whether an error answer written on `socket` now (a client error, such as the request timeout,
 * cut the request still arriving) could land inside or after another answer: one is being sent
 * (a streaming or pipelined answer), or the request still arriving was answered already (a 404
 * to a body still trickling in). Then the connection is only closed.
 */
function answerBegun(socket: Socket): boolean {
  const state = connections.get(socket);
  if (!state) return false;
  // Any open answer but the cut request's own unstarted one: a 408 written now would be read as
  // an earlier pipelined request's answer, or land inside one being sent.
  for (const answer of state.open) if (answer.headersSent || answer !== state.last_answer || state.last.complete) return true;
  return !state.last.complete && state.last_answer.headersSent;
}

/** Errors the router meets before any route (an undecodable URL, an over-long path segment):
 *  answered in Bursar's error shape, without echoing the path (it may hold a token). */
const framework_errors: Record<string, { status: number; code: string; message: string }> = {
  FST_ERR_BAD_URL: { status: 400, code: "malformed", message: "the URL is not valid (a malformed percent-encoding)" },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, code: "uri_too_long", message: "a path segment is too long" },
};

function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const known = framework_errors[error.code];
  if (known) return void reply.status(known.status).send(errorBody(known.code, known.message));
  reply.status(500).send(errorBody("internal", "internal error"));
}

const client_errors: Record<string, { status: number; code: string; message: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, code: "request_timeout", message: "the request did not arrive in time" },
  HPE_HEADER_OVERFLOW: { status: 431, code: "headers_too_large", message: "the request's headers are larger than the server takes" },
};

/**
 * Answers a request Node could not parse, in Bursar's error shape, and logs only the
 * error's code and message: Fastify logged the whole error, whose `rawPacket` holds the request's
 * bytes as received, headers (an Authorization, an observer token) included.
 */
function clientErrorHandler(this: FastifyInstance, error: Error & { code?: string }, socket: Socket): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const { status, code, message } = client_errors[error.code ?? ""] ?? { status: 400, code: "malformed", message: "the request is not valid HTTP" };
  this.log.trace({ err: { code: error.code, message: error.message } }, "client error");
  const reason = STATUS_CODES[status] ?? "Bad Request";
  const body = JSON.stringify(errorBody(code, message));
  if (socket.writable && !answerBegun(socket)) socket.write(`HTTP/1.1 ${status} ${reason}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\n\r\n${body}`);
  socket.destroy(error);
}

async function withTimeout(work: Promise<void>, timeout_ms: number): Promise<void> {
  if (!(await within(work.then(() => true), timeout_ms))) throw new Error(`no answer within ${timeout_ms} ms`);
}

/**
 * Counts requests from arrival until their response ends or their connection closes, and once
 * the server is closing with none in flight, closes every connection left. Node's close waits
 * for them all, and closes only idle kept-alive ones itself: a connection opened with nothing
 * sent yet, or one still sending a request's headers (a slow client), would hold the close for
 * its headers timeout, past the grace period, though nothing is lost by closing it (a request
 * not yet arrived is not in flight; its client sees the connection close, as after a 503).
 */
/**
 * Calls `done` once, when the answer on `reply` is over: its response closed (or, with `finish`,
 * handed whole to the connection), or its connection closed. The connection's close counts
 * because a pipelined request queued behind another gets no close on its response when the
 * connection closes first (Node never starts that response): counted by its response alone, it
 * stayed in flight for good. The listeners go once it is over, so a kept-alive connection does
 * not gather one per request.
 */
export function whenAnswerOver(reply: FastifyReply, done: () => void, options: { finish?: boolean } = {}): void {
  const response = reply.raw;
  // An injected request (light-my-request) has a stand-in socket that may not emit.
  const given = reply.request?.raw.socket as Socket | null | undefined;
  const socket = typeof given?.once === "function" && typeof given.off === "function" ? given : undefined;
  let over = false;
  const end = (): void => {
    if (over) return;
    over = true;
    response.off("close", end);
    response.off("finish", end);
    socket?.off("close", end);
    done();
  };
  response.once("close", end);
  if (options.finish) response.once("finish", end);
  socket?.once("close", end);
}

function countInFlight(app: FastifyInstance): () => number {
  let in_flight = 0;
  let closing = false;
  const closeLeftConnections = (): void => {
    if (in_flight > 0) return;
    // Fastify runs preClose hooks (the observer's drains its queue) before it closes the
    // listener: a connection cut earlier could be replaced by a new one.
    if (app.server.listening) return void setTimeout(closeLeftConnections, listener_close_poll_ms).unref();
    app.server.closeAllConnections();
  };
  app.addHook("preClose", async () => {
    closing = true;
    setImmediate(closeLeftConnections);
  });
  app.addHook("onRequest", async (_request, reply) => {
    in_flight++;
    whenAnswerOver(reply, () => {
      in_flight--;
      // A connection whose answer was in flight becomes idle only now, and would otherwise hold
      // the close open for its keep-alive timeout (72 s).
      if (closing) {
        setImmediate(() => {
          app.server.closeIdleConnections();
          closeLeftConnections();
        });
      }
    });
  });
  return () => in_flight;
}

/** How often a closing server looks whether Fastify has closed its listener yet. */
const listener_close_poll_ms = 10;

/**
 * Signals that stop the server gracefully. SIGHUP too: Bursar reads its configuration only at
 * start, so there is nothing to reload, and a terminal or session that hangs up must not cut
 * money calls in flight (Node's default for all three ends the process at once, silently).
 */
const shutdown_signals: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];

/** Why the process stops: a signal, or something else (its output closed), with its exit code when nothing is cut. */
export type StopReason = { signal: NodeJS.Signals } | { reason: string; exit_code: number };

/**
 * Stops the process gracefully on SIGINT, SIGTERM or SIGHUP, or when asked (`stop`): stop
 * accepting, finish in-flight requests, close idle connections, then exit 0 (or the stop's own
 * code). Requests still running after the grace period (the one given to buildServer, which
 * `bursar serve` sizes from BURSAR_PROVIDER_TIMEOUT_MS) are abandoned, counted in the log, exit 1.
 * A second signal during the shutdown exits at once with 128 + its number, saying so (the same
 * signal within same_signal_window_ms of the first is that one, delivered twice).
 *
 * Made before the server starts, so a signal during the start is not the default, silent death:
 * the stop waits for `attach` (a start that fails ends the process through its own error).
 * `say` writes a line where no server log is yet (stderr).
 */
/** A signal repeated within this long of the first is the same one delivered twice (see GracefulStop). */
export const same_signal_window_ms = 50;

export class GracefulStop {
  private app: FastifyInstance | undefined;
  private requested: StopReason | undefined;
  private first_signal: { signal: NodeJS.Signals; at_ms: number } | undefined;
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    const at_ms = performance.now();
    const first = this.first_signal;
    if (first === undefined) {
      this.first_signal = { signal, at_ms };
      return this.stop({ signal });
    }
    // The same signal again at once is the same request, delivered twice: coreutils `timeout`
    // (and a supervisor signalling the process and its group) sends it to the process and to its
    // process group. Taken for a second signal, it cut every stop short.
    if (signal === first.signal && at_ms - first.at_ms < same_signal_window_ms) return;
    this.exitNow(signal);
  };

  constructor(private readonly say: (line: string) => void) {
    for (const signal of shutdown_signals) process.on(signal, this.onSignal);
  }

  /** Hands over the started server: a stop asked for during the start begins now. */
  attach(app: FastifyInstance): void {
    this.app = app;
    if (this.requested) this.begin(app, this.requested);
  }

  /** Begins the graceful shutdown, once: later calls (but a second signal) change nothing. */
  stop(why: StopReason): void {
    if (this.requested) return;
    this.requested = why;
    if (this.app) return this.begin(this.app, why);
    this.say(`${stopName(why)} while starting: stopping once started (a second signal exits at once)`);
  }

  /** Stops listening for the signals (the start failed: its error ends the process). */
  dispose(): void {
    for (const signal of shutdown_signals) process.off(signal, this.onSignal);
  }

  private exitNow(signal: NodeJS.Signals): never {
    const in_flight = this.app ? (shutdowns.get(this.app)?.in_flight() ?? null) : null;
    if (this.app) this.app.log.error({ signal, in_flight }, "second signal, exiting now");
    else this.say(`second signal (${signal}) while starting, exiting now`);
    process.exit(signalExitCode(signal));
  }

  private begin(app: FastifyInstance, why: StopReason): void {
    const shutdown = shutdowns.get(app);
    const grace_ms = shutdown?.grace_ms ?? shutdown_grace_ms_default;
    app.log.info({ ...("signal" in why ? { signal: why.signal } : { reason: why.reason }), grace_ms }, "shutting down");
    const timer = setTimeout(() => {
      const abandoned = shutdown?.in_flight() ?? null;
      if (abandoned === 0) app.log.error({ grace_ms }, "shutdown grace period over: closing did not finish");
      else app.log.error({ abandoned, grace_ms }, "shutdown grace period over: abandoning requests in flight");
      process.exit(1);
    }, grace_ms);
    timer.unref();
    app.close().then(
      () => process.exit("signal" in why ? 0 : why.exit_code),
      (error: unknown) => {
        app.log.error({ err: { message: (error as Error).message } }, "shutdown failed");
        process.exit(1);
      },
    );
  }
}

function stopName(why: StopReason): string {
  return "signal" in why ? why.signal : why.reason;
}

/**
 * Calls `failed` once when the server's log destination refuses a line (EPIPE: whatever read
 * stdout has gone). pino then drops every later line without a word, so without this a server
 * would go on with no logs. A server built without a logger has no destination: never called.
 */
export function onLogOutputFailed(app: FastifyInstance, failed: (error: NodeJS.ErrnoException) => void): void {
  const destination = (app.log as unknown as Record<symbol, unknown>)[pino_symbols.streamSym];
  // Off the logging call: the line that failed may be written from inside a request's handling.
  if (destination instanceof EventEmitter) destination.once("error", (error: NodeJS.ErrnoException) => process.nextTick(failed, error));
}
