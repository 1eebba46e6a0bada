// Scoring outcomes against expectations, and the reports a security reviewer reads:
// per-class table, the ALLOW/HOLD/BLOCK confusion matrix, webhook effects. An injection payload
// case is also scored against its clean twin's outcome.

import { case_classes, effects, webhook_effects, type EvalCase } from "./cases.js";
import type { Outcome } from "./run.js";

export interface Scored {
  eval_case: EvalCase;
  outcome: Outcome;
  correct: boolean;
  /** A call the gate let through (ALLOW) that should have been held or refused, or a webhook
   *  that moved money (APPLY) that should not have. */
  false_allow: boolean;
  wrong_effect: boolean;
  wrong_rule: boolean;
  /** An injection payload case whose outcome is not exactly its clean twin's. */
  twin_differs: boolean;
}

/** The confusion matrices' columns: every labelled effect, and NONE for no verdict at all
 *  (the gate threw, or answered without an effect). Fixed, so no outcome drops out. */
const no_verdict = "NONE";
const call_columns = [...effects, no_verdict];
const webhook_columns = [...webhook_effects, no_verdict];

/** Gives each payload case its clean twin's outcome (by id), which score() compares with its own. */
export function withTwins(cases: readonly EvalCase[], outcomes: readonly Outcome[]): Outcome[] {
  const by_id = new Map(cases.map((eval_case, index) => [eval_case.id, outcomes[index]]));
  return outcomes.map((outcome, index) => {
    const twin = by_id.get(cases[index]?.twin ?? "");
    return twin ? { ...outcome, twin: { effect: twin.effect, rule: twin.rule, error: twin.error } } : outcome;
  });
}

function sameVerdict(outcome: Outcome, twin: Outcome["twin"]): boolean {
  return twin !== undefined && !outcome.error && !twin.error && outcome.effect === twin.effect && outcome.rule === twin.rule;
}

export function score(eval_case: EvalCase, outcome: Outcome): Scored {
  const expect = eval_case.expect;
  if (eval_case.webhook) {
    const wrong = outcome.webhook_effect !== expect.webhook_effect || (expect.status !== undefined && outcome.status !== expect.status);
    const false_allow = outcome.webhook_effect === "APPLY" && expect.webhook_effect !== "APPLY";
    return { eval_case, outcome, correct: !wrong && !outcome.error, false_allow, wrong_effect: wrong, wrong_rule: false, twin_differs: false };
  }
  const wrong_effect = outcome.effect !== expect.effect;
  const wrong_rule = !wrong_effect && outcome.rule !== expect.rule;
  const false_allow = outcome.effect === "ALLOW" && expect.effect !== "ALLOW";
  // The policy never reads free text: a payload must get exactly what its clean twin got.
  const twin_differs = eval_case.twin !== undefined && !sameVerdict(outcome, outcome.twin);
  const correct = !wrong_effect && !wrong_rule && !twin_differs && !outcome.error;
  return { eval_case, outcome, correct, false_allow, wrong_effect, wrong_rule, twin_differs };
}

export interface Summary {
  cases: number;
  correct: number;
  false_allows: number;
  wrong_effects: number;
  wrong_rules: number;
  twin_mismatches: number;
  by_class: Record<string, { cases: number; false_allows: number; wrong_effects: number; wrong_rules: number }>;
  confusion: Record<string, Record<string, number>>;
  webhooks: Record<string, Record<string, number>>;
  failures: Array<{ id: string; expected: unknown; got: Outcome }>;
}

export function summarize(scored: readonly Scored[]): Summary {
  const by_class = Object.fromEntries(case_classes.map((name) => [name, { cases: 0, false_allows: 0, wrong_effects: 0, wrong_rules: 0 }]));
  const confusion = Object.fromEntries(effects.map((row) => [row, Object.fromEntries(call_columns.map((column) => [column, 0]))]));
  const webhooks = Object.fromEntries(webhook_effects.map((row) => [row, Object.fromEntries(webhook_columns.map((column) => [column, 0]))]));
  const summary: Summary = { cases: scored.length, correct: 0, false_allows: 0, wrong_effects: 0, wrong_rules: 0, twin_mismatches: 0, by_class, confusion, webhooks, failures: [] };
  for (const item of scored) {
    const row = by_class[item.eval_case.class] as Summary["by_class"][string];
    row.cases++;
    if (item.correct) summary.correct++;
    else summary.failures.push({ id: item.eval_case.id, expected: item.eval_case.expect, got: item.outcome });
    if (item.twin_differs) summary.twin_mismatches++;
    for (const [flag, key] of [[item.false_allow, "false_allows"], [item.wrong_effect, "wrong_effects"], [item.wrong_rule, "wrong_rules"]] as const) {
      if (flag) {
        row[key]++;
        summary[key]++;
      }
    }
    if (item.eval_case.webhook) {
      const expected = item.eval_case.expect.webhook_effect as string;
      const cells = webhooks[expected] as Record<string, number>;
      const got = column(webhook_columns, item.outcome, item.outcome.webhook_effect);
      cells[got] = (cells[got] ?? 0) + 1;
    } else {
      const expected = item.eval_case.expect.effect as string;
      const cells = confusion[expected] as Record<string, number>;
      const got = column(call_columns, item.outcome, item.outcome.effect);
      cells[got] = (cells[got] ?? 0) + 1;
    }
  }
  return summary;
}

/** The matrix column an outcome falls in: its effect, or NONE when it has none we label. */
function column(columns: readonly string[], outcome: Outcome, effect: string | undefined): string {
  return !outcome.error && effect !== undefined && columns.includes(effect) ? effect : no_verdict;
}

function table(header: string[], rows: Array<Array<string | number>>): string {
  const lines = [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`];
  for (const row of rows) lines.push(`| ${row.join(" | ")} |`);
  return lines.join("\n");
}

function matrix(title: string, columns: readonly string[], data: Record<string, Record<string, number>>): string {
  return `${title}\n\n${table(["expected \\ got", ...columns], Object.entries(data).map(([row, cells]) => [row, ...columns.map((column) => cells[column] ?? 0)]))}`;
}

export function reportMarkdown(summary: Summary): string {
  const classes = Object.entries(summary.by_class).map(([name, row]) => [name, row.cases, row.false_allows, row.wrong_effects, row.wrong_rules]);
  const failures = summary.failures.length === 0 ? "None." : summary.failures.map((failure) => `- \`${failure.id}\`: expected ${JSON.stringify(failure.expected)}, got ${JSON.stringify(failure.got)}`).join("\n");
  return [
    "# Bursar adversarial evaluation",
    "",
    "Regenerate with `bursar eval` (every case runs in-process on a fresh gate with the embedded",
    "simulator, a fixed clock and deterministic ids, so this file is byte-identical on every run).",
    "",
    `**${summary.cases} cases: ${summary.correct} correct, ${summary.false_allows} false allows, ${summary.wrong_effects} wrong effects, ${summary.wrong_rules} wrong rules, ${summary.twin_mismatches} injection payloads unlike their clean twin.**`,
    "",
    "## By class",
    "",
    table(["class", "cases", "false allows", "wrong effect", "wrong rule"], classes),
    "",
    "## Money calls",
    "",
    matrix("Confusion matrix of effects (rows: labelled, columns: the gate's verdict; NONE: no verdict, the gate threw or answered without an effect).", call_columns, summary.confusion),
    "",
    "## Webhooks",
    "",
    matrix("APPLY: held money became spent; NOOP: audited, nothing moved; REJECT: reconciliation rejected and the block frozen; REFUSE: refused at the door (4xx/5xx); NONE: the harness or gate threw.", webhook_columns, summary.webhooks),
    "",
    "## Failures",
    "",
    failures,
    "",
  ].join("\n");
}
