// The observer's routes: /observe and /observe/* for every method. An onRequest hook
// authenticates the token, then hands the raw request and response to the streaming relay
// (reply.hijack) before Fastify would read the body: no body is parsed or re-serialized on the
// way through, and no Content-Type (missing, empty, malformed) is refused by Fastify's own 415.

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { observer_token_header, type Observer } from "../../observer/index.js";
import type { RoutePlugin } from "../app.js";

export function observeRoutes(observer: Observer): RoutePlugin {
  return async (root: FastifyInstance) => {
    await root.register(async (scope) => {
      const relayRequest = async (request: FastifyRequest, reply: FastifyReply) => {
        observer.track(request.raw.socket);
        const header = request.headers[observer_token_header];
        const target = await observer.target(request.raw.url ?? "/observe", Array.isArray(header) ? header[0] : header);
        reply.hijack();
        observer.relay(target, request.raw, reply.raw);
      };
      // A hijacked reply ends the request's lifecycle at its onRequest hook: the handler is never
      // reached. Headers are the upstream's to judge, two Authorization headers too (app.ts).
      const routed = { onRequest: relayRequest, handler: unreachable, config: { relayed: true } };
      scope.all("/observe", routed);
      scope.all("/observe/*", routed);
      // preClose runs before the server's own onClose closes the database: the observer records
      // its open calls and drains its queue while the database is open.
      scope.addHook("preClose", async () => observer.close());
    });
  };
}

async function unreachable(): Promise<never> {
  throw new Error("an observer request reached its route handler: its onRequest hook relays every request it does not refuse");
}
