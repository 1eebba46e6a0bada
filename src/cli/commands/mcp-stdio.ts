// `bursar mcp-stdio`: a stdio↔HTTP bridge, so stdio-only MCP clients (Claude Desktop, IDEs)
// reach a running gate's /mcp. It holds only the agent token and never opens the data directory.

import { AsyncLocalStorage } from "node:async_hooks";
import { setMaxListeners } from "node:events";
import { Transform, type Readable, type TransformCallback, type Writable } from "node:stream";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { mediaTypeEssence } from "@modelcontextprotocol/sdk/shared/mediaType.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { isJSONRPCRequest, isJSONRPCResultResponse, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import { ConfigError } from "../../config.js";
import { deadline } from "../../deadline.js";
import { unkeptPlaces, unreadMessageReason } from "../../ingest/duplicate-keys.js";
import { isPlainObject } from "../../policy/index.js";
import { invalidRequest, isToolCallEnvelope, message_bytes_max, not_utf8, notJsonRpc, parseError, requestId, utf8Text, type JsonRpcError } from "../../server/jsonrpc.js";
import { bearerToken, httpUrl, parseOptions, println, redacted, redaction, UsageError, type CliIo } from "../command.js";

export const gate_url_default = "http://127.0.0.1:8787";
/** Longer than the gate's longest provider timeout (BURSAR_PROVIDER_TIMEOUT_MS ≤ 120 s), so the
 *  gate's own "outcome unknown" answer arrives before the bridge gives up on a money call. */
export const request_timeout_ms = 150_000;
/** Requests forwarded at once; a client that floods the bridge gets JSON-RPC errors, not a queue. */
export const in_flight_max = 64;
/** How long a request answered over SSE waits for its reply once its stream has ended (the SDK
 *  parses a stream's last events after its body has ended): past it, no reply is coming. */
export const reply_after_stream_ms = 100;
/**
 * The SDK's reconnection to SSE streams, off: a stream that ends or breaks without its request's
 * reply is answered at once, and no timer of the SDK's outlives the bridge. Predicting when the
 * SDK resumes a stream (its parser's id and retry rules, a retry shared by the transport, GET
 * streams resumed whatever they carried) left the bridge hung on exit or answering before a reply
 * it then dropped; the gate answers in JSON and never needs it.
 */
const no_reconnection = { maxRetries: 0, initialReconnectionDelay: 1_000, maxReconnectionDelay: 30_000, reconnectionDelayGrowFactor: 1.5 };
/** The SDK's word that a stream ended without a reply and reconnection is off: forward() answers the request. */
const reconnection_off = /^Maximum reconnection attempts \(0\) exceeded/;
/** The client's answers to the gate's own requests forwarded at once, apart from in_flight_max (so
 *  that requests waiting on them never hold them back); one more is dropped, with a line on stderr. */
export const answers_in_flight_max = 64;
/** Abort listeners the HTTP transport's one long-lived signal may hold: each request and each of
 *  the client's answers holds one (fetchWithTimeout's deadline) until its answer is read, and the
 *  GET stream one; twice both bounds leaves room for answers still being read after their request
 *  left the count. Node's default of 10 printed a MaxListenersExceededWarning on stderr, not a
 *  diagnostic line. */
export const transport_signal_listeners_max = 2 * (in_flight_max + answers_in_flight_max);
/** Above the gate's 128 KiB body limit (message_bytes_max), which the bridge checks itself before
 *  sending: a message over it is answered "not sent", since the gate closes the connection on
 *  an oversized body while it is still being sent, and the sender then sees a broken pipe, not
 *  the 413. A line longer still is answered -32600 unread. */
export const stdin_buffer_max_bytes = 4 * 1024 * 1024;
/** JSON-RPC "server error" range: the gate could not be reached or refused the HTTP request. */
export const bridge_error_code = -32_000;
const batch_refusal = "JSON-RPC batches are not supported (MCP 2025-06-18 removed batching): send each message on its own line";

export const mcp_stdio_options = { url: { type: "string" } } as const;

export const help = `usage: bursar mcp-stdio [--url URL]

A stdio MCP server for clients that only speak stdio (Claude Desktop, IDEs). It forwards
every JSON-RPC message to a running gate's /mcp (Streamable HTTP) with
Authorization: Bearer $BURSAR_AGENT_TOKEN, as the MCP SDK reads it (written again as JSON),
and writes the gate's answers to stdout. A reply goes on only for the request it came with (one
for another id, a second one, or one on a stream no request came with, is dropped with a line
on stderr); a request whose answer held no reply to it (an empty 202, a reply to another id, an
SSE stream that ended or broke without it: no stream is resumed) gets the bridge's own error.
A batch (MCP 2025-06-18 has none) or an invalid message with an id gets a -32600 error, and
so does a line over ${stdin_buffer_max_bytes} bytes (with its id when the line starts with it, else
null): its bytes are dropped up to its newline, and the bridge reads on. A message over the
gate's body limit (${message_bytes_max} bytes as JSON) is answered "not sent" (code
${bridge_error_code}) without being sent, and so is a request past ${in_flight_max} in flight
or one read once the bridge is stopping (a second SIGINT/SIGTERM ends it at once). A line
that is not JSON gets a -32700 error with id null (a JSON line refused for a key written
twice or a number JSON.parse would change gets it with its id, when that is read as sent);
a UTF-8 BOM at a line's start is skipped, and a blank line is ignored. A tools/call is
always forwarded, whatever its params hold: the gate decides it.

It holds only the agent token: it never opens the data directory or the database.
stdout carries nothing but MCP messages; diagnostics go to stderr, one line each (control
characters in what they quote are written as JSON escapes, e.g. \\n). It exits 0 when stdin
closes (after in-flight requests are answered) or on SIGINT/SIGTERM, and exits 1 when the
gate refuses the token (401/403). A request the gate answered with an HTTP error is answered
with a JSON-RPC error (code ${bridge_error_code}) whose data.http_status is that status (401 or 403: the
token was refused). An unreachable gate is answered per request with a
JSON-RPC error (code ${bridge_error_code}) naming the URL; the bridge keeps running. A
connection that breaks after a request was sent, or an answer that held no reply to it, is
answered as "may have been carried out": repeat the call with the same idempotency_key,
never a new one.

Options:
  --url URL   the gate's base URL, or its /mcp endpoint (default: BURSAR_URL, else ${gate_url_default});
              a URL with user:password@ is refused (exit 2) without being shown: the bridge
              authenticates with BURSAR_AGENT_TOKEN only; so is one with whitespace around it.
              A ?query is sent as given (a gateway may route by it) and shown as ?… in
              every message (it can carry a key)

Environment:
  BURSAR_AGENT_TOKEN   required: the agent token from \`bursar agent create\`
  BURSAR_URL           the gate's base URL when --url is not given (default ${gate_url_default})

Example client configuration (Claude Desktop's claude_desktop_config.json):
  {"mcpServers": {"bursar": {"command": "bursar", "args": ["mcp-stdio"],
    "env": {"BURSAR_URL": "${gate_url_default}", "BURSAR_AGENT_TOKEN": "bsr_agent_..."}}}}`;

/** The gate's /mcp endpoint from a base URL (or the endpoint itself). */
export function mcpEndpoint(raw: string): URL {
  // A query stays where it is (the path is set apart from it): a gateway in front may route or
  // authenticate by one. It is sent, never printed (see shownEndpoint): it can carry a key.
  const url = httpUrl(raw, "--url/BURSAR_URL", { credentials_in: "BURSAR_AGENT_TOKEN" });
  const path = url.pathname.replace(/\/+$/, "");
  url.pathname = path.endsWith("/mcp") ? path : `${path}/mcp`;
  return url;
}

/**
 * fetch with a limit on the whole exchange, body included, or until the transport's own signal
 * aborts. The limit is let go once the SDK has read the body, cancelled it (a notification's 202)
 * or met its error: the bridge makes a request per message for as long as the agent runs. A GET
 * (the stream the SDK opens for the gate's own messages, open for the whole session) has no
 * limit but the transport's own signal: cut after 150 s, it was never opened again.
 * `onStream` hears of each answer that is an SSE stream, with a promise that settles once its body
 * has ended (read to its end, failed or cancelled): the SDK reads such a body after send()
 * returns, where it has read any other before.
 */
export function fetchWithTimeout(timeout_ms: number, onStream: (ended: Promise<void>) => void = () => undefined): FetchLike {
  return async (url, init) => {
    if (init?.signal) setMaxListeners(transport_signal_listeners_max, init.signal);
    const limit =
      init?.method === "GET"
        ? { signal: init.signal ?? undefined, release: () => undefined }
        : deadline(timeout_ms, `no answer within ${timeout_ms / 1000} s`, init?.signal ?? undefined);
    let response: Response;
    try {
      response = await fetch(url, { ...init, signal: limit.signal });
    } catch (error) {
      limit.release();
      throw error;
    }
    // No body to read (fetch gives none for a 204, 205 or 304): handed on as it came.
    if (response.body === null) {
      limit.release();
      return response;
    }
    let ended = () => undefined as void;
    if (mediaTypeEssence(response.headers.get("content-type") ?? "") === "text/event-stream") onStream(new Promise<void>((resolve) => (ended = resolve)));
    const end = () => {
      limit.release();
      ended();
    };
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (!done) return controller.enqueue(value);
          end();
          controller.close();
        } catch (error) {
          end();
          controller.error(error);
        }
      },
      cancel(reason) {
        end();
        return reader.cancel(reason);
      },
    });
    // A reason phrase fetch decoded past Latin-1 is one a Response cannot be made with: dropped (the SDK reads the body's text).
    const head = { status: response.status, headers: response.headers };
    let relayed: Response;
    try {
      relayed = new Response(body, { ...head, statusText: response.statusText });
    } catch {
      relayed = new Response(body, head);
    }
    // The SDK names a redirect it did not follow relative to the answer's URL.
    Object.defineProperty(relayed, "url", { value: response.url });
    return relayed;
  };
}

/** The gate's `{"error":{code,message}}` body, when the SDK's error message carries one. */
function gateErrorText(message: string): string | undefined {
  // From the first "{" to a last "}" that only whitespace follows. Found by index: the regex
  // /\{.*\}\s*$/s rescanned from every "{", quadratic in a hostile server's error body.
  const first = message.indexOf("{");
  const last = message.lastIndexOf("}");
  if (first < 0 || last < first || message.slice(last + 1).trim() !== "") return undefined;
  const body = message.slice(first, last + 1);
  try {
    const parsed = JSON.parse(body) as { error?: { code?: unknown; message?: unknown } };
    if (typeof parsed.error?.message !== "string") return undefined;
    return `${String(parsed.error.code)}: ${parsed.error.message}`;
  } catch {
    return undefined;
  }
}

interface Failure {
  message: string;
  /** A refused token never heals within this process: answer, then exit. */
  fatal: boolean;
  /** The gate's HTTP status, when it answered with an HTTP error. */
  http_status?: number;
}

/** Connection errors raised before a request could be sent: the gate never saw it. */
const not_sent_codes = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "UND_ERR_CONNECT_TIMEOUT"]);
const may_have_run = "the call may have been carried out: repeat it with the same idempotency_key to learn its outcome, never with a new one";
/** Certificate and TLS failures end the handshake, before any request is written. */
const tls_failure = /^(ERR_TLS_|ERR_SSL_)|CERT|^UNABLE_TO_/;

/** Whether a fetch failure certainly happened before the request reached the gate; unknown ones count as sent. */
function notSent(cause: { code?: string; message?: string } | undefined): boolean {
  if (cause?.message === "bad port") return true; // fetch refuses some ports without connecting
  const code = cause?.code;
  return code !== undefined && (not_sent_codes.has(code) || tls_failure.test(code));
}

/** The endpoint as messages show it: without its query or fragment, which can carry a key. */
export function shownEndpoint(endpoint: URL): string {
  return `${endpoint.origin}${endpoint.pathname}${endpoint.search ? "?…" : ""}`;
}

export function describeFailure(error: unknown, endpoint: URL): Failure {
  const where = `the gate at ${shownEndpoint(endpoint)}`;
  // The SDK's schema refused what came back (`"id": null` on an error, say): the answer arrived.
  if ((error as { name?: unknown }).name === "ZodError") {
    return { message: `${where} answered with a message the MCP SDK does not read as JSON-RPC (an error with "id": null, say); ${may_have_run}`, fatal: false };
  }
  if (error instanceof StreamableHTTPError && typeof error.code === "number" && error.code > 0) {
    const detail = gateErrorText(error.message) ?? error.message;
    return { message: `${where} answered HTTP ${error.code}: ${detail}`, fatal: error.code === 401 || error.code === 403, http_status: error.code };
  }
  // JSON.stringify gave up on the message before any request was made (nested deeper than its
  // stack, or too long for one string): the gate never saw it.
  if (error instanceof RangeError) return { message: `cannot send the message to ${where}: it cannot be written as JSON (${error.message}); it was not sent`, fatal: false };
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  if ((error as Error).name === "TimeoutError") return { message: `${where} did not answer within ${request_timeout_ms} ms; ${may_have_run}`, fatal: false };
  const reason = cause?.code ?? cause?.message ?? (error as Error).message;
  if (cause?.code !== undefined && tls_failure.test(cause.code)) {
    return { message: `cannot reach ${where} over TLS (${reason}): is it an https:// URL for a server that speaks plain HTTP, or one whose certificate is not trusted? It was not sent`, fatal: false };
  }
  if (notSent(cause)) {
    return { message: `cannot reach ${where} (${reason}); is \`bursar serve\` running?`, fatal: false };
  }
  // Sent, or perhaps sent: the connection broke (reset, closed) before the answer arrived.
  return { message: `the connection to ${where} broke before its answer (${reason}); ${may_have_run}`, fatal: false };
}

/** C0 controls, DEL, C1 controls (NEL among them) and U+2028/U+2029: each can end or rewrite a
 *  line on a terminal or in a log collector. */
const line_breaking = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
const short_escapes: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" };

/**
 * `text` on one line: each control character (and U+2028/U+2029) written as its JSON escape
 * (`\n`, `\r`, `\u0085`…). A warning quotes what a client sent (a JSON-RPC member's name in a
 * schema error) and what a server answered; unescaped, a newline in it would start a line of
 * its own, e.g. a forged `bursar mcp-stdio: …` warning.
 */
export function oneLine(text: string): string {
  return text.replace(line_breaking, (char) => short_escapes[char] ?? `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** The bytes of `message` as the HTTP transport sends it (its JSON text); 0 when it has none,
 *  which the send itself then reports. */
function sentBytes(message: JSONRPCMessage): number {
  try {
    return Buffer.byteLength(JSON.stringify(message), "utf8");
  } catch {
    return 0;
  }
}

/**
 * The id of a request by JSON-RPC's own definition (an id and a method), which the bridge must
 * answer when it cannot forward it. Not the SDK's isJSONRPCRequest: that also checks MCP's schema,
 * and fails a tools/call the bridge forwards unchecked (params "x", `_meta.progressToken: null`:
 * see sortLine), whose client then waited for ever on a refusal written for no one.
 */
function requestIdOf(message: JSONRPCMessage): RequestId | undefined {
  return "method" in message ? requestId(message) : undefined;
}

/** The bridge's own error answer; `http_status`, when the gate answered the request with an HTTP error, goes in its data. */
function errorReply(id: RequestId, message: string, http_status?: number): JSONRPCMessage {
  const data = http_status === undefined ? {} : { data: { http_status } };
  return { jsonrpc: "2.0", id, error: { code: bridge_error_code, message, ...data } };
}

/** A line the bridge answers itself: the reply (none for a batch of notifications only) and why. */
interface Refusal {
  reply: JsonRpcError | JsonRpcError[] | null;
  why: string;
}

/** What becomes of a stdin line the SDK's reader would drop without a reply (a client would wait on it forever). */
type Sorted = { refusal: Refusal } | { forward: JSONRPCMessage };

/**
 * The id of a request whose line is refused unread (a key written twice, a number JSON.parse
 * changes) when its id is not among what JSON.parse did not keep as sent, else null: over stdio,
 * unlike over HTTP, an answer with id null is tied to no request, and its client waited for ever.
 */
function idReadAsSent(line: string, parsed: unknown): RequestId | null {
  if (!isPlainObject(parsed) || typeof parsed.method !== "string") return null;
  const id = requestId(parsed);
  if (id === undefined || unkeptPlaces(line, Number.MAX_SAFE_INTEGER).some((place) => place.path === "id")) return null;
  return id;
}

/**
 * How a stdin line that the SDK's reader would drop is handled: a line that is not JSON, that
 * writes a key twice in one object or a number JSON.parse reads as another, is answered -32700
 * (id null, as the gate answers each, but a request's own id when it is read as sent: see
 * idReadAsSent); a batch gets an array with one -32600 per request in it;
 * a tools/call whose params the SDK's schema refuses (a malformed `_meta`, params that are not
 * an object) is forwarded to the gate, whose policy decides every call with evidence (the gate's
 * /mcp takes it: see toolCallRequest); any other object with an id the schema refuses gets
 * -32600 for that id. Undefined for every other line, which goes on to the SDK.
 */
function sortLine(line: string): Sorted | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (error) {
    const why = `the line is not valid JSON: ${(error as Error).message}`;
    return { refusal: { reply: parseError(why), why } };
  }
  // Forwarded, the message would be written again as JSON.parse read it (the last of two keys,
  // a rounded number), which the gate would take where it refuses the line as sent.
  const unread = unreadMessageReason(line, parsed);
  if (unread !== undefined) {
    const why = `the line is refused: ${unread}`;
    return { refusal: { reply: { ...parseError(why), id: idReadAsSent(line, parsed) }, why } };
  }
  if (Array.isArray(parsed)) {
    if (parsed.length === 0) return { refusal: { reply: invalidRequest(null, "an empty batch"), why: "an empty batch" } };
    const ids = parsed.map(requestId).filter((id) => id !== undefined);
    return { refusal: { reply: ids.length === 0 ? null : ids.map((id) => invalidRequest(id, batch_refusal)), why: batch_refusal } };
  }
  if (requestId(parsed) === undefined) {
    // A notification goes on to the SDK's reader. A value that is no message (5, null) or an id
    // that is no id (null, an object) gets -32600 with id null, as the gate's /mcp answers it;
    // the SDK's reader dropped it with only a line on stderr, and the client waited.
    if (isPlainObject(parsed) && !("id" in parsed)) return undefined;
    const unreadable = notJsonRpc(parsed);
    return unreadable ? { refusal: unreadable } : undefined;
  }
  const refused = notJsonRpc(parsed);
  if (refused === undefined) return undefined;
  // Not a JSONRPCMessage by the SDK's schema, which is why it cannot go through the SDK's reader.
  if (isToolCallEnvelope(parsed)) return { forward: parsed as JSONRPCMessage };
  return { refusal: refused };
}

/** A line without it is blank (some clients end a message with an extra newline): it carries no
 *  message, so it gets no reply and no warning. */
const has_content = /\S/;

/** How much of an overlong line's start is searched for its id: enough for the leading
 *  "jsonrpc", "id" and "method" members clients write first, and no more. */
const overlong_id_scan_bytes = 1024;
/** A member at the start of a message whose value is a plain string or integer, e.g. `"id": 7,`. */
const leading_member = /\s*"(jsonrpc|id|method)"\s*:\s*("[^"\\\u0000-\u001f]{0,256}"|-?(?:0|[1-9]\d{0,14}))\s*,/y;

/**
 * The id of a request from the first bytes of its line, when they hold it as a leading member
 * beside "method" (the order MCP clients write), else null. Only a request is answered with its
 * own id: an oversized response to the gate's request must not be answered as if it were one.
 */
export function leadingRequestId(start: string): RequestId | null {
  const opening = /^\s*\{/.exec(start);
  if (!opening) return null;
  const members = new Map<string, unknown>();
  leading_member.lastIndex = opening[0].length;
  for (let match = leading_member.exec(start); match && members.size < 3; match = leading_member.exec(start)) {
    members.set(match[1]!, JSON.parse(match[2]!));
  }
  const request = typeof members.get("method") === "string";
  return request ? (requestId({ id: members.get("id") }) ?? null) : null;
}

/** The refusal for a line longer than stdin_buffer_max_bytes, from its first bytes. */
function overlongLine(start: Buffer): Refusal {
  const why = `a message longer than ${stdin_buffer_max_bytes} bytes (the bridge's line limit); its bytes were discarded`;
  return { reply: invalidRequest(leadingRequestId(start.toString("utf8")), why), why };
}

/**
 * Sorts stdin into lines ahead of the SDK's reader: lines sortLine answers are answered here, the
 * tools/calls it forwards are handed to the bridge directly, blank lines are dropped, the rest
 * pass through byte for byte (less a leading BOM), and a last line without a newline is ended
 * with one so the SDK reads it too. A line longer than stdin_buffer_max_bytes (which would make
 * the SDK's reader fail and close the transport) is answered with -32600 as soon as it passes the
 * limit, and its remaining bytes are dropped up to its newline: memory stays under the limit.
 */
class LineSorter extends Transform {
  /** The start of a line whose newline has not arrived, in the chunks it came in. */
  private pending: Buffer[] = [];
  private pending_bytes = 0;
  /** Inside an overlong line already answered: its bytes are dropped until its newline. */
  private discarding = false;

  constructor(
    private readonly answer: (refusal: Refusal) => void,
    private readonly forward: (message: JSONRPCMessage) => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let rest = chunk;
    for (let end = rest.indexOf(0x0a); end !== -1; end = rest.indexOf(0x0a)) {
      this.collect(rest.subarray(0, end + 1), true);
      rest = rest.subarray(end + 1);
    }
    if (rest.length > 0) this.collect(rest, false);
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.pending_bytes > 0) this.collect(Buffer.from("\n"), true);
    done();
  }

  /** One piece of a line: all of what remains of it when `ends_line`, else its continuation. */
  private collect(piece: Buffer, ends_line: boolean): void {
    if (this.discarding) {
      this.discarding = !ends_line;
      return;
    }
    this.pending.push(piece);
    this.pending_bytes += piece.length;
    if (this.pending_bytes > stdin_buffer_max_bytes) {
      // A total length cuts the copy short: only the line's first bytes are copied, not all of it.
      this.answer(overlongLine(Buffer.concat(this.pending, Math.min(overlong_id_scan_bytes, this.pending_bytes))));
      this.discarding = !ends_line;
    } else if (ends_line) {
      this.sort(this.pending.length === 1 ? piece : Buffer.concat(this.pending, this.pending_bytes));
    } else {
      return;
    }
    this.pending = [];
    this.pending_bytes = 0;
  }

  private sort(line: Buffer): void {
    // A UTF-8 BOM (EF BB BF) at the start of a line, as some Windows tools write, is not part of
    // its JSON (RFC 8259 §8.1): JSON.parse, and so the SDK's reader, failed on it, unanswered.
    const bytes = line[0] === 0xef && line[1] === 0xbb && line[2] === 0xbf ? line.subarray(3) : line;
    const text = utf8Text(bytes);
    if (text === undefined) {
      const why = `the line is not valid JSON: ${not_utf8}`;
      return this.answer({ reply: parseError(why), why });
    }
    if (!has_content.test(text)) return;
    const sorted = sortLine(text);
    if (sorted === undefined) this.push(bytes);
    else if ("forward" in sorted) this.forward(sorted.forward);
    else this.answer(sorted.refusal);
  }
}

interface BridgeOptions {
  endpoint: URL;
  token: string;
  stdin: Readable;
  stdout: Writable;
  stderr: NodeJS.WritableStream;
}

/**
 * Whether a response's id answers a request's id as the MCP SDK's client matches them: the same
 * id, or, for its numeric ids, a string the client reads as that number (Number(id): a gateway
 * that writes `"1"` for 1 answers request 1).
 */
function answersId(reply: RequestId, request: RequestId): boolean {
  return reply === request || (typeof reply === "string" && typeof request === "number" && Number(reply) === request);
}

/**
 * One forwarded message's exchange with the gate. The SDK's send() makes its fetches, and hands
 * on the answers they carry, within forward()'s async context, so the answers are tied to the
 * request they came with, never matched by id alone.
 */
class Exchange {
  /** Set once the request has its one answer: the gate's reply, or the bridge's own error. */
  answered = false;
  /** Settles when `answered` is set. */
  readonly replied: Promise<void>;
  /** The ends of the SSE streams its send opened. */
  readonly streams: Array<Promise<void>> = [];
  private settle: () => void = () => undefined;

  constructor(
    /** The forwarded request's id; undefined for a notification or the client's response. */
    readonly request: RequestId | undefined,
    readonly initialize: boolean,
  ) {
    this.replied = new Promise<void>((resolve) => (this.settle = resolve));
  }

  /** Takes the request's one answer; false when it has had one. */
  take(): boolean {
    if (this.answered) return false;
    this.answered = true;
    this.settle();
    return true;
  }
}

/** Part of a query percent-decoded (and `+` read as a space), or as it is when it does not decode. */
function decodedQueryPart(part: string): string {
  try {
    return decodeURIComponent(part.replaceAll("+", " "));
  } catch {
    return part;
  }
}

/** One bridge process: stdio on one side, the gate's /mcp on the other. */
class Bridge {
  private readonly stdio: StdioServerTransport;
  /** stdin after the LineSorter: it ends once its last line has reached the SDK's reader. */
  private readonly sorted: LineSorter;
  private readonly http: StreamableHTTPClientTransport;
  private readonly in_flight = new Set<Promise<void>>();
  /** Of those, the requests and notifications (in_flight_max bounds them), and the client's answers
   *  to the gate's requests (answers_in_flight_max), counted apart so that neither holds back the other. */
  private readonly counted = { requests: 0, answers: 0 };
  /** The exchange a fetch, and each answer the SDK hands on, belongs to. */
  private readonly exchange = new AsyncLocalStorage<Exchange>();
  /** Errors the SDK already passed to onerror before throwing them into forward(). */
  private readonly reported = new WeakSet<object>();
  /** The query as messages may quote it after its `?` (as sent, and decoded), and what redacted()
   *  takes out wherever it stands: the token and the query's parameter values. */
  private readonly query_forms: string[];
  private readonly secrets: string[];
  private finishing = false;
  /** A refused token fails the run even when stdin closed first (a piped client). */
  private token_refused = false;
  private resolve: (code: number) => void = () => undefined;
  private readonly onSignal = () => void this.finish(0);

  constructor(private readonly options: BridgeOptions) {
    const query = options.endpoint.search;
    const values = query
      .slice(1)
      .split("&")
      .filter((part) => part.includes("="))
      .map((part) => part.slice(part.indexOf("=") + 1));
    this.query_forms = query.length > 1 ? [...new Set([query, `?${decodedQueryPart(query.slice(1))}`])] : [];
    this.secrets = [options.token, ...values, ...values.map(decodedQueryPart)];
    this.sorted = options.stdin.pipe(
      new LineSorter(
        (refusal) => this.refuse(refusal),
        (message) => this.accept(message),
      ),
    );
    this.stdio = new StdioServerTransport(this.sorted, options.stdout, { maxBufferSize: stdin_buffer_max_bytes });
    this.http = new StreamableHTTPClientTransport(options.endpoint, {
      requestInit: { headers: { authorization: `Bearer ${options.token}` } },
      reconnectionOptions: no_reconnection,
      fetch: fetchWithTimeout(request_timeout_ms, (ended) => this.exchange.getStore()?.streams.push(ended)),
    });
  }

  /** Runs until stdin closes, a signal arrives, or the gate refuses the token. */
  async run(): Promise<number> {
    const done = new Promise<number>((resolve) => (this.resolve = resolve));
    this.stdio.onmessage = (message) => this.accept(message);
    this.stdio.onerror = (error) => this.warn(`ignoring unreadable input: ${error.message}`);
    // The transport closes itself only on a fault (e.g. an overlong line); finish() closes it otherwise.
    this.stdio.onclose = () => void this.finish(1);
    this.http.onmessage = (message) => this.answer(message);
    this.http.onerror = (error) => {
      // The SDK reports a failed GET twice (once as it fails, once as send() catches it again).
      if (this.reported.has(error)) return;
      this.reported.add(error);
      // finish() closing the transport aborts what it still has open, which is no call: finish()
      // waits for the forwarded ones first. Only the GET the SDK opens after notifications/initialized
      // can be cut so, and it carries nothing to repeat. (The SDK wraps a stream's error in its own.)
      if (this.finishing && (error.name === "AbortError" || /\bAbortError\b/.test(error.message))) return;
      if (reconnection_off.test(error.message)) return;
      const exchange = this.exchange.getStore();
      // A stream broken after its request had its answer: nothing is in doubt.
      if (exchange?.answered) return;
      // A stream no request of the client's came with (the GET the SDK opens for the gate's own messages).
      if (exchange !== undefined && exchange.request === undefined) return this.warn(`a stream of the gate's own messages at ${shownEndpoint(this.options.endpoint)} ended (${error.message}); no request was on it`);
      this.warn(describeFailure(error, this.options.endpoint).message);
    };
    this.sorted.once("end", () => void this.finish(0));
    // A read error (the client's end of a socket reset, EIO) ends input like EOF does: pipe()
    // does not pass it on, and unheard it would end the process with in-flight answers lost.
    this.options.stdin.on("error", (error: Error) => {
      this.warn(`stdin failed (${error.message}); answering what was sent, then stopping`);
      this.sorted.end();
    });
    this.options.stdout.on("error", (error: Error) => {
      this.warn(`stdout closed (${error.message})`);
      void this.finish(0);
    });
    process.once("SIGINT", this.onSignal);
    process.once("SIGTERM", this.onSignal);
    await this.http.start();
    await this.stdio.start();
    return done;
  }

  /** Answers a line the SDK would drop (a batch of notifications only gets no answer). */
  private refuse(refusal: Refusal): void {
    this.warn(`refused a message: ${refusal.why}`);
    if (refusal.reply !== null) this.options.stdout.write(`${JSON.stringify(refusal.reply)}\n`);
  }

  /** One warning is one stderr line, whatever the text it quotes holds (see oneLine). */
  private warn(line: string): void {
    println(this.options.stderr, `bursar mcp-stdio: ${oneLine(this.redacted(line))}`);
  }

  /**
   * Error texts from fetch may quote the Authorization header, and a gate's may quote the URL's
   * query (its 404 names the path it was sent, `?` and all, and a gateway may name a key it
   * refuses): neither the token, nor the query where it stands after `?`, nor a parameter's value
   * of redacted_token_chars_min characters or more anywhere leaves the bridge. (A shorter value,
   * or a query without `=`, is taken out only after `?`: taken out anywhere, `?127.0.0.1` took the
   * host out of every message.)
   */
  private redacted(text: string): string {
    let shown = text;
    for (const form of this.query_forms) shown = shown.split(form).join(`?${redaction}`);
    return redacted(shown, this.secrets);
  }

  /** Writes the bridge's own error answer to the exchange's request, unless it has had one. */
  private async refuseRequest(exchange: Exchange, message: string, http_status?: number): Promise<void> {
    if (exchange.request === undefined || !exchange.take()) return;
    await this.stdio.send(errorReply(exchange.request, this.redacted(message), http_status)).catch(() => undefined);
  }

  private accept(message: JSONRPCMessage): void {
    const id = requestIdOf(message);
    // The client's answer to a request of the gate's: the gate may wait on it before it replies to
    // a request of the client's, so it has slots of its own, and is sent while the bridge stops for
    // as long as a request of the client's is still in flight.
    const kind = "method" in message ? "requests" : "answers";
    const why = this.notForwarded(kind);
    if (why !== undefined) {
      if (id === undefined) return this.warn(`dropped a ${kind === "requests" ? "notification" : "response"}: ${why}`);
      this.warn(`refused a message: ${why}`);
      void this.stdio.send(errorReply(id, why)).catch(() => undefined);
      return;
    }
    this.counted[kind]++;
    const pending = this.forward(message).finally(() => {
      this.in_flight.delete(pending);
      this.counted[kind]--;
    });
    this.in_flight.add(pending);
  }

  /** Why a message of this kind is not forwarded now (the bridge is stopping, or its slots are full); undefined when it is. */
  private notForwarded(kind: "requests" | "answers"): string | undefined {
    if (kind === "requests" && this.finishing) return "the bridge is stopping; it was not sent (nothing was carried out)";
    if (kind === "answers" && this.finishing && this.counted.requests === 0) return "the bridge is stopping, and no request is waiting on it; it was not sent";
    const [max, what] = kind === "requests" ? [in_flight_max, "requests"] : [answers_in_flight_max, "answers to the gate's requests"];
    if (this.counted[kind] < max) return undefined;
    return `more than ${max} ${what} in flight; it was not sent (nothing was carried out): send it again once an answer arrives`;
  }

  /** Forwards one message; a request is in flight until it has its one answer, or its answer is over. */
  private async forward(message: JSONRPCMessage): Promise<void> {
    const exchange = new Exchange(requestIdOf(message), isJSONRPCRequest(message) && message.method === "initialize");
    const bytes = sentBytes(message);
    if (bytes > message_bytes_max) {
      const why = `a message of ${bytes} bytes is over the gate's limit of ${message_bytes_max} bytes; it was not sent (nothing was carried out)`;
      this.warn(why);
      await this.refuseRequest(exchange, why);
      return;
    }
    try {
      await this.exchange.run(exchange, () => this.http.send(message));
    } catch (error) {
      const failure = describeFailure(error, this.options.endpoint);
      if (!this.reported.has(error as object)) this.warn(failure.message);
      await this.refuseRequest(exchange, failure.message, failure.http_status);
      if (failure.fatal) {
        this.token_refused = true;
        void this.finish(1);
      }
      return;
    }
    if (exchange.request === undefined || exchange.answered) return;
    // An SSE answer is read after send() returns: its reply may still be on the way (a client that
    // closed stdin meanwhile gets it too), until the stream ends and its last events are parsed.
    if (exchange.streams.length > 0) {
      await Promise.race([exchange.replied, Promise.all(exchange.streams)]);
      let timer: NodeJS.Timeout | undefined;
      if (!exchange.answered) await Promise.race([exchange.replied, new Promise<void>((resolve) => (timer = setTimeout(resolve, reply_after_stream_ms)))]);
      clearTimeout(timer);
    }
    // Any other answer was read whole before send() returned: an empty 202, or a reply to another id.
    const what = exchange.streams.length > 0 ? "ended without a reply to this request" : "held no reply to this request";
    await this.refuseRequest(exchange, `the gate's answer at ${shownEndpoint(this.options.endpoint)} ${what}; ${may_have_run}`);
  }

  private answer(message: JSONRPCMessage): void {
    const exchange = this.exchange.getStore();
    if ("method" in message || exchange === undefined) return void this.stdio.send(message);
    const id = requestId(message);
    // A response on a stream no request came with (the GET the SDK opens for the gate's own
    // messages, which MCP gives none) answers nothing.
    if (exchange.request === undefined) return this.warn(`dropped an answer for id ${JSON.stringify(id ?? null)}: it came on a stream no request came with`);
    // An error without an id (one the gate could not tie to a request) in a request's own answer is that request's.
    if (id === undefined && "error" in message && exchange.take()) return void this.stdio.send({ ...message, id: exchange.request } as JSONRPCMessage);
    // On a request's own answer, a reply to another id, or a second reply, answers nothing.
    if (id === undefined || !answersId(id, exchange.request) || !exchange.take()) {
      const why = exchange.answered ? `the request it came with (id ${JSON.stringify(exchange.request)}) had its answer` : `it came with request ${JSON.stringify(exchange.request)}`;
      this.warn(`dropped an answer for id ${JSON.stringify(id ?? null)}: ${why}`);
      return;
    }
    // The gate is stateless (no session id), but later requests should name the negotiated version.
    const version = exchange.initialize && isJSONRPCResultResponse(message) ? (message.result as { protocolVersion?: unknown }).protocolVersion : undefined;
    if (typeof version === "string") this.http.setProtocolVersion(version);
    void this.stdio.send(message);
  }

  private async finish(code: number): Promise<void> {
    if (this.finishing) return;
    this.finishing = true;
    process.off("SIGINT", this.onSignal);
    process.off("SIGTERM", this.onSignal);
    // Answer what was already sent before closing: a piped client may close stdin at once. The
    // client's answers to the gate's requests, forwarded meanwhile, are waited for too.
    while (this.in_flight.size > 0) await Promise.allSettled([...this.in_flight]);
    await this.http.close();
    await this.stdio.close();
    this.options.stdin.destroy();
    this.resolve(this.token_refused ? 1 : code);
  }
}

export function bridge(options: BridgeOptions): Promise<number> {
  return new Bridge(options).run();
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseOptions(argv, mcp_stdio_options);
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const token = io.env.BURSAR_AGENT_TOKEN;
  if (!token) {
    throw new ConfigError("BURSAR_AGENT_TOKEN is not set: set it to an agent token from `bursar agent create` (the bridge holds nothing else)");
  }
  bearerToken(token, "BURSAR_AGENT_TOKEN", "agent token");
  const endpoint = mcpEndpoint(values.url ?? (io.env.BURSAR_URL || gate_url_default));
  // The bridge owns this process's stdin; stdout is the protocol channel and nothing else.
  return bridge({ endpoint, token, stdin: process.stdin, stdout: io.stdout as Writable, stderr: io.stderr });
}
