// Who is calling: the operator (one token, compared in constant time), an agent (token
// looked up by SHA-256), or an auditor (read-only access to the log's entries and proofs).
// An agent's or an auditor's token where another principal's is needed is 403; no or a bad
// token is 401.

import type { FastifyRequest } from "fastify";
import type { OperatorTokens } from "../datadir.js";
import { BearerRequired, HttpError } from "../errors.js";
import { sha256Hex } from "../ids.js";
import type { Ledger } from "../ledger/index.js";

export function bearer(header: string | undefined): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return match?.[1];
}

export interface Access {
  operator: OperatorTokens;
  ledger: Ledger;
}

/** Throws 503 when no operator token is configured, 401 without a valid one, 403 for an agent's or an auditor's. */
export async function requireOperator(access: Access, request: FastifyRequest): Promise<void> {
  if (!access.operator.configured) {
    throw new HttpError(503, "operator_not_configured", "no operator token is configured (BURSAR_ADMIN_TOKEN or bursar admin rotate)");
  }
  const token = bearer(request.headers.authorization);
  if (!token) throw new BearerRequired("an operator bearer token is required");
  if (access.operator.check(token)) return;
  await refuseAgent(access, token, "operator routes");
  if (await isAuditor(access, token)) throw new HttpError(403, "forbidden", auditor_only_reads("operator routes"));
  throw new BearerRequired("the operator token is not valid");
}

/** What a 403 tells an auditor's token used where it has no say. */
export const auditor_only_reads = (routes: string) => `an auditor token cannot use ${routes}: it reads the log's entries and proofs only`;

/** Whether `token` is an auditor's, not revoked. */
export async function isAuditor(access: Access, token: string): Promise<boolean> {
  const row = await access.ledger.driver.read((tx) =>
    tx.get("SELECT 1 AS one FROM auditor_tokens WHERE token_sha256 = ? AND revoked_at_ms IS NULL", [sha256Hex(token)]),
  );
  return row !== undefined;
}

/** Throws 403 when the token is an agent's: a valid credential for the wrong principal, not a bad one. */
async function refuseAgent(access: Access, token: string, routes: string): Promise<void> {
  if (await access.ledger.authenticateAgent(token)) {
    throw new HttpError(403, "forbidden", `an agent token cannot use ${routes}`);
  }
}

/**
 * True for the operator or an auditor token, false for none or one that is not valid. Throws
 * 403 for an agent's token, as the operator routes answer one (the log routes take this answer).
 */
export async function isReader(access: Access, header: string | undefined): Promise<boolean> {
  const token = bearer(header);
  if (!token) return false;
  if (access.operator.check(token)) return true;
  if (await isAuditor(access, token)) return true;
  await refuseAgent(access, token, "the log's entry and proof routes");
  return false;
}
