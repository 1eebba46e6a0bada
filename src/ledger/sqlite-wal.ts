// The SQLite WAL's housekeeping off the event loop: WalSync makes committed frames durable with
// fdatasync on libuv's thread pool, and Checkpointer copies them into the database file from a
// worker thread with its own connection, so neither a disk flush nor a checkpoint stalls requests.

import type Database from "better-sqlite3";
import { closeSync, fdatasync, fdatasyncSync, openSync } from "node:fs";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/** A commit nobody waits on (an order's second phase) is flushed by the next flush someone waits
 *  for, or after this long without one: one flush a call instead of two when calls follow one
 *  another closely. */
export const async_flush_delay_ms = 5;

/** Flushes the WAL's file descriptor to disk; the default is fdatasync on libuv's thread pool. */
export type WalFlush = (fd: number) => Promise<void>;

/** The default flush, reporting each flush's duration in seconds (whether or not it failed). */
export function timedFlush(report: (seconds: number) => void): WalFlush {
  return (fd) => {
    const start = process.hrtime.bigint();
    return fdatasyncAsync(fd).finally(() => report(Number(process.hrtime.bigint() - start) / 1e9));
  };
}

export interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

export function fdatasyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fdatasync(fd, (error) => (error ? reject(error) : resolve())));
}

/**
 * Makes committed WAL frames durable off the event loop. With synchronous=NORMAL a COMMIT only
 * writes its frames into the WAL (the OS has them: a killed process loses nothing); this class
 * then fdatasyncs the WAL file on the thread pool, one flush for every commit that happened
 * before it started, which is what synchronous=FULL does inside each COMMIT. SQLite itself
 * still syncs the WAL before a checkpoint and the database file after one.
 */
export class WalSync {
  private fd: number | undefined;
  /** Commits made so far, and how many of them a finished flush covers. */
  private committed = 0;
  private synced = 0;
  private flushing = false;
  private waiters: Array<Waiter & { commit: number }> = [];
  /** The flush `later` set for commits nobody waits on, and the last such commit. */
  private later_timer: NodeJS.Timeout | undefined;
  private later_commit = 0;
  failure: unknown;

  constructor(
    private readonly path: string | null,
    private readonly flushFd: WalFlush = fdatasyncAsync,
    /** Hears of the first failed flush. */
    private readonly onFail: (error: unknown) => void = () => undefined,
  ) {}

  /** Counts one COMMIT; returns its number for `durable`. */
  commit(): number {
    return ++this.committed;
  }

  get last(): number {
    return this.committed;
  }

  /**
   * Makes commit number `commit` durable without anyone waiting on it: by the next flush someone
   * waits for, or by one of its own once async_flush_delay_ms pass without a flush covering it.
   * A failed flush fails the driver as ever.
   */
  later(commit: number): void {
    if (commit <= this.synced || this.path === null) return;
    this.later_commit = Math.max(this.later_commit, commit);
    if (this.later_timer === undefined) this.armLater();
  }

  private armLater(): void {
    this.later_timer = setTimeout(() => {
      this.later_timer = undefined;
      this.durable(this.later_commit).catch(() => undefined);
    }, async_flush_delay_ms);
    this.later_timer.unref();
  }

  /** After a flush: nothing left for the timer, or the commits still left get their delay afresh
   *  (so that its flush does not start just before the next one someone waits for). */
  private rearmLater(): void {
    if (this.later_timer === undefined) return;
    clearTimeout(this.later_timer);
    this.later_timer = undefined;
    if (this.later_commit > this.synced) this.armLater();
  }

  /** Resolves once commit number `commit` (and every one before it) is on disk. */
  durable(commit: number): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (commit <= this.synced || this.path === null) return Promise.resolve();
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ commit, resolve, reject }));
    this.flush();
    return done;
  }

  /**
   * The WAL's descriptor, opened at the first flush (a commit has created the file by then) and
   * kept: SQLite deletes or replaces the WAL only when the last connection closes, and ours is
   * open until close(), so one descriptor names the live file throughout.
   */
  private walFd(): number {
    this.fd ??= openSync(this.path as string, "r");
    return this.fd;
  }

  /** Starts one flush for every commit so far, unless one runs or nobody waits on a commit made. */
  private flush(): void {
    if (this.flushing || !this.waiters.some((waiter) => waiter.commit <= this.committed)) return;
    this.flushing = true;
    const covers = this.committed;
    let flushed: Promise<void>;
    try {
      // A flush that throws instead of rejecting fails the same way: nothing here throws.
      flushed = this.flushFd(this.walFd());
    } catch (error) {
      this.fail(error);
      return;
    }
    flushed.then(
      () => {
        this.synced = Math.max(this.synced, covers);
        this.flushing = false;
        const still: typeof this.waiters = [];
        for (const waiter of this.waiters) (waiter.commit <= this.synced ? waiter.resolve() : still.push(waiter));
        this.waiters = still;
        this.rearmLater();
        this.flush();
      },
      (error: unknown) => this.fail(error),
    );
  }

  /** A failed flush leaves what is on disk unknown: every waiter fails, and so does all later work. */
  private fail(error: unknown): void {
    if (this.failure === undefined) this.onFail(error);
    this.failure = error;
    this.flushing = false;
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter.reject(error);
  }

  /** Flushes now, blocking: for migrations and close, where nothing else is waiting. */
  flushNow(): void {
    if (this.path === null || this.synced >= this.committed) return;
    fdatasyncSync(this.walFd());
    this.synced = this.committed;
  }

  close(): void {
    clearTimeout(this.later_timer);
    this.later_timer = undefined;
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** A passive checkpoint is asked for after this many commits (a money call writes ~8 pages). */
export const checkpoint_every_commits = 100;
/** If the worker falls this far behind (or died), the writer checkpoints itself, blocking. */
export const checkpoint_overdue_commits = 10_000;
/**
 * Past this many frames (16 MiB of 4 KiB pages) the WAL is started over: commits keep landing
 * while the worker checkpoints, so it never finds every frame copied, and SQLite restarts the
 * WAL only when it does. Once the worker has left at most wal_tail_frames_max frames, the writer
 * copies those itself between transactions (a millisecond or two on its thread), the next write
 * starts the WAL from its beginning, and the file is cut back to wal_size_limit_bytes.
 */
export const wal_restart_frames_default = 4_096;
const wal_tail_frames_max = 256;
/** Checkpoint passes the worker makes per request while more than the tail is left. */
const checkpoint_passes_max = 8;
const wal_size_limit_bytes = 64 * 1024 * 1024;
/** How long a closing worker may take to close its connection before it is terminated. */
const checkpoint_worker_close_ms = 5_000;
/** SQLite's own threshold, restored when the worker is gone. */
const sqlite_autocheckpoint_pages = 1000;

/** The worker: its own connection, PASSIVE checkpoints (never blocking the writer), repeated
 *  while more than the tail is left; it answers with the WAL's frames and how many are copied. */
const checkpoint_worker_source = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.module);
const db = new Database(workerData.path);
db.pragma("busy_timeout = " + workerData.busy_timeout_ms);
parentPort.on("message", (message) => {
  if (message === "close") {
    db.close();
    parentPort.close();
    return;
  }
  try {
    let done = { log: 0, checkpointed: 0 };
    for (let pass = 0; pass < workerData.passes_max; pass++) {
      done = db.pragma("wal_checkpoint(PASSIVE)")[0];
      if (done.log - done.checkpointed <= workerData.tail_frames_max) break;
    }
    parentPort.postMessage({ ok: true, log: done.log, checkpointed: done.checkpointed });
  } catch (error) {
    parentPort.postMessage({ ok: false, error: String(error && error.message || error) });
  }
});
`;

interface CheckpointAnswer {
  ok: boolean;
  /** Frames in the WAL, and how many of them are in the database file. */
  log?: number;
  checkpointed?: number;
  error?: string;
}

/**
 * Runs the WAL's checkpoints on a worker thread: the writer's connection stops checkpointing on
 * its own (wal_autocheckpoint = 0), and every checkpoint_every_commits commits the worker copies
 * committed frames into the database file and syncs it. The worker starts on first need, so a
 * short-lived database never starts one. A WAL past wal_restart_frames is started over once the
 * worker has caught up but for a short tail, which the writer copies (see copyTail). Should the
 * worker fail or lag far behind, the writer takes checkpointing back. Either way the WAL never
 * grows without bound.
 */
export class Checkpointer {
  private worker: Worker | undefined;
  private running = false;
  private commits = 0;
  private behind = 0;
  private failed = false;
  /** Set when the worker has left only the tail of a long WAL: the writer copies it next. */
  private tail_left = false;
  /** Set while the WAL is past restart_frames: the worker checkpoints again after every commit. */
  private restart_due = false;
  /** Why the writer checkpoints itself again, once it does. */
  taken_back: string | undefined;
  /** Times the writer copied the tail so that the WAL could start over. */
  restarts = 0;

  constructor(
    private readonly db: Database.Database,
    private readonly path: string,
    private readonly busy_timeout_ms: number,
    private readonly restart_frames = wal_restart_frames_default,
  ) {
    db.pragma("wal_autocheckpoint = 0");
    db.pragma(`journal_size_limit = ${wal_size_limit_bytes}`);
  }

  /** Called after every COMMIT of the writer's connection. */
  committed(): void {
    this.behind++;
    if (this.failed) return;
    this.copyTail();
    if (this.behind >= checkpoint_overdue_commits) {
      this.takeBack("the checkpoint worker fell behind");
      return;
    }
    if ((++this.commits < checkpoint_every_commits && !this.restart_due) || this.running) return;
    this.commits = 0;
    this.running = true;
    this.start().postMessage("checkpoint");
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const require = createRequire(import.meta.url);
    const worker = new Worker(checkpoint_worker_source, {
      eval: true,
      workerData: {
        module: require.resolve("better-sqlite3"),
        path: this.path,
        busy_timeout_ms: this.busy_timeout_ms,
        passes_max: checkpoint_passes_max,
        tail_frames_max: wal_tail_frames_max,
      },
    });
    worker.unref();
    worker.on("message", (answer: CheckpointAnswer) => {
      this.running = false;
      if (!answer.ok) return;
      this.behind = 0;
      const log = answer.log ?? 0;
      // A WAL four times the size is started over whatever the tail: writes outpaced the worker.
      const tail = log - (answer.checkpointed ?? 0);
      this.restart_due = log >= this.restart_frames;
      if (this.restart_due && (tail <= wal_tail_frames_max || log >= 4 * this.restart_frames)) {
        this.tail_left = true;
        this.copyTail();
      }
    });
    worker.on("error", () => this.takeBack("the checkpoint worker failed"));
    worker.on("exit", () => {
      if (this.worker === worker) this.takeBack("the checkpoint worker exited");
    });
    this.worker = worker;
    return worker;
  }

  /**
   * The writer copies the frames the worker left, outside any transaction (the group's COMMIT
   * calls committed() first thing), so every frame is in the database file when the next write
   * begins, and SQLite starts the WAL over from its beginning.
   */
  private copyTail(): void {
    if (!this.tail_left || this.running || !this.db.open || this.db.inTransaction) return;
    this.tail_left = false;
    this.restart_due = false;
    try {
      this.db.pragma("wal_checkpoint(PASSIVE)");
      this.restarts++;
    } catch {
      // Nothing is lost: the frames stay in the WAL, and the next long WAL tries again.
    }
  }

  /** The writer checkpoints again itself: now, and from here on at SQLite's usual threshold. */
  private takeBack(why: string): void {
    this.taken_back ??= why;
    this.failed = true;
    this.running = false;
    const worker = this.worker;
    this.worker = undefined;
    void worker?.terminate();
    if (!this.db.open) return;
    this.db.pragma(`wal_autocheckpoint = ${sqlite_autocheckpoint_pages}`);
    if (!this.db.inTransaction) this.db.pragma("wal_checkpoint(PASSIVE)");
  }

  get active(): boolean {
    return this.worker !== undefined;
  }

  /** Lets the worker close its connection and end (terminated if it does not within a bound). */
  async close(): Promise<void> {
    this.failed = true;
    this.taken_back ??= "closed";
    const worker = this.worker;
    this.worker = undefined;
    if (!worker) return;
    const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
    worker.postMessage("close");
    const timer = setTimeout(() => void worker.terminate(), checkpoint_worker_close_ms);
    await exited;
    clearTimeout(timer);
  }
}
