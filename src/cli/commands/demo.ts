// bursar demo: the one-command tour (simulator + gate + scripted buyer, temporary data).

import { startDemo, type DemoResult } from "../../buyer/demo.js";
import { parseFlags, println, signalExitCode, type CliIo } from "../command.js";

export const help = `usage: bursar demo

Runs the simulator, the gate and a scripted buyer in one process on a temporary data
directory (deleted afterwards), with no key and no network. It prints the story: purchases
allowed with the remaining balance, one held for approval and approved, refusals each
naming its rule and reason, an order paid through the simulator's test checkout, captured
and settled, then exports the evidence log, verifies it offline and prints the signed
checkpoint. Exits 0 when everything happened as told and the log verified.

Interrupted (SIGINT, Ctrl-C, or SIGTERM), it stops its servers, deletes the temporary data
directory and exits 130 (SIGINT) or 143 (SIGTERM); a second Ctrl-C while it cleans up ends
it at once. Its output closed under it ('bursar demo | head'), it does the same and exits 141.

Colour only on a terminal (not under CI). No options; no environment variables are read.`;

const interrupting_signals = ["SIGINT", "SIGTERM"] as const;

export async function run(argv: string[], io: CliIo): Promise<number> {
  parseFlags(argv, {});
  const demo = startDemo(io.stdout, io.interactive);
  let interrupted: Promise<number> | undefined;
  let interrupt!: (why: string, status: number) => void;
  const stopped = new Promise<number>((resolve) => {
    interrupt = (why, status) => {
      // Only the first: the signal handlers are `once`, so a second signal ends the process at once.
      if (interrupted) return;
      // Stopped first: the notice may not get out (stderr on the pipe stdout closed, `2>&1 | head`).
      interrupted = demo.stop().then(() => status);
      println(io.stderr, `bursar demo: ${why}: stopping the servers and deleting ${demo.dir}`);
      resolve(interrupted);
    };
  });
  const onSignal = (signal: NodeJS.Signals) => interrupt(signal, signalExitCode(signal));
  for (const signal of interrupting_signals) process.once(signal, onSignal);
  // Output closed under it (`bursar demo | head`): the next write fails with EPIPE, which would
  // end the process before its directory is deleted. Kept for later writes of the dying story.
  io.stdout.on("error", (error: NodeJS.ErrnoException) => interrupt(`its output was closed (${error.code ?? error.message})`, signalExitCode("SIGPIPE")));
  // A notice stderr cannot take is lost, not fatal: unhandled, its EPIPE ended the process
  // before the directory (its keys with it) was deleted. Kept, like the one above, for late writes.
  io.stderr.on("error", () => undefined);
  try {
    // Stopping mid-story makes the story fail (its gate is gone): that failure is the interruption, not an error.
    const told = demo.result.then(
      (result): number => (complete(result) ? 0 : 1),
      (error: unknown) => {
        if (interrupted) return interrupted;
        throw error;
      },
    );
    return await Promise.race([told, stopped]);
  } finally {
    for (const signal of interrupting_signals) process.off(signal, onSignal);
  }
}

function complete(result: DemoResult): boolean {
  const told = result.report.allowed >= 3 && result.report.held.length >= 1 && result.report.refusals.length >= 3 && result.settled >= 1;
  return told && result.verified;
}
