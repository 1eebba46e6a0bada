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

describe("BURSAR_DB that is not a database in a regular file", () => {
  it("is refused in one line naming BURSAR_DB, exit 2, by serve, migrate and export, and left untouched", async () => {
    const fifo = join(dir(), "pipe");
    execFileSync("mkfifo", ["-m", "644", fifo]);
    const plain = join(dir(), "notes.txt");
    writeFileSync(plain, "hello, not a database at all\n".repeat(10), { mode: 0o644 });
    const folder = join(dir(), "folder");
    mkdirSync(folder, { mode: 0o755 });
    const device = nullDevice();
    const cases: Array<[string, string]> = [
      [fifo, "a named pipe (FIFO), not a regular file"],
      [folder, "a directory, not a regular file"],
      [plain, "cannot open the SQLite database (file is not a database)"],
      ...(device ? [[device, "a device, not a regular file"] as [string, string]] : []),
    ];
    for (const [path, said] of cases) {
      const mode = statSync(path).mode;
      for (const args of [["serve"], ["migrate"], ["export", "--out", join(dir(), "out.jsonl")]]) {
        const env = { BURSAR_DATA_DIR: join(dir(), "data"), BURSAR_DB: path, BURSAR_PORT: "0", BURSAR_HOST: "127.0.0.1" };
        const result = await runBursar(args, env, undefined, 20_000);
        expect({ path, args, code: result.code, stderr: result.stderr }).toEqual({ path, args, code: 2, stderr: `bursar ${args[0]}: BURSAR_DB=${path}: ${said}${said.startsWith("cannot") ? "" : "; SQLite keeps a database in a regular file: point it at one (a new path is created)"}\n` });
        expect(statSync(path).mode, `${path} after ${args[0]}`).toBe(mode);
      }
    }
  });
});
