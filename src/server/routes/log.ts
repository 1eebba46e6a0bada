// HTTP routes of the evidence log: the public checkpoint and verifier key, and the
// reader-only pages of entries and inclusion/consistency proofs.

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { entries_page_max, EvidenceRangeError, type EvidenceLog } from "../../evidence/index.js";
import type { RoutePlugin } from "../app.js";
import { BearerRequired, HttpError } from "../errors.js";
import { onlyQueryParams, queryInteger } from "../validate.js";

export interface LogRouteDeps {
  log: EvidenceLog;
  /**
   * True when the Authorization header carries the operator or an auditor token. Throws an
   * HttpError 403 for an agent's token (the wrong principal; auth.ts's isReader does), so an
   * agent gets the answer the operator routes give it rather than a 401.
   */
  authorizeReader: (authorizationHeader: string | undefined) => Promise<boolean>;
}

async function requireReader(deps: LogRouteDeps, request: FastifyRequest): Promise<void> {
  if (!(await deps.authorizeReader(request.headers.authorization))) {
    throw new BearerRequired("log entries and proofs need the operator token or an auditor token");
  }
}

/** Maps the log's range errors to 422 naming the parameter and its limit. */
async function withRange<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof EvidenceRangeError) {
      throw new HttpError(422, "invalid_query", error.message, { param: error.param, limit: error.limit });
    }
    throw error;
  }
}

function sendText(reply: FastifyReply, text: string): FastifyReply {
  return reply.header("content-type", "text/plain; charset=utf-8").header("cache-control", "no-store").send(text);
}

export function logRoutes(deps: LogRouteDeps): RoutePlugin {
  return (app: FastifyInstance) => {
    app.get("/api/v1/log/checkpoint", async (request, reply) => {
      onlyQueryParams(request.query, []);
      const checkpoint = await deps.log.latestCheckpoint();
      if (!checkpoint) throw new HttpError(503, "no_checkpoint", "the log has no checkpoint yet");
      return sendText(reply, checkpoint.note);
    });

    app.get("/.well-known/bursar/log-key", async (request, reply) => {
      onlyQueryParams(request.query, []);
      return sendText(reply, `${deps.log.verifierKey}\n`);
    });

    app.get("/api/v1/log/entries", async (request) => {
      await requireReader(deps, request);
      onlyQueryParams(request.query, ["start", "end"]);
      const start = queryInteger(request.query, "start", { fallback: 0 });
      // A page's furthest end: never past the largest safe integer, which start may be.
      const end_max = Math.min(start + entries_page_max, Number.MAX_SAFE_INTEGER);
      const requested = queryInteger(request.query, "end", { fallback: end_max });
      if (requested < start || requested > end_max) {
        const message = `end must be from start to start + ${entries_page_max} (a page holds at most ${entries_page_max} entries)`;
        throw new HttpError(422, "invalid_query", message, { param: "end", limit: end_max });
      }
      const size = await deps.log.treeSize();
      // From the tree size itself a page is empty (a tail polled before anything new came); past it, out of range.
      if (start > size) throw new HttpError(422, "invalid_query", `start must be at most the tree size ${size}`, { param: "start", limit: size });
      const clamped = Math.max(start, Math.min(requested, size));
      const entries = clamped > start ? await withRange(() => deps.log.entries(start, clamped)) : [];
      // A page of large entries stops early (see EvidenceLog.entries): `end` says where.
      return { start, end: start + entries.length, tree_size: size, entries };
    });

    app.get("/api/v1/log/proof/inclusion", async (request) => {
      await requireReader(deps, request);
      onlyQueryParams(request.query, ["index", "size"]);
      const index = queryInteger(request.query, "index");
      const size = queryInteger(request.query, "size");
      return withRange(() => deps.log.inclusionProof(index, size));
    });

    app.get("/api/v1/log/proof/consistency", async (request) => {
      await requireReader(deps, request);
      onlyQueryParams(request.query, ["from", "to"]);
      const from = queryInteger(request.query, "from");
      const to = queryInteger(request.query, "to");
      return withRange(() => deps.log.consistencyProof(from, to));
    });
  };
}
