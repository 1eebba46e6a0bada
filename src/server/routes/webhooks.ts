// POST /webhooks/razorpay: the raw body (≤ 1 MiB, 413 before parsing) goes to the gate's
// webhook handling, which checks the signature over those exact bytes first.

import type { FastifyInstance } from "fastify";
import type { WebhookContext } from "../../gate/context.js";
import { handleWebhook } from "../../gate/webhooks.js";
import { event_id_header_name, signature_header_name, webhook_body_max_bytes } from "../../provider/razorpay/webhook.js";
import type { RoutePlugin } from "../app.js";
import { refuseContentEncoding } from "../content-coding.js";
import { boundUnprovenBody } from "../unproven-bodies.js";
import { headerOf } from "../validate.js";

/** What webhook bodies in flight may hold together before their signatures are checked (Razorpay's are a few KB). */
export const webhook_unproven_bytes_max = 16 * 1_048_576;

export function webhookRoutes(gate: WebhookContext): RoutePlugin {
  return async (app: FastifyInstance) => {
    await app.register(async (scope) => {
      // Encapsulated: only this route sees bodies as raw bytes.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: webhook_body_max_bytes }, (_request, body, done) => done(null, body));
      // Counted whatever refused it (the body's size before the route ran, too): a wrong secret
      // or forged deliveries must not look like no webhooks at all.
      scope.addHook("onResponse", async (_request, reply) => {
        if (reply.statusCode >= 400) gate.observer?.webhookRejected(reply.statusCode);
      });
      // The signature covers the body, so the body is read before its sender is known: bounded together.
      scope.post("/webhooks/razorpay", { bodyLimit: webhook_body_max_bytes, onRequest: refuseContentEncoding, preParsing: boundUnprovenBody("razorpay_webhook", webhook_unproven_bytes_max) }, async (request) => {
        const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        return handleWebhook(gate, raw, { signature: headerOf(request, signature_header_name), event_id: headerOf(request, event_id_header_name) });
      });
    });
  };
}
