// HTTP routes of the evidence log: the public checkpoint and verifier key, and the
// reader-only pages of entries and inclusion/consistency proofs.

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { entries_page_max, EvidenceRangeError, type EvidenceLog } from "../../evidence/index.js";
import { whenAnswerOver, type RoutePlugin } from "../app.js";
import { BearerRequired, HttpError } from "../errors.js";
import { onlyQueryParams, queryInteger } from "../validate.js";

/**
 * Pages of entries being answered at once, process-wide. A page holds up to
 * entries_page_bytes_max of entry text, built whole and sent as one body, and stays in memory
 * until its reader has taken it: readers that never read held ~33 MB each, without bound.
 */
export const entries_pages_in_flight_max = 8;
/** What a reader refused for too many pages in flight is told to wait before it asks again. */
export const entries_busy_retry_after_seconds = 1;

/**
 * Every page that reads entries counts, from before the log is read until its answer has been
 * handed to the connection ('finish') or the connection is gone ('close'). A small page is
 * handed over as soon as it is written (the connection's buffers take it whole, read or not), so
 * it holds its place for milliseconds; only a page larger than those buffers stays in flight
 * against a reader that does not read. An empty page (a tail polled at the tree size) reads no
 * entries and never counts.
 */
let entries_pages_in_flight = 0;

/** Pages of entries in flight now (for tests and metrics). */
export function entriesPagesInFlight(): number {
  return entries_pages_in_flight;
}

/**
 * How long a page may take to reach its reader once its place is taken: a reader that does not
 * read would otherwise hold the place for as long as it kept its connection open, and 8 such
 * readers would refuse every page for good. Past it the connection is closed (a 16 MiB page
 * within it needs under 300 KB/s).
 */
export const entries_page_send_ms_max = 60_000;

/**
 * Takes a place for a page answered on `reply`, given back once, when its answer is done or its
 * connection gone; false when all are taken. The response's own 'close' does not come for a
 * pipelined request queued behind another whose connection closes (Node never starts it), so
 * the socket's 'close' gives the place back too; and past `send_ms_max` the connection is closed.
 */
function takePagePlace(reply: FastifyReply, send_ms_max: number): boolean {
  if (entries_pages_in_flight >= entries_pages_in_flight_max) return false;
  entries_pages_in_flight += 1;
  const deadline = setTimeout(() => reply.raw.destroy(), send_ms_max);
  deadline.unref();
  whenAnswerOver(
    reply,
    () => {
      clearTimeout(deadline);
      entries_pages_in_flight -= 1;
    },
    { finish: true },
  );
  return true;
}

function pagesBusy(reply: FastifyReply): HttpError {
  reply.header("retry-after", String(entries_busy_retry_after_seconds));
  const message = `${entries_pages_in_flight_max} pages of log entries are being answered already; ask again in ${entries_busy_retry_after_seconds} s (nothing was read)`;
  return new HttpError(503, "busy", message, { limit: entries_pages_in_flight_max });
}

export interface LogRouteDeps {
  log: EvidenceLog;
  /**
   * True when the Authorization header carries the operator or an auditor token. Throws an
   * HttpError 403 for an agent's token (the wrong principal; auth.ts's isReader does), so an
   * agent gets the answer the operator routes give it rather than a 401.
   */
  authorizeReader: (authorizationHeader: string | undefined) => Promise<boolean>;
  /** How long a page may take to reach its reader (entries_page_send_ms_max); tests shorten it. */
  page_send_ms_max?: number;
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

    app.get("/api/v1/log/entries", async (request, reply) => {
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
      if (clamped === start) return { start, end: start, tree_size: size, entries: [] };
      // A reader gone while it was authenticated: its close has fired, so a place taken now would never be given back.
      if (reply.raw.destroyed) return reply;
      if (!takePagePlace(reply, deps.page_send_ms_max ?? entries_page_send_ms_max)) throw pagesBusy(reply);
      const entries = await withRange(() => deps.log.entries(start, clamped));
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
