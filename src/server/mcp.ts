// The MCP endpoint: Streamable HTTP at /mcp in the SDK's stateless mode (any instance answers
// any request), bearer agent token, Origin checked. Tools are declared by hand so that every
// argument shape reaches the gate's policy (and its evidence) instead of dying in a schema.

import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isJsonContentType } from "@modelcontextprotocol/sdk/shared/mediaType.js";
import { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { CallToolRequestParamsSchema, CallToolRequestSchema, ErrorCode, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { loopback_hosts } from "../config.js";
import { scrub } from "../evidence/scrub.js";
import type { Gate } from "../gate/gate.js";
import type { ToolResult } from "../gate/results.js";
import { declaredToolName, tool_declarations } from "../gate/tools.js";
import { whenAnswerOver, type RoutePlugin } from "./app.js";
import { auditor_only_reads, bearer, isAuditor, type Access } from "./auth.js";
import { unreadMessageReason } from "../ingest/duplicate-keys.js";
import { errorBody } from "./errors.js";
import { isToolCallEnvelope, not_utf8, notJsonRpc, parseError, toolCallRequest, utf8Text, withoutBom } from "./jsonrpc.js";
import { version } from "../version.js";

export const server_info = { name: "bursar", version };

/** The JSON-RPC code the SDK's Streamable HTTP transport refuses an HTTP request with. */
const transport_refusal_code = -32000;

/** One validator for every per-request server: building Ajv anew costs ~0.4 ms a request. */
export const json_schema_validator = new AjvJsonSchemaValidator();

/**
 * tools/call with `name` and `arguments` taken as received. The SDK's own schema wants a string
 * name and an object of arguments (a record it copies key by key), so an array, a string or null
 * died there as a JSON-RPC error with no evidence; the gate refuses them under R0 (arguments) or
 * ALLOWLIST (a name that is not a string) instead. The POST handler has already reduced params
 * to these two members (toolCallRequest).
 */
const call_tool_request = CallToolRequestSchema.extend({
  params: CallToolRequestParamsSchema.extend({ name: z.unknown().optional(), arguments: z.unknown().optional() }),
});
type CallToolRequest = z.infer<typeof call_tool_request>;

/**
 * Registers the tools/call handler the way the SDK's Protocol does. Server's own registration
 * wraps every tools/call handler in a check against the SDK's schema first, which refuses the
 * very argument shapes the policy must see (and record).
 */
function handleToolCalls(server: Server, handler: (request: CallToolRequest) => Promise<ToolResult>): void {
  const register = Protocol.prototype.setRequestHandler as (this: Server, schema: typeof call_tool_request, handler: (request: CallToolRequest) => Promise<ToolResult>) => void;
  register.call(server, call_tool_request, handler);
}

/**
 * What the agent hears when a tool call fails inside the gate (a database error, a bug): never
 * the error's own text, which can name tables, constraints and values. A money call may have
 * taken effect before the failure, so the agent is told to repeat it with the same key.
 */
export const internal_error_message =
  "internal error: the gate could not finish this call and has logged why. A money call may or may not have taken effect: repeat it unchanged, with the same idempotency_key, to learn its outcome";

/**
 * Logs an error thrown by a tool call and returns the generic JSON-RPC -32603 the agent gets
 * instead (the SDK sent the error's own message). The log line has the error's code and its
 * message scrubbed of secret-looking values, the tool (a declared name, else "(undeclared)")
 * and the agent: never the arguments.
 */
function internalError(log: FastifyBaseLogger, agent_id: string, tool: unknown, error: unknown): Error {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  const err = { message: scrub(message), ...(typeof code === "string" || typeof code === "number" ? { code } : {}) };
  log.error({ err, tool: declaredToolName(tool), agent_id }, "tool call failed");
  // The SDK answers a thrown error with its `code` (when an integer) and `message`.
  return Object.assign(new Error(internal_error_message), { code: ErrorCode.InternalError });
}

/** One MCP server per request, bound to the authenticated agent: nothing is kept between requests. */
export function mcpServerFor(gate: Gate, agent_id: string, log: FastifyBaseLogger, during: (work: Promise<unknown>) => void = () => undefined): Server {
  const server = new Server(server_info, { capabilities: { tools: {} }, jsonSchemaValidator: json_schema_validator });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: tool_declarations }));
  handleToolCalls(server, async (request) => {
    const { name, arguments: args } = request.params;
    try {
      // The call goes on when its client leaves (a money call is never abandoned half way).
      const work = gate.callToolAs(agent_id, name, args === undefined ? {} : args);
      during(work);
      return await work;
    } catch (error) {
      throw internalError(log, agent_id, name, error);
    }
  });
  return server;
}

/** A POST body that is not JSON, answered -32700 by the route (not by the error handler's 400 `malformed`). */
class NotJson {
  constructor(readonly reason: string) {}
}

/**
 * JSON for /mcp, parsed as JSON.parse does: a "__proto__" or "constructor" key stays an own
 * property (JSON.parse never sets a prototype), so the policy sees it and refuses it with
 * evidence, where Fastify's default parser answered 400 and nothing was recorded. A leading BOM
 * is skipped, as the stdio bridge skips it. Text that is not JSON, that writes a key twice in one
 * object (which key counts is up to the reader), or that writes a number JSON.parse reads as
 * another, becomes a NotJson, which the route answers as JSON-RPC does (-32700, id null):
 * nothing is decided, so nothing is recorded. Fastify enforces the body limit before the parser
 * runs, and a POST reaches it only once authenticated.
 */
function parseJsonAsIs(request: FastifyRequest, body: Buffer, done: (error: Error | null, value?: unknown) => void): void {
  // GET and DELETE are answered 405 whatever they carry; an empty JSON body must not turn that into a 400.
  if (request.method !== "POST" && body.length === 0) return done(null, undefined);
  const text = utf8Text(body);
  if (text === undefined) return done(null, new NotJson(`the body is not valid JSON: ${not_utf8}`));
  const json = withoutBom(text);
  let parsed: unknown;
  try {
    parsed = JSON.parse(json) as unknown;
  } catch (error) {
    return done(null, new NotJson(`the body is not valid JSON: ${(error as Error).message}`));
  }
  const unread = unreadMessageReason(json, parsed);
  done(null, unread === undefined ? parsed : new NotJson(`the body is refused: ${unread}`));
}

/** Whether `host` (a Host header) is a host and optional port and nothing else: the SDK's
 *  transport builds a URL from it, and answered 400 with an empty body where it could not. */
function hostUsable(host: string | undefined): boolean {
  // A user, path (also after a backslash), query or fragment would parse, as part of a URL but not of its host.
  return host !== undefined && host !== "" && !/[@/\\?#]/.test(host) && URL.canParse(`http://${host}`);
}

/**
 * Browsers send Origin; only loopback origins may drive the gate. A "same host as the Host
 * header" rule would not stop DNS rebinding: after a rebind the page's Origin and the Host
 * header both name the attacker's domain. Clients that are not browsers send no Origin.
 */
export function originAllowed(origin: string | undefined): boolean {
  if (!origin) return true;
  try {
    return loopback_hosts.has(new URL(origin).hostname);
  } catch {
    return false;
  }
}

/**
 * Origin, then the bearer token: the agent the request acts as, or undefined once refused. Run
 * twice for each POST: as its onRequest hook, before the body is read, so a caller without a token
 * cannot make the gate buffer and parse up to the body limit (a refused body that is chunked or
 * declared over the limit closes the connection: buildServer's rule); and again once the body has
 * arrived, so an agent disabled while its body was on the way is refused, not let through on the
 * token its headers carried.
 */
async function authenticate(access: Access, request: FastifyRequest, reply: FastifyReply): Promise<string | undefined> {
  if (!originAllowed(request.headers.origin)) {
    await reply.status(403).send(errorBody("origin_forbidden", "this Origin may not call the gate"));
    return undefined;
  }
  const token = bearer(request.headers.authorization);
  const agent = token ? await access.ledger.authenticateAgent(token) : null;
  if (agent) return agent.agent_id;
  if (token && access.operator.check(token)) {
    await reply.status(403).send(errorBody("forbidden", "the operator token cannot call money tools; use an agent token"));
    return undefined;
  }
  if (token && (await isAuditor(access, token))) {
    await reply.status(403).send(errorBody("forbidden", auditor_only_reads("money tools")));
    return undefined;
  }
  const message = token ? "the agent token is not valid" : "an agent bearer token is required";
  await reply.status(401).header("www-authenticate", "Bearer").send(errorBody("unauthorized", message));
  return undefined;
}

/**
 * Answers one POST in the SDK's stateless Streamable HTTP mode (JSON responses): a fresh
 * transport for `server`, both closed when the response is. Shared with bench:gate's bare
 * server, so both sides of that comparison run the same transport code.
 */
export async function answerStateless(server: Server, request: FastifyRequest, reply: FastifyReply, message: unknown = request.body): Promise<FastifyReply> {
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  reply.hijack();
  reply.raw.on("close", () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(request.raw, reply.raw, message);
  return reply;
}

/**
 * A JSON-RPC batch (an array) is refused whole, before any of it runs: MCP 2025-06-18 removed
 * batching, no SDK client sends one, and one POST carrying up to 100 money calls at once let an
 * agent run them concurrently past every per-request bound (the stdio bridge refuses them too).
 */
const batch_refusal = {
  jsonrpc: "2.0",
  id: null,
  error: { code: ErrorCode.InvalidRequest, message: "JSON-RPC batches are not supported (MCP 2025-06-18 removed batching): send each message in its own request" },
} as const;

/**
 * A body in a content coding (gzip, br, …) is refused before it is read: the gate reads JSON as
 * sent, and such bytes would otherwise fail as "not JSON" (400) when the fault is the coding
 * (RFC 9110 §15.5.16: 415, with the codings accepted in Accept-Encoding).
 */
function encodedBody(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
  const coding = request.headers["content-encoding"]?.trim().toLowerCase();
  if (coding === undefined || coding === "" || coding === "identity") return undefined;
  return reply
    .status(415)
    .header("accept-encoding", "identity")
    .send(errorBody("unsupported_media_type", "the gate reads request bodies without a content coding: send JSON with no Content-Encoding (or identity)"));
}

/**
 * A POST whose Content-Type is missing or names another media type than JSON is answered as the
 * SDK's transport answers it (415, JSON-RPC -32000, id null; its own test of the media type),
 * before the body is read. Left to Fastify, text/plain reached the route as a string (a
 * misleading -32600 "not a valid JSON-RPC message"), other types got Fastify's own 415, and a POST
 * with neither a Content-Type nor a body reached the route with no body (-32600 again).
 */
function notJsonMediaType(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
  const content_type = request.headers["content-type"];
  if (request.method !== "POST" || (content_type !== undefined && isJsonContentType(content_type))) return undefined;
  const message = "Unsupported Media Type: Content-Type must be application/json";
  return reply.status(415).send({ jsonrpc: "2.0", error: { code: transport_refusal_code, message }, id: null });
}

/**
 * Requests one agent may have in flight on /mcp at once, on one instance: each holds its body (up
 * to the 128 KiB limit, message_bytes_max) in memory while it is read and decided, so without a
 * bound one agent's token could hold any number of them (200 in flight of 1 MiB each, the limit
 * then, took 300 MB more, measured).
 * Well above what an agent's own concurrency needs (the tests run 100 calls at once on one).
 */
export const agent_requests_in_flight_max = 128;

/**
 * Counts each agent's /mcp requests from their authentication until their responses close and
 * the gate's work on them (busyUntil) has ended: a client that resets its connection closes it at
 * once, while the gate goes on deciding and forwarding its call with its arguments in memory. A
 * request is counted once, for as long as anything holds it: its open answer, or work on it.
 */
export class RequestsInFlight {
  private readonly counts = new Map<string, number>();
  private readonly open = new WeakMap<object, { agent_id: string; holds: number }>();

  /** Counts one for `agent_id` until its answer is over (whenAnswerOver); false (nothing counted) at the limit. */
  take(agent_id: string, reply: FastifyReply): boolean {
    // A client that left while it was being authenticated: its close has fired already, so a
    // count taken now would never be given back. Nothing more is done for it anyway.
    if (reply.raw.destroyed) return true;
    if ((this.counts.get(agent_id) ?? 0) >= agent_requests_in_flight_max) return false;
    const request = { agent_id, holds: 0 };
    this.open.set(reply.raw, request);
    this.hold(request);
    whenAnswerOver(reply, () => this.letGo(request));
    return true;
  }

  /**
   * Keeps the request counted until `work` has settled too, whenever its answer is over: counted
   * again if its client left before the work began (the work is there all the same).
   */
  busyUntil(reply: FastifyReply, work: Promise<unknown>): void {
    const request = this.open.get(reply.raw);
    if (!request) return;
    this.hold(request);
    const settled = () => this.letGo(request);
    work.then(settled, settled);
  }

  private hold(request: { agent_id: string; holds: number }): void {
    if (request.holds++ === 0) this.counts.set(request.agent_id, (this.counts.get(request.agent_id) ?? 0) + 1);
  }

  private letGo(request: { agent_id: string; holds: number }): void {
    if (--request.holds > 0) return;
    const left = (this.counts.get(request.agent_id) ?? 1) - 1;
    if (left === 0) this.counts.delete(request.agent_id);
    else this.counts.set(request.agent_id, left);
  }
}

function tooManyInFlight(reply: FastifyReply): FastifyReply {
  return reply
    .status(429)
    .header("retry-after", "1")
    .send(
      errorBody(
        "too_many_requests_in_flight",
        `this agent already has ${agent_requests_in_flight_max} requests in flight on this instance; send more once some are answered (nothing was read or decided)`,
      ),
    );
}

export function mcpRoutes(access: Access, gate: Gate): RoutePlugin {
  const in_flight = new RequestsInFlight();
  return async (app: FastifyInstance) => {
    await app.register(async (scope) => {
      scope.removeContentTypeParser("application/json");
      scope.addContentTypeParser("application/json", { parseAs: "buffer" }, parseJsonAsIs);
      const refusedEarly = async (request: FastifyRequest, reply: FastifyReply) => {
        const agent_id = await authenticate(access, request, reply);
        if (!agent_id) return reply;
        if (!in_flight.take(agent_id, reply)) return tooManyInFlight(reply);
        return notJsonMediaType(request, reply) ?? encodedBody(request, reply);
      };
      /** What the POST asks for, once its agent is authenticated again: the server to answer it and the message; undefined once refused (answered). */
      const prepared = async (request: FastifyRequest, reply: FastifyReply): Promise<{ server: Server; message: unknown } | undefined> => {
        const agent_id = await authenticate(access, request, reply);
        if (!agent_id) return undefined;
        if (!hostUsable(request.headers.host)) {
          return void reply.status(400).send(errorBody("malformed", "the Host header is missing or is not a host with an optional port (the MCP transport builds the request's URL from it)"));
        }
        const body = request.body;
        if (body instanceof NotJson) return void reply.status(400).send(parseError(body.reason));
        if (Array.isArray(body)) return void reply.status(400).send(batch_refusal);
        // Every tools/call reaches the gate, whatever its params hold; any other message the SDK
        // would refuse is refused here with its own id (the SDK answered -32700 with id null).
        // (A rebuilt tools/call is a valid request by construction: the money path skips the check.)
        const call = isToolCallEnvelope(body);
        const refused = call ? undefined : notJsonRpc(body);
        if (refused) return void reply.status(400).send(refused.reply);
        const server = mcpServerFor(gate, agent_id, request.log, (work) => in_flight.busyUntil(reply, work));
        return { server, message: call ? toolCallRequest(body) : body };
      };
      scope.post("/mcp", { onRequest: refusedEarly }, async (request, reply) => {
        // Counted while the agent is authenticated again (a client may leave meanwhile), then
        // while a tool call runs (mcpServerFor): the transport's own answer may never settle for
        // a client that left, so it holds no count.
        const preparing = prepared(request, reply);
        in_flight.busyUntil(reply, preparing);
        const ready = await preparing;
        if (!ready) return reply;
        return answerStateless(ready.server, request, reply, ready.message);
      });
      const stateless = async (_request: FastifyRequest, reply: FastifyReply) =>
        reply.status(405).header("allow", "POST").send(errorBody("method_not_allowed", "the gate's /mcp is stateless: POST only"));
      // Every method but POST, which would otherwise be a 404 for a path that exists.
      scope.route({ method: ["GET", "DELETE", "PUT", "PATCH", "OPTIONS"], url: "/mcp", handler: stateless });
    });
  };
}
