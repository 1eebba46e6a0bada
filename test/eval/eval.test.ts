// The eval harness: the committed report is what the cases produce today (byte for byte),
// the harness itself can fail on a wrong expectation, and bad case files are named.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { case_classes, loadCases } from "../../src/eval/cases.js";
import { runAll } from "../../src/eval/mutate.js";
import { reportMarkdown, score, summarize } from "../../src/eval/score.js";
import { guard_table } from "../../src/policy/index.js";
import { ensureBuilt, repo_root } from "../support/build.js";
import { runBursar } from "../support/process.js";

describe("bursar eval", () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-eval-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("has at least 200 labelled cases in every class, each with a public source", () => {
    const cases = loadCases(join(repo_root, "eval", "cases"));
    expect(cases.length).toBeGreaterThanOrEqual(200);
    for (const name of case_classes) expect(cases.some((item) => item.class === name), name).toBe(true);
    for (const item of cases.filter((entry) => entry.twin)) expect(cases.some((entry) => entry.id === item.twin), item.id).toBe(true);
  });

  it("regenerates the committed report byte for byte, with no false allow and no wrong rule", async () => {
    const cases = loadCases(join(repo_root, "eval", "cases"));
    const outcomes = await runAll(cases, guard_table);
    const summary = summarize(cases.map((item, index) => score(item, outcomes[index]!)));
    expect(summary.failures).toEqual([]);
    expect(summary.false_allows).toBe(0);
    expect(reportMarkdown(summary)).toBe(readFileSync(join(repo_root, "eval", "report.md"), "utf8"));
  });

  it("exits non-zero when a case's expectation is wrong", async () => {
    const cases = join(dir, "wrong");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(cases);
    writeFileSync(
      join(cases, "wrong.jsonl"),
      `${JSON.stringify({ id: "deliberately-wrong", class: "controls", source: "this test", note: "99 paise is really refused", call: { tool: "create_order", args: { amount: 99, currency: "INR" } }, expect: { effect: "ALLOW", rule: "ALLOW" } })}\n`,
    );
    const run = await runBursar(["eval", "--cases", cases, "--out", join(dir, "out")]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/FAIL deliberately-wrong: expected .*"ALLOW".* got .*"R0"/);
    expect(readFileSync(join(dir, "out", "report.md"), "utf8")).toMatch(/1 cases: 0 correct/);
  });

  it("names the file, line and field of a malformed case and exits 2", async () => {
    const cases = join(dir, "bad");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(cases);
    writeFileSync(join(cases, "bad.jsonl"), `\n${JSON.stringify({ id: "typo", class: "controls", source: "this test", note: "typo'd field", call: { tool: "create_order", args: {} }, expect: { efect: "ALLOW" } })}\n`);
    const run = await runBursar(["eval", "--cases", cases, "--out", join(dir, "bad-out")]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/bad\.jsonl:2: expect/);
  });
});
