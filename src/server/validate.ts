// Request bodies validated by zod: a failure is 422 naming every bad field by path.

import type { z } from "zod";
import { HttpError } from "./errors.js";

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
