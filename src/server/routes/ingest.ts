// Decision-record ingestion over HTTP: the signed webhook, the API-key push, the operator's
// .jsonl upload, and the published JSON Schema. Bodies are raw bytes (≤ 2 MiB, 413 before
// parsing), authenticated before they are read (all but the HMAC) and again before they are split,
// parsed or validated.

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Clock } from "../../clock.js";
import { HttpError } from "../../errors.js";
import { delivery_bytes_max } from "../../ingest/delivery.js";
import { answerBytes, ingestDelivery, type IngestAnswer, type IngestDependencies } from "../../ingest/ingest.js";
import { decisionJsonSchema } from "../../ingest/schema.js";
import { checkTimestamp, parseSignatureHeader, signature_header, verifySignature } from "../../ingest/signature.js";
import type { SourceStore } from "../../sources/store.js";
import type { RoutePlugin } from "../app.js";
import { bearer, requireOperator, type Access } from "../auth.js";

export const schema_path = "/schemas/gateway-decision-1.json";

export interface IngestRouteOptions {
  access: Access;
  sources: SourceStore;
  ingest: IngestDependencies;
  /** The webhook's signature clock (injectable for the ±300 s tolerance tests). */
  clock: Clock;
}

function rawBody(request: FastifyRequest): Buffer {
  return Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

const sourceIdOf = (request: FastifyRequest) => (request.params as { id: string }).id;

/** Sends the answer as bytes written record by record (see answerBytes), not as one big string. */
async function answer(reply: FastifyReply, ingested: Promise<IngestAnswer>): Promise<FastifyReply> {
  return reply.type("application/json; charset=utf-8").send(answerBytes(await ingested));
}

/**
 * What each route can check without the body (the credential, and that the id names an enabled
 * decisions source) runs twice: as its onRequest hook, before the body is read, so a caller
 * without a credential, or one naming no such source, cannot make Bursar wait for and buffer up to
 * 2 MiB first (a refused body that is chunked or declared over the limit closes the connection:
 * buildServer's rule); and again once the body has arrived, so a source disabled or a key expired
 * while the body was on the way is refused. The webhook's HMAC covers the body, so its hook checks
 * only the Bursar-Signature header's shape and its t=; the handler checks all of it.
 */
function routes(app: FastifyInstance, options: IngestRouteOptions): void {
  const { sources, ingest } = options;
  const signedSource = async (request: FastifyRequest): Promise<void> => {
    await sources.decisionsSource(sourceIdOf(request));
    checkTimestamp(parseSignatureHeader(headerOf(request, signature_header)), options.clock());
  };
  const apiKeySource = async (request: FastifyRequest): Promise<void> => {
    const source_id = sourceIdOf(request);
    const token = bearer(request.headers.authorization);
    if (!token) throw new HttpError(401, "unauthorized", "the source's API key is required as a bearer token");
    await sources.decisionsSource(source_id);
    if (!(await sources.apiKeyValid(source_id, token))) throw new HttpError(401, "unauthorized", "the API key is not valid for this source");
  };
  const operatorSource = async (request: FastifyRequest): Promise<void> => {
    await requireOperator(options.access, request);
    await sources.decisionsSource(sourceIdOf(request));
  };
  const bodyLimit = delivery_bytes_max;
  app.post("/ingest/:id", { bodyLimit, onRequest: signedSource }, async (request, reply) => {
    const source_id = sourceIdOf(request);
    await sources.decisionsSource(source_id);
    const raw = rawBody(request);
    verifySignature(headerOf(request, signature_header), await sources.signingKeys(source_id), raw, options.clock());
    return answer(reply, ingestDelivery(ingest, source_id, raw));
  });
  app.post("/api/v1/evidence-sources/:id/events", { bodyLimit, onRequest: apiKeySource }, async (request, reply) => {
    await apiKeySource(request);
    return answer(reply, ingestDelivery(ingest, sourceIdOf(request), rawBody(request)));
  });
  app.post("/api/v1/evidence-sources/:id/upload", { bodyLimit, onRequest: operatorSource }, async (request, reply) => {
    await operatorSource(request);
    return answer(reply, ingestDelivery(ingest, sourceIdOf(request), rawBody(request)));
  });
}

export function ingestRoutes(options: IngestRouteOptions): RoutePlugin {
  const schema = decisionJsonSchema();
  return async (root: FastifyInstance) => {
    root.get(schema_path, async (_request, reply) => reply.type("application/schema+json").send(schema));
    await root.register(async (scope) => {
      // Encapsulated: only these routes see bodies as raw bytes, hashed as received.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: delivery_bytes_max }, (_request, body, done) => done(null, body));
      routes(scope, options);
    });
  };
}
