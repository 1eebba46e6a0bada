// authorizeBatch: many create_order decisions in one PostgreSQL transaction, read and written
// set by set. Each decision sees the ones before it exactly as if they had run one after another
// in the given order at one instant: the batch reads every block, key row and velocity count
// once, keeps them current in memory as its decisions hold money, and writes every row in a few
// statements at the end. Its evidence entries are appended last, in decision order, under one
// take of the log's sequence lock, so the lock order stays blocks → log and one durable commit
// carries the whole batch (six round trips per batch, seven when it waits for a skipped call's
// block, where a decision alone makes 14; the last log INSERT goes with the COMMIT).

import { representable } from "../evidence/canonical.js";
import { append_batch_max } from "../evidence/store.js";
import { decide } from "../policy/index.js";
import {
  decisionEntry,
  decisionResult,
  holdRows,
  idempotencyState,
  insertApproval,
  policyCall,
  pruneCalls,
  replayedBlock,
  stillReplays,
  type AuthorizeInput,
  type AuthorizeResult,
  type Decided,
} from "./authorize.js";
import { record, type EvidenceInput, type EvidenceRef, type EvidenceWriter, type LedgerContext } from "./context.js";
import { CommitOutcomeUnknownError, type SqlTx } from "./driver.js";
import { callKey } from "./keys.js";
import { blockState, type ApprovalRow, type BlockRow, type IdempotencyRow, type ReservationRow } from "./rows.js";
import { agent_block_order, callsInWindow, dropIdempotency, getApproval, getReservation, lockBlock } from "./statements.js";
import { expireApprovals, expireLeasesOfBlock } from "./sweep.js";

/** Decisions one batch carries at most. */
export const decision_batch_max = 32;

/**
 * Calls the batch path decides: create_order by an authenticated agent, with arguments the log
 * can record. A capture (which reads the provider's payment and another reservation) and an
 * anonymous call take the one-call path, and so do arguments the log would refuse (a lone
 * surrogate, which jsonb cannot hold either; a number JSON cannot write): their failure must
 * be theirs alone, not their batch's. The gate hands over only representable arguments.
 */
export function batchable(input: AuthorizeInput): boolean {
  if (input.tool !== "create_order" || input.agent_id === null || input.payment !== undefined) return false;
  return representable(input.args) === input.args;
}

/** Column lists with their PostgreSQL types, for jsonb_to_recordset. */
type Columns = ReadonlyArray<readonly [name: string, type: "text" | "bigint" | "integer"]>;

const reservation_columns: Columns = [
  ["reservation_id", "text"], ["block_id", "text"], ["agent_id", "text"], ["amount", "bigint"], ["currency", "text"],
  ["status", "text"], ["outcome_unknown", "integer"], ["unknown_reason", "text"], ["order_id", "text"], ["payment_id", "text"],
  ["captured_amount", "bigint"], ["release_reason", "text"], ["created_at_ms", "bigint"], ["updated_at_ms", "bigint"],
];
const idempotency_columns: Columns = [
  ["agent_id", "text"], ["key", "text"], ["derived", "integer"], ["tool", "text"], ["params_hash", "text"], ["status", "text"],
  ["effect", "text"], ["reservation_id", "text"], ["approval_id", "text"], ["result_json", "text"], ["first_at_ms", "bigint"],
  ["lease_expires_at_ms", "bigint"],
];
const money_call_columns: Columns = [["agent_id", "text"], ["at_ms", "bigint"], ["n", "bigint"]];

/** `INSERT INTO table (…) SELECT … FROM jsonb_to_recordset(?)`: any number of rows (none too), one statement text. */
function recordsetInsert(table: string, columns: Columns): string {
  const names = columns.map(([name]) => name).join(", ");
  const typed = columns.map(([name, type]) => `${name} ${type}`).join(", ");
  return `INSERT INTO ${table} (${names}) SELECT ${names} FROM jsonb_to_recordset(?::jsonb) AS x(${typed})`;
}

/**
 * Every row the batch's holds write, in one statement (its foreign keys are checked at its end,
 * so a key row may name a reservation inserted beside it). Answers how many blocks it adjusted.
 */
const write_holds = `WITH
  reservations_written AS (${recordsetInsert("reservations", reservation_columns)}),
  keys_written AS (${recordsetInsert("idempotency_keys", idempotency_columns)}),
  calls_written AS (${recordsetInsert("money_calls", money_call_columns)}),
  blocks_adjusted AS (UPDATE blocks AS b SET held = b.held + d.held
    FROM jsonb_to_recordset(?::jsonb) AS d(block_id text, held bigint) WHERE b.block_id = d.block_id RETURNING 1)
  SELECT COUNT(*) AS adjusted FROM blocks_adjusted`;

/** Each agent's block (as lockAgentBlock chooses it), locked in block id order. */
const lock_agent_blocks = `SELECT * FROM blocks WHERE block_id = ANY (ARRAY(
    SELECT (SELECT block_id FROM blocks WHERE agent_id = a.agent_id ORDER BY ${agent_block_order} LIMIT 1)
    FROM jsonb_array_elements_text(?::jsonb) AS a(agent_id)
  )) ORDER BY block_id FOR UPDATE`;

/** The same, skipping blocks another transaction holds; says which agents have no block at all. */
const lock_free_agent_blocks = `WITH chosen AS MATERIALIZED (
    SELECT a.agent_id, (SELECT block_id FROM blocks WHERE agent_id = a.agent_id ORDER BY ${agent_block_order} LIMIT 1) AS block_id
    FROM jsonb_array_elements_text(?::jsonb) AS a(agent_id)),
  locked AS (SELECT * FROM blocks WHERE block_id = ANY (ARRAY(SELECT block_id FROM chosen)) ORDER BY block_id FOR UPDATE SKIP LOCKED)
  SELECT (SELECT COALESCE(json_agg(agent_id), '[]') FROM chosen WHERE block_id IS NULL) AS blockless,
    (SELECT COALESCE(json_agg(locked ORDER BY block_id), '[]') FROM locked) AS locked`;

/**
 * What the decisions read, in one round trip once their blocks are locked: blocks with an
 * in-flight lease or pending approval that ran out (what a one-call snapshot expires first), the
 * rows of the batch's keys, and for each agent the numbers of its newest call and of the first in
 * its block's velocity window, and the newest call's time (see countCalls and recordMoneyCall).
 * Every table is reached through an index per
 * key or agent (LIMIT 1 keeps the planner from hashing the whole key table instead).
 */
const read_state = `SELECT
  (SELECT COALESCE(json_agg(due.block_id), '[]') FROM (
     SELECT r.block_id FROM idempotency_keys k JOIN reservations r ON r.reservation_id = k.reservation_id
       WHERE r.block_id IN (SELECT jsonb_array_elements_text(?::jsonb)) AND k.status = 'in_flight' AND k.lease_expires_at_ms <= ?
     UNION
     SELECT block_id FROM approvals
       WHERE block_id IN (SELECT jsonb_array_elements_text(?::jsonb)) AND state = 'pending' AND expires_at_ms <= ?) AS due) AS due,
  (SELECT COALESCE(json_agg(k), '[]') FROM jsonb_to_recordset(?::jsonb) AS x(agent_id text, key text)
     CROSS JOIN LATERAL (SELECT * FROM idempotency_keys WHERE agent_id = x.agent_id AND key = x.key LIMIT 1) AS k) AS keys,
  (SELECT COALESCE(json_agg(json_build_array(x.agent_id, newest.n, newest.at_ms,
     (SELECT n FROM money_calls WHERE agent_id = x.agent_id AND at_ms > x.since_ms ORDER BY at_ms, n LIMIT 1))), '[]')
   FROM jsonb_to_recordset(?::jsonb) AS x(agent_id text, since_ms bigint)
   LEFT JOIN LATERAL (SELECT n, at_ms FROM money_calls WHERE agent_id = x.agent_id ORDER BY at_ms DESC, n DESC LIMIT 1) AS newest ON TRUE) AS windows`;

/** An agent's newest money call: its number and time, which the next call's row follows. */
interface NewestCall {
  n: number;
  at_ms: number;
}

interface State {
  due: string[];
  keys: IdempotencyRow[];
  /** Each agent's calls in its block's velocity window, up to its max_calls, as countCalls counts them. */
  calls: Map<string, number>;
  newest: Map<string, NewestCall>;
}

/** What read_state answers; each window is an agent's newest call (number, time) and the number of the first in its window. */
interface StateRow {
  due: string[];
  keys: IdempotencyRow[];
  windows: Array<[agent_id: string, newest_n: number | null, newest_at_ms: number | null, first_n: number | null]>;
}

/**
 * The batch's evidence writer: entries are kept in the order they were recorded (the expiries
 * that fell due, then the decisions) and appended by `flush` after every row is written.
 * `append` answers at once with a reference that flush fills in; nothing reads one before that.
 */
class DeferredEvidence implements EvidenceWriter {
  private readonly inputs: EvidenceInput[] = [];
  private readonly refs: EvidenceRef[] = [];

  constructor(private readonly log: EvidenceWriter) {}

  async append(_tx: SqlTx, input: EvidenceInput): Promise<EvidenceRef> {
    const ref: EvidenceRef = { seq: -1, leaf_hash: "", receipt: null };
    this.inputs.push(input);
    this.refs.push(ref);
    return ref;
  }

  async appendMany(tx: SqlTx, inputs: readonly EvidenceInput[]): Promise<EvidenceRef[]> {
    return Promise.all(inputs.map((input) => this.append(tx, input)));
  }

  /** Appends in chunks the log accepts (expiries can add many entries); the transaction keeps
   *  the sequence lock from the first chunk on, so the entries stay consecutive. The batch's
   *  transaction ends with this: its last INSERT goes with the COMMIT. */
  async flush(tx: SqlTx): Promise<void> {
    for (let start = 0; start < this.inputs.length; start += append_batch_max) {
      const last = start + append_batch_max >= this.inputs.length;
      const written = await this.log.appendMany(tx, this.inputs.slice(start, start + append_batch_max), { last });
      written.forEach(({ seq, leaf_hash, receipt }, index) => Object.assign(this.refs[start + index] as EvidenceRef, { seq, leaf_hash, receipt }));
    }
  }
}

/**
 * Rows that came back as JSON (json_agg) skipped the driver's integer parser: every number in
 * them is a stored integer, and one past 2^53 must be refused, not rounded.
 */
function safeIntegers<Row extends object>(rows: Row[]): Row[] {
  for (const row of rows) {
    for (const [column, value] of Object.entries(row)) {
      if (typeof value === "number" && !Number.isSafeInteger(value)) {
        throw new RangeError(`PostgreSQL returned ${value} for ${column}, which is not a safe integer; Bursar stores only integers below 2^53`);
      }
    }
  }
  return rows;
}

function identity(agent_id: string, key: string): string {
  return `${agent_id}\n${key}`;
}

/** The rows the batch's decisions write, in the order foreign keys need them. */
interface Writes {
  reservations: ReservationRow[];
  approvals: ApprovalRow[];
  /** Keys whose old row (an expired derived key) is replaced. */
  replaced: Array<{ agent_id: string; key: string }>;
  keys: IdempotencyRow[];
  money_calls: Array<{ agent_id: string; at_ms: number; n: number }>;
  held: Map<string, number>;
}

async function flushWrites(tx: SqlTx, writes: Writes): Promise<void> {
  for (const { agent_id, key } of writes.replaced) await dropIdempotency(tx, agent_id, key);
  const deltas = [...writes.held].map(([block_id, held]) => ({ block_id, held }));
  const written = await tx.get<{ adjusted: number }>(write_holds, [
    JSON.stringify(writes.reservations),
    JSON.stringify(writes.keys),
    JSON.stringify(writes.money_calls),
    JSON.stringify(deltas),
  ]);
  const adjusted = Number(written?.adjusted);
  if (adjusted !== deltas.length) throw new Error(`${deltas.length - adjusted} of the batch's blocks vanished while adjusting them`);
  for (const approval of writes.approvals) await insertApproval(tx, approval);
}

/**
 * Exported for the test that holds the velocity count to max_calls. `agents` are every agent the
 * batch decides for: one without a block has no window to count, but its refusals are money
 * calls too, numbered after its newest.
 */
export async function readState(
  tx: SqlTx,
  blocks: Map<string, BlockRow>,
  pairs: Array<{ agent_id: string; key: string }>,
  now_ms: number,
  agents: readonly string[] = [...blocks.keys()],
): Promise<State> {
  const ids = JSON.stringify([...blocks.values()].map((row) => row.block_id));
  const since = agents.map((agent_id) => {
    const block = blocks.get(agent_id);
    return { agent_id, since_ms: block ? now_ms - block.velocity_window_seconds * 1000 : null };
  });
  const row = (await tx.get<StateRow>(read_state, [ids, now_ms, ids, now_ms, JSON.stringify(pairs), JSON.stringify(since)])) as StateRow;
  const calls = new Map<string, number>();
  const newest = new Map<string, NewestCall>();
  for (const [agent_id, newest_n, newest_at_ms, first_n] of row.windows) {
    const block = blocks.get(agent_id);
    if (block) calls.set(agent_id, callsInWindow(newest_n, first_n, block.velocity_max_calls));
    if (newest_n !== null && newest_at_ms !== null) newest.set(agent_id, { n: newest_n, at_ms: newest_at_ms });
  }
  return { due: row.due, keys: row.keys, calls, newest };
}

/** Expires what ran out on the given blocks, as a one-call snapshot would before deciding, and
 *  reads each again. */
async function expire(tx: SqlTx, context: LedgerContext, blocks: Map<string, BlockRow>, due: readonly string[]): Promise<void> {
  for (const block_id of due) {
    await expireLeasesOfBlock(tx, context, block_id);
    await expireApprovals(tx, context, block_id);
    const row = (await lockBlock(tx, block_id)) as BlockRow;
    blocks.set(row.agent_id, row);
  }
}

/** What lock_free_agent_blocks answers: the blocks it locked, and the agents with no block. */
interface FreeBlocks {
  blockless: string[];
  locked: BlockRow[];
}

/**
 * The agents' blocks, locked. The blocks of `wait_for`'s agents (calls skipped by an earlier
 * batch) are waited for first, in block id order, while the transaction holds no other block, so
 * two batches can never wait for each other. The other agents' blocks that another transaction
 * holds are skipped (those calls go to a later batch instead of holding this one up), unless
 * every block is held and `wait_if_all_held`: then the batch waits for them all. `skipped`
 * names the skipped agents.
 */
async function lockBlocks(
  tx: SqlTx,
  agents: string[],
  now_ms: number,
  wait_for: ReadonlySet<string>,
  waiting_on?: Set<string>,
  wait_if_all_held = true,
): Promise<{ blocks: Map<string, BlockRow>; skipped: Set<string> }> {
  /** Waits for the blocks of `these` agents, in block id order (named in `waiting_on` first). */
  const waitFor = async (these: string[]) => {
    for (const agent of these) waiting_on?.add(agent);
    const found = await tx.all<BlockRow>(lock_agent_blocks, [now_ms, JSON.stringify(these)]);
    return new Map(found.map((row) => [row.agent_id, row]));
  };
  const waited = agents.filter((agent) => wait_for.has(agent));
  const rest = agents.filter((agent) => !wait_for.has(agent));
  const blocks = waited.length > 0 ? await waitFor(waited) : new Map<string, BlockRow>();
  if (rest.length === 0) return { blocks, skipped: new Set() };
  const free = (await tx.get<FreeBlocks>(lock_free_agent_blocks, [now_ms, JSON.stringify(rest)])) as FreeBlocks;
  for (const row of safeIntegers(free.locked)) blocks.set(row.agent_id, row);
  const skipped = new Set(rest.filter((agent) => !blocks.has(agent) && !free.blockless.includes(agent)));
  if (blocks.size > 0 || skipped.size === 0 || !wait_if_all_held) return { blocks, skipped };
  return { blocks: await waitFor(agents), skipped: new Set() };
}

/** How long heldAgents waits for a lock (a table lock: SKIP LOCKED never waits for a row's). */
export const held_probe_lock_wait_ms = 100;

/** heldAgents could not lock to tell which blocks are held (55P03, without the code the driver
 *  retries): the caller counts them all as held, as after any failure of it. */
export class HeldProbeError extends Error {}

/**
 * Of `agents`, those whose block another transaction holds right now: asked after a batch timed
 * out waiting, to learn whose block it waited on. Locks what it can without waiting (SKIP LOCKED)
 * and lets go at once: the caller runs it in a transaction of its own that only reads. A lock it
 * would wait for (`LOCK TABLE blocks` from psql) fails it after held_probe_lock_wait_ms with a
 * HeldProbeError, which the driver does not retry: it once waited out statement_timeout itself.
 */
export async function heldAgents(tx: SqlTx, agents: readonly string[], now_ms: number): Promise<Set<string>> {
  await tx.get("SELECT set_config('lock_timeout', ?, true)", [`${held_probe_lock_wait_ms}ms`]);
  const free = (await tx.get<FreeBlocks>(lock_free_agent_blocks, [now_ms, JSON.stringify(agents)]).catch((error: unknown) => {
    if ((error as { code?: unknown } | null)?.code !== "55P03") throw error;
    throw new HeldProbeError(`could not tell which blocks another session holds: ${String((error as Error).message)}`, { cause: error });
  })) as FreeBlocks;
  const lockable = new Set([...free.blockless, ...safeIntegers(free.locked).map((row) => row.agent_id)]);
  return new Set(agents.filter((agent) => !lockable.has(agent)));
}

export interface BatchOptions {
  /** Agents whose blocks the batch waits for instead of skipping them (their calls were skipped before). */
  wait_for: ReadonlySet<string>;
  /** Filled with the indexes of the calls left out, as the attempt that last ran left them. */
  skipped?: Set<number>;
  /** Filled with the agents whose blocks the batch waited for (every agent's, when all were held);
   *  which of those another session still holds, heldAgents tells. */
  waiting_on?: Set<string>;
  /** False for a batch that must never wait for a block: one whose every block is held leaves
   *  every call out instead of waiting for them all (default true). */
  wait_if_all_held?: boolean;
}

/**
 * Decides `all` (each batchable) in order, in the caller's transaction, and returns their
 * results in the same order: null for a call whose block another transaction held (unless its
 * agent is in `wait_for`), to be decided in a later batch. Rolled back as a whole when anything throws.
 */
export async function authorizeBatch(
  tx: SqlTx,
  context: LedgerContext,
  all: readonly AuthorizeInput[],
  options: BatchOptions,
): Promise<Array<AuthorizeResult | null>> {
  const evidence = context.evidence ? new DeferredEvidence(context.evidence) : null;
  const batch: LedgerContext = { ...context, evidence };
  const agents = [...new Set(all.map((input) => input.agent_id as string))];
  // As the attempt that last ran left it: the driver runs the work again on a retryable error.
  options.waiting_on?.clear();
  const { blocks, skipped } = await lockBlocks(tx, agents, context.clock().getTime(), options.wait_for, options.waiting_on, options.wait_if_all_held ?? true);
  // The decisions' time is read once their blocks are locked, as one decision reads it: the
  // locks may have waited for other transactions, past a block's expiry or a velocity window.
  const now = context.clock();
  const now_ms = now.getTime();
  const chosen: number[] = [];
  options.skipped?.clear();
  for (const [index, input] of all.entries()) {
    if (skipped.has(input.agent_id as string)) options.skipped?.add(index);
    else chosen.push(index);
  }
  const inputs = chosen.map((index) => all[index] as AuthorizeInput);
  const keys = inputs.map((input) => callKey(input.agent_id as string, input.tool, input.args, input));
  const pairs = keys.map((key, index) => ({ agent_id: inputs[index]?.agent_id as string, key: key.key }));
  const deciding = [...new Set(inputs.map((input) => input.agent_id as string))];
  let state = await readState(tx, blocks, pairs, now_ms, deciding);
  if (state.due.length > 0) {
    await expire(tx, batch, blocks, state.due);
    state = await readState(tx, blocks, pairs, now_ms, deciding);
  }
  const stored = new Map(safeIntegers(state.keys).map((row) => [identity(row.agent_id, row.key), row]));
  const { calls, newest } = state;

  const writes: Writes = { reservations: [], approvals: [], replaced: [], keys: [], money_calls: [], held: new Map() };
  const reservations = new Map<string, ReservationRow>();
  const decided: Decided[] = [];
  const refs: Array<EvidenceRef | undefined> = [];
  for (const [index, input] of inputs.entries()) {
    const agent_id = input.agent_id as string;
    const key = keys[index] as (typeof keys)[number];
    let block = blocks.get(agent_id) ?? null;
    const found = stored.get(identity(agent_id, key.key));
    const row = found && (await stillReplays(tx, batch, found, now_ms)) ? found : undefined;
    const verdict = decide(
      policyCall(input, agent_id, key.params_hash),
      { block: block ? blockState(block) : null, calls_in_window: block ? (calls.get(agent_id) ?? 0) : 0, idempotency: idempotencyState(row) },
      now,
      context.guards,
    );
    let held: Pick<Decided, "reservation" | "approval"> = {};
    if (!verdict.replay) {
      // Numbered and stamped as recordMoneyCall would, call after call.
      const before = newest.get(agent_id);
      const made: NewestCall = { n: (before?.n ?? 0) + 1, at_ms: Math.max(now_ms, before?.at_ms ?? now_ms) };
      newest.set(agent_id, made);
      writes.money_calls.push({ agent_id, ...made });
      calls.set(agent_id, (calls.get(agent_id) ?? 0) + 1);
      if (verdict.effect !== "BLOCK" && block) {
        const rows = holdRows(batch, input, block, key, verdict, now_ms);
        writes.reservations.push(rows.reservation);
        reservations.set(rows.reservation.reservation_id, rows.reservation);
        if (rows.approval) writes.approvals.push(rows.approval);
        if (found) writes.replaced.push({ agent_id, key: key.key });
        writes.keys.push(rows.idempotency);
        stored.set(identity(agent_id, key.key), rows.idempotency);
        block = { ...block, held: block.held + rows.reservation.amount };
        blocks.set(agent_id, block);
        writes.held.set(block.block_id, (writes.held.get(block.block_id) ?? 0) + rows.reservation.amount);
        held = { reservation: rows.reservation, approval: rows.approval };
      }
    }
    await pruneCalls(tx, agent_id, now_ms);
    const replayed = verdict.replay && row?.reservation_id ? (reservations.get(row.reservation_id) ?? (await getReservation(tx, row.reservation_id))) : undefined;
    // As authorize's: a replayed HOLD is answered from, and records, its approval as read here.
    const replayed_approval =
      verdict.replay && row?.approval_id ? (writes.approvals.find((approval) => approval.approval_id === row.approval_id) ?? (await getApproval(tx, row.approval_id))) : undefined;
    const shown = verdict.replay ? await replayedBlock(tx, block, replayed) : block;
    const decision: Decided = { input, verdict, key, block: shown, reservation: held.reservation ?? replayed, approval: held.approval ?? replayed_approval, stored: row };
    decided.push(decision);
    refs.push(await record(tx, batch, "gate.decision", decisionEntry(decision)));
  }
  await flushWrites(tx, writes);
  await evidence?.flush(tx);
  const results: Array<AuthorizeResult | null> = all.map(() => null);
  decided.forEach((decision, index) => (results[chosen[index] as number] = decisionResult(decision, refs[index])));
  return results;
}

interface Waiting {
  input: AuthorizeInput;
  resolve: (result: AuthorizeResult) => void;
  reject: (error: unknown) => void;
  /** Put back once because its block was held elsewhere: its next batch waits for that block. */
  deferred: boolean;
}

/**
 * How long a batch may run (waiting for a block another transaction holds) before the calls
 * queued behind it that are on other agents' blocks go in overflow batches beside it.
 */
export const decision_stall_ms = 250;

/**
 * Gathers concurrent batchable decisions of one process: one batch is in flight at a time, and
 * the next takes every call that arrived meanwhile (up to decision_batch_max). A lone call goes
 * in the next turn of the event loop as a batch of one: batching adds no wait when it is quiet.
 *
 * A batch can wait for a block another transaction holds, up to statement_timeout (an operator's
 * open transaction, a stuck instance). Once it has run for stall_ms, the calls queued behind it
 * on other agents' blocks are decided in overflow batches beside it, which never wait for a
 * block: without them, every later call of the process waited behind the one block. The calls
 * of the stalled batch's agents, and of agents with a call put back to wait for its block, stay
 * queued, so one agent's calls are still decided in the order they came. A second lane always
 * on (not only once stalled) cost throughput under ordinary contention: bench:pg's 4 processes
 * over 100 blocks fell to 0.60 of one lane, the two lanes' batches queueing on the log lock.
 */
export class DecisionQueue {
  private readonly waiting: Waiting[] = [];
  private running = false;
  /** The agents of the batch in flight once it has run past stall_ms; undefined otherwise. */
  private stalled: ReadonlySet<unknown> | undefined;
  /** The overflow lane while it runs. */
  private overflow: Promise<void> | undefined;

  constructor(
    private readonly runBatch: (inputs: AuthorizeInput[], options: BatchOptions) => Promise<Array<AuthorizeResult | null>>,
    private readonly runOne: (input: AuthorizeInput) => Promise<AuthorizeResult>,
    /** Of these agents, those whose block another transaction holds now (heldAgents). */
    private readonly stillHeld: (agents: string[]) => Promise<Set<string>> = async () => new Set(),
    private readonly stall_ms = decision_stall_ms,
  ) {}

  decide(input: AuthorizeInput): Promise<AuthorizeResult> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ input, resolve, reject, deferred: false });
      if (this.stalled) this.startOverflow();
      if (this.running) return;
      this.running = true;
      // Calls made in this turn of the event loop (requests read together) join the first batch.
      setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    try {
      await this.batches();
    } finally {
      this.running = false;
    }
  }

  private async batches(): Promise<void> {
    for (; this.waiting.length > 0; await turn()) {
      const calls = this.waiting.splice(0, decision_batch_max);
      const stall = setTimeout(() => {
        this.stalled = new Set(calls.map((call) => call.input.agent_id));
        this.startOverflow();
      }, this.stall_ms);
      try {
        await this.decideBatch(calls, true);
      } finally {
        clearTimeout(stall);
        this.stalled = undefined;
        // An overflow batch in flight ends first: the next batch may take later calls of its agents.
        await this.overflow;
      }
    }
  }

  /**
   * While the batch in flight is stalled, decides the queued calls on other agents' blocks in
   * batches that never wait for a block (a call whose block is held is put back, to wait for it
   * in a later batch of the main lane), until that batch ends or none is left.
   */
  private startOverflow(): void {
    if (this.overflow !== undefined || this.stalled === undefined) return;
    const run = this.overflowBatches();
    this.overflow = run;
    // Cleared once the run ends, and only if it is still this run: one that finds nothing to
    // decide ends before the line above stores it, and a `finally` inside it clearing the field
    // then left the settled run stored for good, which kept the lane shut for the process's life.
    const clear = () => {
      if (this.overflow === run) this.overflow = undefined;
    };
    void run.then(clear, clear);
  }

  private async overflowBatches(): Promise<void> {
    for (let stalled = this.stalled; stalled !== undefined; stalled = this.stalled) {
      const held_back = new Set(stalled);
      for (const call of this.waiting) if (call.deferred) held_back.add(call.input.agent_id);
      const calls: Waiting[] = [];
      for (let index = 0; index < this.waiting.length && calls.length < decision_batch_max; ) {
        if (held_back.has((this.waiting[index] as Waiting).input.agent_id)) index++;
        else calls.push(...this.waiting.splice(index, 1));
      }
      if (calls.length === 0) return;
      await this.decideBatch(calls, false);
      await turn();
    }
  }

  /**
   * After a batch timed out: of the agents whose blocks it waited for (else, when it waited on
   * none by name, a lock on the whole table say, of every agent it decided), those whose block
   * is still held, or all of them when the probe cannot tell.
   */
  private async heldOf(calls: readonly Waiting[], skipped: ReadonlySet<number>, waiting_on: ReadonlySet<string>): Promise<Set<string>> {
    const decided = calls.filter((_, index) => !skipped.has(index)).map((call) => call.input.agent_id as string);
    const probed = [...(waiting_on.size > 0 ? waiting_on : new Set(decided))];
    if (probed.length === 0) return new Set();
    return this.stillHeld(probed).catch(() => new Set(probed));
  }

  /** Decides one batch of calls and answers them; `wait`: whether it may wait for held blocks
   *  (the main lane's) or never does (an overflow batch's). */
  private async decideBatch(calls: Waiting[], wait: boolean): Promise<void> {
    const skipped = new Set<number>();
    const waiting_on = new Set<string>();
    try {
      // Batches of different processes skip each other's blocks instead of queueing behind
      // them; a call skipped once is in the next main batch, which waits for its block (and
      // only for that: a batch waiting on all its blocks stalled its process for 20-30 ms while
      // it held the others, which other processes' batches then skipped in turn).
      const wait_for = new Set(wait ? calls.filter((call) => call.deferred).map((call) => call.input.agent_id as string) : []);
      const results = await this.runBatch(
        calls.map((call) => call.input),
        { wait_for, skipped, waiting_on, wait_if_all_held: wait },
      );
      const left_out: Waiting[] = [];
      calls.forEach((call, index) => {
        const result = results[index];
        if (result) call.resolve(result);
        else left_out.push({ ...call, deferred: true });
      });
      this.waiting.unshift(...left_out);
    } catch (error) {
      // The batch may have committed: deciding its calls again could hold their money twice.
      // The calls it left out were never decided and wait for the next batch.
      if (error instanceof CommitOutcomeUnknownError) {
        for (const call of calls.filter((_, index) => !skipped.has(index))) call.reject(error);
        this.waiting.unshift(...calls.filter((_, index) => skipped.has(index)).map((call) => ({ ...call, deferred: true })));
        return;
      }
      // Rolled back after waiting out statement_timeout for blocks another session still
      // holds: the calls on those blocks fail with that error rather than each waiting as long
      // again, one after another, with every later call of the process behind them. The others
      // go to the next batch (a block it waited for and got, a timeout elsewhere).
      // A probe that could not tell (it could not lock, or failed) counts them all as held:
      // deciding each again would wait as long again for what may be the same lock.
      const held = isStatementTimeout(error) ? await this.heldOf(calls, skipped, waiting_on) : new Set<string>();
      if (held.size > 0) {
        for (const call of calls) if (held.has(call.input.agent_id as string)) call.reject(error);
        this.waiting.unshift(...calls.filter((call) => !held.has(call.input.agent_id as string)));
        return;
      }
      // Rolled back: one call's failure must not fail the others, so each call the batch
      // decided is decided again on its own before the next batch: one agent's calls in order
      // (they must not overtake each other), different agents' side by side. The calls it left
      // out (their block held elsewhere) were never decided: they wait for the next batch, as
      // after a commit with an unknown outcome, rather than each for its block here.
      const left_out = calls.filter((_, index) => skipped.has(index));
      this.waiting.unshift(...left_out.map((call) => ({ ...call, deferred: true })));
      const decided = calls.filter((_, index) => !skipped.has(index));
      await Promise.all(
        [...callsByAgent(decided).values()].map(async (own) => {
          for (const call of own) await this.runOne(call.input).then(call.resolve, call.reject);
        }),
      );
    }
  }
}

/** PostgreSQL's query_canceled: a statement outlived statement_timeout (a lock waited on too long). */
function isStatementTimeout(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "57014";
}

/** Calls grouped by agent, each group in arrival order. */
function callsByAgent(calls: readonly Waiting[]): Map<unknown, Waiting[]> {
  const groups = new Map<unknown, Waiting[]>();
  for (const call of calls) {
    const group = groups.get(call.input.agent_id);
    if (group) group.push(call);
    else groups.set(call.input.agent_id, [call]);
  }
  return groups;
}

/** The next turn of the event loop: callers answered by the last batch call again before it. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
