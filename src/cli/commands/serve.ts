// bursar serve: the gate, operator API and evidence log over HTTP until SIGINT/SIGTERM/SIGHUP.

import type { FastifyInstance } from "fastify";
import { environment_help, fetchRefusedPort, loadConfig, type Config } from "../../config.js";
import { GracefulStop, onLogOutputFailed } from "../../server/app.js";
import { startServer, type Started } from "../../server/start.js";
import { listenHost, parseStrict, println, signalExitCode, UsageError, type CliIo } from "../command.js";

export const help = `usage: bursar serve [--host HOST] [--port PORT]

Runs Bursar over HTTP: GET /healthz, the MCP gate at /mcp, the operator API under /api/v1,
the evidence log routes and (with BURSAR_PROVIDER=simulator, the default) the Razorpay
simulator under /simulator. The line "bursar listening on URL (provider: …)" names the
provider in use; RAZORPAY_KEY_ID or RAZORPAY_KEY_SECRET set without BURSAR_PROVIDER=razorpay
is refused at start (exit 2), since the simulator's payments are not real.

When BURSAR_ADMIN_TOKEN is unset and the data directory holds no operator token hash (a
fresh one, or one whose hash file was removed), it generates the operator token, stores only
its hash (mode 0600) and prints the token once on stderr, apart from the JSON logs on stdout,
with the next commands to run.

Stopping: SIGINT (Ctrl-C), SIGTERM or SIGHUP stops it gracefully: it stops accepting, closes
idle connections, finishes the requests in flight and exits 0. A signal during the start
lets the start finish first. Requests still running after the grace period (three provider
timeouts plus 5 s) are abandoned and it exits 1; a second signal exits at once with 128 + the
signal's number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP). When its stdout is closed
(the JSON logs can no longer be written, e.g. 'bursar serve | head'), it says so on stderr,
stops the same graceful way and exits 141. When its SQLite database fails a commit (a full
disk, an I/O error), it says so on stderr, stops the same way and exits 75: run it under a
supervisor that restarts it. It does the same when the evidence log finds entries it saw gone
(the database restored under it); the restart is then refused, naming the data directory's
last-checkpoint file (docs/configuration.md, "Backups and restores").

Options:
  --host HOST   listen address (overrides BURSAR_HOST; may not be empty)
  --port PORT   listen port (overrides BURSAR_PORT; 0 picks a free port)

${environment_help}`;

export const port_max = 65_535;

/** --port as given: an empty or non-numeric value is an error, never the default port. */
function listenPort(raw: string): string {
  if (!/^\d+$/.test(raw) || Number(raw) > port_max) throw new UsageError(`--port ${JSON.stringify(raw)}: expected an integer from 0 to ${port_max}`);
  const refused = fetchRefusedPort(Number(raw), `--port ${raw}`);
  if (refused !== undefined) throw new UsageError(refused);
  return raw;
}

/** Exit code of a graceful stop because stdout was closed: a process killed by SIGPIPE's (141), as `bursar demo`. */
const output_closed_status = signalExitCode("SIGPIPE");
/** Exit code of a stop because the database failed a commit or flush (sysexits' EX_TEMPFAIL: a restart recovers). */
export const database_failed_status = 75;

/** The provider the start line names: whether payments are real is never left to guess from the environment. */
export function providerInUse(config: Config): string {
  if (config.provider === "simulator") return "provider: simulator, built in: no real payments";
  const mode = config.razorpay.key_id?.startsWith("rzp_live_") ? "live key" : "test key";
  return `provider: razorpay at ${config.razorpay.base_url}, ${mode}`;
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseStrict({ args: argv, options: { host: { type: "string" }, port: { type: "string" } }, strict: true });
  const env = { ...io.env };
  if (values.host !== undefined) env.BURSAR_HOST = listenHost(values.host);
  if (values.port !== undefined) env.BURSAR_PORT = listenPort(values.port);
  const config = loadConfig(env);
  // An address it cannot listen on is named as it was given.
  config.listen_names = { host: values.host === undefined ? "BURSAR_HOST=" : "--host ", port: values.port === undefined ? "BURSAR_PORT=" : "--port " };
  // From here a signal stops gracefully, during the start too: the start then finishes (a
  // generated token's hash, kept in memory until the token is shown, is stored or dropped) before
  // the server closes.
  const stop = new GracefulStop((line) => println(io.stderr, `bursar serve: ${line}`));
  const output = watchOutput(io, stop);
  let started: Started;
  try {
    started = await startServer(config);
  } catch (error) {
    stop.dispose();
    output.dispose();
    throw error;
  }
  output.started(started.app);
  // A SQLite COMMIT or WAL flush that failed (a full disk, an I/O error) leaves the driver
  // refusing all work until restarted: stop, so a supervisor restarts it, rather than serve 500s.
  started.bursar.driver.onFailure?.((error) => {
    println(io.stderr, `bursar serve: the database failed to commit (${String(error)}); stopping: a restart reopens it with every committed write`);
    stop.stop({ reason: `database failed: ${String(error)}`, exit_code: database_failed_status });
  });
  // The log found the database no longer holds entries it saw (restored under it, or failed over
  // to a replica that lacked them): no entry can be written; the restart is refused, naming why.
  started.bursar.log.onLost((error) => {
    println(io.stderr, `bursar serve: ${error.message}; stopping: the data directory's last-checkpoint keeps what this process saw, and a start on this database is refused`);
    stop.stop({ reason: `evidence log lost entries: ${error.message}`, exit_code: database_failed_status });
  });
  // Before the listen line: whoever reads it may signal at once, and must get a graceful stop.
  stop.attach(started.app);
  println(io.stdout, `bursar listening on ${started.url} (${providerInUse(config)})`);
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

/**
 * What to do when stdout or stderr can no longer be written (EPIPE: `bursar serve | head`, a
 * log collector that died): a failed write would otherwise end the process with a stack trace
 * mid-start. stdout carries the JSON logs, and pino drops every line after a failed one without
 * a word: a server that cannot log is stopped the graceful way (requests in flight are
 * answered) rather than left running unseen, and a supervisor restarts it with its output
 * whole. stderr carries only the start's few lines: losing it stops nothing, and the JSON log
 * says so (the generated operator token may not have been seen).
 */
function watchOutput(io: CliIo, stop: GracefulStop): { started(app: FastifyInstance): void; dispose(): void } {
  let app: FastifyInstance | undefined;
  let stdout_failed = false;
  // Both the stream and pino's destination report one failure: it is told, and stops, once.
  const on_stdout = (error: NodeJS.ErrnoException) => {
    if (stdout_failed) return;
    stdout_failed = true;
    const code = error.code ?? error.message;
    println(io.stderr, `bursar serve: stdout was closed (${code}): the JSON logs cannot be written; stopping`);
    stop.stop({ reason: `stdout closed (${code})`, exit_code: error.code === "EPIPE" ? output_closed_status : 1 });
  };
  let stderr_failure: string | undefined;
  // Logged to stdout, unless stdout is gone too (one pipe read both, as a container's collector
  // often does): a line written there then went round in a retry loop that held the stop forever.
  const warnStderrClosed = (server: FastifyInstance, code: string) => {
    if (stdout_failed) return;
    server.log.warn({ code }, "stderr was closed: a generated operator token printed there may not have been seen (bursar admin rotate issues a new one)");
  };
  const on_stderr = (error: NodeJS.ErrnoException) => {
    if (stderr_failure !== undefined) return;
    stderr_failure = error.code ?? error.message;
    if (app) warnStderrClosed(app, stderr_failure);
  };
  // Kept while it serves: a later write to the broken stream fails again, harmlessly.
  io.stdout.on("error", on_stdout);
  io.stderr.on("error", on_stderr);
  return {
    started: (started_app) => {
      app = started_app;
      onLogOutputFailed(started_app, on_stdout);
      if (stderr_failure !== undefined) warnStderrClosed(started_app, stderr_failure);
    },
    dispose: () => {
      io.stdout.off("error", on_stdout);
      io.stderr.off("error", on_stderr);
    },
  };
}
