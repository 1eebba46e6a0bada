// All-or-nothing validation of a delivery's records: every bad record is named by its index
// and each field path, so the sender can fix the whole delivery at once.

import type { z } from "zod";
import { canonical_depth_max, CanonicalJsonError, canonicalSha256Hex, hasLoneSurrogate } from "../evidence/index.js";
import { invisible_or_control_characters } from "../policy/arguments.js";
import { isPlainObject } from "../policy/index.js";
import { HttpError } from "../errors.js";
import { shownPath } from "../policy/text.js";
import type { ReceivedRecord } from "./delivery.js";
import { decision_record_schema, surelyValidRecord, type DecisionRecord } from "./schema.js";

/** Problems reported per delivery; more are counted but not listed. */
export const problems_listed_max = 1000;

export interface RecordProblem {
  index: number;
  field: string;
  message: string;
}

export interface ValidRecord {
  index: number;
  /** The record exactly as parsed from the bytes received (not zod's copy). */
  value: DecisionRecord;
  sha256: string;
  /** The args' binding: SHA-256 of the RFC 8785 JSON of the unscrubbed args, or the sender's args_hash. */
  args_hash: string;
}

/** What RFC 8785, and so the evidence log, cannot write, though JSON.parse accepted it. */
const lone_surrogate_message = "holds a lone surrogate (a \\uD800-\\uDFFF escape without its pair), which UTF-8 cannot carry";
const out_of_range_message = "holds a number JSON cannot represent exactly (out of range)";
const too_deep_message = `is nested deeper than ${canonical_depth_max} levels`;
const inexact_number_message =
  "holds a number JSON parsers read as another (more digits than a double gives back, as in a 19-digit id, or so small it reads as 0): it would be stored as another; send it as a string";

/** A problem's field: the path with each (sender-chosen, possibly huge) key shortened. */
const fieldName = (path: readonly string[]) => (path.length > 0 ? shownPath(path) : "(record)");

/**
 * Adds a problem for every place in `value` canonical JSON cannot write, walking as canonicalJson
 * does from `depth`: a string or key with a lone surrogate, a non-finite number (1e400 parses to
 * Infinity), a value nested past canonical_depth_max. `path` is the value's own, and is restored.
 */
function unwritable(index: number, value: unknown, path: string[], depth: number, problems: RecordProblem[]): void {
  if (problems.length >= problems_listed_max) return;
  if (depth > canonical_depth_max) {
    problems.push({ index, field: fieldName(path), message: too_deep_message });
  } else if (typeof value === "string") {
    if (hasLoneSurrogate(value)) problems.push({ index, field: fieldName(path), message: lone_surrogate_message });
  } else if (typeof value === "number") {
    if (!Number.isFinite(value)) problems.push({ index, field: fieldName(path), message: out_of_range_message });
  } else if (value !== null && typeof value === "object") {
    const entries: Array<[string, unknown]> = Array.isArray(value) ? value.map((item, i) => [String(i), item]) : Object.entries(value);
    for (const [key, item] of entries) {
      path.push(key);
      if (!Array.isArray(value) && hasLoneSurrogate(key)) problems.push({ index, field: fieldName(path), message: `its name ${lone_surrogate_message}` });
      unwritable(index, item, path, depth + 1, problems);
      path.pop();
    }
  }
}

/** The args' RFC 8785 hash; or, when canonical JSON cannot write them, the problems naming where. */
function argsHash(index: number, args: unknown): string | RecordProblem[] {
  try {
    return canonicalSha256Hex(args);
  } catch (error) {
    if (!(error instanceof CanonicalJsonError)) throw error;
    const problems: RecordProblem[] = [];
    unwritable(index, args, ["args"], 0, problems);
    return problems.length > 0 ? problems : [{ index, field: "args", message: error.message }];
  }
}

function zodProblems(index: number, issues: readonly z.core.$ZodIssue[]): RecordProblem[] {
  return issues.flatMap((issue) => {
    const path = issue.path.map(String);
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((key) => ({ index, field: fieldName([...path, key]), message: "unknown field" }));
    }
    return [{ index, field: fieldName(path), message: issue.message }];
  });
}

function schemaProblems(record: ReceivedRecord): RecordProblem[] {
  if (surelyValidRecord(record.value)) return [];
  const parsed = decision_record_schema.safeParse(record.value);
  return parsed.success ? [] : zodProblems(record.index, parsed.error.issues);
}

/**
 * One record: valid (with its args hash), or every problem found in it. A record the schema
 * accepts can still hold what the log cannot write (a lone surrogate in `reason`, 1e400 in
 * `args`); it is refused here, naming the field, so appending it later cannot fail. A record
 * with a key twice or a number JSON reads as another still parsed, so its fields are checked
 * too, and the sender learns of every problem at once.
 */
function checkRecord(record: ReceivedRecord): ValidRecord | RecordProblem[] {
  const { index, value } = record;
  if (record.syntax_error !== undefined) return [{ index, field: "(record)", message: `not valid JSON: ${record.syntax_error}` }];
  const problems: RecordProblem[] = [];
  if (record.duplicate_key !== undefined) {
    problems.push({ index, field: record.duplicate_key, message: "this key occurs twice in one object; keys must be unique (the hash binds both)" });
  }
  if (record.inexact_number !== undefined) problems.push({ index, field: record.inexact_number, message: inexact_number_message });
  for (const problem of schemaProblems(record)) problems.push(problem);
  if (record.unhashable !== undefined || !isPlainObject(value)) {
    // An array element that could not be hashed is walked whole, from its root as it was hashed.
    const found = problems.length;
    unwritable(index, value, [], 0, problems);
    if (record.unhashable !== undefined && problems.length === found) problems.push({ index, field: "(record)", message: record.unhashable });
    return problems;
  }
  // Outside args the schema allows only short strings and objects of them: a cheap walk.
  for (const [key, item] of Object.entries(value)) if (key !== "args") unwritable(index, item, [key], 1, problems);
  const args_hash = value.args === undefined ? value.args_hash : argsHash(index, value.args);
  if (Array.isArray(args_hash)) for (const problem of args_hash) problems.push(problem);
  if (problems.length > 0) return problems;
  return { index, value: value as DecisionRecord, sha256: record.sha256, args_hash: args_hash as string };
}

/** The records, all valid; or a 422 listing every problem: `details.problems[{index, field, message}]`. */
export function validateRecords(records: readonly ReceivedRecord[]): ValidRecord[] {
  const valid: ValidRecord[] = [];
  const problems: RecordProblem[] = [];
  for (const record of records) {
    const checked = checkRecord(record);
    // A loop, not push(...checked): a record with 180,000 unknown keys has as many problems,
    // more arguments than a call can take (the stack overflowed: a 500 instead of the 422).
    if (Array.isArray(checked)) for (const problem of checked) problems.push(problem);
    else valid.push(checked);
  }
  if (problems.length === 0) return valid;
  throw invalidRecords(problems, records.length);
}

/** The 422 for a delivery of `record_count` records with these problems (at least one): nothing is stored. */
export function invalidRecords(problems: readonly RecordProblem[], record_count: number): HttpError {
  const first = problems[0]!;
  const invalid_records = new Set(problems.map((problem) => problem.index)).size;
  return new HttpError(
    422,
    "invalid_records",
    `${invalid_records} of ${record_count} records are invalid; nothing was stored (first: record ${first.index}, ${first.field}: ${first.message})`,
    {
      invalid_records,
      problems: problems.slice(0, problems_listed_max),
      ...(problems.length > problems_listed_max ? { problems_not_listed: problems.length - problems_listed_max } : {}),
    },
  );
}

/** What the comparison drops from a name: whitespace and format characters (Cf: zero-width, bidi
 *  marks, a byte order mark), and the other characters a name shown to people may not hold because
 *  they show as nothing (Hangul fillers, variation selectors, the Braille blank, controls). */
const unseen_in_name = new RegExp(`[\\p{White_Space}\\p{Cf}]|${invisible_or_control_characters.source}`, "gu");
const withoutUnseen = (text: string) => text.replace(unseen_in_name, "");

/**
 * A principal's id or email as the approval check compares it: NFKC (fullwidth "ｂｏｔ" is "bot",
 * "cafe" + U+0301 is "café"), without what shows as nothing, case-folded (upper then lower case,
 * so "ß" and "SS" fold alike), NFKC again since case mapping can undo it. Undefined when nothing
 * is left: "   " or U+200B alone names nobody. Look-alikes from other scripts (Cyrillic "о" for
 * Latin "o") are not matched: that would take Unicode's confusables data.
 */
export function comparableName(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const folded = withoutUnseen(withoutUnseen(name).normalize("NFKC").toUpperCase().toLowerCase().normalize("NFKC"));
  return folded === "" ? undefined : folded;
}

const namesOf = (principal: { id?: string; email?: string } | undefined): string[] =>
  [comparableName(principal?.id), comparableName(principal?.email)].filter((name): name is string => name !== undefined);

/**
 * DESIGN: an `approve` is verified only if the approver is a human naming an id or email
 * that is not the agent's (any of the approver's names equal to any of the agent's makes it
 * the agent, compared as comparableName writes them). An approver whose id and email name nobody
 * (blank, or only invisible characters) is unverified, and so is a record that names no agent id
 * or email: nothing then tells the two apart. Other decisions carry no approval claim (null).
 */
export function approvalVerified(record: DecisionRecord): boolean | null {
  if (record.decision !== "approve") return null;
  const approver = record.approver;
  if (!approver || approver.type !== "human") return false;
  const approver_names = namesOf(approver);
  const agent_names = namesOf(record.agent);
  if (approver_names.length === 0 || agent_names.length === 0) return false;
  return !approver_names.some((name) => agent_names.includes(name));
}
