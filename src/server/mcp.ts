// The MCP endpoint: Streamable HTTP at /mcp in the SDK's stateless mode (any instance answers
// any request), bearer agent token, Origin checked. Tools are declared by hand so that every
// argument shape reaches the gate's policy (and its evidence) instead of dying in a schema.

import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Gate } from "../gate/gate.js";
import { tool_declarations } from "../gate/tools.js";
import type { RoutePlugin } from "./app.js";
import { bearer, type Access } from "./auth.js";
import { errorBody } from "./errors.js";

export const server_info = { name: "bursar", version: "0.1.0" };

/** One validator for every per-request server: building Ajv anew costs ~0.4 ms a request. */
export const json_schema_validator = new AjvJsonSchemaValidator();

/** One MCP server per request, bound to the authenticated agent: nothing is kept between requests. */
export function mcpServerFor(gate: Gate, agent_id: string): Server {
  const server = new Server(server_info, { capabilities: { tools: {} }, jsonSchemaValidator: json_schema_validator });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: tool_declarations }));
  server.setRequestHandler(CallToolRequestSchema, async (request) =>
    gate.callToolAs(agent_id, request.params.name, request.params.arguments ?? {}),
  );
  return server;
}

/** Browsers send Origin; only same-host and loopback origins may drive the gate (DNS rebinding). */
export function originAllowed(origin: string | undefined, host: string | undefined): boolean {
  if (!origin) return true;
  try {
    const url = new URL(origin);
    const host_name = (host ?? "").replace(/:\d+$/, "");
    return url.hostname === "localhost" || url.hostname === "127.0.0.1" || url.hostname === "[::1]" || url.hostname === host_name;
  } catch {
    return false;
  }
}

async function authenticate(access: Access, request: FastifyRequest, reply: FastifyReply): Promise<string | undefined> {
  if (!originAllowed(request.headers.origin, request.headers.host)) {
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

export function mcpRoutes(access: Access, gate: Gate): RoutePlugin {
  return (app: FastifyInstance) => {
    app.post("/mcp", async (request, reply) => {
      const agent_id = await authenticate(access, request, reply);
      if (!agent_id) return reply;
      return answerStateless(mcpServerFor(gate, agent_id), request, reply);
    });
    const stateless = async (_request: FastifyRequest, reply: FastifyReply) =>
      reply.status(405).header("allow", "POST").send(errorBody("method_not_allowed", "the gate's /mcp is stateless: POST only"));
    app.get("/mcp", stateless);
    app.delete("/mcp", stateless);
  };
}
