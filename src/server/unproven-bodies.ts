// Bodies read before their sender is known. The signed ingest webhook (POST /ingest/:id) and
// Razorpay's (POST /webhooks/razorpay) check an HMAC over the whole body, so they must read all
// of it first, and each such body held what had come of it for as long as its sender took (up to
// the 5-minute request timeout): 100 stalled uploads to each held 300 MiB, and nothing bounded
// how many. Each of these routes now has a budget per server for the bytes such bodies hold, and
// a deadline for a body to arrive whole.

import type { Server } from "node:http";
import { Transform, type Readable } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import { HttpError } from "../errors.js";

/** What a sender refused for a full budget is told to wait before it delivers again. */
export const unproven_body_retry_after_seconds = 5;
/** How long a body read before its sender is known may take to arrive whole, from its head. */
export const unproven_body_deadline_ms = 60_000;

/** Bytes held by bodies in flight, per server and route (routes do not share a budget, so one
 *  cannot starve another: ingest traffic never holds up Razorpay's webhooks). */
const held_by_server = new WeakMap<Server, Map<string, { bytes: number }>>();

function heldFor(server: Server, route: string): { bytes: number } {
  let routes = held_by_server.get(server);
  if (!routes) held_by_server.set(server, (routes = new Map()));
  let held = routes.get(route);
  if (!held) routes.set(route, (held = { bytes: 0 }));
  return held;
}

/**
 * A preParsing hook for a route that reads its body before it can tell who sent it. The bytes of
 * the body are counted as they arrive (a head alone holds nothing) against `budget_bytes`, shared
 * by the route's bodies in flight on this server, until the body has been read or the request is
 * gone (its connection closed). A chunk that would take the budget past it ends the request with
 * 503 `busy` and Retry-After, its connection closed; a body not whole within `deadline_ms` of its
 * head, with 408 `body_timeout`. A sender that waits and delivers again is then answered as usual.
 */
export function boundUnprovenBody(route: string, budget_bytes: number, deadline_ms = unproven_body_deadline_ms) {
  return async (request: FastifyRequest, reply: FastifyReply, payload: Readable): Promise<Readable> => {
    const held = heldFor(request.server.server, route);
    let counted = 0;
    const release = () => {
      held.bytes -= counted;
      counted = 0;
      clearTimeout(timer);
    };
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        if (held.bytes + chunk.length > budget_bytes) {
          reply.header("retry-after", String(unproven_body_retry_after_seconds)).header("connection", "close");
          const message = `too many deliveries are arriving at once (their bodies would hold over ${budget_bytes} bytes before their senders are known); deliver again in ${unproven_body_retry_after_seconds} s`;
          return done(new HttpError(503, "busy", message));
        }
        held.bytes += chunk.length;
        counted += chunk.length;
        done(null, chunk);
      },
    });
    // Fastify listens for the body's error only while it reads it: a late one must not go unheard.
    counter.on("error", () => undefined);
    const timer = setTimeout(() => {
      if (counter.destroyed || counter.writableFinished) return;
      reply.header("connection", "close");
      counter.destroy(new HttpError(408, "body_timeout", `the body did not arrive whole within ${deadline_ms / 1000} s of its head`));
    }, deadline_ms);
    timer.unref();
    // The request closes once its body has been read, or when its connection closes (a pipelined
    // request queued behind an answer never read is destroyed then, its answer never finishing).
    request.raw.once("close", release);
    // An answer sent before the body was read whole (a 415 for a malformed Content-Type, a 413, the
    // 503 or 408 here) leaves it unread: the bytes counted go, and the rest is discarded as Node
    // discards any unread body (the pipe took that from Node), unless the connection is closing.
    const abandon = () => {
      if (counter.writableFinished) return;
      payload.unpipe(counter);
      counter.destroy();
      release();
      if (String(reply.raw.getHeader("connection") ?? "").toLowerCase() !== "close") payload.resume();
    };
    reply.raw.once("finish", abandon);
    reply.raw.once("close", abandon);
    return payload.pipe(counter);
  };
}
