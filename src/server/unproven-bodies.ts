// Bodies read before their sender is known. The signed ingest webhook (POST /ingest/:id) and
// Razorpay's (POST /webhooks/razorpay) check an HMAC over the whole body, so they must read all
// of it first, and each such body held its route's limit (2 MiB, 1 MiB) for as long as its
// sender took to send it (up to the 5-minute request timeout). 100 stalled uploads of each held
// 300 MiB, and nothing bounded how many: these routes share one budget per server instead.

import type { Server } from "node:http";
import type { FastifyReply, FastifyRequest } from "fastify";
import { errorBody } from "./errors.js";

/** What the bodies of unauthenticated senders may hold together, per server. */
export const unproven_body_bytes_max = 64 * 1_048_576;
/** What a sender refused for the budget is told to wait before it delivers again. */
export const unproven_body_retry_after_seconds = 5;

/** Bytes reserved by bodies in flight, per server (all routes of one server share it). */
const reserved = new WeakMap<Server, { bytes: number }>();

/**
 * An onRequest hook for a route that reads its body (at most `limit` bytes) before it can tell
 * who sent it. The body's declared length (the limit for a chunked one) is reserved until the
 * answer is sent or the connection closes; a request that would take the budget past
 * `budget_bytes` is answered 503 `busy` with Retry-After before its body is read, and its
 * connection closed. A sender that waits and delivers again is then answered as usual.
 */
export function boundUnprovenBody(limit: number, budget_bytes = unproven_body_bytes_max) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const declared = Number(request.headers["content-length"]);
    // Over the limit, Fastify answers 413 before the body is read: nothing to reserve.
    if (Number.isSafeInteger(declared) && declared > limit) return undefined;
    const bytes = Number.isSafeInteger(declared) && request.headers["transfer-encoding"] === undefined ? declared : limit;
    const server = request.server.server;
    const held = reserved.get(server) ?? { bytes: 0 };
    reserved.set(server, held);
    if (held.bytes + bytes > budget_bytes) {
      const message = `too many deliveries are arriving at once (their bodies would hold over ${budget_bytes} bytes before their senders are known); deliver again in ${unproven_body_retry_after_seconds} s`;
      return reply.status(503).header("retry-after", String(unproven_body_retry_after_seconds)).header("connection", "close").send(errorBody("busy", message));
    }
    held.bytes += bytes;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      held.bytes -= bytes;
    };
    reply.raw.once("close", release);
    reply.raw.once("finish", release);
    return undefined;
  };
}
