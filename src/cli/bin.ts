#!/usr/bin/env node
// The `bursar` executable: runs main() with the process's streams and exits with its code.

import { main } from "./main.js";

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
