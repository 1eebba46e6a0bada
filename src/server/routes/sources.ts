// Operator routes for evidence sources: create (secrets shown once), list, show, rotate
// (old and new secrets both valid for a grace period), disable, and observer shadow settings.

import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { shadow_settings_schema } from "../../observer/shadow.js";
import {
  rotation_grace_seconds_default,
  rotation_grace_seconds_max,
  rotation_key_pattern,
  source_kinds,
  source_name_chars_max,
  upstream_url_chars_max,
  type SourceSecrets,
  type SourceStore,
  type SourceView,
} from "../../sources/store.js";
import type { RoutePlugin } from "../app.js";
import { requireOperator, type Access } from "../auth.js";
import { refuseContentEncoding } from "../content-coding.js";
import { nameSchema, parseBody, takes_no_body, validationFailed } from "../validate.js";

const upstream_url = z
  .string()
  .max(upstream_url_chars_max)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (url.protocol === "http:" || url.protocol === "https:") && url.username === "" && url.password === "" && url.hash === "";
    } catch {
      return false;
    }
  }, "must be an http(s) URL without credentials or fragment");

const create_source = z
  .strictObject({
    kind: z.enum(source_kinds),
    name: nameSchema(source_name_chars_max),
    upstream_url: upstream_url.optional(),
    shadow: shadow_settings_schema.optional(),
  })
  .superRefine((input, context) => {
    if (input.kind === "observer" && input.upstream_url === undefined) context.addIssue({ code: "custom", path: ["upstream_url"], message: "an observer needs upstream_url" });
    if (input.kind === "decisions" && input.upstream_url !== undefined) context.addIssue({ code: "custom", path: ["upstream_url"], message: "only an observer has upstream_url" });
    if (input.kind === "decisions" && input.shadow !== undefined) context.addIssue({ code: "custom", path: ["shadow"], message: "only an observer has shadow settings" });
  });
const rotate_source = z.strictObject({ grace_seconds: z.number().int().min(0).max(rotation_grace_seconds_max).optional() });
const set_shadow = z.strictObject({ shadow: shadow_settings_schema.nullable() });

/** The server's own base URL as the caller reached it. */
export function baseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/** What the operator copies: the source plus its secrets (shown once) and where to use them. */
function withSecrets(request: FastifyRequest, source: SourceView, secrets: SourceSecrets): Record<string, unknown> {
  const base = baseUrl(request);
  if ("observer_token" in secrets) {
    return { id: source.id, kind: source.kind, name: source.name, observer_url: `${base}/observe`, observer_token: secrets.observer_token, origin: source.origin };
  }
  return {
    id: source.id,
    kind: source.kind,
    name: source.name,
    signing_key: secrets.signing_key,
    api_key: secrets.api_key,
    ingest_url: `${base}/ingest/${source.id}`,
    events_url: `${base}/api/v1/evidence-sources/${source.id}/events`,
  };
}

const idOf = (request: FastifyRequest) => (request.params as { id: string }).id;

/** A rotation's Idempotency-Key header, if sent: 422 naming the header when it is not 1..255 visible ASCII characters. */
function rotationKey(request: FastifyRequest): string | undefined {
  const key = request.headers["idempotency-key"];
  if (key === undefined) return undefined;
  if (typeof key === "string" && rotation_key_pattern.test(key)) return key;
  throw validationFailed("Idempotency-Key", "the header must be 1 to 255 visible ASCII characters (no spaces), sent once");
}

export function sourceRoutes(access: Access, sources: SourceStore): RoutePlugin {
  return async (root: FastifyInstance) => {
    await root.register(async (app) => {
      app.addHook("onRequest", async (request) => requireOperator(access, request));
      app.addHook("onRequest", refuseContentEncoding);
      app.post("/api/v1/evidence-sources", async (request, reply) => {
        const created = await sources.create(parseBody(create_source, request.body));
        return reply.status(201).send(withSecrets(request, created.source, created.secrets));
      });
      app.get("/api/v1/evidence-sources", async () => ({ sources: await sources.list() }));
      app.get("/api/v1/evidence-sources/:id", async (request) => sources.view(idOf(request)));
      app.post("/api/v1/evidence-sources/:id/rotate", async (request) => {
        const { grace_seconds } = parseBody(rotate_source, request.body);
        const rotated = await sources.rotate(idOf(request), grace_seconds ?? rotation_grace_seconds_default, rotationKey(request));
        const replayed = rotated.replayed ? { replayed: true } : {};
        return { ...withSecrets(request, rotated.source, rotated.secrets), previous_valid_until: rotated.previous_valid_until, ...replayed };
      });
      app.post("/api/v1/evidence-sources/:id/disable", takes_no_body, async (request) => sources.disable(idOf(request)));
      app.put("/api/v1/evidence-sources/:id/shadow", async (request) => {
        const { shadow } = parseBody(set_shadow, request.body);
        return sources.setShadow(idOf(request), shadow);
      });
    });
  };
}

