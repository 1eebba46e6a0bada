// Decision-record ingestion over HTTP: the signed webhook, the API-key push, the operator's
// .jsonl upload, and the published JSON Schema. Bodies are raw bytes (≤ 2 MiB, 413 before
// parsing), authenticated before they are split, parsed or validated.

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Clock } from "../../clock.js";
import { HttpError } from "../../errors.js";
import { delivery_bytes_max } from "../../ingest/delivery.js";
import { answerBytes, ingestDelivery, type IngestAnswer, type IngestDependencies } from "../../ingest/ingest.js";
import { decisionJsonSchema } from "../../ingest/schema.js";
import { signature_header, verifySignature } from "../../ingest/signature.js";
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

function routes(app: FastifyInstance, options: IngestRouteOptions): void {
  const { sources, ingest } = options;
  const limit = { bodyLimit: delivery_bytes_max };
  app.post("/ingest/:id", limit, async (request, reply) => {
    const source_id = sourceIdOf(request);
    await sources.decisionsSource(source_id);
    const raw = rawBody(request);
    verifySignature(headerOf(request, signature_header), await sources.signingKeys(source_id), raw, options.clock());
    return answer(reply, ingestDelivery(ingest, source_id, raw));
  });
  app.post("/api/v1/evidence-sources/:id/events", limit, async (request, reply) => {
    const source_id = sourceIdOf(request);
    const token = bearer(request.headers.authorization);
    if (!token) throw new HttpError(401, "unauthorized", "the source's API key is required as a bearer token");
    await sources.decisionsSource(source_id);
    if (!(await sources.apiKeyValid(source_id, token))) throw new HttpError(401, "unauthorized", "the API key is not valid for this source");
    return answer(reply, ingestDelivery(ingest, source_id, rawBody(request)));
  });
  app.post("/api/v1/evidence-sources/:id/upload", limit, async (request, reply) => {
    await requireOperator(options.access, request);
    const source_id = sourceIdOf(request);
    await sources.decisionsSource(source_id);
    return answer(reply, ingestDelivery(ingest, source_id, rawBody(request)));
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
