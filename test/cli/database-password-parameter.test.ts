// A postgres BURSAR_DB may carry its password as a query parameter (`?password=`, `?sslpassword=`):
// `bursar migrate` masks those too, so the secret never reaches stderr or stdout.

import { describe, expect, it } from "vitest";
import { maskedDb } from "../../src/config.js";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const password = "topsecret";

describe("a postgres BURSAR_DB with its password in the query", () => {
  const dir = builtSuiteDir("bursar-db-password-parameter-");

  it.each([
    { url: `postgres://127.0.0.1:1/x?password=${password}`, shown: "postgres://127.0.0.1:1/x?password=***" },
    { url: `postgres://127.0.0.1:1/x?PassWord=${password}&sslmode=disable`, shown: "postgres://127.0.0.1:1/x?PassWord=***&sslmode=disable" },
    { url: `postgresql://u:${password}@127.0.0.1:1/x?sslpassword=${password}&passfile=/home/u/.pgpass`, shown: "postgresql://u:***@127.0.0.1:1/x?sslpassword=***&passfile=/home/u/.pgpass" },
  ])("maskedDb($url) masks every password and keeps passfile", ({ url, shown }) => {
    expect(maskedDb(url)).toBe(shown);
  });

  it("bursar migrate names BURSAR_DB without the ?password= value, exit 2", async () => {
    const result = await runBursar(["migrate"], { BURSAR_DATA_DIR: dir(), BURSAR_DB: `postgres://127.0.0.1:1/x?password=${password}` });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe("bursar migrate: BURSAR_DB=postgres://127.0.0.1:1/x?password=***: cannot reach PostgreSQL (connect ECONNREFUSED 127.0.0.1:1)\n");
    expect(`${result.stdout}${result.stderr}`).not.toContain(password);
  });
});
