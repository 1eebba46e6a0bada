// `bursar send-decisions FILE --receipts R` refuses an R that is FILE itself, by any spelling,
// symlink or hard link: receipts appended to the decision file were sent as records by the next
// run. Refused in one line naming --receipts and FILE, exit 2, before anything is sent, FILE as it was.

import { linkSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { ndjson, record } from "../ingest/support.js";

const dir = builtSuiteDir("bursar-receipts-into-file-");
const key_env = { BURSAR_SOURCE_SIGNING_KEY: "bsr_whsec_never-used-nothing-is-sent" };

// Counts requests: none may arrive. Answers 200 with no receipt, so a run that did send stops.
let requests = 0;
let url = "";
const counting: Server = createServer((request, response) => {
  requests++;
  request.resume();
  request.on("end", () => response.end());
});
beforeAll(async () => {
  await new Promise<void>((resolve) => counting.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(counting.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => counting.close(() => resolve())));

describe("bursar send-decisions --receipts naming FILE", () => {
  // [what, FILE as given, --receipts as given]; each case in a directory of its own.
  const cases: Array<[string, (case_dir: string) => { file: string; receipts: string }]> = [
    ["the same path", (case_dir) => ({ file: join(case_dir, "decisions.jsonl"), receipts: join(case_dir, "decisions.jsonl") })],
    ["another spelling of the path (./ and ..)", (case_dir) => ({ file: join(case_dir, "decisions.jsonl"), receipts: `${case_dir}/./sub/../decisions.jsonl` })],
    ["a symlink to FILE", (case_dir) => ({ file: join(case_dir, "decisions.jsonl"), receipts: join(case_dir, "link.jsonl") })],
    ["a hard link to FILE", (case_dir) => ({ file: join(case_dir, "decisions.jsonl"), receipts: join(case_dir, "hard.jsonl") })],
  ];
  it.each(cases)("refuses %s in one line naming --receipts and FILE, exit 2, sending nothing and leaving FILE as it was", async (what, paths) => {
    const case_dir = join(dir(), what.replace(/\W+/g, "-"));
    mkdirSync(join(case_dir, "sub"), { recursive: true });
    const { file, receipts } = paths(case_dir);
    const content = ndjson([record("evt_receipts_into_file_1"), record("evt_receipts_into_file_2")]);
    writeFileSync(file, content);
    symlinkSync(file, join(case_dir, "link.jsonl"));
    linkSync(file, join(case_dir, "hard.jsonl"));
    const before = requests;
    const result = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x", "--receipts", receipts], key_env);
    // It sent the file, then appended to it whatever the server answered as receipts.
    expect(result.stderr).toBe(
      `bursar send-decisions: --receipts ${receipts}: the same file as FILE ${file} (receipts appended to it would be sent as records by the next run); choose another path; nothing was sent\n`,
    );
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(requests - before).toBe(0);
    expect(readFileSync(file, "utf8")).toBe(content);
  });

  it("still takes a --receipts file that does not exist yet, or is another file, and sends", async () => {
    const file = join(dir(), "other-decisions.jsonl");
    writeFileSync(file, ndjson([record("evt_receipts_other")]));
    const existing = join(dir(), "existing-receipts.jsonl");
    writeFileSync(existing, '{"earlier":"receipt"}\n');
    for (const receipts of [join(dir(), "new-receipts.jsonl"), existing]) {
      const before = requests;
      const result = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x", "--receipts", receipts], key_env);
      // The counting server answers no receipt: the run reaches it, and stops there (exit 1).
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^bursar send-decisions: delivery of lines 1\.\.1 was answered HTTP 200 without its receipt/);
      expect(requests - before).toBe(1);
    }
  });
});
