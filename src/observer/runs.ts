// Each observer process's run in the database: how many tools/call it took in and how many of
// those it wrote down. Writing is off the critical path, so a process killed (or closed while the
// store failed) loses what its queue held; its run row is left unended and falls silent, and any
// instance sharing the database, this one after a restart included, writes a system.observer_lost
// entry for it. A run taken for lost that was only stalled writes system.observer_resumed when
// it next reaches the database, so the log never keeps a loss that did not happen unanswered.

import type { Clock } from "../clock.js";
import type { EvidenceLog } from "../evidence/index.js";
import { randomBase62 } from "../ids.js";
import type { SqlDriver, SqlTx } from "../ledger/driver.js";

/** A run whose row was not updated for this long, and not ended, is taken for lost. */
export const run_silent_ms_max_default = 60_000;
/** A run updates its row at least this often while nothing changes (more often while calls come). */
export const run_heartbeat_ms = 20_000;
/** Ended runs are deleted this long after their end: their row says nothing the log does not. */
export const run_kept_ms = 7 * 86_400_000;
/** Lost runs looked for per pass; the rest wait for the next pass. */
const lost_runs_per_pass_max = 100;

export const observer_lost_kind = "system.observer_lost";
export const observer_resumed_kind = "system.observer_resumed";

interface RunRow {
  run_id: string;
  started_at_ms: number | string;
  seen_at_ms: number | string;
  calls_taken: number | string;
  calls_written: number | string;
}

export interface ObserverRunsOptions {
  driver: SqlDriver;
  log: EvidenceLog;
  clock: Clock;
  /** Default run_silent_ms_max_default. */
  silent_ms_max?: number;
  /** Default: a random id. */
  run_id?: string;
}

/** What a transaction wrote to the run's row, for `stored` once it has committed. */
export interface RunMark {
  taken: number;
  at_ms: number;
}

/** seen_at and calls_taken only move forward, whichever of two transactions commits last. */
const upsert_sql = `INSERT INTO observer_runs (run_id, started_at_ms, seen_at_ms, calls_taken, calls_written) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (run_id) DO UPDATE SET
    seen_at_ms = CASE WHEN excluded.seen_at_ms > observer_runs.seen_at_ms THEN excluded.seen_at_ms ELSE observer_runs.seen_at_ms END,
    calls_taken = CASE WHEN excluded.calls_taken > observer_runs.calls_taken THEN excluded.calls_taken ELSE observer_runs.calls_taken END,
    calls_written = observer_runs.calls_written + excluded.calls_written, ended_at_ms = NULL`;

function iso(ms: number | string): string {
  return new Date(Number(ms)).toISOString();
}

export class ObserverRuns {
  readonly run_id: string;
  readonly silent_ms_max: number;
  private readonly started_at_ms: number;
  /** What the row last said, as this process committed it. */
  private taken_stored = -1;
  private stored_at_ms = -Infinity;
  private ended = false;
  /** Set at close: a pass of findLost stops between claims rather than hold the shutdown. */
  private stopping = false;

  constructor(private readonly options: ObserverRunsOptions) {
    this.run_id = options.run_id ?? `run_${randomBase62(16)}`;
    this.started_at_ms = options.clock().getTime();
    this.silent_ms_max = options.silent_ms_max ?? run_silent_ms_max_default;
  }

  /**
   * Inside the transaction that writes a batch of observed calls, before its entries (the row is
   * locked before the log, as findLost locks them): `written` more calls have their entry (an
   * observer.call, or their count in a system.evidence_gap). `taken` is read here, once the
   * transaction holds the row, so it counts every call taken in before the time the row gets.
   */
  async written(tx: SqlTx, written: number, taken: () => number): Promise<RunMark> {
    return this.update(tx, written, taken);
  }

  /** After the transaction of `written`, `heartbeat` or `begin` committed. */
  stored(mark: RunMark): void {
    this.taken_stored = Math.max(this.taken_stored, mark.taken);
    this.stored_at_ms = Math.max(this.stored_at_ms, mark.at_ms);
  }

  /** The row, before any call is taken in: a process killed before its first heartbeat still leaves one. */
  async begin(): Promise<void> {
    await this.heartbeat(() => 0);
  }

  /** Updates the row when calls were taken in since it was, or run_heartbeat_ms passed: what shows the run alive. */
  async heartbeat(taken: () => number): Promise<void> {
    if (this.ended) return;
    if (taken() === this.taken_stored && this.options.clock().getTime() - this.stored_at_ms < run_heartbeat_ms) return;
    this.stored(await this.options.driver.transaction((tx) => this.update(tx, 0, taken), { async_commit: true }));
  }

  /**
   * The row's upsert, then a system.observer_resumed entry when another instance had taken the
   * run for lost (it stalled for longer than silent_ms_max, or its database was out of reach),
   * which always wrote system.observer_lost (a run it ends without one it deletes). The append,
   * if any, comes last: the log's sequence lock is held no longer than it must be.
   */
  private async update(tx: SqlTx, written: number, taken: () => number): Promise<RunMark> {
    const row = await tx.get<{ ended_at_ms: number | string | null; calls_written: number | string }>(
      `SELECT ended_at_ms, calls_written FROM observer_runs WHERE run_id = ? ${tx.forUpdate}`,
      [this.run_id],
    );
    const mark = { taken: taken(), at_ms: this.options.clock().getTime() };
    await tx.run(upsert_sql, [this.run_id, this.started_at_ms, mark.at_ms, mark.taken, written]);
    if (row && row.ended_at_ms !== null) {
      const body = { run_id: this.run_id, lost_at: iso(row.ended_at_ms), resumed_at: iso(mark.at_ms), calls_taken: mark.taken, calls_written: Number(row.calls_written) };
      await this.options.log.appendMany(tx, [{ kind: observer_resumed_kind, source: "observer", body }], { receipts: false });
    }
    return mark;
  }

  /**
   * A clean stop: the row is ended only when every call taken has its entry (one handed over while
   * closing, after the drain, leaves it open, to be found lost). No heartbeat follows it.
   */
  async end(taken: number): Promise<boolean> {
    this.ended = true;
    return this.options.driver.transaction(async (tx) => {
      // As any update: a run taken for lost meanwhile says it came back before it ends.
      const { at_ms } = await this.update(tx, 0, () => taken);
      const ended = await tx.run("UPDATE observer_runs SET ended_at_ms = ? WHERE run_id = ? AND calls_written >= calls_taken", [at_ms, this.run_id]);
      return ended.changes === 1;
    });
  }

  /** Close is coming: a findLost pass under way claims no further runs. */
  stop(): void {
    this.stopping = true;
  }

  /**
   * Ends other runs silent for longer than silent_ms_max, each in its own transaction with its
   * system.observer_lost entry (unless it took no calls in and no observer source exists): one
   * instance claims each, by the time it read. Deletes runs ended more than run_kept_ms ago.
   * Returns the runs found lost.
   */
  async findLost(): Promise<string[]> {
    const now_ms = this.options.clock().getTime();
    const { silent, expired } = await this.options.driver.read(async (tx) => ({
      silent: await tx.all<RunRow>(
        `SELECT run_id, started_at_ms, seen_at_ms, calls_taken, calls_written FROM observer_runs
         WHERE ended_at_ms IS NULL AND seen_at_ms < ? AND run_id <> ? ORDER BY seen_at_ms LIMIT ${lost_runs_per_pass_max}`,
        [now_ms - this.silent_ms_max, this.run_id],
      ),
      expired: await tx.get("SELECT 1 AS one FROM observer_runs WHERE ended_at_ms < ? LIMIT 1", [now_ms - run_kept_ms]),
    }));
    const lost: string[] = [];
    for (const row of silent) {
      if (this.stopping) break;
      if (await this.claim(row, now_ms)) lost.push(row.run_id);
    }
    if (expired) await this.options.driver.transaction((tx) => tx.run("DELETE FROM observer_runs WHERE ended_at_ms < ?", [now_ms - run_kept_ms]), { async_commit: true });
    return lost;
  }

  private async claim(row: RunRow, now_ms: number): Promise<boolean> {
    return this.options.driver.transaction(async (tx) => {
      const claimed = await tx.run("UPDATE observer_runs SET ended_at_ms = ? WHERE run_id = ? AND ended_at_ms IS NULL AND seen_at_ms = ?", [now_ms, row.run_id, Number(row.seen_at_ms)]);
      if (claimed.changes !== 1) return false;
      const [taken, written] = [Number(row.calls_taken), Number(row.calls_written)];
      // A run that had taken nothing in when last seen may have taken calls since: said so
      // wherever an observer could have been used, never in a gate-only deployment, where the
      // row goes (should the run come back, its next update makes a new one, with no entry).
      if (taken === 0 && !(await tx.get("SELECT 1 AS one FROM evidence_sources WHERE kind = 'observer' LIMIT 1"))) {
        await tx.run("DELETE FROM observer_runs WHERE run_id = ?", [row.run_id]);
        return true;
      }
      const body = {
        run_id: row.run_id,
        started_at: iso(row.started_at_ms),
        last_seen_at: iso(row.seen_at_ms),
        found_at: iso(now_ms),
        calls_taken: taken,
        calls_written: written,
        calls_unwritten: Math.max(0, taken - written),
      };
      await this.options.log.appendMany(tx, [{ kind: observer_lost_kind, source: "observer", body }], { receipts: false });
      return true;
    });
  }
}
