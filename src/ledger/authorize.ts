// authorize: in one transaction, read the caller's snapshot, decide, and write the hold (or
// the velocity count of a refusal) together with the decision's evidence entry.

import { canonicalJson, sha256Hex } from "../evidence/canonical.js";
import { scrub, withoutSecretKeys } from "../evidence/scrub.js";
import { decide, isPlainObject, type IdempotencyState, type PaymentState, type PolicyCall, type PolicyState, type Verdict } from "../policy/index.js";
import { record, type EvidenceRef, type LedgerContext } from "./context.js";
import type { SqlTx } from "./driver.js";
import { callKey, type CallKey, type SentKey } from "./keys.js";
import { blockState, reservationState, resultUnknown, type ApprovalRow, type BlockRow, type IdempotencyRow, type ReservationRow } from "./rows.js";
import {
  adjustBlock,
  approvalByReservation,
  countCalls,
  getApproval,
  getIdempotency,
  getReservation,
  insertReservation,
  lockAgentBlock,
  lockBlock,
  keyInFlightOn,
  readBlock,
  putIdempotency,
  recordMoneyCall,
  reservationByOrder,
  reservationByPayment,
} from "./statements.js";
import { expireApprovals, expireLeasesOfBlock } from "./sweep.js";

/** money_calls rows older than this are pruned; no velocity window may be longer. */
export const velocity_window_max_seconds = 86_400;
/** Pruning is amortized: an agent's old rows at its first decision in a process, then every this many of its decisions. */
export const money_calls_prune_every = 64;
/** Each agent's decisions since its rows were last pruned, in this process; past this many agents it is counted afresh. */
const prune_counts = new Map<string, number>();
const prune_counts_agents_max = 10_000;

export interface AuthorizeInput extends SentKey {
  agent_id: string | null;
  tool: string;
  args: unknown;
  /** For capture_payment: what the provider reported for args.payment_id (fetched first), or payment_not_asked. */
  payment?: PaymentState;
}

export interface AuthorizeResult {
  verdict: Verdict;
  key: CallKey | null;
  block: BlockRow | null;
  reservation?: ReservationRow;
  approval?: ApprovalRow;
  /** The stored record a replay returns. */
  stored?: IdempotencyRow;
  evidence?: EvidenceRef;
}

interface Snapshot {
  /** The decision's time, read once the caller's block is locked. */
  now: Date;
  block: BlockRow | null;
  reservation: ReservationRow | null;
  key: CallKey | null;
  stored: IdempotencyRow | undefined;
  /** A row exists under the key (perhaps an expired derived one that no longer replays). */
  key_row: boolean;
  state: PolicyState;
}

/**
 * Whether a stored key still replays: explicit keys always; derived ones for 5 minutes, or while
 * their reservation waits for approval and 5 minutes after it is decided (an agent that repeated
 * the held call while it waited learns the decision by repeating it once more, where a fresh
 * HOLD would hold the amount a second time), or while the outcome of their own call is unknown
 * (not an order's whose later capture went unanswered: that order's key would replay it for good).
 */
export async function stillReplays(tx: SqlTx, context: LedgerContext, row: IdempotencyRow, now_ms: number): Promise<boolean> {
  if (!row.derived || row.status === "in_flight") return true;
  if (now_ms < row.first_at_ms + context.derived_key_lifetime_ms) return true;
  const reservation = row.reservation_id ? await getReservation(tx, row.reservation_id) : undefined;
  if (!reservation) return false;
  const approval = await approvalByReservation(tx, reservation.reservation_id);
  if (approval?.decided_at_ms != null && now_ms < approval.decided_at_ms + context.derived_key_lifetime_ms) return true;
  if (reservation.status !== "held") return false;
  if (approval?.state === "pending" || approval?.state === "forwarding") return true;
  if (!reservation.outcome_unknown) return false;
  return resultUnknown(row.result_json) || (approval?.state === "approved" && resultUnknown(approval.result_json));
}

export function idempotencyState(row: IdempotencyRow | undefined): IdempotencyState {
  if (!row) return { status: "none" };
  if (row.status === "in_flight") return { status: "in_flight", params_hash: row.params_hash };
  return { status: "stored", params_hash: row.params_hash, effect: row.effect ?? "ALLOW" };
}

/** The caller's block, locked: the capture's reservation's block, else the agent's own. */
async function lockCallerBlock(tx: SqlTx, input: AuthorizeInput, reservation: ReservationRow | null, now_ms: number) {
  if (!input.agent_id) return undefined;
  if (reservation && reservation.agent_id === input.agent_id) return lockBlock(tx, reservation.block_id);
  return lockAgentBlock(tx, input.agent_id, now_ms);
}

/**
 * For a capture without its payment (not asked, or not confirmed): the reservation its key
 * already holds, if any. A replay is then decided on, and shows, the block it captured on, as it
 * would be had the payment been fetched, not the agent's current block.
 */
async function keyedReservation(tx: SqlTx, agent_id: string, key: CallKey): Promise<ReservationRow | null> {
  const row = await getIdempotency(tx, agent_id, key.key);
  return row?.reservation_id ? ((await getReservation(tx, row.reservation_id)) ?? null) : null;
}

/** What the policy is asked about: the call, and what it sent as its key when that had no JSON form. */
export function policyCall(input: AuthorizeInput, agent_id: string | null, params_hash: string): PolicyCall {
  const call: PolicyCall = { tool: input.tool, args: input.args, agent_id, params_hash };
  if (input.idempotency_key_sent !== undefined) call.idempotency_key_sent = input.idempotency_key_sent;
  return call;
}

/**
 * The caller's held reservation bound to the payment a capture names, found without the
 * provider: a capture in flight has bound its payment, so this is the reservation another call
 * is capturing, if any. Read only to refuse (CAPTURE_IN_FLIGHT): nothing is decided on it else.
 */
export async function boundReservation(tx: SqlTx, agent_id: string, args: unknown): Promise<ReservationRow | undefined> {
  const payment_id = isPlainObject(args) ? args.payment_id : undefined;
  if (typeof payment_id !== "string") return undefined;
  const bound = await reservationByPayment(tx, payment_id);
  return bound && bound.agent_id === agent_id && bound.status === "held" ? bound : undefined;
}

/** Whether a capture with another key than `key` is executing on `reservation` (held), its lease not run out. */
export async function captureInFlightElsewhere(tx: SqlTx, reservation: ReservationRow | undefined | null, agent_id: string | null, key: CallKey | null, now_ms: number): Promise<boolean> {
  if (!reservation || reservation.status !== "held" || !agent_id || !key) return false;
  return keyInFlightOn(tx, reservation.reservation_id, { except: { agent_id, key: key.key }, lease_after_ms: now_ms });
}

/** What the policy sees of the caller's block: its state, and the agent's calls in its velocity window. */
export async function blockPolicyState(tx: SqlTx, agent_id: string | null, block: BlockRow | null, now_ms: number): Promise<Pick<PolicyState, "block" | "calls_in_window">> {
  if (!block || !agent_id) return { block: block ? blockState(block) : null, calls_in_window: 0 };
  const velocity = { window_seconds: block.velocity_window_seconds, max_calls: block.velocity_max_calls };
  return { block: blockState(block), calls_in_window: await countCalls(tx, agent_id, now_ms, velocity) };
}

/**
 * What the decision sees. The caller's block is chosen by the time `choose_at` (which block is
 * active) and locked; the decision's own time is read after that lock, which on PostgreSQL may
 * have waited for another transaction: a call decided at a stale time could pass R2 after its
 * block expired, or be counted against the wrong velocity window, while it waited.
 */
async function snapshot(tx: SqlTx, context: LedgerContext, input: AuthorizeInput, choose_at: Date): Promise<Snapshot> {
  const payment = input.payment?.fetched ? input.payment : undefined;
  const candidate = payment ? ((await reservationByOrder(tx, payment.order_id)) ?? null) : null;
  const key = input.agent_id ? callKey(input.agent_id, input.tool, input.args, input) : null;
  const keyed = !payment && input.tool === "capture_payment" && input.agent_id && key ? await keyedReservation(tx, input.agent_id, key) : null;
  let block = (await lockCallerBlock(tx, input, candidate ?? keyed, choose_at.getTime())) ?? null;
  const now = block ? context.clock() : choose_at;
  const now_ms = now.getTime();
  if (block && input.agent_id) {
    const expired = (await expireLeasesOfBlock(tx, context, block.block_id)) + (await expireApprovals(tx, context, block.block_id));
    if (expired > 0) block = (await lockBlock(tx, block.block_id)) ?? null;
  }
  const reservation = candidate ? ((await getReservation(tx, candidate.reservation_id)) ?? null) : null;
  let stored = key && input.agent_id ? await getIdempotency(tx, input.agent_id, key.key) : undefined;
  const key_row = stored !== undefined;
  if (stored && !(await stillReplays(tx, context, stored, now_ms))) stored = undefined;
  const state: PolicyState = { ...(await blockPolicyState(tx, input.agent_id, block, now_ms)), idempotency: idempotencyState(stored) };
  if (input.tool === "capture_payment") {
    // Binding a payment that another reservation holds would break the one-payment-one-reservation rule (R3).
    const bound = payment && reservation ? await reservationByPayment(tx, payment.id) : undefined;
    // Without the payment, the reservation the named payment is bound to: a capture in flight
    // on it is refused as such, not sent back to the provider for the payment ("retry").
    const capturing = payment ? reservation : input.agent_id ? await boundReservation(tx, input.agent_id, input.args) : undefined;
    const pending = reservation?.status === "held" && (await approvalByReservation(tx, reservation.reservation_id))?.state === "pending";
    state.capture = {
      payment: input.payment ?? { fetched: false, reason: "the payment was not fetched" },
      reservation: reservation ? { ...reservationState(reservation), ...(pending ? { approval_pending: true as const } : {}) } : null,
      payment_bound_elsewhere: bound !== undefined && bound.reservation_id !== reservation?.reservation_id,
      other_capture_in_flight: await captureInFlightElsewhere(tx, capturing, input.agent_id, key, now_ms),
    };
  }
  return { now, block, reservation, key, stored, key_row, state };
}

/** The key's row while its call is executing: a lease, and the reservation it holds. The key
 *  belongs to the caller (the CALLER guard makes that the reservation's owner too). */
function inFlightRow(context: LedgerContext, input: AuthorizeInput, key: CallKey, reservation: ReservationRow, now_ms: number): IdempotencyRow {
  return {
    agent_id: input.agent_id as string,
    key: key.key,
    derived: key.derived ? 1 : 0,
    tool: input.tool,
    params_hash: key.params_hash,
    status: "in_flight",
    effect: "ALLOW",
    reservation_id: reservation.reservation_id,
    approval_id: null,
    result_json: null,
    first_at_ms: now_ms,
    lease_expires_at_ms: now_ms + context.lease_ms,
  };
}

/**
 * The arguments an approval stores to forward: notes whose keys look secret are left out one by
 * one, as the direct path's providerNotes leaves them out, so an approved call reaches the
 * provider with the notes an allowed one does (scrubbing alone replaced all its notes) and the
 * operator reviewing it sees them.
 */
function forwardable(args: unknown): unknown {
  if (!isPlainObject(args) || !isPlainObject(args.notes)) return args;
  return { ...args, notes: withoutSecretKeys(args.notes) };
}

/** The rows a create_order hold writes: its reservation, the key's row and, for a HOLD, the
 *  approval it waits for. Built here once for the one-call and the batched paths. */
export function holdRows(
  context: LedgerContext,
  input: AuthorizeInput,
  block: BlockRow,
  key: CallKey,
  verdict: Verdict,
  now_ms: number,
): { reservation: ReservationRow; approval?: ApprovalRow; idempotency: IdempotencyRow } {
  const args = input.args as { amount: number; currency: string };
  const reservation: ReservationRow = {
    reservation_id: context.ids("res"),
    block_id: block.block_id,
    agent_id: block.agent_id,
    amount: args.amount,
    currency: block.currency,
    status: "held",
    outcome_unknown: 0,
    unknown_reason: null,
    order_id: null,
    payment_id: null,
    captured_amount: null,
    release_reason: null,
    created_at_ms: now_ms,
    updated_at_ms: now_ms,
  };
  const base = inFlightRow(context, input, key, reservation, now_ms);
  if (verdict.effect === "ALLOW") return { reservation, idempotency: base };
  const approval: ApprovalRow = {
    approval_id: context.ids("apr"),
    reservation_id: reservation.reservation_id,
    agent_id: block.agent_id,
    block_id: block.block_id,
    idempotency_key: key.key,
    tool: input.tool,
    // Stored for forwarding after approval; secret-looking values are not written down.
    args_json: JSON.stringify(scrub(forwardable(input.args))),
    state: "pending",
    created_at_ms: now_ms,
    expires_at_ms: now_ms + context.approval_lifetime_ms,
    decided_at_ms: null,
    result_json: null,
  };
  const idempotency: IdempotencyRow = { ...base, status: "stored", effect: "HOLD", approval_id: approval.approval_id, lease_expires_at_ms: null };
  return { reservation, approval, idempotency };
}

export async function insertApproval(tx: SqlTx, approval: ApprovalRow): Promise<void> {
  await tx.run(
    `INSERT INTO approvals (approval_id, reservation_id, agent_id, block_id, idempotency_key, tool, args_json, state,
       created_at_ms, expires_at_ms, decided_at_ms, result_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      approval.approval_id, approval.reservation_id, approval.agent_id, approval.block_id, approval.idempotency_key,
      approval.tool, approval.args_json, approval.state, approval.created_at_ms, approval.expires_at_ms, null, null,
    ],
  );
}

/** Writes a hold's rows one statement at a time (the batched path writes many holds' rows together). */
async function writeHold(tx: SqlTx, rows: ReturnType<typeof holdRows>, replace_key: boolean): Promise<Written> {
  const { reservation, approval } = rows;
  await insertReservation(tx, reservation);
  await adjustBlock(tx, reservation.block_id, { held: reservation.amount });
  if (approval) await insertApproval(tx, approval);
  await putIdempotency(tx, rows.idempotency, replace_key);
  return approval ? { reservation, approval } : { reservation };
}

/** A capture binds its payment to the reservation now, so no second payment can claim it. */
async function bindCapture(
  tx: SqlTx,
  context: LedgerContext,
  input: AuthorizeInput,
  snap: Snapshot,
  now_ms: number,
): Promise<Written> {
  const reservation = snap.reservation as ReservationRow;
  const payment = input.payment as Extract<PaymentState, { fetched: true }>;
  const key = snap.key as CallKey;
  await tx.run("UPDATE reservations SET payment_id = ?, updated_at_ms = ? WHERE reservation_id = ?", [
    payment.id,
    now_ms,
    reservation.reservation_id,
  ]);
  await putIdempotency(tx, inFlightRow(context, input, key, reservation, now_ms), snap.key_row);
  return { reservation: { ...reservation, payment_id: payment.id } };
}

type Written = Pick<AuthorizeResult, "reservation" | "approval">;

async function writeDecision(
  tx: SqlTx,
  context: LedgerContext,
  input: AuthorizeInput,
  snap: Snapshot,
  verdict: Verdict,
  now_ms: number,
): Promise<Written> {
  if (verdict.replay) return {};
  if (input.agent_id) await recordMoneyCall(tx, input.agent_id, now_ms);
  if (verdict.effect === "BLOCK") return {};
  if (input.tool === "create_order") {
    return writeHold(tx, holdRows(context, input, snap.block as BlockRow, snap.key as CallKey, verdict, now_ms), snap.key_row);
  }
  return bindCapture(tx, context, input, snap, now_ms);
}

/**
 * Deletes the agent's velocity rows past the longest window: at its first decision in this
 * process, then once every money_calls_prune_every of its decisions. Counted per agent: one count
 * for the whole process pruned only the agent whose decision was the 64th, so an agent whose
 * decisions never fell there (or that stopped calling) kept every row it ever made. An agent that
 * stops keeps at most its last day's rows. A transaction rolled back after its count was reset
 * (a batch retried) skips that prune: the rows go 64 decisions later.
 */
export async function pruneCalls(tx: SqlTx, agent_id: string | null, now_ms: number): Promise<void> {
  if (!agent_id) return;
  const since = prune_counts.get(agent_id);
  if (since !== undefined && since + 1 < money_calls_prune_every) return void prune_counts.set(agent_id, since + 1);
  if (since === undefined && prune_counts.size >= prune_counts_agents_max) prune_counts.clear();
  prune_counts.set(agent_id, 0);
  await tx.run("DELETE FROM money_calls WHERE agent_id = ? AND at_ms <= ?", [agent_id, now_ms - velocity_window_max_seconds * 1000]);
}

/** What a decision's `gate.decision` entry says, and what the caller gets back besides the evidence. */
export interface Decided {
  input: AuthorizeInput;
  verdict: Verdict;
  key: CallKey | null;
  /** The block as the decision leaves it. */
  block: BlockRow | null;
  reservation?: ReservationRow | undefined;
  approval?: ApprovalRow | undefined;
  stored?: IdempotencyRow | undefined;
}

/**
 * A decision records the call's tool name and arguments (scrubbed) up to these sizes: an
 * allowed or held call's arguments up to 64 KiB (the most a valid call carries is about 30 KB
 * of canonical JSON), a refused call's or a replay's up to 4 KiB (2,000 replays of a call
 * with 29 KB of notes wrote 76 MB, measured). Past them the entry keeps the value's size
 * and SHA-256 instead of the value, still bound by the entry's hash, so an agent cannot fill
 * the log's disk at the pace of its refusals: with 1 MB of arguments it wrote 37 MB/s of
 * evidence from one loop, and still 47 MB/s with 60 KB ones refused by R6 (which runs before
 * R0), measured. A refusal of an ordinary call (well under 4 KiB) keeps its arguments.
 */
export const decision_args_bytes_max = 65_536;
export const refused_args_bytes_max = 4_096;
export const decision_tool_bytes_max = 256;

/** What a value is recorded as in place of itself: its canonical JSON's size and SHA-256. */
interface OmittedValue {
  bytes: number;
  sha256: string;
}

/**
 * True when `value`'s canonical JSON surely fits in `limit` bytes: each string or key unit
 * takes at most 6 bytes (a \u escape) and each value at most 32 more (a number, quotes,
 * separators). Stops as soon as that bound passes the limit, so a huge value costs no more to
 * look at than a small one.
 */
function surelyFits(value: unknown, limit: number): boolean {
  let budget = limit;
  const walk = (item: unknown): boolean => {
    budget -= 32;
    if (typeof item === "string") budget -= 6 * item.length;
    else if (Array.isArray(item)) {
      for (const element of item) if (!walk(element)) return false;
    } else if (item !== null && typeof item === "object") {
      for (const [name, element] of Object.entries(item)) {
        budget -= 6 * name.length;
        if (!walk(element)) return false;
      }
    }
    return budget >= 0;
  };
  return walk(value);
}

/** A top-level argument kept when the arguments are recorded by size and hash. */
const kept_argument_chars_max = 64;
const kept_arguments_max = 16;

/**
 * What stays of arguments recorded by size and hash: their top-level numbers, booleans, nulls
 * and strings of at most 64 characters under names of at most 64 (16 at most), so a refused
 * call's entry still shows its amount, currency, key and ids; null when they are not an object.
 */
function keptArguments(args: unknown): Record<string, unknown> | null {
  if (!isPlainObject(args)) return null;
  const kept: Record<string, unknown> = {};
  let count = 0;
  for (const [name, value] of Object.entries(args)) {
    if (count >= kept_arguments_max) break;
    if (name.length > kept_argument_chars_max) continue;
    const scalar = value === null || typeof value === "number" || typeof value === "boolean";
    if (!scalar && !(typeof value === "string" && value.length <= kept_argument_chars_max)) continue;
    kept[name] = value;
    count++;
  }
  return kept;
}

/** `value` itself when its canonical JSON fits in `limit` bytes, else its size and hash. */
function recordedValue(value: unknown, limit: number): { value: unknown } | { omitted: OmittedValue } {
  if (surelyFits(value, limit)) return { value };
  const text = canonicalJson(value);
  const bytes = Buffer.byteLength(text, "utf8");
  return bytes <= limit ? { value } : { omitted: { bytes, sha256: sha256Hex(text) } };
}

export function decisionEntry(decided: Decided): Record<string, unknown> {
  const { input, key, verdict } = decided;
  const entry: Record<string, unknown> = {
    agent_id: input.agent_id,
    block_id: decided.block?.block_id ?? null,
    tool: input.tool,
    args: (input.args ?? null) as unknown,
    key: key ? { derived: key.derived, params_hash: key.logged_params_hash ?? key.params_hash } : null,
    verdict,
    reservation_id: decided.reservation?.reservation_id ?? null,
    approval_id: decided.approval?.approval_id ?? decided.stored?.approval_id ?? null,
    payment: input.payment ?? null,
  };
  if (verdict.replay && decided.approval) entry.approval_state = decided.approval.state;
  // The HOLD's approval expires at this time, as its answer tells the agent: an auditor can check
  // an approve came before it and an approval.expire after it.
  else if (decided.approval) entry.approval_expires_at = new Date(decided.approval.expires_at_ms).toISOString();
  const tool = recordedValue(input.tool, decision_tool_bytes_max);
  if ("omitted" in tool) Object.assign(entry, { tool: null, tool_omitted: tool.omitted });
  // A replay answers a call already recorded under its key, and, like a refusal, nothing bounds
  // how often an agent sends one: it is capped as a refusal is. (Its params_hash matches the
  // recorded call's; for a derived key that hash leaves out receipt and notes, which a replay
  // past the cap then keeps by size and SHA-256 only.)
  const args = recordedValue(entry.args, verdict.effect === "BLOCK" || verdict.replay ? refused_args_bytes_max : decision_args_bytes_max);
  if ("omitted" in args) Object.assign(entry, { args: keptArguments(input.args), args_omitted: args.omitted });
  return entry;
}

/**
 * The block a replay answers with and records: its reservation's, as a capture's replay is decided
 * on. The agent's current block may be another (the reservation's expired and a new one was
 * issued), where the call's money is not held.
 */
export async function replayedBlock(tx: SqlTx, block: BlockRow | null, reservation: ReservationRow | undefined): Promise<BlockRow | null> {
  if (!reservation || reservation.block_id === block?.block_id) return block;
  return (await readBlock(tx, reservation.block_id)) ?? block;
}

export function decisionResult(decided: Decided, evidence: EvidenceRef | undefined): AuthorizeResult {
  const result: AuthorizeResult = { verdict: decided.verdict, key: decided.key, block: decided.block };
  if (decided.reservation) result.reservation = decided.reservation;
  if (decided.approval) result.approval = decided.approval;
  if (decided.verdict.replay && decided.stored) result.stored = decided.stored;
  if (evidence) result.evidence = evidence;
  return result;
}

/** The rules a capture decided without its payment may name from the agent's current block, where its reservation's own block would name another. */
const block_rules_unasked: ReadonlySet<string> = new Set(["R6", "R0", "R5"]);

/**
 * A capture refused without its payment looked up (capturePaymentMatters) was decided on the
 * agent's current block. When the agent has another, its reservation may be there, and that
 * block refuses it too (revoked or expired, R4 or R2), perhaps under another rule than the one
 * named here: the reason says so.
 */
async function notedUnasked(tx: SqlTx, input: AuthorizeInput, block: BlockRow | null, verdict: Verdict): Promise<Verdict> {
  const payment = input.payment;
  if (input.tool !== "capture_payment" || payment?.fetched !== false || payment.asked !== false || !block) return verdict;
  if (verdict.effect !== "BLOCK" || !block_rules_unasked.has(verdict.rule)) return verdict;
  if (!(await tx.get("SELECT 1 AS other FROM blocks WHERE agent_id = ? AND block_id <> ? LIMIT 1", [block.agent_id, block.block_id]))) return verdict;
  const note = "decided on the agent's current block without asking the provider for the payment; on any other block of the agent the capture is refused as revoked or expired";
  return { ...verdict, reason: `${verdict.reason} (${note})` };
}

export async function authorize(tx: SqlTx, context: LedgerContext, input: AuthorizeInput): Promise<AuthorizeResult> {
  const snap = await snapshot(tx, context, input, context.clock());
  const now = snap.now;
  const now_ms = now.getTime();
  const verdict = await notedUnasked(
    tx,
    input,
    snap.block,
    decide(policyCall(input, input.agent_id, snap.key?.params_hash ?? ""), snap.state, now, context.guards),
  );
  const written = await writeDecision(tx, context, input, snap, verdict, now_ms);
  await pruneCalls(tx, input.agent_id, now_ms);
  // The block as this transaction leaves it: a create_order hold is the only balance change here.
  const held_now = written.reservation && input.tool === "create_order" && !verdict.replay ? written.reservation.amount : 0;
  const block = snap.block ? { ...snap.block, held: snap.block.held + held_now } : null;
  const reservation = written.reservation ?? (verdict.replay && snap.stored?.reservation_id ? await getReservation(tx, snap.stored.reservation_id) : undefined);
  // A replayed HOLD is answered from its approval as this transaction reads it, and its entry
  // records that state: the receipt the agent holds names what it was told (denied, approved…).
  const approval = written.approval ?? (verdict.replay && snap.stored?.approval_id ? await getApproval(tx, snap.stored.approval_id) : undefined);
  const shown = verdict.replay ? await replayedBlock(tx, block, reservation) : block;
  const decided: Decided = { input, verdict, key: snap.key, block: shown, reservation, approval, stored: snap.stored };
  return decisionResult(decided, await record(tx, context, "gate.decision", decisionEntry(decided)));
}
