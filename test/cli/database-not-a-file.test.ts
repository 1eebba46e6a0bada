// BURSAR_DB naming something other than a SQLite database in a regular file: serve, migrate and
// export refuse it in one line naming BURSAR_DB, exit 2, and leave it as it was. Found by a review:
// BURSAR_DB=/dev/null made /dev/null owner-only for every user of the machine, created
// /dev/null-journal beside it, then died with "SqliteError: disk I/O error" and a stack; a FIFO
// did the same; a file that was not a database had its mode changed before it was refused.

import { execFileSync } from "node:child_process";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const dir = builtSuiteDir("bursar-db-not-a-file-");

/** A character device like /dev/null (major 1, minor 3) where one can be made (root), else undefined. */
function nullDevice(): string | undefined {
  const path = join(dir(), "null");
  try {
    execFileSync("mknod", ["-m", "666", path, "c", "1", "3"], { stdio: "ignore" });
    return path;
  } catch {
    return undefined;
  }
}

/** Each kind of path, made fresh, with what the refusal says of it; undefined where it cannot be made. */
const kinds: Record<string, () => { path: string; said: string } | undefined> = {
  "a named pipe": () => {
    const path = join(dir(), "pipe");
    execFileSync("mkfifo", ["-m", "644", path]);
    return { path, said: "a named pipe (FIFO), not a regular file" };
  },
  "a directory": () => {
    const path = join(dir(), "folder");
    mkdirSync(path, { mode: 0o755 });
    return { path, said: "a directory, not a regular file" };
  },
  "a text file": () => {
    const path = join(dir(), "notes.txt");
    writeFileSync(path, "hello, not a database at all\n".repeat(10), { mode: 0o644 });
    return { path, said: "cannot open the SQLite database (file is not a database)" };
  },
  "a device": () => {
    const path = nullDevice();
    return path === undefined ? undefined : { path, said: "a character device, not a regular file" };
  },
};

const not_regular = "; SQLite keeps a database in a regular file: point it at one (a new path is created)";

describe("BURSAR_DB that is not a database in a regular file", () => {
  it.each(Object.keys(kinds))("%s is refused in one line naming BURSAR_DB, exit 2, by serve, migrate and export, and left untouched", async (kind) => {
    const made = kinds[kind]!();
    if (made === undefined) return; // mknod needs root: CI runs as root.
    const { path, said } = made;
    const mode = statSync(path).mode;
    for (const args of [["serve"], ["migrate"], ["export", "--out", join(dir(), "out.jsonl")]]) {
      const env = { BURSAR_DATA_DIR: join(dir(), "data"), BURSAR_DB: path, BURSAR_PORT: "0", BURSAR_HOST: "127.0.0.1" };
      const result = await runBursar(args, env, undefined, 20_000);
      const line = `bursar ${args[0]}: BURSAR_DB=${path}: ${said}${said.startsWith("cannot") ? "" : not_regular}\n`;
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 2, stderr: line });
      expect(statSync(path).mode, `${path} after ${args[0]}`).toBe(mode);
    }
  });
});
