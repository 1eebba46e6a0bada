// Correlating `tools/call` requests with their responses: a JSON body or the POST's SSE stream
// answers the calls its own request carried; a resumed GET stream answers calls by (source, MCP
// session id, JSON-RPC id). Each completed call becomes its `observer.call` entry.

import { representable } from "../evidence/canonical.js";
import { canonicalJson, sha256Hex, type AppendInput } from "../evidence/index.js";
import type { ObserverSource } from "../sources/store.js";
import { shadowVerdict } from "./shadow.js";

export const pending_calls_max = 10_000;
/** A call with no response after this long is recorded as `no_response`. */
export const pending_call_ttl_ms = 15 * 60_000;
/** Args or results whose canonical JSON is larger are kept by hash only. */
export const stored_value_chars_max = 65_536;
export const tool_name_chars_max = 256;
/** The shadow verdict's reason can quote an argument's name; it is cut to this. */
export const shadow_reason_chars_max = 1024;

type JsonRpcId = string | number;

export interface PendingCall {
  source: ObserverSource;
  /** The MCP session id; "" when the server uses none (then only its own request can answer it). */
  session: string;
  /** The HTTP exchange (one request) that carried the call, numbered by the correlator. */
  exchange: number;
  id: JsonRpcId;
  tool: string;
  args: unknown;
  started_at: Date;
  started_ms: number;
}

export type Outcome =
  | { type: "result"; is_error: boolean; result: unknown }
  | { type: "error"; error: unknown }
  | { type: "no_response"; reason: "timeout" | "evicted" | "http_status" | "unreadable_response" | "stream_ended"; status?: number };

export interface CallEvidence {
  input: AppendInput;
  /** Approximate bytes held while queued. */
  bytes: number;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

const isId = (value: unknown): value is JsonRpcId => typeof value === "string" || (typeof value === "number" && Number.isFinite(value));

/**
 * At most `chars_max` UTF-16 units of `text`, never ending inside a surrogate pair, with lone
 * surrogates replaced: canonical JSON has no form for half a character, so a cut must not make one.
 */
export function boundedText(text: string, chars_max: number): string {
  let end = Math.min(text.length, chars_max);
  const last = text.charCodeAt(end - 1);
  if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
  return representable(text.slice(0, end)) as string;
}

/** The tools/call requests among parsed JSON-RPC messages (one message or a batch). */
export function toolCalls(parsed: unknown): Array<{ id: JsonRpcId; tool: string; args: unknown }> {
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  const calls: Array<{ id: JsonRpcId; tool: string; args: unknown }> = [];
  for (const message of messages) {
    if (!isObject(message) || message.method !== "tools/call" || !isId(message.id)) continue;
    const params = isObject(message.params) ? message.params : {};
    const tool = typeof params.name === "string" ? boundedText(params.name, tool_name_chars_max) : "(unnamed)";
    calls.push({ id: message.id, tool, args: params.arguments ?? {} });
  }
  return calls;
}

/** JSON-RPC responses (result or error with an id) among parsed messages. */
export function responses(parsed: unknown): Array<{ id: JsonRpcId; outcome: Outcome }> {
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  const found: Array<{ id: JsonRpcId; outcome: Outcome }> = [];
  for (const message of messages) {
    if (!isObject(message) || !isId(message.id) || "method" in message) continue;
    if ("result" in message) {
      const result = message.result;
      found.push({ id: message.id, outcome: { type: "result", is_error: isObject(result) && result.isError === true, result } });
    } else if ("error" in message) {
      found.push({ id: message.id, outcome: { type: "error", error: message.error } });
    }
  }
  return found;
}

const idKey = (id: JsonRpcId): string => `${typeof id}:${String(id)}`;

/**
 * Pending calls, each under the exchange that carried it, so a response is matched to its own
 * request even when two clients of a server without sessions both use JSON-RPC id 1. Calls with
 * a session are also indexed by (source, session, id) for responses on a resumed GET stream;
 * without a session id there is nothing to tie one request to another, so none is guessed.
 */
export class Correlator {
  /** By exchange and id, in arrival order: the oldest (and expired) calls are at the front. */
  private readonly pending = new Map<string, PendingCall>();
  /** (source, session, id) → the key in `pending` of the latest such call. */
  private readonly in_session = new Map<string, string>();
  private exchanges = 0;

  constructor(private readonly onExpired: (call: PendingCall, reason: "timeout" | "evicted") => void) {}

  private static key(exchange: number, id: JsonRpcId): string {
    return `${exchange}\n${idKey(id)}`;
  }

  private static sessionKey(source_id: string, session: string, id: JsonRpcId): string {
    return `${source_id}\n${session}\n${idKey(id)}`;
  }

  get size(): number {
    return this.pending.size;
  }

  /** A number for a new exchange, unique for this correlator's life. */
  nextExchange(): number {
    return ++this.exchanges;
  }

  add(call: PendingCall): void {
    this.expire(call.started_ms);
    const key = Correlator.key(call.exchange, call.id);
    // The same id twice in one request (a batch): the first cannot be told apart any more.
    const previous = this.pending.get(key);
    if (previous) this.evict(key, previous, "evicted");
    if (this.pending.size >= pending_calls_max) {
      const [oldest_key, oldest] = this.pending.entries().next().value as [string, PendingCall];
      this.evict(oldest_key, oldest, "evicted");
    }
    this.pending.set(key, call);
    // A later call with the same session and id takes the index; the earlier one stays pending,
    // still answerable by its own request.
    if (call.session !== "") this.in_session.set(Correlator.sessionKey(call.source.source_id, call.session, call.id), key);
  }

  private remove(key: string, call: PendingCall): void {
    this.pending.delete(key);
    if (call.session === "") return;
    const session_key = Correlator.sessionKey(call.source.source_id, call.session, call.id);
    if (this.in_session.get(session_key) === key) this.in_session.delete(session_key);
  }

  private evict(key: string, call: PendingCall, reason: "timeout" | "evicted"): void {
    this.remove(key, call);
    this.onExpired(call, reason);
  }

  private takeKey(key: string): PendingCall | undefined {
    const call = this.pending.get(key);
    if (call) this.remove(key, call);
    return call;
  }

  /** The call with this id that `exchange` carried, removed; undefined when none is pending. */
  takeOwn(exchange: number, id: JsonRpcId): PendingCall | undefined {
    return this.takeKey(Correlator.key(exchange, id));
  }

  /** The latest pending call of this session with this id, whichever request carried it (a resumed GET stream's answer). */
  takeInSession(source_id: string, session: string, id: JsonRpcId): PendingCall | undefined {
    if (session === "") return undefined;
    const key = this.in_session.get(Correlator.sessionKey(source_id, session, id));
    return key === undefined ? undefined : this.takeKey(key);
  }

  /** Map order is arrival order, so the expired calls are at the front. */
  expire(now_ms: number): void {
    for (const [key, call] of this.pending) {
      if (now_ms - call.started_ms < pending_call_ttl_ms) return;
      this.evict(key, call, "timeout");
    }
  }

  /** Every pending call, removed (on close). */
  drainAll(): PendingCall[] {
    const calls = [...this.pending.values()];
    this.pending.clear();
    this.in_session.clear();
    return calls;
  }
}

/** A value's canonical text and hash, or null when JSON cannot carry it canonically. */
function bound(value: unknown): { text: string; sha256: string } | null {
  try {
    const text = canonicalJson(value);
    return { text, sha256: sha256Hex(text) };
  } catch {
    return null;
  }
}

/** Stores `value` when small; always its hash. `chars` feeds the queue's byte bound. */
function keep(name: string, value: unknown): { fields: Record<string, unknown>; chars: number } {
  const hashed = bound(value);
  if (!hashed) return { fields: { [`${name}_hash`]: null, [`${name}_omitted`]: "not_canonical_json" }, chars: 0 };
  if (hashed.text.length > stored_value_chars_max) return { fields: { [`${name}_hash`]: hashed.sha256, [`${name}_omitted`]: "too_large" }, chars: 0 };
  return { fields: { [`${name}_hash`]: hashed.sha256, [name]: value }, chars: hashed.text.length };
}

function outcomeFields(outcome: Outcome): { fields: Record<string, unknown>; chars: number } {
  if (outcome.type === "no_response") return { fields: { outcome: { ...outcome } }, chars: 0 };
  const kept = keep("result", outcome.type === "result" ? outcome.result : outcome.error);
  const summary = outcome.type === "result" ? { type: "result", is_error: outcome.is_error } : { type: "error", ...errorSummary(outcome.error) };
  return { fields: { outcome: summary, ...kept.fields }, chars: kept.chars };
}

export const error_message_chars_max = 1024;

/** Only well-formed parts of a JSON-RPC error: a finite or string code and a string message. */
function errorSummary(error: unknown): { code: number | string | null; message: string | null } {
  if (!isObject(error)) return { code: null, message: null };
  const code = typeof error.code === "string" ? boundedText(error.code, error_message_chars_max) : isId(error.code) ? error.code : null;
  const message = typeof error.message === "string" ? boundedText(error.message, error_message_chars_max) : null;
  return { code, message };
}

/** The `observer.call` entry for a completed (or abandoned) call. Headers are never part of it. */
export function callEvidence(call: PendingCall, outcome: Outcome, finished_ms: number, transport: string): CallEvidence {
  const args = keep("args", call.args);
  const result = outcomeFields(outcome);
  const shadow = shadowVerdict(call.source.shadow, call.tool, call.args, call.started_at);
  const body = {
    tool: call.tool,
    jsonrpc_id: call.id,
    ...args.fields,
    ...result.fields,
    started_at: call.started_at.toISOString(),
    duration_ms: Math.max(0, Math.round((finished_ms - call.started_ms) * 1000) / 1000),
    upstream: call.source.upstream.origin,
    transport,
    shadow: shadow && { ...shadow, reason: boundedText(shadow.reason, shadow_reason_chars_max) },
  };
  const input: AppendInput = { kind: "observer.call", source: call.source.source_id, occurred_at: call.started_at.toISOString(), body };
  return { input, bytes: 1024 + args.chars + result.chars };
}
