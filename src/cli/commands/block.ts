// `bursar block create|show|revoke|unfreeze`: an agent's spending block through a running
// server's operator API. Thin: the server validates and decides; this maps flags to JSON.

import { rfc3339Problem } from "../../evidence/entry.js";
import { block_field_ranges } from "../../ledger/blocks.js";
import { parseOptions, UsageError, type CliIo } from "../command.js";
import { operator_environment_help, operator_help, operator_options, operatorRequest, operatorTarget, printOperatorCall } from "./agent.js";

/** create's flags, each mapped to one field of POST /api/v1/blocks. */
const create_options = {
  agent: { type: "string" },
  currency: { type: "string" },
  reserved: { type: "string" },
  "ttl-seconds": { type: "string" },
  "expires-at": { type: "string" },
  "per-call-cap": { type: "string" },
  "approval-threshold": { type: "string" },
  "max-calls": { type: "string" },
  "window-seconds": { type: "string" },
} as const;

export const block_options = { ...create_options, ...operator_options } as const;

/** Actions that name an existing block: `bursar block <action> ID`. */
const id_actions = {
  show: { method: "GET", suffix: "" },
  revoke: { method: "POST", suffix: "/revoke" },
  unfreeze: { method: "POST", suffix: "/unfreeze" },
} as const;

const range = (field: keyof typeof block_field_ranges): string => block_field_ranges[field].join(" to ");

export const help = `usage: bursar block create --agent ID --currency INR [--reserved N]
                           [--ttl-seconds N | --expires-at ISO] [--per-call-cap N]
                           [--approval-threshold N] [--max-calls N] [--window-seconds N]
       bursar block show ID
       bursar block revoke ID
       bursar block unfreeze ID
       (each also takes [--url URL] [--token TOKEN])

A block is what an agent may spend: one active block per agent. Amounts are integers in
the currency's minor unit (paise for INR). Omitted limits take the server's defaults
(reserved 1000000, per-call cap 500000, approval threshold 200000, 10 calls per 60 s,
lifetime 30 days; at most 90 days). Each command prints the block as JSON on stdout
(as the agent's get_block tool shows it).

  create    POST /api/v1/blocks; creating a second active block for an agent is refused (409)
  show      GET /api/v1/blocks/ID
  revoke    POST /api/v1/blocks/ID/revoke: every later money call is refused (R4) and the
            block's pending approvals are denied
  unfreeze  POST /api/v1/blocks/ID/unfreeze: lifts a freeze (e.g. after a late capture)

Exit codes: 0 done; 1 the server refused (its error message is printed) or is unreachable;
2 bad arguments or no operator token.

Options (create):
  --agent ID                the agent_id from \`bursar agent create\`
  --currency CODE           active ISO 4217 code of every call against the block, e.g. INR
  --reserved N              total the agent may spend (minor units; ${range("reserved")})
  --ttl-seconds N           lifetime from now, in seconds (${range("ttl_seconds")})
  --expires-at ISO          or an absolute expiry, RFC 3339 with an offset, e.g.
                            2026-12-31T00:00:00Z or 2027-01-01T05:30:00+05:30 (not both)
  --per-call-cap N          largest single amount (R5; ${range("per_call_cap")})
  --approval-threshold N    amounts above this wait for an operator's approval (HOLD; ${range("approval_threshold")})
  --max-calls N             velocity: money calls allowed per window (R6; ${range("velocity.max_calls")})
  --window-seconds N        velocity window in seconds (${range("velocity.window_seconds")})
A number outside its range is refused (exit 2) before anything is sent.
Options (all):
${operator_help}

${operator_environment_help}`;

/** A whole-number flag within the range the server takes for its field (block_field_ranges), refused here otherwise. */
function wholeNumber(flag: string, raw: string | undefined, field: keyof typeof block_field_ranges): number | undefined {
  if (raw === undefined) return undefined;
  const [min, max] = block_field_ranges[field];
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < min || value > max) {
    throw new UsageError(`--${flag} ${JSON.stringify(raw)}: expected a whole number from ${min} to ${max}`);
  }
  return value;
}

/** --expires-at as the server takes it (an RFC 3339 time that exists), checked before anything is sent; whether it is in the future is the server's to say. */
function rfc3339Time(flag: string, value: string | undefined): string | undefined {
  const problem = value === undefined ? undefined : rfc3339Problem(value);
  if (problem !== undefined) throw new UsageError(`--${flag} ${JSON.stringify(value)}: ${problem}`);
  return value;
}

type CreateValues = { [K in keyof typeof create_options]?: string | undefined };

/** The POST /api/v1/blocks body: only the fields given, so the server's defaults apply to the rest. */
export function createBody(values: CreateValues): Record<string, unknown> {
  if (!values.agent) throw new UsageError("--agent is required (the agent_id from `bursar agent create`)");
  if (!values.currency) throw new UsageError("--currency is required, e.g. --currency INR");
  if (values["ttl-seconds"] !== undefined && values["expires-at"] !== undefined) {
    throw new UsageError("give --ttl-seconds or --expires-at, not both");
  }
  const fields: Record<string, unknown> = {
    agent_id: values.agent,
    currency: values.currency,
    reserved: wholeNumber("reserved", values.reserved, "reserved"),
    ttl_seconds: wholeNumber("ttl-seconds", values["ttl-seconds"], "ttl_seconds"),
    expires_at: rfc3339Time("expires-at", values["expires-at"]),
    per_call_cap: wholeNumber("per-call-cap", values["per-call-cap"], "per_call_cap"),
    approval_threshold: wholeNumber("approval-threshold", values["approval-threshold"], "approval_threshold"),
  };
  const velocity = {
    max_calls: wholeNumber("max-calls", values["max-calls"], "velocity.max_calls"),
    window_seconds: wholeNumber("window-seconds", values["window-seconds"], "velocity.window_seconds"),
  };
  if (velocity.max_calls !== undefined || velocity.window_seconds !== undefined) fields.velocity = velocity;
  // JSON.stringify drops undefined fields, so the server sees only what was given.
  return fields;
}

function idRequest(action: keyof typeof id_actions, rest: string[], values: CreateValues): { method: "GET" | "POST"; path: string } {
  const given = Object.keys(create_options).filter((flag) => values[flag as keyof CreateValues] !== undefined);
  if (given.length > 0) throw new UsageError(`--${given[0]} applies to block create, not block ${action}`);
  const [id, ...extra] = rest;
  if (!id) throw new UsageError(`expected: block ${action} ID`);
  if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
  const { method, suffix } = id_actions[action];
  return { method, path: `/api/v1/blocks/${encodeURIComponent(id)}${suffix}` };
}

function request(positionals: string[], values: CreateValues): { method: "GET" | "POST"; path: string; body?: unknown } {
  const [action, ...rest] = positionals;
  if (action === "create") {
    if (rest.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(rest[0])}`);
    return { method: "POST", path: "/api/v1/blocks", body: createBody(values) };
  }
  // Object.hasOwn, not `in`: "constructor" or "toString" must not pass for an action.
  if (action !== undefined && Object.hasOwn(id_actions, action)) return idRequest(action as keyof typeof id_actions, rest, values);
  throw new UsageError(`expected an action: create, ${Object.keys(id_actions).join(", ")}`);
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseOptions(argv, block_options);
  const call = request(positionals, values);
  const target = operatorTarget(values, io.env);
  const result = await printOperatorCall(io, `block ${positionals[0]}`, target, () => operatorRequest(target, call.method, call.path, call.body));
  return result === undefined ? 1 : 0;
}
