// The streaming relay: request and response bodies pass through chunk by chunk, untouched,
// with their status, MCP session and resumption headers; a tap beside the stream reads the
// JSON-RPC messages (JSON or SSE) after each chunk is already on its way.

import { request as httpRequest, STATUS_CODES, validateHeaderName, validateHeaderValue, type Agent, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { request as httpsRequest } from "node:https";
import { mediaTypeEssence } from "@modelcontextprotocol/sdk/shared/mediaType.js";
import { performance } from "node:perf_hooks";
import type { Clock } from "../clock.js";
import type { ObserverSource } from "../sources/store.js";
import { call_overhead_bytes, callEvidence, resumable_event_id_chars_max, heldArguments, heldBytes, heldId, repeatedRequestIds, responseKeys, responses, toolCalls, type Correlator, type Outcome, type PendingCall } from "./calls.js";
import { firstDuplicateKeyPath } from "../ingest/duplicate-keys.js";
import { ToolCallCounter } from "./count.js";
import type { Recorder } from "./recorder.js";
import { detached, SseReader, type HeldBudget } from "./sse.js";

export const observer_token_header = "x-bursar-observer-token";
/** Bodies larger than this are still relayed in full, but not parsed: a request's tools/calls are only counted. */
export const observed_body_bytes_max = 4_194_304;
/** Bytes the body taps of all open exchanges hold at once: a body that would pass it is read as one over observed_body_bytes_max. */
export const observed_bytes_held_max = 64 * 1_048_576;
/** Of that, what each source's exchanges are sure of: one source holding more leaves this much free for the others. */
export const observed_bytes_held_per_source_max = 16 * 1_048_576;
/** tools/call requests recorded from one HTTP request (a JSON-RPC batch); the rest go in the gap. */
export const observed_calls_per_request_max = 100;
/** The SSE event ids of a stream kept for a GET that resumes it: a client resumes from the last
 *  it got, one of the last few relayed (the rest may still be on their way when a stream is cut). */
export const event_ids_kept_max = 8;

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) are the connection's own; the token is Bursar's. The
 * framing is set from the parsed request (framingHeaders), so a Connection header that lists
 * Content-Length cannot take it off a body that is still forwarded.
 */
// Proxy-Authorization is a credential for the proxy (here Bursar, which takes none), never for the upstream.
const request_headers_dropped = new Set(["host", "content-length", "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "transfer-encoding", "upgrade", observer_token_header]);
/** A request not chunked drops its Trailer header too: no trailer fields can follow it. */
const unchunked_request_headers_dropped = new Set([...request_headers_dropped, "trailer"]);
/** Trailer is not hop-by-hop (RFC 9110 §6.6.2): it announces the trailer fields relayed after the body. */
const response_headers_dropped = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]);
/** Dropped from a message no trailer fields can follow (one not chunked): Node refuses to write it there. */
const trailer_header = new Set(["trailer"]);

/**
 * The bytes all body taps hold, one budget shared by every exchange (stalled uploads would
 * otherwise hold 4 MiB each). Past observed_bytes_held_per_source_max of its own, a source's
 * exchanges take only what leaves that much free for the others: stalled uploads through one
 * source cannot leave another source's calls unread, while one busy source alone still has
 * most of the budget.
 */
export class HeldBytes {
  bytes = 0;
  private readonly by_source = new Map<string, number>();

  /** Takes `bytes` when they fit under observed_bytes_held_max (and, for a source, beside the others' reserve). */
  take(bytes: number, source_id?: string): boolean {
    if (this.bytes + bytes > observed_bytes_held_max) return false;
    if (source_id !== undefined) {
      const held = (this.by_source.get(source_id) ?? 0) + bytes;
      const leaves_reserve = this.bytes + bytes <= observed_bytes_held_max - observed_bytes_held_per_source_max;
      if (held > observed_bytes_held_per_source_max && !leaves_reserve) return false;
      this.by_source.set(source_id, held);
    }
    this.bytes += bytes;
    return true;
  }

  give(bytes: number, source_id?: string): void {
    this.bytes -= bytes;
    if (source_id === undefined) return;
    const held = (this.by_source.get(source_id) ?? 0) - bytes;
    if (held > 0) this.by_source.set(source_id, held);
    else this.by_source.delete(source_id);
  }

  /** What a source's exchanges hold of the budget. */
  heldBy(source_id: string): number {
    return this.by_source.get(source_id) ?? 0;
  }

  /** The budget as one source's exchanges draw on it. */
  forSource(source_id: string): HeldBudget {
    return { take: (bytes) => this.take(bytes, source_id), give: (bytes) => this.give(bytes, source_id) };
  }
}

export interface RelayContext {
  clock: Clock;
  held: HeldBytes;
  correlator: Correlator;
  recorder: Recorder;
  agents: { http: Agent; https: Agent };
  /** Open exchanges (what cuts each) and the token that opened them: cut when the server closes,
   *  or when their token no longer opens its source (GET streams never end by themselves). */
  active: Map<() => void, string>;
  /** Connections that carried observer traffic: cut on close, so a gateway's kept-alive socket cannot hold shutdown open. */
  sockets: Set<Socket>;
}

/** The raw header list minus the dropped names and any the Connection header lists. */
function keptHeaders(raw: readonly string[], dropped: ReadonlySet<string>): string[] {
  const kept: string[] = [];
  // Names the Connection header lists that are not dropped anyway (usually none: "keep-alive").
  let listed: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name === "connection") {
      for (const token of raw[i + 1]!.split(",")) {
        const listed_name = token.trim().toLowerCase();
        if (!dropped.has(listed_name)) (listed ??= new Set()).add(listed_name);
      }
    }
    if (!dropped.has(name)) kept.push(raw[i]!, raw[i + 1]!);
  }
  if (listed === undefined) return kept;
  const without: string[] = [];
  for (let i = 0; i < kept.length; i += 2) if (!listed.has(kept[i]!.toLowerCase())) without.push(kept[i]!, kept[i + 1]!);
  return without;
}

/**
 * The upstream request's framing, as Node's parser read the client's: its Transfer-Encoding (the
 * coding list as it came: Node takes off only the final chunked, so a gzip before it is still on
 * the bytes, and Node's client chunks them again), else its Content-Length. Node frames a GET,
 * DELETE or OPTIONS body only when told to: sent bare on a kept-alive upstream socket, its bytes
 * would be read as requests of their own.
 */
function framingHeaders(headers: IncomingHttpHeaders): string[] {
  const codings = headers["transfer-encoding"];
  if (codings !== undefined) return ["transfer-encoding", codings];
  const length = headers["content-length"];
  return length === undefined ? [] : ["content-length", length];
}

/** http.request options for an upstream URL (what urlToHttpOptions gives, without credentials: upstream URLs have none). */
interface TargetOptions {
  protocol: string;
  hostname: string;
  port?: number;
  path: string;
}

/** Observed sources are cached, and with them their URL objects (never changed once made): options are computed once per URL. */
const target_options = new WeakMap<URL, TargetOptions>();

function targetOptions(target: URL): TargetOptions {
  let options = target_options.get(target);
  if (!options) {
    const hostname = target.hostname.startsWith("[") ? target.hostname.slice(1, -1) : target.hostname;
    options = { protocol: target.protocol, hostname, path: `${target.pathname}${target.search}`, ...(target.port === "" ? {} : { port: Number(target.port) }) };
    target_options.set(target, options);
  }
  return options;
}

/**
 * How a body is labelled: "plain" UTF-8 JSON (a leading BOM allowed), compressed ("encoded":
 * servers behind express.json inflate gzip, deflate and br), or in another charset ("charset").
 * A response so labelled is not read. A request is read as UTF-8 JSON whatever its label, as the
 * SDK's transport reads it (it ignores both the charset and any Content-Encoding): the label
 * only says how its calls are counted when its bytes are not UTF-8 JSON (BodyTap).
 */
type BodyForm = "plain" | "encoded" | "charset";

const charset_parameter = /;\s*charset\s*=\s*"?([^";\s]*)/i;

/** The transfer codings other than chunked (gzip, say) still on the body's bytes, in order. */
function transferCodings(headers: IncomingHttpHeaders): string[] {
  return (headers["transfer-encoding"] ?? "").split(",").map((coding) => coding.trim()).filter((coding) => !["", "chunked"].includes(coding.toLowerCase()));
}

/** A body's label by its Content-Encoding and transfer codings, and a request's by its charset too (the SDK's client reads JSON as UTF-8, whatever its charset). */
function bodyForm(headers: IncomingHttpHeaders, is_request: boolean): BodyForm {
  const encoding = headers["content-encoding"]?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== "" && encoding !== "identity") return "encoded";
  if (transferCodings(headers).length > 0) return "encoded";
  if (!is_request) return "plain";
  const charset = charset_parameter.exec(headers["content-type"] ?? "")?.[1]?.toLowerCase();
  return charset === undefined || charset === "utf-8" || charset === "utf8" ? "plain" : "charset";
}

/** JSON.parse of UTF-8 bytes, after a leading BOM (which servers' body parsers strip), with the
 *  text it read; undefined when they are not JSON. */
function parseJson(body: Buffer): { value: unknown; text: string } | undefined {
  const text = (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? body.subarray(3) : body).toString("utf8");
  try {
    return { value: JSON.parse(text) as unknown, text };
  } catch {
    return undefined;
  }
}

/**
 * Collects a body up to the inspection limit: a response's only when plain, a request's whatever
 * its label (a client could otherwise keep its calls out of the evidence by labelling a body the
 * server reads as UTF-8 JSON anyway). A request body the tap cannot parse has its tools/calls
 * counted instead: one past the limit as its bytes stream past (scanned once, kept nowhere), one
 * that is not UTF-8 JSON once it has arrived.
 */
class BodyTap {
  private chunks: Buffer[] = [];
  /** What `chunks` hold, taken from the shared budget (HeldBytes, as the source draws on it). */
  private held_bytes = 0;
  bytes = 0;
  overflowed = false;
  /** Present once a request body is known not to be parsed. */
  counter: ToolCallCounter | null = null;
  /** A request body's first key written twice in one object (its path), once parsed: JSON.parse
   *  kept the last, and so does the evidence, but the server may have read the first. */
  written_twice: string | undefined;

  constructor(
    private readonly is_request: boolean,
    readonly form: BodyForm,
    private readonly held: HeldBudget,
  ) {}

  /** Whether the body is read at all: a request always, a response only when plain. */
  private get readable(): boolean {
    return this.is_request || this.form === "plain";
  }

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (!this.readable || this.overflowed) return this.counter?.push(chunk);
    if (this.bytes <= observed_body_bytes_max && this.held.take(chunk.length)) {
      this.held_bytes += chunk.length;
      return void this.chunks.push(chunk);
    }
    this.overflowed = true;
    if (this.is_request) this.countHeld(chunk);
    this.release();
  }

  /** Lets the kept bytes go, back to the shared budget. */
  release(): void {
    this.held.give(this.held_bytes);
    this.held_bytes = 0;
    this.chunks = [];
  }

  private countHeld(last?: Buffer): void {
    this.counter = new ToolCallCounter();
    for (const kept of this.chunks) this.counter.push(kept);
    if (last) this.counter.push(last);
  }

  /** The body parsed, or undefined; read once: the tap then lets its bytes go (an exchange can stay open long after). */
  json(): unknown {
    if (!this.readable || this.overflowed || this.bytes === 0) return undefined;
    const parsed = parseJson(this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks));
    if (parsed === undefined && this.is_request) this.countHeld();
    if (parsed !== undefined && this.is_request) {
      this.written_twice = firstDuplicateKeyPath(parsed.text, parsed.value);
      // Which of its messages are tools/calls is then up to the reader ("method" written twice):
      // they are counted as written too, for the calls a server reading the first may have run.
      if (this.written_twice !== undefined) this.countHeld();
    }
    this.release();
    return parsed?.value;
  }

  /**
   * The tools/calls of a request body that was not parsed (call after json()): as counted, or, for
   * one labelled compressed or in another charset, at least one when there are any bytes (the
   * server may decode what the scan cannot count: compressed bytes, or a charset such as UTF-16,
   * where JSON's own characters are not single bytes).
   */
  unparsedCalls(): number {
    if (this.form === "plain") return this.counter?.calls ?? 0;
    if (this.bytes === 0) return 0;
    return Math.max(1, this.counter?.calls ?? 0);
  }
}

/** One proxied HTTP exchange and what the tap learned from it. */
class Exchange {
  readonly session: string;
  readonly number: number;
  readonly started_at: Date;
  readonly started_ms = performance.now();
  /** The keys (idKey) of the tools/call ids this request carried (POST only). */
  readonly calls: string[] = [];
  /** Ended from this side (the gateway went away, or Bursar cut the exchange) rather than by the upstream. */
  cancelled = false;
  /** Whether the request has ended and its calls are known: an upstream may answer before. */
  calls_known = false;
  /** What the response's end left to do until the calls are known. */
  private deferred: (() => void) | null = null;
  /** A GET's Last-Event-ID: it resumes the stream that carried that event. */
  private readonly resumed_from: string | undefined;
  /** The exchange whose stream that was (Correlator.resumableFrom), once known. */
  private resumes: number | undefined;
  /** The last SSE event ids this exchange's stream carried, for a GET that resumes it. */
  private readonly event_ids: string[] = [];

  constructor(
    private readonly context: RelayContext,
    readonly source: ObserverSource,
    readonly request: IncomingMessage,
  ) {
    const session = request.headers["mcp-session-id"];
    this.session = typeof session === "string" ? session : "";
    this.number = context.correlator.nextExchange();
    this.started_at = context.clock();
    const last_event_id = request.headers["last-event-id"];
    this.resumed_from = request.method === "GET" && typeof last_event_id === "string" ? last_event_id : undefined;
  }

  /**
   * The exchange whose calls this exchange's stream answers when resumed from one of its events:
   * itself, for a request with calls; for a GET resuming a stream, that stream's, looked up until
   * found (the stream it resumes may still be open to Bursar: a connection its client gave up on
   * without closing it). Undefined for a stream that carries no calls' answers.
   */
  private streamOf(): number | undefined {
    if (this.request.method !== "GET") return this.calls.length > 0 ? this.number : undefined;
    if (this.resumed_from === undefined) return undefined;
    this.resumes ??= this.context.correlator.resumedExchange(this.source.source_id, this.session, this.resumed_from);
    return this.resumes;
  }

  /** An SSE event id on this exchange's stream: a GET may resume the stream from it, at once. */
  sawEventId(id: string): void {
    if (this.session === "" || id.length > resumable_event_id_chars_max) return;
    const previous = this.event_ids.at(-1);
    const kept = detached(id);
    this.event_ids.push(kept);
    if (this.event_ids.length > event_ids_kept_max) this.event_ids.shift();
    const stream = this.streamOf();
    if (stream !== undefined) this.context.correlator.resumableFrom(this.source.source_id, this.session, [kept], stream, previous);
  }

  /** Runs `step` once the request's calls are known: now, or when the request ends. */
  whenRegistered(step: () => void): void {
    if (this.calls_known) return step();
    this.deferred = step;
  }

  /** The request closed: before its end, none of its calls can be read, and what waited for them runs now. */
  requestClosed(): void {
    if (!this.calls_known) this.registerCalls(null);
  }

  registerCalls(tap: BodyTap | null): void {
    this.readCalls(tap);
    this.calls_known = true;
    this.deferred?.();
    this.deferred = null;
  }

  private readCalls(tap: BodyTap | null): void {
    if (!tap) return;
    const parsed = tap.json();
    if (parsed === undefined) {
      // The server may well read what the tap cannot (it inflates, decodes, or parses past the
      // limit): the calls are counted, never dropped without a trace.
      const calls = tap.unparsedCalls();
      if (calls > 0) this.context.recorder.unrecorded(calls, tap.overflowed ? "too_large" : "unparsed", this.source.source_id);
      return;
    }
    const calls = toolCalls(parsed);
    // More written than parsed: a server reading the first of two equal keys ran calls that
    // JSON.parse does not see ({"method":"tools/call",…,"method":"ping"}). Counted in the gap.
    const written = tap.written_twice === undefined ? 0 : (tap.counter?.calls ?? 0);
    if (written > calls.length) this.context.recorder.unrecorded(written - calls.length, "keys_written_twice", this.source.source_id);
    // A batch of tiny calls would otherwise write an entry per call, filling the queue all
    // sources share: past the limit, calls are counted in the gap instead.
    const kept = calls.slice(0, observed_calls_per_request_max);
    if (kept.length < calls.length) this.context.recorder.unrecorded(calls.length - kept.length, "too_large", this.source.source_id);
    const repeated = repeatedRequestIds(parsed);
    // The calls' arguments are parts of the body: each kept call is charged an equal share of its
    // bytes, or what it holds (its args as canonical text, never parsed) when that is more.
    const share_bytes = Math.ceil(tap.bytes / Math.max(1, kept.length));
    const written_twice = tap.written_twice === undefined ? {} : { written_twice: tap.written_twice };
    for (const call of kept) {
      const held = { id: heldId(call.id), ...heldArguments(this.source, call.tool, call.args, this.started_at), ...written_twice };
      const pending: PendingCall = {
        source: this.source,
        session: this.session,
        exchange: this.number,
        ...held,
        started_at: this.started_at,
        started_ms: this.started_ms,
        bytes: call_overhead_bytes + Buffer.byteLength(this.session) + Math.max(share_bytes, heldBytes(held)),
      };
      // Another request message of this body has its id: no response can be told to be its own.
      // Nor is an earlier request's call of the session with this id given a resumed GET
      // stream's response that may be its (the id is ambiguous there).
      if (repeated.has(pending.id.key)) {
        this.record(pending, { type: "unattributed", reason: "duplicate_id" }, "none");
        this.context.correlator.repeatedInSession(this.source.source_id, this.session, pending.id.key);
        continue;
      }
      this.context.correlator.add(pending);
      this.calls.push(pending.id.key);
    }
  }

  /**
   * Matches JSON-RPC responses to pending calls and queues their evidence. A JSON body or a
   * POST's SSE stream answers the calls of its own request; a GET stream (a resumed POST
   * stream, or the session's standalone stream) answers calls of its session. `status` is the
   * HTTP status the responses came in. False when the MCP SDK's client would refuse the body or
   * event whole (see responses): nothing in it answers a call.
   */
  answer(parsed: unknown, transport: string, status: number): boolean {
    const correlator = this.context.correlator;
    const on_get = this.request.method === "GET";
    const found = responses(parsed, status, transport === "json");
    if (found === undefined) return false;
    for (const { id, outcome } of found) {
      // Its own id's call first, then the one the MCP SDK's client would give it (responseKeys).
      for (const key of responseKeys(id)) if (this.answerWith(key, outcome, transport, on_get)) break;
    }
    return true;
  }

  /** Records `outcome` for the call (or calls) a response with this id key answers; false when none does. */
  private answerWith(key: string, outcome: Outcome, transport: string, on_get: boolean): boolean {
    const correlator = this.context.correlator;
    if (!on_get) {
      const call = correlator.takeOwn(this.number, key);
      if (call) this.record(call, outcome, transport);
      return call !== undefined;
    }
    if (this.resumed_from !== undefined) return this.answerResumed(key, outcome, transport);
    const taken = correlator.takeInSession(this.source.source_id, this.session, key);
    if (taken === undefined) return false;
    if ("call" in taken) this.record(taken.call, outcome, transport);
    // Calls of several requests of the session shared the id: the response may be any one's.
    else for (const call of taken.unattributed) this.record(call, { type: "unattributed", reason: "duplicate_id" }, transport);
    return true;
  }

  /**
   * A response on a GET resuming a stream (Last-Event-ID) answers the call with its id of the
   * exchange whose stream carried that event. An event no stream Bursar relayed carried, as far
   * as it remembers (its client resumed from an event of another stream, whose answers the
   * upstream then replays, say), makes the response no call's own: the session's calls with its
   * id awaiting a resumed stream are recorded as unattributed.
   */
  private answerResumed(key: string, outcome: Outcome, transport: string): boolean {
    const correlator = this.context.correlator;
    const stream = this.streamOf();
    if (stream !== undefined) {
      const call = correlator.takeOwn(stream, key);
      if (call) this.record(call, outcome, transport);
      return call !== undefined;
    }
    const awaiting = correlator.takeAwaitingWithId(this.source.source_id, this.session, key);
    for (const call of awaiting) this.record(call, { type: "unattributed", reason: "unknown_stream" }, transport);
    return awaiting.length > 0;
  }

  /**
   * This request's SSE stream ended or was cut: its calls still pending can now only be answered
   * on a resumed GET stream, which resumes from one of the event ids the stream carried. A GET's
   * own stream resuming a known exchange, cut in turn, is resumed from its ids the same way.
   */
  awaitResume(): void {
    const correlator = this.context.correlator;
    // A request's stream is resumed only for the calls it left unanswered.
    if (this.request.method !== "GET" && correlator.awaitResume(this.number, this.calls) === 0) return;
    const stream = this.streamOf();
    if (stream !== undefined) correlator.resumableFrom(this.source.source_id, this.session, this.event_ids, stream);
  }

  record(call: PendingCall, outcome: Outcome, transport: string): void {
    const evidence = callEvidence(call, outcome, performance.now(), transport);
    this.context.recorder.enqueue(evidence.input, evidence.bytes, call.source.source_id);
  }

  /**
   * The calls an SSE event too large to read may have answered, once its stream ended or was cut,
   * recorded with `outcome`: this request's own, or on a resumed stream (a GET with Last-Event-ID)
   * the session's calls awaiting one. A GET without it is the session's standalone stream, which
   * carries no responses (MCP), so its oversized events answer nothing.
   */
  settleUnread(outcome: Outcome, transport: string): void {
    if (this.resumed_from === undefined) return this.settle(outcome, transport);
    for (const call of this.context.correlator.takeAwaitingResume(this.source.source_id, this.session, this.streamOf())) this.record(call, outcome, transport);
  }

  /** Calls of this request still unanswered when its response ended and no other can answer them. */
  settle(outcome: Outcome, transport: string): void {
    for (const id of this.calls) {
      const call = this.context.correlator.takeOwn(this.number, id);
      if (call) this.record(call, outcome, transport);
    }
  }
}

interface ResponseTap {
  push(chunk: Buffer): void;
  /** The response has ended or broken off: what was held only to read more of it goes, at once,
   *  whether or not its calls are known yet (end or cut may wait for them). */
  finish(): void;
  end(): void;
  /** The response broke off before its end; `outcome` is what its calls left unanswered get. */
  cut(outcome: Outcome): void;
}

/**
 * Whether an SSE event's data may hold a JSON-RPC response, checked before it is parsed: it has an
 * `"id"` key, or a `\u` escape (the key may be written `"\u0069d"`). Notifications with neither,
 * most of them, are not parsed.
 */
function mayHoldResponse(data: string): boolean {
  return data.includes('"id"') || data.includes("\\u");
}

function sseTap(exchange: Exchange, transport: string, status: number, correlator: Correlator, held: HeldBudget): ResponseTap {
  // Set once an event too large to read went past: the client got it, and it may have answered any call still pending.
  let skipped_too_large = false;
  const reader = new SseReader(
    (data) => {
      if (correlator.size === 0 || !mayHoldResponse(data)) return;
      try {
        exchange.answer(JSON.parse(data) as unknown, transport, status);
      } catch {
        // Not JSON: the stream carries it on untouched; there is nothing to record.
      }
    },
    () => (skipped_too_large = true),
    held,
    (id) => exchange.sawEventId(id),
  );
  // A call the stream left unanswered (ended or cut) after an event too large to read may have
  // had its answer in it, which no resumed stream brings again: it is recorded as answered but
  // unread, as a JSON answer over the limit is (on a resumed stream, each call it may have
  // answered). Otherwise, with a session, it may still be answered on a resumed GET stream;
  // without one nothing can resume it.
  const cut = (outcome: Outcome) => {
    if (skipped_too_large) exchange.settleUnread({ type: "unread_response", reason: "too_large", status }, transport);
    else if (exchange.session === "") exchange.settle(outcome, transport);
    else exchange.awaitResume();
  };
  // An event left unfinished when the stream ends or breaks off is never dispatched (nor said to be skipped).
  return { push: (chunk) => reader.push(chunk), finish: () => reader.release(), end: () => cut({ type: "no_response", reason: "stream_ended" }), cut };
}

function jsonTap(exchange: Exchange, status: number, form: BodyForm, held: HeldBudget): ResponseTap {
  // Calls not known yet (the request still arriving) may be ones this answer is for.
  const tap = exchange.calls.length > 0 || !exchange.calls_known ? new BodyTap(false, form, held) : null;
  return {
    push: (chunk) => tap?.push(chunk),
    // The body is read once its calls are known (end).
    finish: () => undefined,
    end: () => {
      if (!tap) return;
      const parsed = tap.json();
      const taken = parsed !== undefined && exchange.answer(parsed, "json", status);
      exchange.settle(unanswered(tap, taken, status), "json");
    },
    cut: (outcome) => {
      tap?.release();
      exchange.settle(outcome, "json");
    },
  };
}

/** The outcome of a call its request's JSON response did not answer; `taken`: the MCP SDK's client would take the body (JSON of well-formed messages). */
function unanswered(tap: BodyTap, taken: boolean, status: number): Outcome {
  // An answer came, but the tap did not read it: whatever it says, it is not "no response".
  if (tap.form === "encoded") return { type: "unread_response", reason: "encoded", status };
  if (tap.overflowed) return { type: "unread_response", reason: "too_large", status };
  return { type: "no_response", reason: !taken && status < 400 ? "unreadable_response" : "http_status", status };
}

/** A compressed SSE stream: nothing in it can be read, so its request's calls are settled as unread when it ends. */
function unreadStreamTap(exchange: Exchange, transport: string, status: number): ResponseTap {
  return {
    push: () => undefined,
    finish: () => undefined,
    end: () => exchange.settle({ type: "unread_response", reason: "encoded", status }, transport),
    cut: (outcome) => exchange.settle(outcome, transport),
  };
}

/** An answer of a media type the MCP SDK's client does not read (neither JSON nor SSE): it takes nothing from it. */
function unreadableTap(exchange: Exchange, status: number): ResponseTap {
  const outcome: Outcome = { type: "no_response", reason: status < 400 ? "unreadable_response" : "http_status", status };
  return { push: () => undefined, finish: () => undefined, end: () => exchange.settle(outcome, "json"), cut: (cut) => exchange.settle(cut, "json") };
}

/**
 * An answer's Content-Type as fetch, and so the MCP SDK's client, reads it: each field of the
 * name, joined with ", " (Node's headers keep only the first). Two fields, even alike, are one
 * value the client takes for no media type it reads.
 */
function fetchedContentType(upstream: IncomingMessage): string | undefined {
  const values: string[] = [];
  for (let i = 0; i < upstream.rawHeaders.length; i += 2) if (upstream.rawHeaders[i]!.toLowerCase() === "content-type") values.push(upstream.rawHeaders[i + 1]!);
  return values.length === 0 ? undefined : values.join(", ");
}

/** The tap for an upstream answer, by its media type as the MCP SDK's client reads it (mediaTypeEssence). */
function responseTap(exchange: Exchange, upstream: IncomingMessage, context: RelayContext): ResponseTap {
  const media = mediaTypeEssence(fetchedContentType(upstream));
  const status = upstream.statusCode ?? 0;
  const form = bodyForm(upstream.headers, false);
  const held = context.held.forSource(exchange.source.source_id);
  if (media === "application/json") return jsonTap(exchange, status, form, held);
  if (media !== "text/event-stream") return unreadableTap(exchange, status);
  const transport = exchange.request.method === "GET" ? "sse_get" : "sse";
  return form === "encoded" ? unreadStreamTap(exchange, transport, status) : sseTap(exchange, transport, status, context.correlator, held);
}

/** Whether a client reads transfer codings (chunked among them): HTTP/1.1 or later, never HTTP/1.0 (RFC 9112 §6.1). */
function knowsTransferCodings(request: IncomingMessage): boolean {
  return request.httpVersionMajor > 1 || (request.httpVersionMajor === 1 && request.httpVersionMinor >= 1);
}

/** Final statuses whose answers have no body: no Transfer-Encoding on them (RFC 9112 §6.1 forbids it on a 204, and a 304's is only informative). */
const statuses_without_body = new Set([204, 304]);

/**
 * Writes the upstream's status line and headers; false when Node's client took a status line its
 * server cannot write. A reason phrase it refuses (a control character: `200 O\x01K`) gives way
 * to the status's standard one, which clients ignore anyway (RFC 9112 §4); a status outside
 * 100–999 (`099`) cannot be relayed at all. No Date is added that the upstream did not send. The
 * Trailer header (not hop-by-hop) is kept, except on an answer Node does not chunk (to an HTTP/1.0
 * client, a 204, a HEAD's): no trailers can follow it, and Node refuses to write the header there.
 * Never throws: a throw here would end the process.
 */
function writeUpstreamHead(request: IncomingMessage, response: ServerResponse, upstream: IncomingMessage): boolean {
  const status = upstream.statusCode ?? 0;
  // A final answer is never 1xx: Node's client hands on a 101 (switching protocols, never asked
  // for) as one, which relayed would leave the client waiting for a body that does not come.
  if (!Number.isInteger(status) || status < 200 || status > 999) return false;
  let headers = keptHeaders(upstream.rawHeaders, response_headers_dropped);
  // Node's client takes off only the chunked framing: a coding before it (gzip) is still on the
  // bytes relayed, and an HTTP/1.1 client is told so, with the bytes chunked again. RFC 9112 §6.1:
  // never to an HTTP/1.0 client, nor on an answer without a body (1xx never comes here).
  const codings = transferCodings(upstream.headers);
  const chunkable = knowsTransferCodings(request);
  if (codings.length > 0 && chunkable && !statuses_without_body.has(status)) headers.push("transfer-encoding", [...codings, "chunked"].join(", "));
  // Node chunks an answer of unknown length to an HTTP/1.0 client that sent `TE: chunked`: it
  // gets the bytes as they come instead, ended by the connection's close (RFC 9112 §6.3).
  if (!chunkable) response.useChunkedEncodingByDefault = false;
  let phrase = upstream.statusMessage;
  response.sendDate = false;
  // At most one retry for the phrase and one for the Trailer header.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      response.writeHead(status, phrase, headers);
      return true;
    } catch (error) {
      if ((error as { code?: unknown }).code === "ERR_HTTP_TRAILER_INVALID") headers = keptHeaders(headers, trailer_header);
      // Node keeps the refused phrase as the response's statusMessage (it checks the phrase before
      // any header): every later writeHead names its phrase, or it would be refused again.
      else phrase = STATUS_CODES[status] ?? "unknown";
    }
  }
  return false;
}

/**
 * The trailer fields of a raw list Node can write (its parsers take some it refuses to write, as
 * with the reason phrase); the others are dropped. Node throws on one, and a throw here, in an
 * end event, would end the process.
 */
function writableTrailers(raw: readonly string[]): Array<[string, string]> {
  const trailers: Array<[string, string]> = [];
  for (let i = 0; i < raw.length; i += 2) {
    try {
      validateHeaderName(raw[i]!);
      validateHeaderValue(raw[i]!, raw[i + 1]!);
      trailers.push([raw[i]!, raw[i + 1]!]);
    } catch {
      // Not writable: this field alone is dropped, never the answer.
    }
  }
  return trailers;
}

/**
 * Relays a 103 Early Hints (RFC 8297) ahead of the final answer, to an HTTP/1.1 client (HTTP/1.0
 * knows no 1xx). Node writes hints only with a Link header it can parse (writeEarlyHints); other
 * hints are dropped, as a client may ignore any 103. Repeated fields other than Link are joined.
 */
function relayEarlyHints(request: IncomingMessage, response: ServerResponse, raw: readonly string[]): void {
  if (response.headersSent || request.httpVersionMajor !== 1 || request.httpVersionMinor < 1) return;
  const hints: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  const links: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name === "link") links.push(raw[i + 1]!);
    else if (!response_headers_dropped.has(name)) hints[name] = hints[name] === undefined ? raw[i + 1]! : `${String(hints[name])}, ${raw[i + 1]!}`;
  }
  if (links.length === 0) return;
  try {
    response.writeEarlyHints({ ...hints, link: links });
  } catch {
    // A Link value Node does not take: these hints are dropped, never the answer.
  }
}

/**
 * Whether an answer's body ends only with its connection (RFC 9112 §6.3): one that may have a
 * body, framed neither by Content-Length nor by chunked coding (an HTTP/1.0 server's, say).
 */
function endsWithConnection(method: string | undefined, upstream: IncomingMessage): boolean {
  const status = upstream.statusCode ?? 0;
  if (method === "HEAD" || status === 204 || status === 304 || (status >= 100 && status <= 199)) return false;
  if (upstream.headers["content-length"] !== undefined) return false;
  const coding = upstream.headers["transfer-encoding"];
  return coding === undefined || coding.split(",").at(-1)!.trim().toLowerCase() !== "chunked";
}

/** Ends a TCP connection with a reset; any other (a Unix socket's, one already closed) is left to the destroy that follows. */
function resetConnection(socket: Socket | null): void {
  if (socket === null || socket.destroyed) return;
  try {
    socket.resetAndDestroy();
  } catch {
    // Not a TCP handle: Node resets only those.
  }
}

/** Relays the upstream's answer and taps it; false when its status line cannot be written (nothing was). */
function relayResponse(exchange: Exchange, upstream: IncomingMessage, response: ServerResponse, context: RelayContext): boolean {
  if (!writeUpstreamHead(exchange.request, response, upstream)) return false;
  const tap = responseTap(exchange, upstream, context);
  if (upstream.headers["content-length"] === undefined) response.flushHeaders();
  // Node's parser takes any close of a connection for the end of a body that ends with it, a
  // reset or a cut from this side too (complete, and an end event): such a body is whole only
  // when the upstream closed its side in order (FIN) and nothing cut the exchange. (As far as the
  // socket shows: a reset that finds much of the answer still unread can end it as a FIN does,
  // and a TLS connection closed without close_notify ends so too.)
  const by_connection = endsWithConnection(exchange.request.method, upstream);
  let closed_in_order = false;
  if (by_connection) upstream.socket.once("end", () => (closed_in_order = !exchange.cancelled));
  const whole = () => upstream.complete && (!by_connection || (closed_in_order && !exchange.cancelled));
  let over = false;
  upstream.on("data", (chunk: Buffer) => {
    if (!response.write(chunk)) upstream.pause();
    tap.push(chunk);
  });
  response.on("drain", () => upstream.resume());
  // Cut before its end: by the upstream (a reset) or from this side. The client's answer is cut
  // too, so it cannot take the part it got for the whole.
  const cut = () => {
    over = true;
    // An answer the client reads to its connection's close (an HTTP/1.0 client's: neither a
    // length nor chunks) ends with a reset, not a close in order, which would read as its end.
    // (Its head went out as a raw list, which Node does not keep: the upstream's says whether it
    // carried a length.)
    if (!response.chunkedEncoding && upstream.headers["content-length"] === undefined) resetConnection(response.socket);
    response.destroy();
    const outcome: Outcome = { type: "no_response", reason: exchange.cancelled ? "cancelled" : "response_cut", status: upstream.statusCode ?? 0 };
    tap.finish();
    exchange.whenRegistered(() => tap.cut(outcome));
  };
  upstream.on("end", () => {
    if (over) return;
    if (!whole()) return cut();
    over = true;
    // Node writes trailers after a chunked body only (the Trailer header goes with the others).
    if (upstream.rawTrailers.length > 0) response.addTrailers(writableTrailers(upstream.rawTrailers));
    response.end();
    tap.finish();
    exchange.whenRegistered(() => tap.end());
  });
  // A whole answer's close follows its end, which recorded it.
  upstream.on("close", () => {
    if (!over && !whole()) cut();
  });
  // The cut's error (ECONNRESET, "aborted") is what its close, above, records.
  upstream.on("error", () => undefined);
  return true;
}

function badGateway(response: ServerResponse, code: string, message: string): void {
  if (response.headersSent) return void response.destroy();
  // Whatever a refused writeHead may have set on the response goes: the 502 is Bursar's own.
  for (const name of response.getHeaderNames()) response.removeHeader(name);
  response.sendDate = true;
  const body = JSON.stringify({ error: { code, message } });
  response.writeHead(502, "Bad Gateway", { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
  response.end(body);
}

/** Methods whose requests Node's client sends without body framing when given none; it chunks the others' (POST, PUT, PATCH). */
const methods_sent_unframed = new Set(["GET", "HEAD", "DELETE", "OPTIONS", "TRACE", "CONNECT"]);

/** A raw header list as an object Node's client writes field by field in order: each name as first written, a repeated field's values in an array. */
function headerObject(raw: readonly string[]): Record<string, string | string[]> {
  // No prototype: a field named constructor, toString or __proto__ is a field like any other.
  const object: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  const names = new Map<string, string>();
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    const name = names.get(lower) ?? raw[i]!;
    names.set(lower, name);
    const present = object[name];
    object[name] = present === undefined ? raw[i + 1]! : [...(Array.isArray(present) ? present : [present]), raw[i + 1]!];
  }
  return object;
}

/**
 * Requests a client connection may have waiting behind the exchange being relayed on it (HTTP/1.1
 * pipelining); one more closes the connection. Answers on a connection go out in request order,
 * so a request sent ahead is relayed only once its answer's turn comes: one upstream exchange per
 * connection at a time, however many requests a client sends ahead. The connection is not paused
 * instead: one not read would not show its client's close, and behind an SSE stream that never
 * ends it and its upstream stream would outlive the client.
 */
export const pipelined_requests_waiting_max = 32;

/** The relayed requests each client connection has waiting for their turn. */
const requests_waiting = new WeakMap<Socket, number>();

/**
 * Relays one request, opened by `token`, to `target` and its response back, observing both: now,
 * or, for a request its client sent ahead of earlier answers on the connection, once Node gives
 * the connection to its response (the 'socket' event, once every earlier answer has finished;
 * never, when the connection goes first).
 */
export function relay(context: RelayContext, source: ObserverSource, token: string, request: IncomingMessage, response: ServerResponse, target: URL): void {
  if (response.socket !== null) return relayNow(context, source, token, request, response, target);
  const socket = request.socket;
  const waiting = (requests_waiting.get(socket) ?? 0) + 1;
  // Each waiting request holds its parsed head and Node's, Fastify's and the relay's objects.
  if (waiting > pipelined_requests_waiting_max) return void socket.destroy();
  requests_waiting.set(socket, waiting);
  response.once("socket", () => {
    const left = requests_waiting.get(socket)! - 1;
    if (left > 0) requests_waiting.set(socket, left);
    else requests_waiting.delete(socket);
    if (request.destroyed || response.destroyed) return void response.destroy();
    relayNow(context, source, token, request, response, target);
  });
}

function relayNow(context: RelayContext, source: ObserverSource, token: string, request: IncomingMessage, response: ServerResponse, target: URL): void {
  const exchange = new Exchange(context, source, request);
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  // Trailer fields follow a chunked body only, and Node's parser takes a request's
  // Transfer-Encoding only with chunked last: the Trailer header goes on with one, never without.
  const headers = keptHeaders(request.rawHeaders, request.headers["transfer-encoding"] === undefined ? unchunked_request_headers_dropped : request_headers_dropped);
  const framing = framingHeaders(request.headers);
  headers.push("host", target.host, ...framing);
  // A request without framing has no body (RFC 9112 §6.3), and goes on without framing. Node's
  // client would chunk a POST's: it decides when it writes the head, which it does at once for a
  // header list given as an array, and in its constructor for headers with an Expect. So the
  // headers are set one by one after it, once the client is told not to chunk, and written at the
  // request's end. (Only a Cookie repeated, which no HTTP/1.1 client sends, is then one line.)
  const unframed = framing.length === 0 && !methods_sent_unframed.has(request.method ?? "GET");
  const agent = target.protocol === "https:" ? context.agents.https : context.agents.http;
  const upstream = send({ ...targetOptions(target), method: request.method, ...(unframed ? { setHost: false } : { headers }), agent });
  if (unframed) {
    upstream.useChunkedEncodingByDefault = false;
    for (const [name, value] of Object.entries(headerObject(headers))) upstream.setHeader(name, value);
  }
  const tap = request.method === "POST" ? new BodyTap(true, bodyForm(request.headers, true), context.held.forSource(source.source_id)) : null;
  const destroy = () => {
    exchange.cancelled = true;
    upstream.destroy();
    response.destroy();
  };
  context.active.set(destroy, token);
  response.on("close", () => {
    context.active.delete(destroy);
    if (response.writableFinished) return;
    exchange.cancelled = true;
    upstream.destroy();
  });
  // Once Bursar answers in the upstream's place (a 502), the body is no longer forwarded but still
  // read into the tap, so its calls are known and recorded with that answer: paused, it would stall
  // unread. (A body chunked or declared over the server's limit has its connection closed instead.)
  let forwarding = true;
  const answerInstead = (outcome: Outcome, code: string, message: string) => {
    forwarding = false;
    request.resume();
    exchange.whenRegistered(() => exchange.settle(outcome, "none"));
    badGateway(response, code, message);
  };
  request.on("data", (chunk: Buffer) => {
    if (forwarding && !upstream.write(chunk)) request.pause();
    tap?.push(chunk);
  });
  upstream.on("drain", () => request.resume());
  request.on("end", () => {
    // The upstream gets the end first: reading the calls (parse, hash, shadow verdict) is the
    // observer's own work. Its response cannot be read before this handler returns.
    if (forwarding) {
      // Trailer fields came after a chunked body, which goes on chunked: Node writes them after
      // its last chunk. Bursar's token is never forwarded, as a trailer field no more than a header.
      if (request.rawTrailers.length > 0) upstream.addTrailers(writableTrailers(keptHeaders(request.rawTrailers, request_headers_dropped)));
      upstream.end();
    }
    exchange.registerCalls(tap);
  });
  request.on("error", () => upstream.destroy());
  // After its end this changes nothing; before it (the gateway went away mid-upload), the tap's
  // bytes go back to the shared budget, and an answer waiting for the calls goes on without them.
  // Once its answer has been sent, Node no longer ties a request still uploading to its
  // connection, and it is never closed when the connection goes: the connection's close stands in.
  // A request closed before its end has its upstream request cut too, which Node does only while
  // the answer is unfinished (through the request's error).
  const socket = request.socket;
  const closed = () => {
    socket.off("close", closed);
    tap?.release();
    exchange.requestClosed();
    if (request.complete) return;
    exchange.cancelled = true;
    upstream.destroy();
  };
  request.on("close", closed);
  socket.on("close", closed);
  let answered = false;
  // Other 1xx are the connection's own: Node's server answers an Expect: 100-continue itself.
  upstream.on("information", (information) => {
    if (information.statusCode === 103) relayEarlyHints(request, response, information.rawHeaders);
  });
  /** An answer whose status line cannot be relayed: its rest is not read, and its connection goes
   *  rather than back to the pool. */
  const unrelayable = (upstream_status: number, connection: { destroy(): void }) => {
    answered = true;
    connection.destroy();
    const outcome: Outcome = { type: "no_response", reason: "unrelayable_status", status: 502, upstream_status };
    answerInstead(outcome, "upstream_invalid_status", "the observed MCP server answered a status line that cannot be relayed");
  };
  upstream.on("response", (incoming) => {
    answered = true;
    if (!relayResponse(exchange, incoming, response, context)) unrelayable(incoming.statusCode ?? 0, incoming);
  });
  // A 101 nobody asked for (Upgrade is never forwarded): with no listener, Node's client drops the
  // connection and tells no one, and the client waited until its own timeout.
  upstream.on("upgrade", (incoming: IncomingMessage, upgraded: Duplex) => unrelayable(incoming.statusCode ?? 101, upgraded));
  upstream.on("error", () => {
    // An answer that had begun is recorded by relayResponse, when it ends or is cut.
    if (answered) return;
    // Only an upstream that failed gets the 502 Bursar answers in its place: recorded as Bursar's
    // own, not as a status the upstream (or a balancer in front of it) answered.
    const outcome: Outcome = exchange.cancelled ? { type: "no_response", reason: "cancelled" } : { type: "no_response", reason: "upstream_unreachable", status: 502 };
    answerInstead(outcome, "upstream_unreachable", "the observed MCP server did not answer");
  });
}
