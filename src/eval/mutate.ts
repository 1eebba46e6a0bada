// Guard-deletion mutation scoring: every case first runs with all guards on (the baseline, which
// must get every label right); then for each guard in the table, a gate built without that one
// guard (instance-level, through createBursar's guard table) runs every case, and the guard is
// killed when some case's verdict differs from its baseline verdict. A case that crashes instead
// is counted apart and kills nothing, except for FAIL_CLOSED, whose mutant must let the exception
// escape. Plus the "gate off" figure: every guard removed.

import { guard_table, withoutGuard, type Guard } from "../policy/index.js";
import type { EvalCase } from "./cases.js";
import { runCase, type Outcome } from "./run.js";
import { score, withTwins } from "./score.js";

/** The guard whose removal is expected to show as an exception: it is what turns one into a BLOCK. */
const guard_killed_by_exception = "FAIL_CLOSED";

export interface MutantResult {
  guard: string;
  rule: string;
  description: string;
  /** Cases whose verdict (a call's effect or rule, a webhook's effect or status) differs from the baseline's. */
  killed_by_verdict: string[];
  /** Cases that crashed (the harness or the gate threw) and did not on the baseline. */
  killed_by_exception: string[];
  /** The cases that count as killing the guard: killed_by_verdict, and for FAIL_CLOSED killed_by_exception too. */
  killed_by: string[];
}

export interface GateOffRow {
  label: string;
  /** Money calls labelled HOLD or BLOCK that the gate let through. */
  calls_through: number;
  /** The sum of those calls' amounts (minor units). */
  amount_through: number;
  webhooks_applied_wrongly: number;
}

export interface MutationReport {
  mutants: MutantResult[];
  gate_off: GateOffRow[];
}

/** Thrown when a case gets its label wrong with every guard on: a mutant's changed verdict could
 *  then not be told from the case's own mistake, and one wrong label would "kill" every guard. */
export class BaselineFailed extends Error {
  override name = "BaselineFailed";
  constructor(readonly case_ids: readonly string[]) {
    super(`with every guard on, ${case_ids.length} ${case_ids.length === 1 ? "case gets" : "cases get"} its label wrong (fix ${case_ids.length === 1 ? "it" : "them"} first; bursar eval shows how): ${case_ids.join(", ")}`);
  }
}

export async function runAll(cases: readonly EvalCase[], guards: readonly Guard[], onCase?: () => void): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  for (const eval_case of cases) {
    outcomes.push(await runCase(eval_case, guards));
    onCase?.();
  }
  return withTwins(cases, outcomes);
}

export function gateOffRow(label: string, cases: readonly EvalCase[], outcomes: readonly Outcome[]): GateOffRow {
  const row: GateOffRow = { label, calls_through: 0, amount_through: 0, webhooks_applied_wrongly: 0 };
  cases.forEach((eval_case, index) => {
    const scored = score(eval_case, outcomes[index] as Outcome);
    if (!scored.false_allow) return;
    if (eval_case.webhook) row.webhooks_applied_wrongly++;
    else {
      row.calls_through++;
      row.amount_through += scored.outcome.amount ?? 0;
    }
  });
  return row;
}

/** Whether a mutant's outcome is another verdict than the baseline's: what the gate decided, not the label. */
function verdictChanged(baseline: Outcome, mutant: Outcome): boolean {
  return baseline.effect !== mutant.effect || baseline.rule !== mutant.rule || baseline.webhook_effect !== mutant.webhook_effect || baseline.status !== mutant.status;
}

/** The cases a mutant's outcomes catch: each was right on the baseline and now gets another verdict, or crashes. */
function caughtBy(guard: Guard, cases: readonly EvalCase[], baseline: readonly Outcome[], outcomes: readonly Outcome[]): MutantResult {
  const killed_by_verdict: string[] = [];
  const killed_by_exception: string[] = [];
  cases.forEach((eval_case, index) => {
    const outcome = outcomes[index] as Outcome;
    if (outcome.error !== undefined) killed_by_exception.push(eval_case.id);
    else if (verdictChanged(baseline[index] as Outcome, outcome)) killed_by_verdict.push(eval_case.id);
  });
  const crashes_kill = guard.id === guard_killed_by_exception;
  const killed_by = crashes_kill ? cases.map((eval_case) => eval_case.id).filter((id) => killed_by_verdict.includes(id) || killed_by_exception.includes(id)) : killed_by_verdict;
  return { guard: guard.id, rule: guard.rule, description: guard.description, killed_by_verdict, killed_by_exception, killed_by };
}

/** Throws BaselineFailed, before any mutant runs, when a case is wrong with every guard on. */
export async function mutate(cases: readonly EvalCase[], onCase?: () => void): Promise<MutationReport> {
  const baseline = await runAll(cases, guard_table, onCase);
  const wrong = cases.filter((eval_case, index) => !score(eval_case, baseline[index] as Outcome).correct);
  if (wrong.length > 0) throw new BaselineFailed(wrong.map((eval_case) => eval_case.id));
  const mutants: MutantResult[] = [];
  for (const guard of guard_table) mutants.push(caughtBy(guard, cases, baseline, await runAll(cases, withoutGuard(guard.id), onCase)));
  const off = await runAll(cases, Object.freeze([]), onCase);
  return { mutants, gate_off: [gateOffRow("all guards on", cases, baseline), gateOffRow("gate off (every guard removed)", cases, off)] };
}

export function mutationMarkdown(report: MutationReport, cases: number): string {
  const rows = report.mutants.map((mutant) => {
    const shown = mutant.killed_by.slice(0, 4).map((id) => `\`${id}\``).join(", ");
    const more = mutant.killed_by.length > 4 ? ` and ${mutant.killed_by.length - 4} more` : "";
    const result = mutant.killed_by.length === 0 ? "**SURVIVED**" : mutant.guard === guard_killed_by_exception ? "killed (fails closed)" : "killed";
    return `| ${mutant.guard} | ${mutant.rule} | ${result} | ${mutant.killed_by_verdict.length} | ${mutant.killed_by_exception.length} | ${shown}${more} |`;
  });
  const gate = report.gate_off.map((row) => `| ${row.label} | ${row.calls_through} | ${(row.amount_through / 100).toFixed(2)} | ${row.webhooks_applied_wrongly} |`);
  const survived = report.mutants.filter((mutant) => mutant.killed_by.length === 0).length;
  return [
    "# Bursar guard-deletion mutation report",
    "",
    "Regenerate with `bursar mutate`. Each row is a gate built without that one guard (through",
    `createBursar's guard table, per instance), re-running all ${cases} labelled cases, each of which`,
    "gets its label right with every guard on; a guard is killed when at least one case's verdict",
    "(a call's effect or rule, a webhook's effect or status) differs from that all-guards-on verdict.",
    "A case that crashes instead (the harness or the gate threw) is counted under \"by exception\" and",
    "kills nothing, except for FAIL_CLOSED: that guard is what turns an exception into a BLOCK, so",
    "its mutant is expected to throw.",
    "",
    `**${report.mutants.length - survived} of ${report.mutants.length} guards killed${survived > 0 ? `; ${survived} survived` : ""}.**`,
    "",
    "| guard | rule | result | cases: by verdict | cases: by exception | first of those that kill it |",
    "|---|---|---|---|---|---|",
    ...rows,
    "",
    "## The gate off",
    "",
    "Money calls labelled HOLD or BLOCK that got through, and how much money that asked to move:",
    "",
    "| gate | money calls through | amount through (major units) | webhooks wrongly applied |",
    "|---|---|---|---|",
    ...gate,
    "",
  ].join("\n");
}
