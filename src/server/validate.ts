// Request bodies validated by zod: a failure is 422 naming every bad field by path.

import { z } from "zod";
import { control_characters } from "../policy/index.js";
import { HttpError } from "./errors.js";

/** A name an operator gives (agent, auditor, evidence source): trimmed, 1..max characters, and no
 *  control characters (PostgreSQL text cannot hold NUL; logs and the console print names). */
export function nameSchema(max: number) {
  return z
    .string()
    .trim()
    .min(1)
    .max(max)
    .refine((name) => !control_characters.test(name), "must not contain control characters");
}

export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    field: issue.path.length > 0 ? issue.path.join(".") : ((issue as { keys?: string[] }).keys?.join(", ") ?? "(body)"),
    message: issue.message,
  }));
  const first = issues[0] as { field: string; message: string };
  throw new HttpError(422, "validation_failed", `${first.field}: ${first.message}`, { issues });
}
