// A negative number given to an option as a separate argument (`--reserved -5`) gets the
// option's own range error, as `--reserved=-5` does; parseArgs refused it as "ambiguous" and
// told the user to write `--reserved=-XYZ`, and the range was never said. And `bursar --help`
// lists the options `bursar` itself takes, --version among them.

import { beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

beforeAll(() => ensureBuilt());

/** No server is reached: each is refused before anything is sent or read. */
const env = { BURSAR_ADMIN_TOKEN: "", BURSAR_URL: "http://127.0.0.1:9" };

describe("a negative number after an option, space-separated", () => {
  const cases = [
    { name: "block create --reserved", args: (value: string[]) => ["block", "create", "--agent", "agt_x", "--currency", "INR", ...value], option: "--reserved", said: "--reserved \"-5\": expected a whole number from" },
    { name: "send-decisions --batch", args: (value: string[]) => ["send-decisions", "records.jsonl", "--url", "http://127.0.0.1:9", "--source", "src_x", ...value], option: "--batch", said: "--batch must be an integer from 1 to" },
    { name: "verify --index", args: (value: string[]) => ["verify", "--inclusion", "proof.json", "--leaf-hash", "ab", ...value], option: "--index", said: "--index: expected an entry's seq, a whole number from 0" },
  ];
  it.each(cases)("$name -N is refused with the option's range, as $option=-N is", async ({ args, option, said }) => {
    const value = option === "--reserved" ? "-5" : "-1";
    const joined = await runBursar(args([`${option}=${value}`]), env, undefined, 30_000);
    const spaced = await runBursar(args([option, value]), env, undefined, 30_000);
    expect(spaced.stderr).not.toContain("ambiguous");
    expect(spaced.stderr).toBe(joined.stderr);
    expect(spaced.stderr).toContain(said);
    expect(spaced.code).toBe(2);
  });

  it("leaves a value after -- alone", async () => {
    const result = await runBursar(["verify", "--", "--index", "-1"], env, undefined, 30_000);
    expect(result.stderr).not.toContain("--index");
  });
});

describe("bursar --help", () => {
  it("lists --version, which prints the version", async () => {
    const help = await runBursar(["--help"]);
    expect(help.stdout).toMatch(/^ {2}--version {2,}\S/m);
    const version = await runBursar(["--version"]);
    expect(version).toEqual({ code: 0, stdout: "bursar 0.1.0\n", stderr: "" });
  });
});
