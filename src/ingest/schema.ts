// The decision-record schema `bursar.gateway-decision/1` (records written for
// `interlok.gateway-decision/1` are accepted unchanged): strict objects everywhere except the
// free-form `args`, so a typo cannot silently drop evidence. Published as JSON Schema.

import { z } from "zod";
import { isRfc3339 } from "../evidence/entry.js";

export const decision_schema_ids = ["bursar.gateway-decision/1", "interlok.gateway-decision/1"] as const;
export const decisions = ["allow", "deny", "approve", "hold", "error", "other"] as const;
export const principal_types = ["human", "agent", "service", "system", "other"] as const;
export const event_id_chars_max = 200;
export const text_chars_max = 256;
export const reason_chars_max = 4096;
export const json_schema_id = "https://bursar.dev/schemas/gateway-decision-1.json";

const short_text = z.string().min(1).max(text_chars_max);

const principal = z.strictObject({
  id: short_text.optional(),
  email: short_text.optional(),
  name: short_text.optional(),
  type: z.enum(principal_types),
});

const policy = z.strictObject({
  id: short_text.optional(),
  name: short_text.optional(),
  version: short_text.optional(),
});

const decision_fields = z.strictObject({
  schema: z.enum(decision_schema_ids),
  event_id: z.string().min(1).max(event_id_chars_max),
  occurred_at: z.iso.datetime({ offset: true }).refine(isRfc3339, "must be an RFC 3339 time with at most 9 fraction digits"),
  decision: z.enum(decisions),
  tool: short_text,
  server: short_text.optional(),
  args: z.record(z.string(), z.unknown()).optional(),
  args_hash: z.string().regex(/^[0-9a-f]{64}$/, "must be 64 lower-case hex digits (SHA-256 of the RFC 8785 JSON of the args)").optional(),
  agent: principal.optional(),
  on_behalf_of: principal.optional(),
  approver: principal.optional(),
  policy: policy.optional(),
  reason: z.string().max(reason_chars_max).optional(),
  correlation_id: short_text.optional(),
});

/** Exactly one of `args` (bound by its hash) or `args_hash`. */
export const decision_record_schema = decision_fields.superRefine((record, context) => {
  const has_args = record.args !== undefined;
  const has_hash = record.args_hash !== undefined;
  if (has_args === has_hash) {
    context.addIssue({ code: "custom", path: [has_args ? "args_hash" : "args"], message: "exactly one of args or args_hash is required" });
  }
});

export type DecisionRecord = z.infer<typeof decision_record_schema>;

/** The JSON Schema served at GET /schemas/gateway-decision-1.json (the args/args_hash rule as oneOf). */
export function decisionJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(decision_fields, { target: "draft-2020-12" }) as Record<string, unknown>;
  return {
    ...generated,
    $id: json_schema_id,
    title: "bursar.gateway-decision/1",
    description: "A decision another MCP gateway made (allow, deny, approve, hold, error, other), ingested as signed evidence.",
    oneOf: [{ required: ["args"] }, { required: ["args_hash"] }],
  };
}
