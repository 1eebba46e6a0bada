#!/usr/bin/env node
// The `bursar` executable: runs main() with the process's streams and exits with its code.

import { nodeTooOld } from "./node-version.js";

const too_old = nodeTooOld(process.versions.node);
if (too_old !== undefined) {
  process.stderr.write(`${too_old}\n`);
  process.exit(2);
}
// Loaded only once the version is known to do.
const { main } = await import("./main.js");

const io = {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  interactive: Boolean(process.stdout.isTTY) && !process.env.CI,
  stderr_interactive: Boolean(process.stderr.isTTY) && !process.env.CI,
};

main(process.argv.slice(2), io).then(
  (code) => {
    // Long-running commands (serve, simulator) resolve only after their server closed.
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`bursar: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
