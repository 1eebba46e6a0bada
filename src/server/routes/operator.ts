// The operator API: agents, blocks, revoke/unfreeze, approvals, the inbox, reservation checks
// and auditor tokens. Operator token only; thin: every decision lives in the ledger and gate.

import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { HttpError } from "../../errors.js";
import { approve, checkReservation } from "../../gate/operator.js";
import type { GateContext } from "../../gate/context.js";
import { newToken, sha256Hex } from "../../ids.js";
import { record } from "../../ledger/index.js";
import { approvals_page_default, approvals_page_max, type ApprovalPosition } from "../../ledger/ledger.js";
import type { RoutePlugin } from "../app.js";
import { requireOperator, type Access } from "../auth.js";
import { refuseContentEncoding } from "../content-coding.js";
import { invalidQuery, nameSchema, onlyQueryParams, parseBody, queryInteger, takes_no_body } from "../validate.js";

// Whole numbers are checked by the ledger, which names each field's range (src/ledger/blocks.ts):
// the schema's own int() answered "expected int, received number" or "Too big: expected int to
// be <=9007199254740991" before the range was ever named.
const money = z.number();
const create_agent = z.object({ name: z.string() }).strict();
const create_block = z
  .object({
    agent_id: z.string(),
    currency: z.string(),
    reserved: money.optional(),
    expires_at: z.string().optional(),
    ttl_seconds: z.number().optional(),
    per_call_cap: money.optional(),
    approval_threshold: money.optional(),
    velocity: z.object({ max_calls: z.number().optional(), window_seconds: z.number().optional() }).strict().optional(),
  })
  .strict();
const create_auditor = z.object({ name: nameSchema(128) }).strict();
const approval_states = ["pending", "forwarding", "approved", "denied", "expired"] as const;
type ApprovalState = (typeof approval_states)[number];

type IdParams = { id: string };

function id(request: FastifyRequest): string {
  return (request.params as IdParams).id;
}

export function operatorRoutes(access: Access, gate: GateContext): RoutePlugin {
  return async (root: FastifyInstance) => {
    await root.register(async (app) => routes(app, access, gate));
  };
}

function routes(app: FastifyInstance, access: Access, gate: GateContext): void {
  const ledger = gate.ledger;
  // Encapsulated: the hook guards only the routes registered in this scope.
  app.addHook("onRequest", async (request) => requireOperator(access, request));
  app.addHook("onRequest", refuseContentEncoding);
  app.post("/api/v1/agents", async (request, reply) => {
    const agent = await ledger.createAgent(parseBody(create_agent, request.body));
    return reply.status(201).send(agent);
  });
  app.post("/api/v1/agents/:id/disable", takes_no_body, async (request) => ledger.disableAgent(id(request)));
  app.post("/api/v1/blocks", async (request, reply) => reply.status(201).send(await ledger.createBlock(parseBody(create_block, request.body))));
  app.get("/api/v1/blocks/:id", async (request) => ledger.getBlock(id(request)));
  app.post("/api/v1/blocks/:id/revoke", takes_no_body, async (request) => ledger.revoke(id(request)));
  app.post("/api/v1/blocks/:id/unfreeze", takes_no_body, async (request) => ledger.unfreeze(id(request)));
  app.get("/api/v1/approvals", async (request) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    onlyQueryParams(query, ["state", "limit", "after"]);
    const state = stateParam(query.state);
    const limit = queryInteger(query, "limit", { fallback: approvals_page_default, min: 1, max: approvals_page_max });
    const after = query.after === undefined ? undefined : cursorParam(query.after, state);
    const page = await ledger.approvals(state, { limit, ...(after ? { after } : {}) });
    return { approvals: page.approvals, next_cursor: page.next ? encodeCursor(state, page.next) : null };
  });
  app.post("/api/v1/approvals/:id/approve", takes_no_body, async (request) => approve(gate, id(request)));
  app.post("/api/v1/approvals/:id/deny", takes_no_body, async (request) => ledger.deny(id(request)));
  app.get("/api/v1/inbox", async () => ledger.inbox());
  app.post("/api/v1/reservations/:id/check", takes_no_body, async (request) => checkReservation(gate, id(request)));
  app.post("/api/v1/auditor-tokens", async (request, reply) => {
    const { name } = parseBody(create_auditor, request.body);
    const token = newToken("bsr_audit");
    const auditor_id = ledger.context.ids("aud");
    await ledger.transaction(async (tx, context) => {
      await tx.run("INSERT INTO auditor_tokens (auditor_id, name, token_sha256, created_at_ms) VALUES (?, ?, ?, ?)", [
        auditor_id,
        name,
        sha256Hex(token),
        context.clock().getTime(),
      ]);
      await record(tx, context, "gate.operator", { action: "auditor.create", auditor_id, name });
    });
    return reply.status(201).send({ auditor_id, name, token });
  });
  app.get("/api/v1/auditor-tokens", async () => {
    const rows = await ledger.driver.read((tx) =>
      tx.all<AuditorRow>(`${select_auditors} ORDER BY created_at_ms, auditor_id`),
    );
    return { auditor_tokens: rows.map(auditorView) };
  });
  // Revoking is immediate on every instance (each read checks the table) and idempotent; the
  // first revoke is recorded.
  app.post("/api/v1/auditor-tokens/:id/revoke", takes_no_body, async (request) => {
    const auditor_id = id(request);
    return ledger.transaction(async (tx, context) => {
      const revoked = await tx.run("UPDATE auditor_tokens SET revoked_at_ms = ? WHERE auditor_id = ? AND revoked_at_ms IS NULL", [
        context.clock().getTime(),
        auditor_id,
      ]);
      if (revoked.changes === 1) await record(tx, context, "gate.operator", { action: "auditor.revoke", auditor_id });
      const row = await tx.get<AuditorRow>(`${select_auditors} WHERE auditor_id = ?`, [auditor_id]);
      if (!row) throw new HttpError(404, "not_found", `no auditor token ${auditor_id}`);
      return auditorView(row);
    });
  });
}

function stateParam(raw: unknown): ApprovalState | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw === "string" && (approval_states as readonly string[]).includes(raw)) return raw as ApprovalState;
  throw invalidQuery("state", `must be one of ${approval_states.join(", ")}`, { allowed: approval_states });
}

/**
 * `after` is opaque to clients, who only hand back a `next_cursor`: base64url of JSON
 * `[state or null, created_at_ms, approval_id]`. It names the listing it continues, since a
 * position means something else in another state's order. Its size and its id's characters are
 * bounded, so a forged one is refused before it reaches the database.
 */
const cursor_length_max = 256;
const cursor_pattern = /^[A-Za-z0-9_-]+$/;
const cursor_id_pattern = /^[A-Za-z0-9_]{1,64}$/;

function encodeCursor(state: ApprovalState | undefined, position: ApprovalPosition): string {
  return Buffer.from(JSON.stringify([state ?? null, position.created_at_ms, position.approval_id]), "utf8").toString("base64url");
}

function listing(state: ApprovalState | null | undefined): string {
  return state ? `state=${state}` : "every state (no state parameter)";
}

function cursorParam(raw: unknown, state: ApprovalState | undefined): ApprovalPosition {
  const refused = invalidQuery("after", "must be the next_cursor of an earlier page, as it was given (omit after to start from the first page)");
  if (typeof raw !== "string" || raw.length > cursor_length_max || !cursor_pattern.test(raw)) throw refused;
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(raw, "base64url").toString("utf8"));
  } catch {
    throw refused;
  }
  if (!Array.isArray(decoded) || decoded.length !== 3) throw refused;
  const [cursor_state, created_at_ms, approval_id] = decoded as [unknown, unknown, unknown];
  const known_state = cursor_state === null || (typeof cursor_state === "string" && (approval_states as readonly string[]).includes(cursor_state));
  if (!known_state || !Number.isSafeInteger(created_at_ms) || typeof approval_id !== "string" || !cursor_id_pattern.test(approval_id)) throw refused;
  if (cursor_state !== (state ?? null)) {
    throw invalidQuery("after", `continues the listing of ${listing(cursor_state as ApprovalState | null)}, not of ${listing(state)}`);
  }
  return { created_at_ms: created_at_ms as number, approval_id };
}

const select_auditors = "SELECT auditor_id, name, created_at_ms, revoked_at_ms FROM auditor_tokens";

interface AuditorRow {
  auditor_id: string;
  name: string;
  created_at_ms: number;
  revoked_at_ms: number | null;
}

function auditorView(row: AuditorRow): Record<string, unknown> {
  const revoked_at = row.revoked_at_ms === null ? null : new Date(Number(row.revoked_at_ms)).toISOString();
  return { auditor_id: row.auditor_id, name: row.name, created_at: new Date(Number(row.created_at_ms)).toISOString(), revoked_at };
}
