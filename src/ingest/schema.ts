// The decision-record schema `bursar.gateway-decision/1` (records written for
// `interlok.gateway-decision/1` are accepted unchanged): strict objects everywhere except the
// free-form `args`, so a typo cannot silently drop evidence. Published as JSON Schema.

import { z } from "zod";
import { isRfc3339, rfc3339Problem } from "../evidence/entry.js";
import { invisible_or_control_characters } from "../policy/arguments.js";
import { isPlainObject } from "../policy/index.js";

export const decision_schema_ids = ["bursar.gateway-decision/1", "interlok.gateway-decision/1"] as const;
export const decisions = ["allow", "deny", "approve", "hold", "error", "other"] as const;
export const principal_types = ["human", "agent", "service", "system", "other"] as const;
export const event_id_chars_max = 200;
export const text_chars_max = 256;
export const reason_chars_max = 4096;
export const json_schema_id = "https://bursar.dev/schemas/gateway-decision-1.json";

/** No controls (C0, DEL, C1): an event id is a stored key, and PostgreSQL text cannot hold NUL.
 *  Nor what makes an id read as another where it is shown: line and paragraph separators, and the
 *  invisible format characters (Unicode's Cf: soft hyphen, zero-width characters, bidirectional
 *  marks, overrides and isolates, a byte order mark, interlinear annotation). */
const event_id_pattern =
  /^[^\u0000-\u001f\u007f-\u009f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]*$/;
const lone_surrogates = /[\ud800-\udfff]/gu;

/** Besides, whatever a name shown to people may not hold (policy/arguments.ts): the format
 *  characters past U+FFFF (tags, Egyptian, shorthand and musical format controls) and the other
 *  invisible ones (Hangul fillers, the Braille blank, variation selectors). Checked apart from the
 *  pattern, which the published JSON Schema carries and which a validator may read without
 *  Unicode mode, where a code point past U+FFFF cannot be written. A lone surrogate is not
 *  counted: the record's strings are checked for one by a rule of its own, which names it. */
const hidesCharacters = (id: string) => invisible_or_control_characters.test(id.replace(lone_surrogates, ""));

/** surelyValidRecord's test: an id with a lone surrogate is left to the full check too. */
const eventIdShown = (id: string) => event_id_pattern.test(id) && !invisible_or_control_characters.test(id);

const event_id_characters =
  "must not contain control characters (U+0000–U+001F, U+007F–U+009F), line or paragraph separators, or invisible characters (zero-width, bidirectional marks, a byte order mark, tag characters, fillers)";

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

/** isRfc3339's limit: the log keeps at most nanoseconds. */
const occurred_at_fraction_digits_max = 9;
/** One issue saying what is wrong (rfc3339Problem's words): zod's own "Invalid ISO datetime", and
 *  then a second issue for the same value, said nothing about a date that does not exist. A value
 *  that is not a string reads as the empty one (the shape's message); zod's check and isRfc3339
 *  refuse the same times, so one of them failing means rfc3339Problem names something. */
const timeProblem = (input: unknown): string | undefined => rfc3339Problem(typeof input === "string" ? input : "");
const occurred_at = z.iso
  .datetime({ offset: true, error: (issue) => timeProblem(issue.input) })
  .refine(isRfc3339, { error: (issue) => timeProblem(issue.input), when: (payload) => payload.issues.length === 0 });

/**
 * The pattern published for occurred_at: zod's date-time pattern that the check above runs (a real
 * calendar date, hours 00–23, seconds 00–59, upper-case T and Z, an offset up to ±23:59), its
 * unbounded fraction cut to isRfc3339's limit. isRfc3339 checks the same calendar (and Date.parse
 * reads every 4-digit year), so it adds nothing else, and a JSON Schema validator and the server
 * agree on every time.
 */
function publishedTimePattern(checked: string): string {
  const unbounded = "(?:\\.\\d+)?";
  // A zod upgrade that writes the fraction otherwise must fail here, not publish a looser pattern.
  if (checked.split(unbounded).length !== 2) throw new Error(`occurred_at: zod's date-time pattern has no single ${unbounded}: ${checked}`);
  return checked.replace(unbounded, `(?:\\.\\d{1,${occurred_at_fraction_digits_max}})?`);
}

const decision_fields = z.strictObject({
  schema: z.enum(decision_schema_ids),
  event_id: z
    .string()
    .min(1)
    .max(event_id_chars_max)
    .regex(event_id_pattern, { message: event_id_characters, abort: true })
    .refine((id) => !hidesCharacters(id), event_id_characters),
  occurred_at,
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

/** A record-level key that is `args` or `args_hash` but for its case (`ARGS_HASH`): refused as an
 *  unknown field, which names the one mistake; "exactly one of args or args_hash" would be a
 *  second problem for it. */
const miscasedArgs = (issues: readonly z.core.$ZodRawIssue[]): boolean =>
  issues.some((issue) => issue.code === "unrecognized_keys" && (issue.path ?? []).length === 0 && issue.keys.some((key) => /^args(?:_hash)?$/i.test(key)));

/** Exactly one of `args` (bound by its hash) or `args_hash`. */
export const decision_record_schema = decision_fields.superRefine((record, context) => {
  const has_args = record.args !== undefined;
  const has_hash = record.args_hash !== undefined;
  if (has_args === has_hash && (has_args || !miscasedArgs(context.issues))) {
    context.addIssue({ code: "custom", path: [has_args ? "args_hash" : "args"], message: "exactly one of args or args_hash is required" });
  }
});

export type DecisionRecord = z.infer<typeof decision_record_schema>;

// A sufficient check, written out because zod's full parse of a record (which also copies it)
// was the larger part of validating a delivery: true only for records the schema above accepts
// (a property test holds the two side by side). Anything unusual answers false, and the zod
// schema decides and names the problems.

const record_keys = new Set(Object.keys(decision_fields.shape));
const principal_keys = new Set(Object.keys(principal.shape));
const policy_keys = new Set(Object.keys(policy.shape));
const lower_hex_sha256 = /^[0-9a-f]{64}$/;

const isText = (value: unknown, max: number): boolean => typeof value === "string" && value.length >= 1 && value.length <= max;
const isOptionalText = (value: unknown): boolean => value === undefined || isText(value, text_chars_max);
const hasOnlyKeys = (value: Record<string, unknown>, allowed: ReadonlySet<string>): boolean => Object.keys(value).every((key) => allowed.has(key));

/** zod's record check also refuses symbol keys and an own `constructor` that is a class or function. */
function isPlainArgs(value: unknown): boolean {
  return isPlainObject(value) && !Object.hasOwn(value, "constructor") && Object.getOwnPropertySymbols(value).length === 0;
}

function isPrincipal(value: unknown): boolean {
  if (value === undefined) return true;
  if (!isPlainObject(value) || !hasOnlyKeys(value, principal_keys)) return false;
  return (principal_types as readonly unknown[]).includes(value.type) && isOptionalText(value.id) && isOptionalText(value.email) && isOptionalText(value.name);
}

function isPolicy(value: unknown): boolean {
  if (value === undefined) return true;
  if (!isPlainObject(value) || !hasOnlyKeys(value, policy_keys)) return false;
  return isOptionalText(value.id) && isOptionalText(value.name) && isOptionalText(value.version);
}

/** True only when `decision_record_schema` accepts `value`; false means "ask the schema".
 *  (Records come from JSON.parse; an Object.prototype polluted with enumerable keys is out of scope.) */
export function surelyValidRecord(value: unknown): boolean {
  if (!isPlainObject(value) || !hasOnlyKeys(value, record_keys)) return false;
  const has_args = value.args !== undefined;
  if (has_args === (value.args_hash !== undefined)) return false;
  if (has_args ? !isPlainArgs(value.args) : !(typeof value.args_hash === "string" && lower_hex_sha256.test(value.args_hash))) return false;
  return (
    (decision_schema_ids as readonly unknown[]).includes(value.schema) &&
    isText(value.event_id, event_id_chars_max) &&
    eventIdShown(value.event_id as string) &&
    typeof value.occurred_at === "string" &&
    occurred_at.safeParse(value.occurred_at).success &&
    (decisions as readonly unknown[]).includes(value.decision) &&
    isText(value.tool, text_chars_max) &&
    isOptionalText(value.server) &&
    isPrincipal(value.agent) &&
    isPrincipal(value.on_behalf_of) &&
    isPrincipal(value.approver) &&
    isPolicy(value.policy) &&
    (value.reason === undefined || (typeof value.reason === "string" && value.reason.length <= reason_chars_max)) &&
    isOptionalText(value.correlation_id)
  );
}

/** The JSON Schema served at GET /schemas/gateway-decision-1.json (the args/args_hash rule as oneOf). */
export function decisionJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(decision_fields, {
    target: "draft-2020-12",
    override: ({ zodSchema, jsonSchema }) => {
      if (zodSchema === occurred_at && typeof jsonSchema.pattern === "string") jsonSchema.pattern = publishedTimePattern(jsonSchema.pattern);
    },
  }) as Record<string, unknown>;
  return {
    ...generated,
    $id: json_schema_id,
    title: "bursar.gateway-decision/1",
    description: "A decision another MCP gateway made (allow, deny, approve, hold, error, other), ingested as signed evidence.",
    oneOf: [{ required: ["args"] }, { required: ["args_hash"] }],
  };
}
