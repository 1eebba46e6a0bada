// All-or-nothing validation of a delivery's records: every bad record is named by its index
// and each field path, so the sender can fix the whole delivery at once.

import type { z } from "zod";
import { canonicalSha256Hex } from "../evidence/index.js";
import { HttpError } from "../errors.js";
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

/** The args' RFC 8785 hash, or undefined when JSON cannot carry them canonically (1e400 parses to Infinity). */
function argsHash(record: DecisionRecord): string | undefined {
  if (record.args === undefined) return record.args_hash;
  try {
    return canonicalSha256Hex(record.args);
  } catch {
    return undefined;
  }
}

function zodProblems(index: number, issues: readonly z.core.$ZodIssue[]): RecordProblem[] {
  return issues.flatMap((issue) => {
    const path = issue.path.map(String);
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((key) => ({ index, field: [...path, key].join("."), message: "unknown field" }));
    }
    return [{ index, field: path.length > 0 ? path.join(".") : "(record)", message: issue.message }];
  });
}

/** One record: valid (with its args hash), or its problems. */
function checkRecord(record: ReceivedRecord): ValidRecord | RecordProblem[] {
  if (record.syntax_error !== undefined) return [{ index: record.index, field: "(record)", message: `not valid JSON: ${record.syntax_error}` }];
  if (!surelyValidRecord(record.value)) {
    const parsed = decision_record_schema.safeParse(record.value);
    if (!parsed.success) return zodProblems(record.index, parsed.error.issues);
  }
  const value = record.value as DecisionRecord;
  const args_hash = argsHash(value);
  if (args_hash === undefined) return [{ index: record.index, field: "args", message: "holds a number JSON cannot represent exactly (out of range)" }];
  return { index: record.index, value, sha256: record.sha256, args_hash };
}

/** The records, all valid; or a 422 listing every problem: `details.problems[{index, field, message}]`. */
export function validateRecords(records: readonly ReceivedRecord[]): ValidRecord[] {
  const valid: ValidRecord[] = [];
  const problems: RecordProblem[] = [];
  for (const record of records) {
    const checked = checkRecord(record);
    if (Array.isArray(checked)) problems.push(...checked);
    else valid.push(checked);
  }
  if (problems.length === 0) return valid;
  const first = problems[0]!;
  const invalid_records = new Set(problems.map((problem) => problem.index)).size;
  throw new HttpError(
    422,
    "invalid_records",
    `${invalid_records} of ${records.length} records are invalid; nothing was stored (first: record ${first.index}, ${first.field}: ${first.message})`,
    {
      invalid_records,
      problems: problems.slice(0, problems_listed_max),
      ...(problems.length > problems_listed_max ? { problems_not_listed: problems.length - problems_listed_max } : {}),
    },
  );
}

const sameName = (a: string | undefined, b: string | undefined) => a !== undefined && b !== undefined && a.trim().toLowerCase() === b.trim().toLowerCase();

/**
 * DESIGN: an `approve` is verified only if the approver is a human naming an id or email
 * that is not the agent's (any of the approver's names equal to any of the agent's makes it
 * the agent). Other decisions carry no approval claim (null).
 */
export function approvalVerified(record: DecisionRecord): boolean | null {
  if (record.decision !== "approve") return null;
  const approver = record.approver;
  if (!approver || approver.type !== "human") return false;
  if (approver.id === undefined && approver.email === undefined) return false;
  const agent_names = [record.agent?.id, record.agent?.email];
  return ![approver.id, approver.email].some((name) => agent_names.some((other) => sameName(name, other)));
}
