// The labelled case format (eval/cases/*.jsonl), validated strictly so a typo in a case file
// is an error, not a silently different test.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";

export const case_classes = [
  "injection",
  "boundaries",
  "idempotency",
  "revocation",
  "isolation",
  "capture",
  "webhooks",
  "guards",
  "controls",
] as const;

const caller = z.enum(["A", "B"]);
const args = z.record(z.string(), z.unknown());
const call = z.object({ tool: z.string(), args: z.unknown(), as: caller.optional() }).strict();

export const webhook_spec = z
  .object({
    event: z.string(),
    payment: args.optional(),
    order: args.optional(),
    event_id: z.string().optional(),
    signature: z.enum(["valid", "invalid", "missing", "reserialized"]).optional(),
    event_id_header: z.boolean().optional(),
    raw: z.string().optional(),
    pad_to_bytes: z.number().int().optional(),
    no_secret: z.boolean().optional(),
  })
  .strict();

const step = z.union([
  z.object({ block: args }).strict(),
  z.object({ block_b: args }).strict(),
  z.object({ no_block: caller }).strict(),
  z.object({ call }).strict(),
  z.object({ hold: call }).strict(),
  z.object({ pay: z.object({ order: z.string(), card: z.string().optional() }).strict() }).strict(),
  z.object({ advance_ms: z.number().int() }).strict(),
  z.object({ revoke: caller }).strict(),
  z.object({ freeze: caller }).strict(),
  z.object({ unfreeze: caller }).strict(),
  // `refused: true`: the operator's decision is expected to be refused; any other error fails the case.
  z.object({ approve: z.string(), refused: z.literal(true).optional() }).strict(),
  z.object({ deny: z.string(), refused: z.literal(true).optional() }).strict(),
  z.object({ corrupt_block: caller }).strict(),
  z.object({ fault: args }).strict(),
  // An order made at the provider directly, as anyone holding the provider key could, never through the gate.
  z.object({ outside_order: z.object({ amount: z.number().int(), currency: z.string(), receipt: z.string() }).strict() }).strict(),
  z.object({ webhook: webhook_spec }).strict(),
  z.object({ repeat: z.object({ times: z.number().int().min(1).max(200), call }).strict() }).strict(),
]);

export const effects = ["ALLOW", "HOLD", "BLOCK"] as const;
export const webhook_effects = ["APPLY", "NOOP", "REJECT", "REFUSE"] as const;

export const case_schema = z
  .object({
    id: z.string().regex(/^[a-z0-9-]+$/),
    class: z.enum(case_classes),
    source: z.string().min(3),
    note: z.string().min(3),
    twin: z.string().optional(),
    setup: z.array(step).optional(),
    at: z.number().int().optional(),
    caller: caller.optional(),
    call: call.optional(),
    webhook: webhook_spec.optional(),
    expect: z
      .object({
        effect: z.enum(effects).optional(),
        rule: z.string().optional(),
        webhook_effect: z.enum(webhook_effects).optional(),
        status: z.number().int().optional(),
      })
      .strict(),
  })
  .strict()
  .refine((value) => (value.call === undefined) !== (value.webhook === undefined), { message: "a case has exactly one of call or webhook" })
  .refine((value) => value.call === undefined || (value.expect.effect !== undefined && value.expect.rule !== undefined), {
    message: "a call case expects an effect and a rule",
  })
  .refine((value) => value.webhook === undefined || value.expect.webhook_effect !== undefined, { message: "a webhook case expects a webhook_effect" })
  // An expectation the scoring never reads would pass whatever it says: refused, not ignored.
  .refine((value) => value.webhook === undefined || (value.expect.effect === undefined && value.expect.rule === undefined), {
    message: "a webhook case expects webhook_effect (and status), not effect or rule",
    path: ["expect"],
  })
  .refine((value) => value.call === undefined || (value.expect.webhook_effect === undefined && value.expect.status === undefined), {
    message: "a call case expects effect and rule, not webhook_effect or status",
    path: ["expect"],
  });

export type EvalCase = z.infer<typeof case_schema>;
export type Step = z.infer<typeof step>;
export type CallSpec = z.infer<typeof call>;
export type WebhookSpec = z.infer<typeof webhook_spec>;

/** Reads every *.jsonl file in a directory, in name order; throws naming the file, line and field. */
export function loadCases(dir: string): EvalCase[] {
  const cases: EvalCase[] = [];
  const seen = new Set<string>();
  const twins: Array<{ where: string; twin: string }> = [];
  for (const file of readdirSync(dir).filter((name) => name.endsWith(".jsonl")).sort()) {
    // Named as the user gave the directory (--cases), so the message points at the file to fix.
    const path = join(dir, file);
    const lines = readFileSync(path, "utf8").split("\n");
    lines.forEach((line, index) => {
      if (line.trim() === "") return;
      const where = `${path}:${index + 1}`;
      let json: unknown;
      try {
        json = JSON.parse(line);
      } catch (error) {
        throw new Error(`${where}: not JSON (${(error as Error).message})`);
      }
      const parsed = case_schema.safeParse(json);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new Error(`${where}: ${issue?.path.join(".") || "(case)"}: ${issue?.message}`);
      }
      if (seen.has(parsed.data.id)) throw new Error(`${where}: duplicate case id ${parsed.data.id}`);
      seen.add(parsed.data.id);
      cases.push(parsed.data);
      if (parsed.data.twin !== undefined) twins.push({ where, twin: parsed.data.twin });
    });
  }
  // A payload case is scored against its twin's outcome, so the twin must be in the same run.
  for (const { where, twin } of twins) if (!seen.has(twin)) throw new Error(`${where}: twin: no case ${twin}`);
  return cases;
}

/** loadCases for the CLI: a bad case file is a usage error (exit 2) naming file, line and field. */
export function loadCasesOrExplain(dir: string): EvalCase[] {
  let cases: EvalCase[];
  try {
    cases = loadCases(dir);
  } catch (error) {
    // A directory it cannot read (missing, a file, unreadable) is named as --cases is: Node's own
    // message alone ("ENOENT: …, scandir 'x'") did not say which option to fix.
    const unusable = error instanceof Error && "syscall" in error;
    throw usageError(unusable ? `--cases ${dir}: cannot use it (${error.message})` : (error as Error).message);
  }
  // A mistyped --cases would otherwise score nothing and pass.
  if (cases.length === 0) throw usageError(`${dir} holds no cases (lines of *.jsonl files)`);
  return cases;
}

function usageError(message: string): Error {
  const usage = new Error(message);
  usage.name = "UsageError";
  return usage;
}
