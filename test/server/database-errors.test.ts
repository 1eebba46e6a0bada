// How a command names a SQLite failure met while it opens, migrates or first writes: one line
// naming BURSAR_DB that says what happened. A full disk is said to be one (it was "cannot read
// the SQLite database (disk I/O error)", or a SqliteError stack and exit 1 when met by the
// start's own first writes, or by export's checkpoint), a failed write is not called a read.

import { describe, expect, it } from "vitest";
import { ConfigError, databaseError } from "../../src/config.js";

function sqliteError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe("databaseError on SQLite", () => {
  it.each([
    ["SQLITE_FULL", "database or disk is full", "BURSAR_DB=/d/bursar.db: the disk is full (database or disk is full); nothing was lost: free space on it and try again"],
    ["SQLITE_IOERR", "disk I/O error", "BURSAR_DB=/d/bursar.db: cannot read or write the SQLite database (disk I/O error); check the disk (its space, its errors)"],
    ["SQLITE_IOERR_WRITE", "disk I/O error", "BURSAR_DB=/d/bursar.db: cannot read or write the SQLite database (disk I/O error); check the disk (its space, its errors)"],
    ["SQLITE_CORRUPT", "database disk image is malformed", "BURSAR_DB=/d/bursar.db: cannot read the SQLite database (database disk image is malformed)"],
  ])("%s is one line naming BURSAR_DB", (code, message, line) => {
    const reported = databaseError("/d/bursar.db", sqliteError(code, message));
    expect(reported).toBeInstanceOf(ConfigError);
    expect((reported as Error).message).toBe(line);
  });

  it("leaves other errors as they are", () => {
    const error = sqliteError("SQLITE_CONSTRAINT", "UNIQUE constraint failed");
    expect(databaseError("/d/bursar.db", error)).toBe(error);
  });
});
