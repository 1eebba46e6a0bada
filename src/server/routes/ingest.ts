// Decision-record ingestion over HTTP: the signed webhook, the API-key push, the operator's
// .jsonl upload, and the published JSON Schema. Bodies are raw bytes (≤ 2 MiB, 413 before
// parsing; in no content coding, 415 before they are read), authenticated before they are read
// (all but the webhook's HMAC) and again before they are split, parsed or validated; an id is
// looked at only past the credential, so none is probeable. Past it, deliveries take turns to be
// decoded and stored, a few at once per process (DeliveryTurns), and too many waiting is 503 busy.

import { randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Clock } from "../../clock.js";
import { BearerRequired, HttpError } from "../../errors.js";
import { delivery_bytes_max, withoutByteOrderMark } from "../../ingest/delivery.js";
import { answerBytes, ingestDelivery, type IngestAnswer, type IngestDependencies } from "../../ingest/ingest.js";
import { decisionJsonSchema } from "../../ingest/schema.js";
import { deliveries_busy_retry_after_seconds, delivery_turns, type DeliveryTurns } from "../../ingest/turns.js";
import { checkTimestamp, parseSignatureHeader, signature_header, verifySignature } from "../../ingest/signature.js";
import type { SourceStore } from "../../sources/store.js";
import type { RoutePlugin } from "../app.js";
import { bearer, requireOperator, type Access } from "../auth.js";
import { refuseContentEncoding } from "../content-coding.js";
import { boundUnprovenBody } from "../unproven-bodies.js";
import { headerOf } from "../validate.js";

export const schema_path = "/schemas/gateway-decision-1.json";
/** What the webhook's bodies in flight may hold together before their signatures are checked (32 whole deliveries). */
export const ingest_unproven_bytes_max = 64 * 1_048_576;

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

const sourceIdOf = (request: FastifyRequest) => (request.params as { id: string }).id;

/** Sends the answer as bytes written record by record (see answerBytes), not as one big string. */
async function answer(reply: FastifyReply, ingested: Promise<IngestAnswer>): Promise<FastifyReply> {
  return reply.type("application/json; charset=utf-8").send(answerBytes(await ingested));
}

/**
 * Decodes, validates and stores a delivery in its turn (see DeliveryTurns): its sender's
 * credential has passed, and the body is whole. Past the deliveries waiting already it is answered
 * 503 `busy` with Retry-After, as a full unproven-body budget is, nothing read or stored. The
 * connection stays open: the body has been read.
 */
function inTurn(turns: DeliveryTurns, reply: FastifyReply, ingest: () => Promise<IngestAnswer>): Promise<IngestAnswer> {
  if (turns.full) {
    reply.header("retry-after", String(deliveries_busy_retry_after_seconds));
    const message = `too many deliveries are being stored or waiting (${turns.in_progress_max} at once, ${turns.waiting_max} waiting); deliver again in ${deliveries_busy_retry_after_seconds} s`;
    throw new HttpError(503, "busy", message);
  }
  return turns.run(ingest);
}

/**
 * A pushed delivery whose API key ended while it was stored (credential_expired) is refused as a
 * bearer token is, naming the scheme; the webhook's key is no bearer token, and its 401 names none.
 */
function bearerExpired(error: unknown): never {
  if (error instanceof HttpError && error.code === "credential_expired") throw new BearerRequired(error.message, error.code);
  throw error;
}

/**
 * A signing key no source has and nobody holds: a delivery to an id without signing keys (unknown,
 * an observer's) is checked against it, so it costs the same HMAC over the body as a wrong
 * signature to a known source and fails the same way.
 */
const unheld_signing_key = randomBytes(32).toString("hex");

/**
 * Why the id cannot take a delivery — 404 `not_found` (no decisions source by that id) or 403
 * `source_disabled` — or undefined. Returned, not thrown: a route answers it only to a caller whose
 * credential for the source passed, and no credential passes for an id without a decisions source.
 */
async function sourceRefusal(sources: SourceStore, source_id: string): Promise<HttpError | undefined> {
  try {
    await sources.decisionsSource(source_id);
    return undefined;
  } catch (error) {
    if (error instanceof HttpError && (error.status === 404 || error.status === 403)) return error;
    throw error;
  }
}

/**
 * Ids are not probeable: each route checks the caller's credential before it looks at what the id
 * names, so an unknown id, an observer's id or a disabled source answers a caller without the
 * source's credential exactly as a wrong credential to a known source does. The webhook's HMAC
 * covers the body, so for every id, known or not, its onRequest hook checks only the
 * Bursar-Signature header's shape and its t= (neither depends on the id), and the handler reads the
 * body and computes an HMAC before it answers (see unheld_signing_key). The API key and the
 * operator token are checked in the onRequest hook, before the body is read, so a caller without
 * them cannot make Bursar wait for and buffer up to 2 MiB first (a refused body that is chunked or
 * declared over the limit closes the connection: buildServer's rule); and again once the body has
 * arrived, so a source disabled or a key expired while the body was on the way is refused. The
 * upload route is the operator's: past the operator token, it names an unknown id (404) and a
 * disabled source (403).
 */
function routes(app: FastifyInstance, options: IngestRouteOptions): void {
  const { sources, ingest } = options;
  // One set of turns for the process, not per server: the deliveries share its one thread.
  const turns = delivery_turns;
  const signatureShape = async (request: FastifyRequest): Promise<void> => {
    checkTimestamp(parseSignatureHeader(headerOf(request, signature_header)), options.clock());
  };
  /** The API key's secret id, once the key is valid for an enabled source. */
  const apiKeySource = async (request: FastifyRequest): Promise<string> => {
    const source_id = sourceIdOf(request);
    const token = bearer(request.headers.authorization);
    if (!token) throw new BearerRequired("the source's API key is required as a bearer token");
    // Both look-ups run for every id, so an unknown id costs what a wrong key does.
    const refusal = await sourceRefusal(sources, source_id);
    const secret_id = await sources.apiKeySecret(source_id, token);
    if (secret_id === undefined || refusal?.status === 404) throw new BearerRequired("the API key is not valid for this source");
    if (refusal) throw refusal;
    return secret_id;
  };
  const operatorSource = async (request: FastifyRequest): Promise<void> => {
    await requireOperator(options.access, request);
    await sources.decisionsSource(sourceIdOf(request));
  };
  const bodyLimit = delivery_bytes_max;
  // A coding is refused past what each route checks before the body, and before the body is read.
  // Its HMAC covers the body, so the body is read before its sender is known: bounded together.
  app.post("/ingest/:id", { bodyLimit, onRequest: [signatureShape, refuseContentEncoding], preParsing: boundUnprovenBody("ingest", ingest_unproven_bytes_max) }, async (request, reply) => {
    const source_id = sourceIdOf(request);
    const raw = rawBody(request);
    // Both look-ups run for every id; an id without a decisions source is checked against a key nobody holds.
    const refusal = await sourceRefusal(sources, source_id);
    const secrets = await sources.signingKeys(source_id);
    const held = refusal?.status !== 404 && secrets.length > 0;
    const matched = verifySignature(headerOf(request, signature_header), held ? secrets.map((secret) => secret.key) : [unheld_signing_key], raw, options.clock());
    if (refusal) throw refusal;
    const secret_ids = matched.map((index) => secrets[index]!.secret_id);
    return answer(reply, inTurn(turns, reply, () => ingestDelivery(ingest, source_id, raw, secret_ids)));
  });
  app.post("/api/v1/evidence-sources/:id/events", { bodyLimit, onRequest: [apiKeySource, refuseContentEncoding] }, async (request, reply) => {
    const secret_id = await apiKeySource(request);
    return answer(reply, inTurn(turns, reply, () => ingestDelivery(ingest, sourceIdOf(request), rawBody(request), [secret_id])).catch(bearerExpired));
  });
  app.post("/api/v1/evidence-sources/:id/upload", { bodyLimit, onRequest: [operatorSource, refuseContentEncoding] }, async (request, reply) => {
    await operatorSource(request);
    // A file's contents, sent as is: the byte order mark an editor may have written is left out,
    // as send-decisions leaves it out (signed and pushed deliveries that start with one are refused).
    return answer(reply, inTurn(turns, reply, () => ingestDelivery(ingest, sourceIdOf(request), withoutByteOrderMark(rawBody(request)))));
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
      // The media type is not used: a header that names none (empty, ";;;") would otherwise be
      // answered 415 before the body is read, though the same bytes without it are stored.
      scope.addHook("onRequest", async (request) => {
        delete request.headers["content-type"];
      });
      routes(scope, options);
    });
  };
}
