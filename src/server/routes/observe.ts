// The observer's routes: /observe and /observe/* for every method. The handler authenticates
// the token, then hands the raw request and response to the streaming relay (reply.hijack),
// so no body is parsed or re-serialized on the way through.

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { observer_token_header, type Observer } from "../../observer/index.js";
import type { RoutePlugin } from "../app.js";

export function observeRoutes(observer: Observer): RoutePlugin {
  return async (root: FastifyInstance) => {
    await root.register(async (scope) => {
      scope.removeAllContentTypeParsers();
      // Leaves the body stream unread: the relay streams it to the upstream as it arrives.
      scope.addContentTypeParser("*", (_request, _payload, done) => done(null, undefined));
      const handler = async (request: FastifyRequest, reply: FastifyReply) => {
        observer.track(request.raw.socket);
        const header = request.headers[observer_token_header];
        const target = await observer.target(request.raw.url ?? "/observe", Array.isArray(header) ? header[0] : header);
        reply.hijack();
        observer.relay(target, request.raw, reply.raw);
      };
      scope.all("/observe", handler);
      scope.all("/observe/*", handler);
      // preClose runs before the server's own onClose closes the database: the observer records
      // its open calls and drains its queue while the database is open.
      scope.addHook("preClose", async () => observer.close());
    });
  };
}
