// JSON-RPC envelopes as /mcp and the stdio bridge read them, before the MCP SDK does: the same
// -32700 / -32600 answers on both, and tools/call requests whose params the SDK would refuse.

import { ErrorCode, JSONRPCMessageSchema, RequestIdSchema, type JSONRPCRequest, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import { holdsMoreValues, isPlainObject } from "../policy/index.js";
import { visibleText } from "../policy/arguments.js";
import { shortened } from "../policy/text.js";

export interface JsonRpcError {
  jsonrpc: "2.0";
  id: RequestId | null;
  error: { code: number; message: string };
}

/** -32700: the text is not JSON, so no id can be read from it (JSON-RPC 2.0 §5.1). The parser's
 *  detail quotes the text: its control and invisible characters are written as escapes. */
export function parseError(detail: string): JsonRpcError {
  return { jsonrpc: "2.0", id: null, error: { code: ErrorCode.ParseError, message: `Parse error: ${visibleText(detail)}` } };
}

/** -32600: JSON, but not a request this endpoint takes; `id` is the message's own when readable. */
export function invalidRequest(id: RequestId | null, message: string): JsonRpcError {
  return { jsonrpc: "2.0", id, error: { code: ErrorCode.InvalidRequest, message } };
}

/** A message's id when it is one JSON-RPC allows at all (a string or a number, even 4.5), else undefined. */
export function requestId(message: unknown): RequestId | undefined {
  const id = (message as { id?: unknown } | null)?.id;
  return typeof id === "string" || typeof id === "number" ? id : undefined;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * JSON text's bytes as a string, or undefined when they are not UTF-8 (RFC 8259 §8.1). Decoded
 * leniently, each bad byte became U+FFFD, so two keys that differ only in bad bytes ("buy\xff",
 * "buy\xfe") were one key and the second purchase replayed the first; a lone surrogate, the
 * same mistake written as an escape, is refused under R0 (docs/rules.md).
 */
export function utf8Text(bytes: Buffer): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Why JSON text whose bytes utf8Text refuses is not JSON. */
export const not_utf8 = "it is not UTF-8, as JSON text must be (RFC 8259 §8.1)";

/** A leading U+FEFF (a UTF-8 BOM, as some Windows tools write) is not part of the JSON text (RFC 8259 §8.1). */
export function withoutBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** Valid JSON-RPC, but not a call: the SDK takes it as a notification, which nothing handles and
 *  nobody answers (202), so the call was neither decided nor recorded. */
const call_without_id = "a tools/call is a request and needs an id; sent as a notification it would get no answer, and the gate decides and records only the calls it answers";

/**
 * The -32600 answer for a parsed message the SDK's schema refuses, and why (quoting the first
 * schema issue); undefined for a valid JSON-RPC message. A tools/call envelope (isToolCallEnvelope)
 * is never refused for its params: /mcp does not ask for one, and the bridge forwards one it refuses.
 */
export function notJsonRpc(message: unknown): { reply: JsonRpcError; why: string } | undefined {
  if (isPlainObject(message) && message.method === "tools/call" && !("id" in message)) {
    const why = `not a valid JSON-RPC message: ${call_without_id}`;
    return { reply: invalidRequest(null, why), why };
  }
  const outsized = outsizedMessage(message);
  const checked = outsized ? undefined : JSONRPCMessageSchema.safeParse(message);
  if (checked?.success) return undefined;
  const issue = checked?.error.issues[0];
  const schema_says = issue ? `${issue.path.join(".") || "(message)"}: ${issue.message}` : "refused";
  const why = `not a valid JSON-RPC message: ${envelopeProblem(message) ?? outsized ?? schema_says}`;
  return { reply: invalidRequest(requestId(message) ?? null, why), why };
}

/**
 * How deep a message (other than a tools/call, whose arguments the gate reads) may nest objects
 * and arrays; no message an MCP client sends comes near it. A response nested 400,000 deep
 * overflowed the SDK's stack: it answered -32700 with id null and the RangeError's text.
 */
export const message_depth_max = 64;
/**
 * The most bytes a message may take as a /mcp request body: the server's body limit for JSON
 * routes (app.ts), known here to the stdio bridge, which refuses a longer one unsent. A valid
 * call's arguments stay under about 30 KB even written with every character escaped, so 128 KiB
 * leaves room for any client's spacing. It was 1 MiB: one agent's 128 requests in flight of a
 * megabyte of empty objects each (JSON.parse alone takes 70 ms or more per megabyte of them,
 * 2 ms per 128 KiB, measured) held the event loop for 5 to 11 s, so every other agent waited.
 */
export const message_bytes_max = 131_072;
/**
 * How many values (object members and array elements at any depth) such a message may hold, as
 * a tools/call's arguments may (argument_values_max). An initialize of 1 MiB whose clientInfo
 * held 499,000 bad icons took the SDK 6–8 s of the one thread to answer, with every schema
 * issue written out: a 120 MB answer.
 */
export const message_values_max = 1_000;

/** Why a message is refused before the SDK reads it, or undefined: it nests too deep, or holds too many values. */
function outsizedMessage(message: unknown): string | undefined {
  if (nestsDeeperThan(message, message_depth_max)) return `it nests objects and arrays more than ${message_depth_max} deep`;
  if (holdsMoreValues(message, message_values_max)) return `it holds more than ${message_values_max} values (object members and array elements at any depth)`;
  return undefined;
}

/** True when `value` nests objects and arrays deeper than `max`, walked without recursion
 *  (JSON.parse takes nesting deeper than the call stack); it stops at the first level past it. */
function nestsDeeperThan(value: unknown, max: number): boolean {
  const pending: unknown[] = [value];
  const depths: number[] = [0];
  while (pending.length > 0) {
    const item = pending.pop();
    const depth = depths.pop()!;
    if (item === null || typeof item !== "object") continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      pending.push(child);
      depths.push(depth + 1);
    }
  }
  return false;
}

const request_members = new Set(["jsonrpc", "id", "method", "params"]);
const message_members = ["jsonrpc", "id", "method", "params", "result", "error"];

/**
 * A member's value as a refusal shows it: a string or scalar as JSON, shortened; an object or
 * array only by its kind (written out, one nested 400,000 deep overflowed the stack: a 500).
 */
function shownMember(value: unknown): string {
  if (value === undefined) return "nothing";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object" && value !== null) return "an object";
  return shortened(JSON.stringify(value));
}

/**
 * What is wrong with a message's envelope, said in its own terms; undefined when the envelope is
 * not the problem. The SDK's schema is a union of message kinds, whose first issue for a message
 * that fits none is only "(message): Invalid input".
 */
function envelopeProblem(message: unknown): string | undefined {
  if (!isPlainObject(message)) return "a message is a JSON object";
  if (message.jsonrpc !== "2.0") return `jsonrpc must be "2.0", got ${shownMember(message.jsonrpc)}`;
  const extra = Object.keys(message).find((key) => !message_members.includes(key));
  if (extra !== undefined) return `unknown member ${JSON.stringify(extra)} (a message holds only ${message_members.join(", ")})`;
  if ("id" in message && !RequestIdSchema.safeParse(message.id).success) return "id must be a string or an integer";
  if ("method" in message && typeof message.method !== "string") return "method must be a string";
  if ("params" in message && !isPlainObject(message.params)) return "params must be an object (MCP names every parameter)";
  if (!("method" in message) && !("result" in message) && !("error" in message)) {
    return "a message needs a method (a request or a notification), or a result or an error (a response)";
  }
  return undefined;
}

export interface ToolCallEnvelope {
  jsonrpc: "2.0";
  id: RequestId;
  method: "tools/call";
  params?: unknown;
}

/**
 * A tools/call whose envelope (jsonrpc, id, method, no other top-level member) is a valid
 * JSON-RPC request, whatever its params hold. Such a message is a call the agent made: it must
 * reach the gate's policy, not die in the SDK's schema (see toolCallRequest). A message that
 * fails as JSON-RPC itself (a wrong version, an id 4.5, an extra member) is not a call: -32600.
 */
export function isToolCallEnvelope(message: unknown): message is ToolCallEnvelope {
  if (!isPlainObject(message) || message.jsonrpc !== "2.0" || message.method !== "tools/call") return false;
  return RequestIdSchema.safeParse(message.id).success && Object.keys(message).every((key) => request_members.has(key));
}

/**
 * The tools/call as the gate's handler takes it: params holding only the name and the arguments,
 * as received (a name of any type, or none). The SDK refused the rest before any handler ran, so
 * those calls had no evidence and did not count toward R6 (DESIGN: every money call that reaches
 * the policy counts; any argument shape reaches it):
 * - `task` is dropped: the gate declares no task capability, and MCP 2025-11-25 says a receiver
 *   without it MUST process the request normally, ignoring the task metadata (the SDK answered
 *   -32603 "Server does not support task creation", or a schema error for a malformed one).
 * - `_meta` (progress token, related task) is dropped: the gate sends no progress and keeps no
 *   tasks, so it reads none of it; a malformed one made the transport answer -32700.
 * - params that are not an object (a string, an array, null) carry no name: they become the
 *   arguments of a call with none, which the gate refuses under ALLOWLIST with evidence.
 * A missing or non-string name is left for the gate, which records it and refuses it under
 * ALLOWLIST (Gate.callToolAs); a name that is a string is decided as usual.
 */
export function toolCallRequest(message: ToolCallEnvelope): JSONRPCRequest {
  const { params } = message;
  const call: Record<string, unknown> = {};
  if (isPlainObject(params)) {
    if (Object.hasOwn(params, "name")) call.name = params.name;
    if (Object.hasOwn(params, "arguments")) call.arguments = params.arguments;
  } else if (params !== undefined) {
    call.arguments = params;
  }
  return { jsonrpc: "2.0", id: message.id, method: "tools/call", params: call };
}
