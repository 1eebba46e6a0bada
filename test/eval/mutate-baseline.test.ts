// bursar mutate compares each mutant with the all-guards-on run: a case that gets its label wrong
// with every guard on is refused before any mutant runs (it would otherwise "kill" every guard),
// and a kill is a verdict that changed from that baseline.

import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { case_schema, type EvalCase } from "../../src/eval/cases.js";
import { BaselineFailed, mutate } from "../../src/eval/mutate.js";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const evalCase = (json: Record<string, unknown>): EvalCase => case_schema.parse({ class: "controls", source: "this test", note: "a test case", ...json });
// 99 paise is refused under R0 (below the minimum), not R5: the label is wrong with every guard on.
const wrong_label = { id: "wrong-label", call: { tool: "create_order", args: { amount: 99, currency: "INR" } }, expect: { effect: "BLOCK", rule: "R5" } };
const right_label = { id: "right-label", call: { tool: "create_order", args: { amount: 5000, currency: "INR" } }, expect: { effect: "ALLOW", rule: "ALLOW" } };

describe("bursar mutate's baseline", () => {
  const dir = builtSuiteDir("bursar-mutate-baseline-");

  it("a case wrong with every guard on stops the run, named, before any mutant runs", async () => {
    let runs = 0;
    const cases = [evalCase(right_label), evalCase(wrong_label)];
    const refused = await mutate(cases, () => runs++).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(BaselineFailed);
    expect((refused as BaselineFailed).case_ids).toEqual(["wrong-label"]);
    expect(runs).toBe(cases.length);
  });

  it("the CLI refuses it in one line naming the case, exit 1, and writes no report", async () => {
    const cases = join(dir(), "cases");
    mkdirSync(cases);
    writeFileSync(join(cases, "a.jsonl"), `${JSON.stringify({ class: "controls", source: "this test", note: "a wrong label", ...wrong_label })}\n`);
    const run = await runBursar(["mutate", "--cases", cases, "--out", join(dir(), "out")]);
    expect(run.code).toBe(1);
    const lines = run.stderr.split("\n").filter((line) => line !== "" && !line.startsWith("mutants × cases"));
    expect(lines).toEqual([expect.stringMatching(/^bursar mutate: with every guard on, 1 case gets its label wrong .*: wrong-label$/)]);
    expect(run.stdout).not.toMatch(/guards killed/);
    expect(existsSync(join(dir(), "out", "mutation.md"))).toBe(false);
  });

  it("a guard is killed only by a case whose verdict changed from the baseline's", async () => {
    const report = await mutate([evalCase(right_label), evalCase({ id: "too-big", call: { tool: "create_order", args: { amount: 600000, currency: "INR" } }, expect: { effect: "BLOCK", rule: "R5" } })]);
    const killed = Object.fromEntries(report.mutants.map((mutant) => [mutant.guard, mutant.killed_by]));
    // Only R5 (the per-call cap) decides either case: no other guard's removal changes a verdict.
    expect(Object.entries(killed).filter(([, by]) => by.length > 0)).toEqual([["R5", ["too-big"]]]);
  });
});
