// What a path names when a command needs a regular file there and finds something else.

import { statSync } from "node:fs";

/**
 * What `path` names when it exists and is not a regular file, followed through symbolic links
 * ("a directory", "a named pipe (FIFO)", "a character device", …); undefined for a regular file,
 * for no file, and for a path that cannot be looked at (a parent that is a file, no permission),
 * which opening it then explains.
 */
export function notRegularFile(path: string): string | undefined {
  let stats;
  try {
    stats = statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
  if (stats === undefined || stats.isFile()) return undefined;
  if (stats.isDirectory()) return "a directory";
  if (stats.isFIFO()) return "a named pipe (FIFO)";
  if (stats.isCharacterDevice()) return "a character device";
  if (stats.isBlockDevice()) return "a block device";
  return stats.isSocket() ? "a socket" : "not a regular file";
}
