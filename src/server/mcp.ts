// The MCP endpoint: Streamable HTTP at /mcp in the SDK's stateless mode (any instance answers
// any request), bearer agent token, Origin checked. Tools are declared by hand so that every
// argument shape reaches the gate's policy (and its evidence) instead of dying in a schema.

import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { CallToolRequestParamsSchema, CallToolRequestSchema, ErrorCode, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { loopback_hosts } from "../config.js";
import type { Gate } from "../gate/gate.js";
import type { ToolResult } from "../gate/results.js";
import { tool_declarations } from "../gate/tools.js";
import type { RoutePlugin } from "./app.js";
import { bearer, type Access } from "./auth.js";
import { errorBody } from "./errors.js";

export const server_info = { name: "bursar", version: "0.1.0" };

/** One validator for every per-request server: building Ajv anew costs ~0.4 ms a request. */
export const json_schema_validator = new AjvJsonSchemaValidator();

/**
 * tools/call with `arguments` taken as received. The SDK's own schema wants an object (a record
 * it copies key by key), so an array, a string or null died there as a JSON-RPC error with no
 * evidence; the gate refuses them under R0 instead.
 */
const call_tool_request = CallToolRequestSchema.extend({
  params: CallToolRequestParamsSchema.extend({ arguments: z.unknown().optional() }),
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

/** One MCP server per request, bound to the authenticated agent: nothing is kept between requests. */
export function mcpServerFor(gate: Gate, agent_id: string): Server {
  const server = new Server(server_info, { capabilities: { tools: {} }, jsonSchemaValidator: json_schema_validator });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: tool_declarations }));
  handleToolCalls(server, async (request) => {
    const args = request.params.arguments;
    return gate.callToolAs(agent_id, request.params.name, args === undefined ? {} : args);
  });
  return server;
}

/**
 * JSON for /mcp, parsed as JSON.parse does: a "__proto__" or "constructor" key stays an own
 * property (JSON.parse never sets a prototype), so the policy sees it and refuses it with
 * evidence, where Fastify's default parser answered 400 and nothing was recorded. Fastify
 * enforces the body limit before the parser runs, and a POST reaches it only once authenticated.
 */
function parseJsonAsIs(request: FastifyRequest, body: string, done: (error: Error | null, value?: unknown) => void): void {
  // GET and DELETE are answered 405 whatever they carry; an empty JSON body must not turn that into a 400.
  if (request.method !== "POST" && body === "") return done(null, undefined);
  try {
    done(null, JSON.parse(body) as unknown);
  } catch (error) {
    done(Object.assign(new Error(`the body is not valid JSON: ${(error as Error).message}`), { statusCode: 400 }));
  }
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
  const message = token ? "the agent token is not valid" : "an agent bearer token is required";
  await reply.status(401).header("www-authenticate", "Bearer").send(errorBody("unauthorized", message));
  return undefined;
}

/**
 * Answers one POST in the SDK's stateless Streamable HTTP mode (JSON responses): a fresh
 * transport for `server`, both closed when the response is. Shared with bench:gate's bare
 * server, so both sides of that comparison run the same transport code.
 */
export async function answerStateless(server: Server, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  reply.hijack();
  reply.raw.on("close", () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(request.raw, reply.raw, request.body);
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

export function mcpRoutes(access: Access, gate: Gate): RoutePlugin {
  return async (app: FastifyInstance) => {
    await app.register(async (scope) => {
      scope.removeContentTypeParser("application/json");
      scope.addContentTypeParser("application/json", { parseAs: "string" }, parseJsonAsIs);
      const refusedEarly = async (request: FastifyRequest, reply: FastifyReply) => ((await authenticate(access, request, reply)) ? encodedBody(request, reply) : reply);
      scope.post("/mcp", { onRequest: refusedEarly }, async (request, reply) => {
        const agent_id = await authenticate(access, request, reply);
        if (!agent_id) return reply;
        if (Array.isArray(request.body)) return reply.status(400).send(batch_refusal);
        return answerStateless(mcpServerFor(gate, agent_id), request, reply);
      });
      const stateless = async (_request: FastifyRequest, reply: FastifyReply) =>
        reply.status(405).header("allow", "POST").send(errorBody("method_not_allowed", "the gate's /mcp is stateless: POST only"));
      scope.get("/mcp", stateless);
      scope.delete("/mcp", stateless);
    });
  };
}
