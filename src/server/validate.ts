// Request bodies validated by zod: a failure is 422 naming every bad field by path.

import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { hasLoneSurrogate } from "../evidence/canonical.js";
import { nameCharacterProblem } from "../policy/index.js";
import { HttpError } from "./errors.js";

/** A request header's value; its first when sent more than once (Node joins most, keeps some as a list). */
export function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A name an operator gives (agent, auditor, evidence source): trimmed, 1..max characters, and no
 *  control or invisible characters (PostgreSQL text cannot hold NUL; logs and the console print
 *  names, and a bidi override or a zero-width space would show one name as another). The message
 *  names the first such character by its code point, since printing it would repeat the trick. */
export function nameSchema(max: number) {
  return z
    .string()
    .trim()
    .min(1)
    .max(max)
    .superRefine((name, context) => {
      const problem = nameCharacterProblem(name);
      if (problem !== undefined) context.addIssue({ code: "custom", message: problem });
    });
}

/** NUL, which PostgreSQL text cannot hold, and a lone surrogate, which no evidence entry can. */
const unstorable = (text: string): boolean => text.includes("\u0000") || hasLoneSurrogate(text);

/** Deeper than any operator body's schema reaches: left to the schema, which refuses it. */
const unstorable_depth_max = 64;

/** The path of the first string (key or value) in `value` that holds what cannot be stored. */
function unstorablePath(value: unknown, path: readonly (string | number)[]): string | undefined {
  if (typeof value === "string") return unstorable(value) ? path.join(".") || "(body)" : undefined;
  if (typeof value !== "object" || value === null || path.length >= unstorable_depth_max) return undefined;
  for (const [key, item] of Object.entries(value)) {
    const at = [...path, Array.isArray(value) ? Number(key) : key];
    if (unstorable(key)) return at.join(".");
    const found = unstorablePath(item, at);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * A body's fields by the schema, 422 naming each bad field. Any string in it, key or value, that
 * holds NUL or a lone surrogate is refused first (422 naming it): stored, it failed as a 500.
 */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const bad = unstorablePath(body, []);
  if (bad !== undefined) throw validationFailed(bad, "must not contain a NUL character or a lone surrogate");
  // No body is `{}`; a body that is the JSON literal null is a body, and not an object.
  const parsed = schema.safeParse(body === undefined ? {} : body);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    field: issue.path.length > 0 ? issue.path.join(".") : ((issue as { keys?: string[] }).keys?.join(", ") ?? "(body)"),
    message: issue.message,
  }));
  const first = issues[0] as { field: string; message: string };
  throw new HttpError(422, "validation_failed", `${first.field}: ${first.message}`, { issues });
}

/** An action route takes no body: none, or `{}`. One with keys (a deny's "reason", say) was
 *  dropped unread while the operator believed it recorded; it is refused as any unknown key is. */
const no_body = z.object({}).strict();

/** Route options for an action route (see no_body): the body is checked before the handler runs. */
export const takes_no_body = {
  preValidation: async (request: FastifyRequest) => {
    parseBody(no_body, request.body);
  },
};

/** One field (of a body, or a header) refused: 422 `validation_failed` in parseBody's shape. */
export function validationFailed(field: string, message: string): HttpError {
  return new HttpError(422, "validation_failed", `${field}: ${message}`, { issues: [{ field, message }] });
}

/** A query parameter refused: 422 `invalid_query` naming it, with `details.param` (and any limit). */
export function invalidQuery(param: string, message: string, details: Record<string, unknown> = {}): HttpError {
  return new HttpError(422, "invalid_query", `${param} ${message}`, { param, ...details });
}

/**
 * Refuses a query parameter the route does not take: 422 `invalid_query` naming it and the ones
 * it does. A misspelt one (`?status=pending` for `state`) was ignored, and the answer (every
 * approval, or the log from its start) looked like an answer to the question asked.
 */
export function onlyQueryParams(query: unknown, taken: readonly string[]): void {
  for (const param of Object.keys((query ?? {}) as Record<string, unknown>)) {
    if (taken.includes(param)) continue;
    const takes = taken.length === 0 ? "it takes none" : `it takes ${taken.map((name) => `\`${name}\``).join(", ")}`;
    throw invalidQuery(param, `is not a parameter of this route; ${takes}`, { taken });
  }
}

/** Query integers: digits only, no sign or leading zero; at most 16 digits keeps them exact JavaScript numbers. */
const query_integer_pattern = /^(0|[1-9][0-9]{0,15})$/;

/**
 * The query parameter `name` as an integer (`fallback` when it is absent and one is given): 422
 * `invalid_query` naming it when it is not one, or lies outside min..max (`details.limit`: max).
 */
export function queryInteger(query: unknown, name: string, range: { fallback?: number; min?: number; max?: number } = {}): number {
  const { fallback, min = 0, max } = range;
  const raw = (query as Record<string, unknown> | undefined)?.[name];
  if (raw === undefined && fallback !== undefined) return fallback;
  const value = typeof raw === "string" && query_integer_pattern.test(raw) ? Number(raw) : Number.NaN;
  if (Number.isSafeInteger(value) && value >= min && (max === undefined || value <= max)) return value;
  // Digits past the largest exact integer are out of range, not "not an integer".
  const past_exact = typeof raw === "string" && /^[0-9]+$/.test(raw) && !Number.isSafeInteger(Number(raw));
  const limit = max ?? (past_exact ? Number.MAX_SAFE_INTEGER : undefined);
  if (limit !== undefined) throw invalidQuery(name, `must be an integer from ${min} to ${limit}`, { limit });
  throw invalidQuery(name, min === 0 ? "must be a non-negative integer" : `must be an integer of at least ${min}`);
}
