// Files Bursar owns (the SQLite database and its journals, the data directory's keys and
// secrets), so a command that writes where the user says never overwrites one of them.

import { closeSync, constants, fstatSync, ftruncateSync, openSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { isPostgresUrl, type Config } from "../config.js";
import { data_dir_secret_files, lastCheckpointPath } from "../data-files.js";
import { last_checkpoint_file_name } from "../evidence/witness.js";
import { errorCode } from "../datadir.js";
import { CommandError } from "./command.js";

/** Beside a SQLite database: its write-ahead log, shared memory index and rollback journal. */
const sqlite_companion_suffixes = ["-wal", "-shm", "-journal"] as const;
/** The paths of every file Bursar owns under this configuration, as configured (not resolved). */
function ownedFiles(config: Config): string[] {
  const owned = data_dir_secret_files.map((name) => join(config.data_dir, name));
  // The kept checkpoints: one written over would let a database restored from an older copy start.
  owned.push(join(config.data_dir, last_checkpoint_file_name));
  if (config.db !== ":memory:") owned.push(lastCheckpointPath(config.data_dir, config.db));
  if (config.signing_key_path) owned.push(config.signing_key_path);
  const sqlite = config.db !== ":memory:" && !isPostgresUrl(config.db);
  if (sqlite) owned.push(config.db, ...sqlite_companion_suffixes.map((suffix) => `${config.db}${suffix}`));
  return owned;
}

/** Links followed when resolving where a missing path lands (as the kernel's ELOOP limit). */
const symlink_hops_max = 40;

/**
 * Where writing to `path` lands: the real path of an existing file (through any symlink), the
 * target of a symlink to a missing file (opening it creates that target), else the real path of
 * its directory plus its name, else the absolute path as given. The path is never normalised as
 * text: the kernel follows `link/..` through the link first, so the C library's realpath is used
 * (Node's own resolves `..` as text first, and took `link/../.bursar/bursar.db` for another file).
 */
export function landingPath(path: string): string {
  let current = path;
  for (let hop = 0; hop < symlink_hops_max; hop++) {
    try {
      return realpathSync.native(current);
    } catch (error) {
      if (errorCode(error) !== "ENOENT") return resolve(current);
    }
    try {
      const target = readlinkSync(current);
      current = isAbsolute(target) ? target : `${realpathSync.native(dirname(current))}/${target}`;
    } catch {
      break;
    }
  }
  try {
    return join(realpathSync.native(dirname(current)), basename(current));
  } catch {
    return resolve(current);
  }
}

/** Device and inode of an existing file (a hard link to an owned file has the same pair). */
function identity(path: string): string | undefined {
  try {
    const stats = statSync(path);
    return `${stats.dev}:${stats.ino}`;
  } catch {
    return undefined;
  }
}

/**
 * Refuses (CommandError, exit 2) an output path that would overwrite a file Bursar owns: the
 * same landing path as one of them (through symlinks and `..`), or the same inode
 * (a hard link). `option` names where the path came from, e.g. `--out`.
 */
export function refuseOwnedTarget(option: string, path: string, config: Config): void {
  const landing = landingPath(path);
  const target = identity(landing);
  for (const owned of ownedFiles(config)) {
    const same_inode = target !== undefined && identity(owned) === target;
    if (landingPath(owned) === landing || same_inode) {
      throw new CommandError(`${option} ${path}: refusing to overwrite ${owned}, a file Bursar owns; choose another path`);
    }
  }
}

/**
 * Opens `path` for writing (a path refuseOwnedTarget let through), checked once more by what was
 * opened: the file is opened without truncating it, and refused (closed untouched) when it is one
 * Bursar owns, whatever path led to it. A new file is private (0600): what goes in it is evidence
 * or a checkpoint of it, kept like the database. Returns the descriptor; the caller empties the
 * file (ftruncateSync) once it writes, so a later failure to open another output leaves it as it was.
 */
export function openOutput(option: string, path: string, config: Config): number {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT, 0o600);
  const opened = fstatSync(fd);
  const owned = ownedFiles(config).find((file) => identity(file) === `${opened.dev}:${opened.ino}`);
  if (owned !== undefined) {
    closeSync(fd);
    throw new CommandError(`${option} ${path}: refusing to overwrite ${owned}, a file Bursar owns; choose another path`);
  }
  return fd;
}
