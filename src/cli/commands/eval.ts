// bursar eval: every labelled case through the gate in-process; writes eval/report.md and
// eval/report.json; exits non-zero on any false allow or wrong verdict.

import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadCasesOrExplain } from "../../eval/cases.js";
import { runAll } from "../../eval/mutate.js";
import { packageRoot } from "../../eval/paths.js";
import { Progress } from "../../eval/progress.js";
import { reportMarkdown, score, summarize } from "../../eval/score.js";
import { guard_table } from "../../policy/index.js";
import { outputDirectory, parseFlags, println, type CliIo } from "../command.js";

export const help = `usage: bursar eval [--cases DIR] [--out DIR]

Runs every labelled case (eval/cases/*.jsonl) in-process through createBursar with the
simulator provider, a fixed clock and deterministic ids, and writes report.md (per class:
cases, false allows, wrong effect or rule; the ALLOW/HOLD/BLOCK confusion matrix; webhook
effects) and report.json. Exits 1 on any false allow or wrong verdict, 2 on a bad case file.

options:
  --cases DIR   case files (default eval/cases in the package)
  --out DIR     where the reports go (default ./eval, under the current directory)

A progress bar shows on a terminal; under CI two plain lines.`;

export async function run(argv: string[], io: CliIo): Promise<number> {
  const values = parseFlags(argv, { cases: { type: "string" }, out: { type: "string" } });
  const root = packageRoot();
  const cases = loadCasesOrExplain(values.cases ?? join(root, "eval", "cases"));
  // The reports go under the current directory: the installed package's folder may be
  // read-only and is replaced on every install. In a checkout, run from its root, that is eval/.
  const out = outputDirectory(resolve(values.out ?? "eval"));
  const progress = new Progress(io.stderr, io.stderr_interactive, "eval cases", cases.length);
  let done = 0;
  progress.update(0);
  const started = performance.now();
  const outcomes = await runAll(cases, guard_table, () => progress.update(++done));
  const summary = summarize(cases.map((eval_case, index) => score(eval_case, outcomes[index]!)));
  writeFileSync(join(out, "report.md"), reportMarkdown(summary));
  writeFileSync(join(out, "report.json"), `${JSON.stringify(summary, null, 2)}\n`);
  println(io.stdout, `${summary.cases} cases: ${summary.correct} correct, ${summary.false_allows} false allows, ${summary.wrong_effects} wrong effects, ${summary.wrong_rules} wrong rules, ${summary.twin_mismatches} injection payloads unlike their clean twin (${((performance.now() - started) / 1000).toFixed(1)} s)`);
  for (const failure of summary.failures.slice(0, 20)) println(io.stdout, `  FAIL ${failure.id}: expected ${JSON.stringify(failure.expected)}, got ${JSON.stringify(failure.got)}`);
  println(io.stdout, `wrote ${join(out, "report.md")} and report.json`);
  return summary.correct === summary.cases ? 0 : 1;
}
