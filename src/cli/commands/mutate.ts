// bursar mutate: remove each guard in turn and show which labelled cases catch it.

import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadCasesOrExplain } from "../../eval/cases.js";
import { BaselineFailed, mutate, mutationMarkdown, type MutationReport } from "../../eval/mutate.js";
import { packageRoot } from "../../eval/paths.js";
import { Progress } from "../../eval/progress.js";
import { guard_table } from "../../policy/index.js";
import { counted, outputDirectory, parseFlags, println, type CliIo } from "../command.js";

export const help = `usage: bursar mutate [--cases DIR] [--out DIR]

For each guard in the policy's guard table, builds a gate without that one guard (per
instance, through createBursar's guard table; nothing is patched globally), re-runs every
labelled case and reports which cases caught it: a case catches a guard when its verdict
differs from the one it got with every guard on. That all-guards-on run comes first; if any
case gets its label wrong there, nothing more runs: one line names those cases, exit 1. Also
the "gate off" figure: with every guard removed, how many money calls labelled HOLD or BLOCK
got through and how much money they asked to move, beside the guards-on row (zero). Writes
mutation.md and mutation.json; exits 1 if any guard survives.

options:
  --cases DIR   case files (default eval/cases in the package)
  --out DIR     where the reports go (default ./eval, under the current directory)`;

export async function run(argv: string[], io: CliIo): Promise<number> {
  const values = parseFlags(argv, { cases: { type: "string" }, out: { type: "string" } });
  const root = packageRoot();
  const cases = loadCasesOrExplain(values.cases ?? join(root, "eval", "cases"));
  // The reports go under the current directory: the installed package's folder may be
  // read-only and is replaced on every install. In a checkout, run from its root, that is eval/.
  const out = outputDirectory(resolve(values.out ?? "eval"));
  const total = cases.length * (guard_table.length + 2);
  const progress = new Progress(io.stderr, io.stderr_interactive, "mutants × cases", total);
  let done = 0;
  progress.update(0);
  const started = performance.now();
  let report: MutationReport;
  try {
    report = await mutate(cases, () => progress.update(++done));
  } catch (error) {
    if (!(error instanceof BaselineFailed)) throw error;
    // The bar stopped part way; its line is ended before the refusal.
    io.stderr.write(`${io.stderr_interactive ? "\n" : ""}bursar mutate: ${error.message}\n`);
    return 1;
  }
  writeFileSync(join(out, "mutation.md"), mutationMarkdown(report, cases.length));
  writeFileSync(join(out, "mutation.json"), `${JSON.stringify(report, null, 2)}\n`);
  const survivors = report.mutants.filter((mutant) => mutant.killed_by.length === 0);
  const width = Math.max(...report.mutants.map((mutant) => mutant.guard.length));
  for (const mutant of report.mutants) {
    const killers = mutant.killed_by.length;
    println(io.stdout, `${mutant.guard.padEnd(width)}  ${killers > 0 ? `killed by ${counted(killers, "case", "cases")}` : "SURVIVED"}`);
  }
  for (const row of report.gate_off) println(io.stdout, `${row.label}: ${row.calls_through} money calls through, ${(row.amount_through / 100).toFixed(2)} moved`);
  println(io.stdout, `${report.mutants.length - survivors.length}/${report.mutants.length} guards killed (${((performance.now() - started) / 1000).toFixed(1)} s); wrote ${join(out, "mutation.md")}`);
  const guards_on = report.gate_off[0];
  return survivors.length === 0 && guards_on?.calls_through === 0 ? 0 : 1;
}
