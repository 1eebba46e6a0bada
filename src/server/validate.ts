// Request bodies validated by zod: a failure is 422 naming every bad field by path.

import { z } from "zod";
import { hasLoneSurrogate } from "../evidence/canonical.js";
import { invisibleOrControlCharacter } from "../policy/index.js";
import { HttpError } from "./errors.js";

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
      const character = invisibleOrControlCharacter(name);
      if (character !== undefined) {
        context.addIssue({ code: "custom", message: `must not contain ${character} (invisible or control character)` });
      }
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
  if (bad !== undefined) {
    const message = "must not contain a NUL character or a lone surrogate";
    throw new HttpError(422, "validation_failed", `${bad}: ${message}`, { issues: [{ field: bad, message }] });
  }
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    field: issue.path.length > 0 ? issue.path.join(".") : ((issue as { keys?: string[] }).keys?.join(", ") ?? "(body)"),
    message: issue.message,
  }));
  const first = issues[0] as { field: string; message: string };
  throw new HttpError(422, "validation_failed", `${first.field}: ${first.message}`, { issues });
}
