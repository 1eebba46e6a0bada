// Correlating `tools/call` requests with their responses: a JSON body or the POST's SSE stream
// answers the calls its own request carried; a resumed GET stream answers calls by (source, MCP
// session id, JSON-RPC id). Each completed call becomes its `observer.call` entry.

import { JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { representable } from "../evidence/canonical.js";
import { scrubbedCanonicalJson, sha256Hex, type AppendInput } from "../evidence/index.js";
import { cutText } from "../policy/text.js";
import type { ObserverSource } from "../sources/store.js";
import type { DeferredInput } from "./recorder.js";
import { shadowVerdict, type ShadowVerdict } from "./shadow.js";

export const pending_calls_max = 10_000;
/** Pending calls hold their arguments (as text) until answered: bounded in bytes too (a request is up to 4 MiB). */
export const pending_bytes_max = 64 * 1_048_576;
/** What a pending or queued call costs besides its variable parts (an estimate). */
export const call_overhead_bytes = 1024;
/** SSE event ids remembered for a GET that resumes a stream from one (the oldest forgotten first). */
export const resumable_event_ids_max = 20_000;
/** An SSE event id longer than this is not remembered: a GET resuming from it resumes no known stream. */
export const resumable_event_id_chars_max = 256;
/** A call with no response after this long is recorded as `no_response`. */
export const pending_call_ttl_ms = 15 * 60_000;
/** Args or results whose canonical JSON is larger are kept by hash only. */
export const stored_value_chars_max = 65_536;
export const tool_name_chars_max = 256;
/** A string JSON-RPC id longer than this is kept by its SHA-256 only (an id can be megabytes). */
export const jsonrpc_id_chars_max = 256;
/** The shadow verdict's reason can quote an argument's name; it is cut to this. */
export const shadow_reason_chars_max = 1024;

type JsonRpcId = string | number;

/** A JSON-RPC id as the observer keeps it: itself, or for a long string id its SHA-256. */
export interface HeldId {
  /** The correlation key: the same for the request's id and the response's. */
  key: string;
  fields: { jsonrpc_id: JsonRpcId } | { jsonrpc_id_hash: string; jsonrpc_id_omitted: "too_large" };
  bytes: number;
}

/**
 * What a held string counts for in the byte bounds: its UTF-8 bytes, or its size in the heap when
 * that is more. V8 keeps a string with any code unit past U+00FF at two bytes a unit, so mostly
 * ASCII text with one such character takes twice its UTF-8 bytes.
 */
const textBytes = (text: string): number => Math.max(Buffer.byteLength(text, "utf8"), /[^\u0000-\u00ff]/.test(text) ? 2 * text.length : 0);

const long = (id: JsonRpcId): id is string => typeof id === "string" && id.length > jsonrpc_id_chars_max;

export function idKey(id: JsonRpcId): string {
  return long(id) ? `hash:${sha256Hex(id)}` : `${typeof id}:${String(id)}`;
}

/**
 * The keys (idKey) of the calls a response's id answers, tried in order: its own, then, for a
 * string, the number JavaScript reads it as, since the MCP SDK's client matches a response to its
 * request by Number(response.id) (its requests' ids are numbers): it takes `"id":"1"` for the
 * answer to request 1, and so must Bursar.
 */
export function responseKeys(id: JsonRpcId): string[] {
  const own = idKey(id);
  if (typeof id !== "string") return [own];
  const read = Number(id);
  return Number.isFinite(read) ? [own, idKey(read)] : [own];
}

export function heldId(id: JsonRpcId): HeldId {
  if (long(id)) {
    const hash = sha256Hex(id);
    return { key: `hash:${hash}`, fields: { jsonrpc_id_hash: hash, jsonrpc_id_omitted: "too_large" }, bytes: hash.length };
  }
  const kept = typeof id === "string" ? (representable(id) as string) : id;
  return { key: idKey(id), fields: { jsonrpc_id: kept }, bytes: textBytes(String(kept)) };
}

/**
 * A value (args, a result) as a pending or queued call holds it until its entry is built: its
 * hash, and its canonical JSON when small enough to store. Parsed JSON takes up to ~20 times its
 * text's bytes in the heap, so only text is held, and counted; it is parsed again for the entry.
 */
export interface HeldValue {
  /** `{name}_hash`, and `{name}_omitted` when the value is kept by hash only. */
  fields: Record<string, string | null>;
  /** The canonical JSON of a value that is stored; null when it is kept by hash only. */
  text: string | null;
  /** What the byte bounds count for `text` (see textBytes). */
  bytes: number;
}

export interface PendingCall {
  source: ObserverSource;
  /** The MCP session id; "" when the server uses none (then only its own request can answer it). */
  session: string;
  /** The HTTP exchange (one request) that carried the call, numbered by the correlator. */
  exchange: number;
  id: HeldId;
  tool: string;
  args: HeldValue;
  /** Decided when the call is registered, from the parsed args (which are not kept) and `started_at`. */
  shadow: ShadowVerdict | null;
  /** The first key its request body wrote twice in one object (a path such as
   *  params.arguments.amount): `args` holds the last, as JSON.parse keeps it; a server that reads
   *  the first acted on others. Absent for a body without one. */
  written_twice?: string;
  started_at: Date;
  started_ms: number;
  /** Counted against pending_bytes_max: the overhead, the session id, and the call's share of its
   *  request body or what the call holds (heldBytes), whichever is more. */
  bytes: number;
  /** Its request's SSE stream ended or was cut without its answer: only a resumed GET stream can bring it now. */
  awaiting_resume?: boolean;
}

/** Why a call is recorded without an answer (see docs/evidence-sources.md). */
type NoResponseReason = "timeout" | "evicted" | "http_status" | "unreadable_response" | "stream_ended" | "cancelled" | "response_cut" | "shutdown" | "unrelayable_status" | "upstream_unreachable";

/** Why the correlator gives up on a pending call by itself. */
type ExpiredReason = "timeout" | "evicted" | "shutdown";

export type Outcome =
  // `status`: the upstream's HTTP status, present only when outside 2xx (a result in a 500).
  | { type: "result"; is_error: boolean; result: unknown; status?: number }
  | { type: "error"; error: unknown; status?: number }
  | { type: "no_response"; reason: NoResponseReason; status?: number; upstream_status?: number }
  // The upstream answered, but the tap could not read the answer: the call may have any result.
  | { type: "unread_response"; reason: "too_large" | "encoded"; status: number }
  // Another request message carries the call's JSON-RPC id (of the same body, or of the session
  // while both await answers): a response with that id could answer either, so none is taken as
  // this call's.
  | { type: "unattributed"; reason: "duplicate_id" }
  // A GET resumed a stream from an SSE event id Bursar does not know (no stream it relayed
  // carried it, as far as it remembers): a response on it could be a replay of any call's answer.
  | { type: "unattributed"; reason: "unknown_stream" };

export interface CallEvidence {
  input: CallEntry;
  /** Approximate bytes held while queued: never less than the entry body's JSON (an estimate, not a measure). */
  bytes: number;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

const isId = (value: unknown): value is JsonRpcId => typeof value === "string" || (typeof value === "number" && Number.isFinite(value));

/** At most `chars_max` UTF-16 units of `text` (cut as cutText cuts), with lone surrogates replaced. */
export function boundedText(text: string, chars_max: number): string {
  return representable(cutText(text, chars_max)) as string;
}

/**
 * The tools/call requests among parsed JSON-RPC messages (one message or a batch), each with its
 * tool's whole name (lone surrogates replaced): the shadow verdict looks the whole name up, and
 * only the entry keeps it cut (heldArguments), so a name that merely starts with a mapped tool's
 * is never taken for it.
 */
export function toolCalls(parsed: unknown): Array<{ id: JsonRpcId; tool: string; args: unknown }> {
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  const calls: Array<{ id: JsonRpcId; tool: string; args: unknown }> = [];
  for (const message of messages) {
    if (!isObject(message) || message.method !== "tools/call" || !isId(message.id)) continue;
    const params = isObject(message.params) ? message.params : {};
    const tool = typeof params.name === "string" ? (representable(params.name) as string) : "(unnamed)";
    // As sent: only a call without arguments (MCP's are optional) is recorded as calling with none.
    calls.push({ id: message.id, tool, args: params.arguments === undefined ? {} : params.arguments });
  }
  return calls;
}

const no_repeated_ids: ReadonlySet<string> = new Set();

/**
 * The id keys (idKey) that more than one request message of a body carries, whatever their
 * methods: a response with such an id could answer any of them (a tools/call and a ping both
 * id 8 are answered `{id: 8, result: {}}` and `{id: 8, result: {content}}`, in either order).
 */
export function repeatedRequestIds(parsed: unknown): ReadonlySet<string> {
  // One message repeats nothing: the common case costs no set.
  if (!Array.isArray(parsed)) return no_repeated_ids;
  const messages = parsed;
  const seen = new Set<string>();
  const repeated = new Set<string>();
  for (const message of messages) {
    if (!isObject(message) || !("method" in message) || !isId(message.id)) continue;
    const key = idKey(message.id);
    if (seen.has(key)) repeated.add(key);
    else seen.add(key);
  }
  return repeated;
}

/**
 * JSON-RPC responses (result or error with an id) among the messages of one JSON body (`batch`:
 * one message, or an array of them) or of one SSE event (one message), as the MCP SDK's client
 * takes them: it parses each with its JSONRPCMessageSchema and takes an event or a body only when
 * that passes, so a body with one malformed member is refused whole (undefined), and so is an
 * event holding an array. A malformed event answers nothing, and a later well-formed one with the
 * same id is the answer the client takes: taking the first would record what the client never
 * accepted, and drop what it did. The messages came in an answer of HTTP `status`; outside 2xx
 * the status goes with each outcome: a result in a 500 is what the client got, but not a plain
 * success, and an auditor must be able to tell the two apart.
 */
export function responses(parsed: unknown, status: number, batch: boolean): Array<{ id: JsonRpcId; outcome: Outcome }> | undefined {
  if (Array.isArray(parsed) && !batch) return undefined;
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  if (!messages.every((message) => JSONRPCMessageSchema.safeParse(message).success)) return undefined;
  const found: Array<{ id: JsonRpcId; outcome: Outcome }> = [];
  const http = status >= 200 && status <= 299 ? {} : { status };
  for (const message of messages as Array<Record<string, unknown>>) {
    // A request or notification (a method), or an error without an id, answers no call.
    const id = message.id as JsonRpcId | undefined;
    if (id === undefined || "method" in message) continue;
    if ("result" in message) {
      const result = message.result as Record<string, unknown>;
      found.push({ id, outcome: { type: "result", is_error: result.isError === true, result, ...http } });
    } else {
      found.push({ id, outcome: { type: "error", error: message.error, ...http } });
    }
  }
  return found;
}

/**
 * What a resumed GET stream's response with an id takes: the one pending call of its session with
 * that id, or, when calls of several requests of the session awaited answers with that id at once
 * (ambiguous), none as its own: those only a resumed stream can still answer are recorded as
 * unattributed, and the others are left to their own request's answer.
 */
export type SessionAnswer = { call: PendingCall } | { unattributed: PendingCall[] };

/**
 * Pending calls, each under the exchange that carried it, so a response is matched to its own
 * request even when two clients of a server without sessions both use JSON-RPC id 1. Calls with
 * a session are also indexed by (source, session, id) for responses on a resumed GET stream;
 * without a session id there is nothing to tie one request to another, so none is guessed.
 */
export class Correlator {
  /** By exchange and id, in arrival order: the oldest (and expired) calls are at the front. */
  private readonly pending = new Map<string, PendingCall>();
  /**
   * (source, session, id) → the key in `pending` of the one such call; or, once calls of two
   * requests shared it while pending (or a request's body repeated it), the keys of those still
   * pending: the id stays ambiguous until none of them is.
   */
  private readonly in_session = new Map<string, string | Set<string>>();
  /**
   * Per source, (session, SSE event id) → the exchange whose calls a GET resuming from that event
   * answers: the latest id of each stream carrying calls' answers, and the last few of one that
   * ended or was cut with calls awaiting. Each in insertion order; past resumable_event_ids_max in
   * all, the source remembering the most forgets its oldest, so one source's streams cannot push
   * out another's.
   */
  private readonly resumable = new Map<string, Map<string, number>>();
  private resumable_count = 0;
  /** The pending calls of each source, in arrival order, and the bytes they count. */
  private readonly by_source = new Map<string, { calls: Map<string, PendingCall>; bytes: number }>();
  private pending_bytes = 0;
  private exchanges = 0;
  private closed = false;

  constructor(
    private readonly onExpired: (call: PendingCall, reason: ExpiredReason) => void,
    private readonly ttl_ms = pending_call_ttl_ms,
  ) {}

  private static key(exchange: number, id_key: string): string {
    return `${exchange}\n${id_key}`;
  }

  private static sessionKey(source_id: string, session: string, id_key: string): string {
    return `${source_id}\n${session}\n${id_key}`;
  }

  get size(): number {
    return this.pending.size;
  }


  /** A number for a new exchange, unique for this correlator's life. */
  nextExchange(): number {
    return ++this.exchanges;
  }

  add(call: PendingCall): void {
    if (this.closed) return this.onExpired(call, "shutdown");
    this.expire(call.started_ms);
    const key = Correlator.key(call.exchange, call.id.key);
    // The proxy never adds two calls with one id from one request (it records such calls as
    // unattributed); were it to, the earlier is given up on rather than left unreachable.
    const previous = this.pending.get(key);
    if (previous) this.evict(key, previous, "evicted");
    for (;;) {
      const by_count = this.pending.size >= pending_calls_max;
      if (!by_count && !(this.pending.size > 0 && this.pending_bytes + call.bytes > pending_bytes_max)) break;
      const [oldest_key, oldest] = this.oldestOfLargestSource(by_count);
      this.evict(oldest_key, oldest, "evicted");
    }
    this.pending.set(key, call);
    this.pending_bytes += call.bytes;
    const held = this.by_source.get(call.source.source_id) ?? { calls: new Map<string, PendingCall>(), bytes: 0 };
    held.calls.set(key, call);
    held.bytes += call.bytes;
    this.by_source.set(call.source.source_id, held);
    if (call.session !== "") this.index(Correlator.sessionKey(call.source.source_id, call.session, call.id.key), key);
  }

  /**
   * Indexes a call by session and id. Another request's call of the session with this id still
   * pending makes the id ambiguous: a resumed stream's response with it could be either's (a
   * client may reuse ids across requests), so it is taken as neither's; each call can still be
   * answered by its own request.
   */
  private index(session_key: string, key: string): void {
    const indexed = this.in_session.get(session_key);
    if (indexed === undefined) this.in_session.set(session_key, key);
    else if (typeof indexed === "string") this.in_session.set(session_key, new Set([indexed, key]));
    else indexed.add(key);
  }

  /**
   * The oldest pending call of the source holding the most calls (`by_count`) or bytes: past a
   * bound, that source gives one up, so one source's clients (parking calls for resumed streams
   * that never come, say) cannot push out another source's calls.
   */
  private oldestOfLargestSource(by_count: boolean): [string, PendingCall] {
    const size = (held: { calls: Map<string, PendingCall>; bytes: number }) => (by_count ? held.calls.size : held.bytes);
    let largest: { calls: Map<string, PendingCall>; bytes: number } | undefined;
    for (const held of this.by_source.values()) if (largest === undefined || size(held) > size(largest)) largest = held;
    return largest!.calls.entries().next().value as [string, PendingCall];
  }

  private remove(key: string, call: PendingCall): void {
    this.pending.delete(key);
    this.pending_bytes -= call.bytes;
    const held = this.by_source.get(call.source.source_id);
    if (held?.calls.delete(key)) {
      held.bytes -= call.bytes;
      if (held.calls.size === 0) this.by_source.delete(call.source.source_id);
    }
    if (call.session === "") return;
    const session_key = Correlator.sessionKey(call.source.source_id, call.session, call.id.key);
    const indexed = this.in_session.get(session_key);
    if (indexed === key) this.in_session.delete(session_key);
    // An ambiguous id stays so while any of its calls is pending: a response on a resumed stream
    // may still be the removed call's (a replay of an answer its own stream brought).
    else if (typeof indexed === "object" && indexed.delete(key) && indexed.size === 0) this.in_session.delete(session_key);
  }

  /**
   * A request's body repeated this id (its calls are unattributed): the id is ambiguous for the
   * session's pending calls, so a resumed GET stream's response with it, which may be one of that
   * body's answers, is taken as none's.
   */
  repeatedInSession(source_id: string, session: string, id_key: string): void {
    if (session === "") return;
    const session_key = Correlator.sessionKey(source_id, session, id_key);
    const indexed = this.in_session.get(session_key);
    if (typeof indexed === "string") this.in_session.set(session_key, new Set([indexed]));
  }

  /** The calls of `exchange` with these ids (idKey) are left for a resumed GET stream: their request's own stream ended or was cut without their answers. Returns how many are. */
  awaitResume(exchange: number, id_keys: readonly string[]): number {
    let awaiting = 0;
    for (const id_key of id_keys) {
      const call = this.pending.get(Correlator.key(exchange, id_key));
      if (!call) continue;
      call.awaiting_resume = true;
      awaiting++;
    }
    return awaiting;
  }

  /**
   * A GET resuming from any of these SSE event ids (of a stream of `exchange`) resumes `exchange`:
   * its responses answer that exchange's calls only. `replaced`: an id of the same stream no
   * longer needed (its latest but one), forgotten if it still names `exchange`.
   */
  resumableFrom(source_id: string, session: string, event_ids: readonly string[], exchange: number, replaced?: string): void {
    if (session === "") return;
    const remembered = this.resumable.get(source_id) ?? new Map<string, number>();
    this.resumable.set(source_id, remembered);
    const forget = (key: string) => {
      if (remembered.delete(key)) this.resumable_count -= 1;
    };
    if (replaced !== undefined) {
      const key = Correlator.resumeKey(session, replaced);
      if (remembered.get(key) === exchange) forget(key);
    }
    for (const event_id of event_ids) {
      if (event_id.length > resumable_event_id_chars_max) continue;
      const key = Correlator.resumeKey(session, event_id);
      forget(key);
      remembered.set(key, exchange);
      this.resumable_count += 1;
      if (this.resumable_count > resumable_event_ids_max) this.forgetOldestResumable();
    }
    if (remembered.size === 0) this.resumable.delete(source_id);
    else this.resumable.set(source_id, remembered);
  }

  /** The exchange a GET resuming from `event_id` resumes (resumableFrom); undefined when none known. */
  resumedExchange(source_id: string, session: string, event_id: string): number | undefined {
    if (session === "") return undefined;
    return this.resumable.get(source_id)?.get(Correlator.resumeKey(session, event_id));
  }

  private static resumeKey(session: string, event_id: string): string {
    return `${session}\n${event_id}`;
  }

  /** Forgets the oldest event id of the source remembering the most. */
  private forgetOldestResumable(): void {
    let largest: [string, Map<string, number>] | undefined;
    for (const entry of this.resumable) if (largest === undefined || entry[1].size > largest[1].size) largest = entry;
    const [source_id, remembered] = largest!;
    remembered.delete(remembered.keys().next().value as string);
    this.resumable_count -= 1;
    if (remembered.size === 0) this.resumable.delete(source_id);
  }

  /** The session's calls with this id (its idKey) awaiting a resumed stream, removed. */
  takeAwaitingWithId(source_id: string, session: string, id_key: string): PendingCall[] {
    if (session === "") return [];
    const indexed = this.in_session.get(Correlator.sessionKey(source_id, session, id_key));
    const keys = indexed === undefined ? [] : typeof indexed === "string" ? [indexed] : [...indexed];
    return keys.filter((key) => this.pending.get(key)?.awaiting_resume).map((key) => this.takeKey(key)!);
  }

  /**
   * The session's calls awaiting a resumed GET stream (only `exchange`'s, when the stream resumed
   * is known), removed: one that carried an event too large to read may have answered any of
   * them, which one its unread id does not say. A scan of every pending call, as rare as such an
   * event on a resumed stream is.
   */
  takeAwaitingResume(source_id: string, session: string, exchange?: number): PendingCall[] {
    if (session === "") return [];
    const taken: PendingCall[] = [];
    for (const [key, call] of this.pending) {
      if (!call.awaiting_resume || call.session !== session || call.source.source_id !== source_id) continue;
      if (exchange !== undefined && call.exchange !== exchange) continue;
      this.remove(key, call);
      taken.push(call);
    }
    return taken;
  }

  private evict(key: string, call: PendingCall, reason: ExpiredReason): void {
    this.remove(key, call);
    this.onExpired(call, reason);
  }

  private takeKey(key: string): PendingCall | undefined {
    const call = this.pending.get(key);
    if (call) this.remove(key, call);
    return call;
  }

  /** The call with this id (its idKey) that `exchange` carried, removed; undefined when none is pending. */
  takeOwn(exchange: number, id_key: string): PendingCall | undefined {
    return this.takeKey(Correlator.key(exchange, id_key));
  }

  /**
   * What a resumed GET stream's response with this id answers (SessionAnswer), removed: the one
   * pending call of the session with the id, whichever request carried it, once its own stream
   * ended or was cut without its answer; for an ambiguous id, the calls awaiting a resumed
   * stream, to be recorded as unattributed. Undefined when none.
   */
  takeInSession(source_id: string, session: string, id_key: string): SessionAnswer | undefined {
    if (session === "") return undefined;
    const indexed = this.in_session.get(Correlator.sessionKey(source_id, session, id_key));
    if (indexed === undefined) return undefined;
    if (typeof indexed === "string") {
      // A call whose own stream is still open is answered there: a resumed stream's response with
      // its id replays an earlier call's answer (MCP sends a response on a GET stream only when
      // resuming a request's stream, and the client may reuse an answered call's id).
      if (!this.pending.get(indexed)?.awaiting_resume) return undefined;
      const call = this.takeKey(indexed);
      return call && { call };
    }
    const unattributed: PendingCall[] = [];
    for (const key of [...indexed]) {
      if (this.pending.get(key)?.awaiting_resume) unattributed.push(this.takeKey(key)!);
    }
    return { unattributed };
  }

  /** Map order is arrival order, so the expired calls are at the front. `now_ms` is on the
   *  monotonic clock (performance.now()) that calls are started on. */
  expire(now_ms: number): void {
    for (const [key, call] of this.pending) {
      if (now_ms - call.started_ms < this.ttl_ms) return;
      this.evict(key, call, "timeout");
    }
  }

  /** Every pending call, removed (on close). */
  drainAll(): PendingCall[] {
    const calls = [...this.pending.values()];
    this.pending.clear();
    this.in_session.clear();
    this.resumable.clear();
    this.resumable_count = 0;
    this.by_source.clear();
    this.pending_bytes = 0;
    return calls;
  }

  /**
   * Gives up on every pending call now, synchronously, as shut down (while the log can still take
   * them), and on any call added later at once: nothing is left pending after the observer stops.
   */
  close(): void {
    this.closed = true;
    for (const call of this.drainAll()) this.onExpired(call, "shutdown");
  }
}

/**
 * The canonical text of the entry's member `name` as the entry stores it (scrubbed, at the depth
 * it has in the body, where scrubbing stops as deep) and its hash, or null when JSON cannot carry
 * it canonically. The hash is of the scrubbed text, as an entry's body_sha256 is (buildEntry):
 * one of a secret scrubbing hid would give a guessable one (a PIN) away.
 */
function bound(name: string, value: unknown): { text: string; sha256: string } | null {
  try {
    // `{"name":…}`: the value's own text follows the key.
    const member = scrubbedCanonicalJson({ [name]: value }).text;
    const text = member.slice(name.length + 4, -1);
    return { text, sha256: sha256Hex(text) };
  } catch {
    return null;
  }
}

/**
 * Holds `value` as its canonical text when small enough to store; always its hash. A value JSON
 * parsed but RFC 8785 cannot write (a lone surrogate, `1e400`, nesting past the limit) is held
 * with those parts replaced as the gate's own evidence replaces them (representable), and says
 * so (`{name}_replaced`): the rest of it, an amount beside a lone surrogate, stays bound.
 */
function hold(name: string, value: unknown): HeldValue {
  let hashed = bound(name, value);
  const replaced = hashed ? {} : { [`${name}_replaced`]: "not_canonical_json" };
  hashed ??= bound(name, representable(value));
  if (!hashed) return { fields: { [`${name}_hash`]: null, [`${name}_omitted`]: "not_canonical_json" }, text: null, bytes: 0 };
  if (hashed.text.length > stored_value_chars_max) return { fields: { [`${name}_hash`]: hashed.sha256, [`${name}_omitted`]: "too_large", ...replaced }, text: null, bytes: 0 };
  return { fields: { [`${name}_hash`]: hashed.sha256, ...replaced }, text: hashed.text, bytes: textBytes(hashed.text) };
}

/** The entry's fields for a held value: its hash, and the value parsed back from its text when stored. */
function stored(name: string, held: HeldValue): Record<string, unknown> {
  // Canonical text parses back to a value with the same canonical (and scrubbed) text: entries are unchanged.
  return held.text === null ? held.fields : { ...held.fields, [name]: JSON.parse(held.text) as unknown };
}

/**
 * What a call keeps of its tool and arguments while pending: the tool's name (representable, as
 * toolCalls gives it) cut to tool_name_chars_max, the arguments' text, and the shadow verdict, decided now (at the call's
 * `started_at`) from the whole name and the parsed arguments, which are then let go.
 */
export function heldArguments(source: ObserverSource, tool: string, args: unknown, started_at: Date): Pick<PendingCall, "tool" | "args" | "shadow"> {
  const verdict = shadowVerdict(source.shadow, tool, args, started_at);
  return {
    tool: cutText(tool, tool_name_chars_max),
    args: hold("args", args),
    shadow: verdict && { ...verdict, reason: boundedText(verdict.reason, shadow_reason_chars_max) },
  };
}

/** The bytes of what a pending call holds that grows with the call: the tool, the id, the args' text and the shadow verdict. */
export function heldBytes(call: Pick<PendingCall, "tool" | "id" | "args" | "shadow" | "written_twice">): number {
  return textBytes(call.tool) + call.id.bytes + call.args.bytes + shadowBytes(call.shadow) + textBytes(call.written_twice ?? "");
}

const shadowBytes = (shadow: ShadowVerdict | null): number => (shadow ? textBytes(shadow.as_tool) + textBytes(shadow.reason) : 0);

function outcomeFields(outcome: Outcome): { fields: Record<string, unknown>; result: HeldValue | null; bytes: number } {
  if (outcome.type !== "result" && outcome.type !== "error") return { fields: { outcome: { ...outcome } }, result: null, bytes: 0 };
  const result = hold("result", outcome.type === "result" ? outcome.result : outcome.error);
  const http = outcome.status === undefined ? {} : { status: outcome.status };
  if (outcome.type === "result") return { fields: { outcome: { type: "result", is_error: outcome.is_error, ...http } }, result, bytes: result.bytes };
  const summary = errorSummary(outcome.error);
  const summary_bytes = textBytes(String(summary.code)) + textBytes(String(summary.message));
  return { fields: { outcome: { type: "error", ...summary, ...http } }, result, bytes: result.bytes + summary_bytes };
}

export const error_message_chars_max = 1024;

/** Only well-formed parts of a JSON-RPC error: a finite or string code and a string message, strings cut to the limit. */
function errorSummary(error: unknown): { code: number | string | null; message: string | null } {
  if (!isObject(error)) return { code: null, message: null };
  const code = typeof error.code === "string" ? boundedText(error.code, error_message_chars_max) : isId(error.code) ? error.code : null;
  const message = typeof error.message === "string" ? boundedText(error.message, error_message_chars_max) : null;
  return { code, message };
}

/**
 * An `observer.call` entry as it waits in the recorder's queue: every field but the stored args
 * and result, which stay canonical text until the entry is built for its batch.
 */
export class CallEntry implements DeferredInput {
  constructor(
    readonly source_id: string,
    readonly occurred_at: string,
    readonly fields: Record<string, unknown>,
    readonly args: HeldValue,
    readonly result: HeldValue | null,
  ) {}

  build(): AppendInput {
    // Keys in any order: the entry is canonical JSON.
    const body = { ...this.fields, ...stored("args", this.args), ...(this.result ? stored("result", this.result) : {}) };
    return { kind: "observer.call", source: this.source_id, occurred_at: this.occurred_at, body };
  }
}

/** The `observer.call` entry for a completed (or abandoned) call. Headers are never part of it. */
export function callEvidence(call: PendingCall, outcome: Outcome, finished_ms: number, transport: string): CallEvidence {
  const result = outcomeFields(outcome);
  const upstream = call.source.upstream.origin;
  const fields = {
    tool: call.tool,
    ...call.id.fields,
    ...result.fields,
    started_at: call.started_at.toISOString(),
    duration_ms: Math.max(0, Math.round((finished_ms - call.started_ms) * 1000) / 1000),
    upstream,
    transport,
    shadow: call.shadow,
    ...(call.written_twice === undefined ? {} : { key_written_twice: call.written_twice }),
  };
  const input = new CallEntry(call.source.source_id, call.started_at.toISOString(), fields, call.args, result.result);
  // Every part that can grow is counted: names, the id, the origin, held values, the error and the reason.
  const bytes = call_overhead_bytes + heldBytes(call) + textBytes(upstream) + result.bytes;
  return { input, bytes };
}
