// The newest signed checkpoint a process saw, kept outside the database it came from (the data
// directory's last-checkpoint file). A database restored from an older copy, replaced, or lost
// and started afresh no longer holds that checkpoint; the next start finds so before it writes
// anything, and refuses: carrying on would forget holds, spending and idempotency keys that the
// provider may already have acted on, so an agent could spend again what it spent.

import { lstatSync, readFileSync } from "node:fs";
import { open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { stagedPath } from "../datadir.js";
import { NoteError, parseCheckpoint, parseNote } from "./note.js";
import type { StoredCheckpoint } from "./store.js";

export const last_checkpoint_file_name = "last-checkpoint";

/** A kept checkpoint, as read back. */
export interface KeptCheckpoint {
  origin: string;
  size: number;
  /** Hex, as log_checkpoints stores it. */
  root_hash: string;
}

export interface CheckpointWitness {
  /** Where the checkpoint is kept, as messages name it. */
  readonly place: string;
  /** The checkpoint kept, if any; a WitnessError when what is kept cannot be read as one. */
  kept(): KeptCheckpoint | undefined;
  /** Keeps `checkpoint` when it is newer than what is kept; written off the caller's path. */
  keep(checkpoint: StoredCheckpoint): void;
  /** Waits for writes under way. */
  settled(): Promise<void>;
}

export class WitnessError extends Error {
  override name = "WitnessError";
}

/**
 * The database no longer holds the checkpoint the witness kept: restored from an older copy,
 * replaced, or forked. Thrown by EvidenceLog.open before anything is written.
 */
export class LogRolledBackError extends Error {
  override name = "LogRolledBackError";
}

const about =
  "it keeps the newest checkpoint this data directory's bursar saw, to find a database restored from an older copy: put back the file bursar wrote, or remove it to start without that check";

/** Reads what `place` holds as a kept checkpoint. */
export function keptCheckpointOf(text: string, place: string): KeptCheckpoint {
  try {
    const body = parseCheckpoint(parseNote(text).text);
    return { origin: body.origin, size: body.size, root_hash: body.rootHash.toString("hex") };
  } catch (error) {
    if (!(error instanceof NoteError)) throw error;
    throw new WitnessError(`${place}: not a signed checkpoint (${error.message}); ${about}`);
  }
}

/**
 * A witness in one file, replaced atomically (written aside, flushed to disk, renamed), so a
 * crash leaves the older checkpoint or the newer one, never a torn file. Writes are made one at a
 * time, each of the newest checkpoint given meanwhile, on the thread pool; a failed write is
 * reported to `onError` (once, until a write succeeds) and the next checkpoint tries again.
 */
export function fileWitness(path: string, onError: (error: unknown) => void = () => undefined): CheckpointWitness {
  let kept_size = -1;
  let failing = false;
  let wanted: StoredCheckpoint | undefined;
  let writing: Promise<void> | undefined;

  const write = async (checkpoint: StoredCheckpoint): Promise<void> => {
    const staged = stagedPath(path);
    try {
      const file = await open(staged, "wx", 0o600);
      try {
        await file.writeFile(checkpoint.note);
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(staged, path);
      // The rename itself made durable: else a power cut could bring back the older checkpoint.
      const directory = await open(dirname(path), "r");
      try {
        await directory.sync();
      } finally {
        await directory.close();
      }
    } catch (error) {
      await rm(staged, { force: true });
      throw error;
    }
  };

  const drain = async (): Promise<void> => {
    while (wanted !== undefined) {
      const checkpoint = wanted;
      wanted = undefined;
      try {
        await write(checkpoint);
        failing = false;
      } catch (error) {
        kept_size = -1;
        // Told once until a write succeeds: each tick tries again, and would say so every second.
        if (!failing) onError(error);
        failing = true;
      }
    }
    writing = undefined;
  };

  return {
    place: path,
    kept() {
      let text: string;
      try {
        // Not followed: a link (dangling or not) is not the file bursar wrote.
        if (!lstatSync(path).isFile()) throw new WitnessError(`${path}: not a regular file; ${about}`);
        text = readFileSync(path, "utf8");
      } catch (error) {
        if (error instanceof WitnessError) throw error;
        if ((error as { code?: unknown }).code === "ENOENT") return undefined;
        throw new WitnessError(`${path}: cannot read it (${(error as Error).message}); ${about}`);
      }
      const kept = keptCheckpointOf(text, path);
      kept_size = kept.size;
      return kept;
    },
    keep(checkpoint) {
      if (checkpoint.size <= kept_size) return;
      kept_size = checkpoint.size;
      wanted = checkpoint;
      writing ??= drain();
    },
    settled: () => writing ?? Promise.resolve(),
  };
}
