// bursar demo: the one-command tour (simulator + gate + scripted buyer, temporary data).

import { runDemo } from "../../buyer/demo.js";
import { parseOptions, type CliIo } from "../command.js";

export const help = `usage: bursar demo

Runs the simulator, the gate and a scripted buyer in one process on a temporary data
directory (deleted afterwards), with no key and no network. It prints the story: purchases
allowed with the remaining balance, one held for approval and approved, refusals each
naming its rule and reason, an order paid through the simulator's test checkout, captured
and settled, then exports the evidence log, verifies it offline and prints the signed
checkpoint. Exits 0 when everything happened as told and the log verified.

Colour only on a terminal (not under CI). No options; no environment variables are read.`;

export async function run(argv: string[], io: CliIo): Promise<number> {
  parseOptions(argv, {});
  const result = await runDemo(io.stdout, io.interactive);
  const complete = result.report.allowed >= 3 && result.report.held.length >= 1 && result.report.refusals.length >= 3 && result.settled >= 1;
  return complete && result.verified ? 0 : 1;
}
