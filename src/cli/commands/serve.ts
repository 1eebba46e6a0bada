// bursar serve: the gate, operator API and evidence log over HTTP until SIGINT/SIGTERM.

import { environment_help, loadConfig } from "../../config.js";
import { closeOnSignals } from "../../server/app.js";
import { startServer } from "../../server/start.js";
import { parsing, println, UsageError, type CliIo } from "../command.js";
import { parseArgs } from "node:util";

export const help = `usage: bursar serve [--host HOST] [--port PORT]

Runs Bursar over HTTP: GET /healthz, the MCP gate at /mcp, the operator API under /api/v1,
the evidence log routes and (with BURSAR_PROVIDER=simulator, the default) the Razorpay
simulator under /simulator. Stops gracefully on SIGINT/SIGTERM.

When BURSAR_ADMIN_TOKEN is unset and the data directory holds no operator token hash (a
fresh one, or one whose hash file was removed), it generates the operator token, stores only
its hash (mode 0600) and prints the token once on stderr, apart from the JSON logs on stdout,
with the next commands to run.

Options:
  --host HOST   listen address (overrides BURSAR_HOST)
  --port PORT   listen port (overrides BURSAR_PORT; 0 picks a free port)

${environment_help}`;

export const port_max = 65_535;

/** --port as given: an empty or non-numeric value is an error, never the default port. */
function listenPort(raw: string): string {
  if (!/^\d+$/.test(raw) || Number(raw) > port_max) throw new UsageError(`--port ${JSON.stringify(raw)}: expected an integer from 0 to ${port_max}`);
  return raw;
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values } = parsing(() =>
    parseArgs({ args: argv, options: { host: { type: "string" }, port: { type: "string" } }, strict: true }),
  );
  const env = { ...io.env };
  if (values.host) env.BURSAR_HOST = values.host;
  if (values.port !== undefined) env.BURSAR_PORT = listenPort(values.port);
  const config = loadConfig(env);
  const started = await startServer(config);
  // Before the listen line: whoever reads it may signal at once, and must get a graceful stop.
  closeOnSignals(started.app);
  println(io.stdout, `bursar listening on ${started.url}`);
  if (started.generated_token) {
    // On stderr: stdout carries the JSON logs, which must never hold a token.
    println(io.stderr, "");
    println(io.stderr, "Operator token (shown once; only its hash is stored in the data directory):");
    println(io.stderr, `  ${started.generated_token}`);
    println(io.stderr, "");
    println(io.stderr, "Next:");
    println(io.stderr, `  export BURSAR_URL=${started.url} BURSAR_ADMIN_TOKEN=<the token above>`);
    println(io.stderr, "  bursar agent create --name buyer-1");
    println(io.stderr, "  bursar block create --agent <agent_id> --currency INR --reserved 1000000");
  }
  await new Promise<void>((resolve) => started.app.server.once("close", () => resolve()));
  return 0;
}
