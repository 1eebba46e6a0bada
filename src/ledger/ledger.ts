// The Ledger: the authority over agents, blocks and held money. Each method is one atomic
// phase in one transaction, with its evidence entry written in the same transaction.

import { HttpError } from "../errors.js";
import { newToken, sha256Hex } from "../ids.js";
import { agent_name_length_max, nameCharacterProblem } from "../policy/index.js";
import { authorize, type AuthorizeInput, type AuthorizeResult } from "./authorize.js";
import { authorizeBatch, batchable, DecisionQueue, heldAgents } from "./authorize-batch.js";
import { capturePaymentMatters } from "./payment-matters.js";
import type { SentKey } from "./keys.js";
import { approvalExpiredError, beginApproval, denyApproval, denyPending, type ApprovalGrant } from "./approvals.js";
import { newBlockRow, type CreateBlockInput } from "./blocks.js";
import {
  abandonCapture,
  captureUnknown,
  type AbandonOutcome,
  completeCapture,
  completeOrder,
  type CallRef,
  type CaptureUnknownOutcome,
  type Completion,
  type ForwardOutcome,
  type OrderRecord,
  resolveUnlandedCapture,
  unbindUncapturable,
  type UnbindVia,
  type UnlandedOutcome,
} from "./complete.js";
import { checkLifetimes, record, type LedgerContext } from "./context.js";
import type { SqlDriver, SqlTx, TransactionOptions } from "./driver.js";
import { blockView, type ApprovalRow, type ApprovalView, type BlockRow, type BlockView, type ReservationRow } from "./rows.js";
import { settleCapture, type CapturedPayment, type SettleOutcome, type SettleVia } from "./settle.js";
import { agentBlockId, freezeBlock, getApproval, getReservation, lockAgent, lockBlock, readBlock, reservationByOrder } from "./statements.js";
import { blocksDue, expireApprovals, expireForwarding, expireLeasesOfBlock } from "./sweep.js";

export interface Agent {
  agent_id: string;
  name: string;
}

/**
 * What needs the operator, each list cut at its limit and beside it how many there are in all
 * (read in one snapshot, so a list is cut exactly when it is shorter than its total).
 */
export interface Inbox {
  /** Oldest first, as GET /api/v1/approvals?state=pending walks them; at most inbox_approvals_max. */
  pending_approvals: ApprovalView[];
  pending_approvals_total: number;
  /** Oldest first; at most inbox_unknown_outcomes_max. */
  unknown_outcomes: ReservationRow[];
  unknown_outcomes_total: number;
  /** Longest frozen first, each with its latest inbox_reservations_per_block reservations; at most inbox_frozen_blocks_max. */
  frozen_blocks: Array<{ block: BlockView; reservations: ReservationRow[] }>;
  frozen_blocks_total: number;
  /** True when some list above holds fewer items than its total. */
  truncated: boolean;
}

/** The inbox's lists as `table WHERE condition`: what needs the operator. */
const inbox_lists = {
  pending_approvals: "approvals WHERE state = 'pending'",
  unknown_outcomes: "reservations WHERE outcome_unknown = 1 AND status = 'held'",
  frozen_blocks: "blocks WHERE frozen_at_ms IS NOT NULL",
} as const;

export type InboxCounts = Record<keyof typeof inbox_lists, number>;

async function countRows(tx: SqlTx, from_where: string): Promise<number> {
  return Number((await tx.get<{ total: number }>(`SELECT COUNT(*) AS total FROM ${from_where}`))?.total ?? 0);
}

const second_phase: TransactionOptions = Object.freeze({ async_commit: true });
export const inbox_reservations_per_block = 20;
export const inbox_approvals_max = 500;
export const inbox_unknown_outcomes_max = 500;
export const inbox_frozen_blocks_max = 100;

/** A page of GET /api/v1/approvals holds 1..approvals_page_max rows; the default is the most, as
 *  many as the list held before it was paged, so a client that never pages loses nothing it had. */
export const approvals_page_max = 500;
export const approvals_page_default = 500;

/** Where a walk of the approvals stands: the last row it was given (rows are ordered by both). */
export interface ApprovalPosition {
  created_at_ms: number;
  approval_id: string;
}

/** ApprovalView's columns, the amount and currency read from the approval's reservation. */
const approval_view_columns =
  "approvals.*, (SELECT r.amount FROM reservations r WHERE r.reservation_id = approvals.reservation_id) AS amount, " +
  "(SELECT r.currency FROM reservations r WHERE r.reservation_id = approvals.reservation_id) AS currency";

export interface ApprovalPage {
  approvals: ApprovalView[];
  /** The last row's position when more rows follow it, else null. */
  next: ApprovalPosition | null;
}

/**
 * An id column compared byte by byte on both backends. PostgreSQL would compare text by the
 * database's collation (en_US puts `apr_a` before `apr_B`, SQLite does not), so a walk's order,
 * and which rows follow a position, would differ between backends. Ids are ASCII.
 */
function byteOrder(tx: SqlTx, column: string): string {
  return tx.dialect === "postgres" ? `${column} COLLATE "C"` : column;
}

/** A token's agent is remembered (bounded), and read again after this long, so an agent
 *  disabled through another instance sharing the database stops authenticating here too. */
export const agent_cache_entries_max = 10_000;
export const agent_cache_ms = 5_000;

export interface LedgerOptions {
  /** PostgreSQL only: decide concurrent create_order calls in shared transactions (default true). */
  batch_decisions?: boolean;
}

export class Ledger {
  private readonly agents = new Map<string, { agent: Agent; read_at_ms: number }>();
  /** Moves on at every disable, so a read that began before it does not refill the cache. */
  private agents_disabled = 0;
  private readonly decisions: DecisionQueue | undefined;

  constructor(
    readonly driver: SqlDriver,
    readonly context: LedgerContext,
    options: LedgerOptions = {},
  ) {
    checkLifetimes(context);
    // On PostgreSQL each decision pays round trips and a commit that the log's sequence lock
    // serializes across processes; batches share them. SQLite decides in-process and gains nothing.
    if (driver.dialect === "postgres" && options.batch_decisions !== false) {
      this.decisions = new DecisionQueue(
        (inputs, batch) => this.tx((tx) => authorizeBatch(tx, this.context, inputs, batch)),
        (input) => this.tx((tx) => authorize(tx, this.context, input)),
        (agents) => this.tx((tx) => heldAgents(tx, agents, this.now_ms())),
      );
    }
  }

  private tx<T>(work: (tx: SqlTx) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.driver.transaction(work, options);
  }

  private now_ms(): number {
    return this.context.clock().getTime();
  }

  async createAgent(input: { name: string }): Promise<Agent & { token: string }> {
    // Trimmed, as auditor and source names are (white space around a name shows as nothing).
    const name = typeof input.name === "string" ? input.name.trim() : "";
    if (name === "" || name.length > agent_name_length_max) {
      throw new HttpError(422, "validation_failed", `name: must be a non-empty string of at most ${agent_name_length_max} characters`, { field: "name" });
    }
    // Names are shown to people: a bidi override or a zero-width space would show one agent as another.
    const problem = nameCharacterProblem(name);
    if (problem !== undefined) throw new HttpError(422, "validation_failed", `name: ${problem}`, { field: "name" });
    const agent_id = this.context.ids("agt");
    const token = newToken("bsr_agent");
    await this.tx(async (tx) => {
      await tx.run("INSERT INTO agents (agent_id, name, token_sha256, created_at_ms) VALUES (?, ?, ?, ?)", [
        agent_id,
        name,
        sha256Hex(token),
        this.now_ms(),
      ]);
      await record(tx, this.context, "gate.operator", { action: "agent.create", agent_id, name });
    });
    return { agent_id, name, token };
  }

  /** Finds the agent a bearer token belongs to. Tokens are stored as SHA-256 only; the lookup
   *  is by hash, so timing reveals nothing about the token. */
  async authenticateAgent(token: string | undefined): Promise<Agent | null> {
    if (!token) return null;
    const hash = sha256Hex(token);
    const now_ms = this.now_ms();
    const cached = this.agents.get(hash);
    if (cached && now_ms >= cached.read_at_ms && now_ms - cached.read_at_ms < agent_cache_ms) return cached.agent;
    this.agents.delete(hash);
    const disabled_before = this.agents_disabled;
    const row = await this.driver.read((tx) =>
      tx.get<Agent & { disabled_at_ms: number | null }>("SELECT agent_id, name, disabled_at_ms FROM agents WHERE token_sha256 = ?", [hash]),
    );
    if (!row || row.disabled_at_ms !== null) return null;
    const agent = { agent_id: row.agent_id, name: row.name };
    if (disabled_before !== this.agents_disabled) return agent;
    if (this.agents.size >= agent_cache_entries_max) this.agents.clear();
    this.agents.set(hash, { agent, read_at_ms: now_ms });
    return agent;
  }

  /**
   * Disables an agent: its token authenticates nothing from now on (on other instances sharing
   * the database, within agent_cache_ms), so its calls reach neither the ledger nor the log.
   * Its block and holds are left as they are (revoking the block releases the holds waiting on
   * an approval; one with an order at the provider stays until settled); its pending approvals
   * can no longer be approved. Idempotent; the first disable is recorded in the log.
   */
  async disableAgent(agent_id: string): Promise<Agent & { disabled_at: string }> {
    const disabled = await this.tx(async (tx) => {
      // The agent row first (as createBlock locks it), so of two disables the second finds the
      // first's; then the agent's blocks, in id order, so an approval being granted on one (under
      // its block's lock) either finishes first, its evidence before the disable's, or finds the
      // agent disabled.
      const row = await lockAgent<Agent & { disabled_at_ms: number | null }>(tx, agent_id, "agent_id, name, disabled_at_ms");
      if (!row) throw new HttpError(404, "not_found", `no agent ${agent_id}`);
      if (row.disabled_at_ms !== null) return { ...row, disabled_at_ms: row.disabled_at_ms };
      await tx.all(`SELECT block_id FROM blocks WHERE agent_id = ? ORDER BY block_id ${tx.forUpdate}`, [agent_id]);
      const disabled_at_ms = this.now_ms();
      await tx.run("UPDATE agents SET disabled_at_ms = ? WHERE agent_id = ?", [disabled_at_ms, agent_id]);
      await record(tx, this.context, "gate.operator", { action: "agent.disable", agent_id });
      return { ...row, disabled_at_ms };
    });
    this.agents_disabled++;
    for (const [hash, cached] of this.agents) if (cached.agent.agent_id === agent_id) this.agents.delete(hash);
    return { agent_id: disabled.agent_id, name: disabled.name, disabled_at: new Date(Number(disabled.disabled_at_ms)).toISOString() };
  }

  async createBlock(input: CreateBlockInput): Promise<BlockView> {
    return this.tx(async (tx) => {
      const now_ms = this.now_ms();
      // The agent row is locked first so two instances cannot both create "the" active block.
      const agent = await lockAgent<Agent & { disabled_at_ms: number | null }>(tx, input.agent_id, "agent_id, name, disabled_at_ms");
      if (!agent) throw new HttpError(404, "not_found", `agent_id: no agent ${String(input.agent_id)}`);
      // Its token authenticates nothing: a block for it could never be spent from, yet would look active.
      if (agent.disabled_at_ms !== null) throw new HttpError(409, "agent_disabled", `agent_id: agent ${input.agent_id} is disabled; a block for it could never be used`);
      const row = newBlockRow(input, this.context.ids("blk"), now_ms);
      const current = await agentBlockId(tx, input.agent_id, now_ms);
      const active = current ? await lockBlock(tx, current) : undefined;
      if (active && active.revoked_at_ms === null && active.expires_at_ms > now_ms) {
        throw new HttpError(409, "active_block_exists", `agent ${input.agent_id} already has an active block ${active.block_id}`);
      }
      await tx.run(
        `INSERT INTO blocks (block_id, agent_id, currency, reserved, spent, held, unreconciled, per_call_cap, approval_threshold,
           velocity_max_calls, velocity_window_seconds, created_at_ms, expires_at_ms, revoked_at_ms, frozen_at_ms, freeze_reason)
         VALUES (?, ?, ?, ?, 0, 0, 0, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL)`,
        [
          row.block_id, row.agent_id, row.currency, row.reserved, row.per_call_cap, row.approval_threshold,
          row.velocity_max_calls, row.velocity_window_seconds, row.created_at_ms, row.expires_at_ms,
        ],
      );
      const view = blockView(row);
      await record(tx, this.context, "gate.operator", { action: "block.create", block: view });
      return view;
    });
  }

  async getBlock(block_id: string): Promise<BlockView> {
    const row = await this.driver.read((tx) => readBlock(tx, block_id));
    if (!row) throw new HttpError(404, "not_found", `no block ${block_id}`);
    return blockView(row);
  }

  /** The agent's own block (active, else latest), or null when none was issued. */
  async agentBlock(agent_id: string): Promise<BlockView | null> {
    return this.driver.read(async (tx) => {
      const block_id = await agentBlockId(tx, agent_id, this.now_ms());
      const row = block_id ? await readBlock(tx, block_id) : undefined;
      return row ? blockView(row) : null;
    });
  }

  /** Revokes a block: every later money call is refused, and its pending approvals are denied. */
  async revoke(block_id: string): Promise<BlockView> {
    return this.tx(async (tx) => {
      const block = await lockBlock(tx, block_id);
      if (!block) throw new HttpError(404, "not_found", `no block ${block_id}`);
      if (block.revoked_at_ms === null) {
        await tx.run("UPDATE blocks SET revoked_at_ms = ? WHERE block_id = ?", [this.now_ms(), block_id]);
        // Approvals already past their lifetime expire first; only live ones are denied.
        await expireApprovals(tx, this.context, block_id);
        // The rest are denied as they are, even one whose lifetime ran out since: the block's lock
        // is held, and denying releases its hold just as expiring would.
        const pending = await tx.all<ApprovalRow>("SELECT * FROM approvals WHERE block_id = ? AND state = 'pending'", [block_id]);
        for (const approval of pending) await denyPending(tx, this.context, approval, "block.revoke");
        await record(tx, this.context, "gate.operator", { action: "block.revoke", block_id, denied_approvals: pending.length });
      }
      return blockView((await lockBlock(tx, block_id)) as BlockRow);
    });
  }

  async freeze(block_id: string, reason: string): Promise<BlockView> {
    return this.tx(async (tx) => {
      const block = await lockBlock(tx, block_id);
      if (!block) throw new HttpError(404, "not_found", `no block ${block_id}`);
      await freezeBlock(tx, block_id, reason, this.now_ms());
      await record(tx, this.context, "gate.operator", { action: "block.freeze", block_id, reason });
      return blockView((await lockBlock(tx, block_id)) as BlockRow);
    });
  }

  /** Lifts a freeze. Unreconciled money stays recorded: the ledger never forgets money that moved. */
  async unfreeze(block_id: string): Promise<BlockView> {
    return this.tx(async (tx) => {
      const block = await lockBlock(tx, block_id);
      if (!block) throw new HttpError(404, "not_found", `no block ${block_id}`);
      // A block that is not frozen is answered as it is, with no entry: as for a second revoke,
      // the log records only what changed, never an unfreeze that lifted nothing.
      if (block.frozen_at_ms === null) return blockView(block);
      await tx.run("UPDATE blocks SET frozen_at_ms = NULL, freeze_reason = NULL WHERE block_id = ?", [block_id]);
      await record(tx, this.context, "gate.operator", { action: "block.unfreeze", block_id, unreconciled: block.unreconciled });
      return blockView((await lockBlock(tx, block_id)) as BlockRow);
    });
  }

  /** Whether capture_payment needs the payment from the provider: false when the call is refused
   *  (or replayed) whatever the payment is (src/ledger/payment-matters.ts). `undecided`: the
   *  agent's other money calls about to be recorded, counted toward its velocity limit. */
  capturePaymentMatters(agent_id: string, args: unknown, undecided = 0, sent: SentKey = {}): Promise<boolean> {
    return this.driver.read((tx) => capturePaymentMatters(tx, this.context, agent_id, args, undecided, sent), { unreported: true });
  }

  authorize(input: AuthorizeInput): Promise<AuthorizeResult> {
    if (this.decisions && batchable(input)) return this.decisions.decide(input);
    return this.tx((tx) => authorize(tx, this.context, input));
  }

  /**
   * The second phase records what the provider answered. It is committed before the agent hears
   * the answer, but its flush is not awaited: power lost right after undoes only this phase,
   * and the first phase's durable in-flight lease then expires to outcome-unknown, which the
   * operator's reservation check reconciles with the provider (the order carries the
   * reservation id as its receipt, and an order alone moves no money). The evidence the agent
   * receives is the first phase's, durable before the provider was called. A capture's second
   * phase is awaited in full: it moves money and a conflict hands the agent its own evidence.
   */
  completeOrder(call: CallRef, outcome: ForwardOutcome<OrderRecord>): Promise<Completion> {
    return this.tx((tx) => completeOrder(tx, this.context, call, outcome), second_phase);
  }

  completeCapture(call: CallRef, payment: CapturedPayment) {
    return this.tx((tx) => completeCapture(tx, this.context, call, payment));
  }

  abandonCapture(call: CallRef, payment: { payment_id: string; unbind: boolean; refused: boolean }, reason: string): Promise<AbandonOutcome> {
    return this.tx((tx) => abandonCapture(tx, this.context, call, payment, reason));
  }

  captureUnknown(call: CallRef, reason: string): Promise<CaptureUnknownOutcome> {
    return this.tx((tx) => captureUnknown(tx, this.context, call, reason));
  }

  /** Unbinds a held reservation's payment the provider reports can no longer be captured (see
   *  unbindUncapturable); false when the binding stays. */
  unbindUncapturable(reservation_id: string, payment: { id: string; status: string }, via: UnbindVia): Promise<boolean> {
    return this.tx((tx) => unbindUncapturable(tx, this.context, reservation_id, payment, via));
  }

  /** Resolves a held reservation's unknown capture the provider proves did not land (see
   *  resolveUnlandedCapture). */
  resolveUnlandedCapture(reservation_id: string, payment: { id: string; status: string; captured?: boolean }): Promise<UnlandedOutcome> {
    return this.tx((tx) => resolveUnlandedCapture(tx, this.context, reservation_id, payment));
  }

  /** The reservation an order belongs to, as committed now (no lock). */
  async reservationByOrder(order_id: string): Promise<ReservationRow | undefined> {
    return this.driver.read((tx) => reservationByOrder(tx, order_id));
  }

  /** Settles a capture the provider proved, outside any tool call (operator check). */
  settle(payment: CapturedPayment, via: SettleVia): Promise<SettleOutcome> {
    return this.tx((tx) => settleCapture(tx, this.context, payment, via));
  }

  /** Runs `work` in a ledger transaction: for callers (webhooks) that combine steps atomically. */
  transaction<T>(work: (tx: SqlTx, context: LedgerContext) => Promise<T>): Promise<T> {
    return this.tx((tx) => work(tx, this.context));
  }

  /** Moves a pending approval to forwarding; 409 approval_expired (after recording the expiry)
   *  when its lifetime ran out. */
  async beginApproval(approval_id: string): Promise<ApprovalGrant | { refused: string }> {
    const outcome = await this.tx((tx) => beginApproval(tx, this.context, approval_id));
    if ("expired" in outcome) throw approvalExpiredError(outcome);
    return outcome;
  }

  /** Denies a pending approval and releases its hold; 409 approval_expired as beginApproval.
   *  Answers the approval as the list shows it. */
  async deny(approval_id: string): Promise<ApprovalView> {
    const outcome = await this.tx((tx) => denyApproval(tx, this.context, approval_id));
    if ("expired" in outcome) throw approvalExpiredError(outcome);
    return outcome;
  }

  async approval(approval_id: string): Promise<ApprovalRow | undefined> {
    return this.driver.read((tx) => getApproval(tx, approval_id));
  }

  /**
   * One page of the approvals in `state` (oldest first, the order they are worked through), or of
   * every state (newest first), after `after` when given. Ordered by creation time and then id,
   * and continued from the last row's position (not an offset): a walk page by page sees each row
   * at most once, and every row that was there when it began and stays in `state`, whatever is
   * inserted or decided meanwhile.
   */
  async approvals(state?: ApprovalRow["state"], page: { limit?: number; after?: ApprovalPosition } = {}): Promise<ApprovalPage> {
    const limit = page.limit ?? approvals_page_default;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > approvals_page_max) {
      throw new Error(`approvals: limit ${limit} is outside 1..${approvals_page_max}`);
    }
    const newest_first = state === undefined;
    const rows = await this.driver.read((tx) => {
      const id = byteOrder(tx, "approval_id");
      const direction = newest_first ? "DESC" : "ASC";
      const filters: string[] = [];
      const params: Array<string | number> = [];
      if (state !== undefined) {
        filters.push("state = ?");
        params.push(state);
      }
      if (page.after) {
        filters.push(`(created_at_ms, ${id}) ${newest_first ? "<" : ">"} (?, ?)`);
        params.push(page.after.created_at_ms, page.after.approval_id);
      }
      const where = filters.length > 0 ? `WHERE ${filters.join(" AND ")}` : "";
      // One row more than the page: whether it comes says whether the walk goes on.
      return tx.all<ApprovalView>(`SELECT ${approval_view_columns} FROM approvals ${where} ORDER BY created_at_ms ${direction}, ${id} ${direction} LIMIT ?`, [...params, limit + 1]);
    });
    const approvals = rows.slice(0, limit);
    const last = approvals.at(-1);
    const next = rows.length > limit && last ? { created_at_ms: Number(last.created_at_ms), approval_id: last.approval_id } : null;
    return { approvals, next };
  }

  async reservation(reservation_id: string): Promise<ReservationRow | undefined> {
    return this.driver.read((tx) => getReservation(tx, reservation_id));
  }

  /**
   * Time-driven transitions for everyone: expired leases and approvals (bounded per call). One
   * transaction per block, each taking the block's lock first: a sweep that wrote rows of many
   * blocks after its first evidence entry would hold the log's sequence lock while waiting for
   * block rows, the reverse of every other writer's order (a deadlock on PostgreSQL).
   */
  async sweep(): Promise<{ leases: number; approvals: number }> {
    const due = await this.driver.read((tx) => blocksDue(tx, this.now_ms(), this.context.lease_ms));
    const total = { leases: 0, approvals: 0 };
    for (const block_id of due) {
      const done = await this.tx(async (tx) => {
        if (!(await lockBlock(tx, block_id))) return { leases: 0, approvals: 0 };
        return {
          leases: (await expireLeasesOfBlock(tx, this.context, block_id)) + (await expireForwarding(tx, this.context, block_id)),
          approvals: await expireApprovals(tx, this.context, block_id),
        };
      });
      total.leases += done.leases;
      total.approvals += done.approvals;
    }
    return total;
  }

  /**
   * Expires the block's pending approvals whose lifetime is over, releasing their holds, before a
   * read tool reports the block or an approval: the sweep runs only every second in `bursar
   * serve` and not at all in the library, and an expired approval must not read as pending.
   * Writes nothing (one read) when none is due. Returns how many expired.
   */
  async expireDueApprovals(block_id: string): Promise<number> {
    const due = await this.driver.read((tx) =>
      tx.get("SELECT 1 AS one FROM approvals WHERE block_id = ? AND state = 'pending' AND expires_at_ms <= ? LIMIT 1", [block_id, this.now_ms()]),
    );
    if (!due) return 0;
    return this.tx(async (tx) => ((await lockBlock(tx, block_id)) ? expireApprovals(tx, this.context, block_id) : 0));
  }

  /** The operator's inbox, read in one snapshot: each list cut at its limit, with its total. */
  async inbox(): Promise<Inbox> {
    return this.driver.read(async (tx) => {
      const count = (from_where: string) => countRows(tx, from_where);
      const { pending_approvals: pending, unknown_outcomes: unknown, frozen_blocks: frozen } = inbox_lists;
      const pending_approvals = await tx.all<ApprovalView>(
        `SELECT ${approval_view_columns} FROM ${pending} ORDER BY created_at_ms, ${byteOrder(tx, "approval_id")} LIMIT ${inbox_approvals_max}`,
      );
      const unknown_outcomes = await tx.all<ReservationRow>(
        `SELECT * FROM ${unknown} ORDER BY created_at_ms, ${byteOrder(tx, "reservation_id")} LIMIT ${inbox_unknown_outcomes_max}`,
      );
      const frozen_rows = await tx.all<BlockRow>(
        `SELECT * FROM ${frozen} ORDER BY frozen_at_ms, ${byteOrder(tx, "block_id")} LIMIT ${inbox_frozen_blocks_max}`,
      );
      const frozen_blocks = [];
      for (const block of frozen_rows) {
        const reservations = await tx.all<ReservationRow>(
          `SELECT * FROM reservations WHERE block_id = ? ORDER BY created_at_ms DESC, ${byteOrder(tx, "reservation_id")} DESC LIMIT ${inbox_reservations_per_block}`,
          [block.block_id],
        );
        frozen_blocks.push({ block: blockView(block), reservations });
      }
      const pending_approvals_total = await count(pending);
      const unknown_outcomes_total = await count(unknown);
      const frozen_blocks_total = await count(frozen);
      const truncated =
        pending_approvals.length < pending_approvals_total || unknown_outcomes.length < unknown_outcomes_total || frozen_blocks.length < frozen_blocks_total;
      return { pending_approvals, pending_approvals_total, unknown_outcomes, unknown_outcomes_total, frozen_blocks, frozen_blocks_total, truncated };
    });
  }

  /** How many items each of the inbox's lists holds, in one snapshot, without the items (/metrics). */
  async inboxCounts(): Promise<InboxCounts> {
    return this.driver.read(async (tx) => ({
      pending_approvals: await countRows(tx, inbox_lists.pending_approvals),
      unknown_outcomes: await countRows(tx, inbox_lists.unknown_outcomes),
      frozen_blocks: await countRows(tx, inbox_lists.frozen_blocks),
    }));
  }
}
