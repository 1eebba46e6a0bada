// `bursar export`: writes the evidence log as JSONL (entries, receipts, checkpoints) and
// the signed checkpoint it ends on, for `bursar verify` to check offline.

import { once } from "node:events";
import { closeSync, createWriteStream, existsSync, fsyncSync, ftruncateSync, openSync, renameSync, rmSync, writeFileSync } from "node:fs";
import type { Writable } from "node:stream";
import { systemClock } from "../../clock.js";
import { databaseError, isPostgresUrl, loadConfig, maskedDb, type Config } from "../../config.js";
import { stagedPath } from "../../datadir.js";
import { exportLog, type ExportSummary } from "../../evidence/export.js";
import { createLogSigner, resolveSigningKey } from "../../evidence/keys.js";
import { EvidenceLog, readLatestCheckpoint, type StoredCheckpoint } from "../../evidence/store.js";
import type { SqlDriver } from "../../ledger/driver.js";
import { migration } from "../../ledger/migrations/002_evidence.js";
import { notRegularFile } from "../../file-kind.js";
import { openDriver } from "../../index.js";
import { baseUrl, bearerToken, CommandError, parseStrict, println, redacted, usingPath, UsageError, type CliIo } from "../command.js";
import { exportRemote, remoteCheckpoint, type RemoteLog } from "../remote-export.js";
import { landingPath, openOutput, refuseOwnedTarget } from "../owned-files.js";
import { storedGenesisIn } from "../stored-log.js";

export const help = `
usage: bursar export --out FILE [--checkpoint FILE]
       bursar export --from URL --out FILE [--checkpoint FILE] [--token TOKEN]

Writes the whole evidence log as JSONL to --out: a header line, then each entry's exact
canonical bytes, each followed by its signed receipt, with every stored signed checkpoint
placed after the entry that completes it. Before exporting, a checkpoint is signed for the
current tree (when the signing key is available), so the export ends on a signed root;
without the key, the export stops at the latest stored checkpoint.

With --from, the log is read from a running server's log routes instead of the database (for
an auditor who has a token but no database): every entry up to the server's latest signed
checkpoint, with its receipt, and that checkpoint after the last; each entry's bytes are
checked against the leaf hash the server sent (a mismatch stops it, exit 2). It is written
beside --out and renamed over it once whole: a run that fails (a refused token, a dropped
connection, a server that sends what no log holds) leaves an earlier --out as it was. Redirects
are not followed (the token goes only to --from). Progress goes to stderr. Verify it as any
export, with the key you hold for that server.

options:
  --out FILE          where to write the JSONL export (required; overwritten)
  --checkpoint FILE   also write the final signed checkpoint (note text) here; verify with
                      bursar verify FILE --checkpoint CP --key KEY (the verifier key you
                      hold for that log: 'bursar key' on its data directory)
  --from URL          the server's base URL, e.g. http://127.0.0.1:8787 (no credentials,
                      query or fragment, refused without being shown)
  --token TOKEN       with --from: the token that reads the log (default: BURSAR_AUDITOR_TOKEN,
                      else BURSAR_ADMIN_TOKEN); visible in the process list, prefer a variable

Neither may be a file Bursar owns (exit 2 before anything is written): the database and its
-wal/-shm/-journal files, the data directory's signing-key.pem, master-key, webhook-secret
and operator-token.sha256, or BURSAR_SIGNING_KEY. Nor may either be something that exists
and is not a regular file (/dev/null, /dev/stdout, a named pipe, a directory): one line naming
the option and the path, exit 2, before anything is opened. The export holds the whole
(scrubbed) log: store it as you would the database. New files are created mode 0600; both are opened before
either is written, so a --checkpoint that cannot be opened leaves --out as it was. A database
holding no evidence log is refused (exit 2), and nothing is created in it.

A database it cannot open or reach, or a SQLite file it cannot read (cut short, damaged, not a
database), is one line naming BURSAR_DB (a postgres URL with its password masked) and, for
SQLite, its message, exit 2.

Environment:
  BURSAR_DB            database: a SQLite path (default $BURSAR_DATA_DIR/bursar.db) or a postgres:// URL
  BURSAR_PG_PREPARED_STATEMENTS  0 to send PostgreSQL statements unprepared (a pooler without them)
  BURSAR_DATA_DIR      data directory (default ./.bursar)
  BURSAR_SIGNING_KEY   Ed25519 private key PEM (default $BURSAR_DATA_DIR/signing-key.pem; never generated here)
  BURSAR_LOG_ORIGIN    log origin (default bursar.local/log); must match the log's
  BURSAR_AUDITOR_TOKEN with --from: an auditor token (POST /api/v1/auditor-tokens)
  BURSAR_ADMIN_TOKEN   with --from, when BURSAR_AUDITOR_TOKEN is unset: the operator token
`;

/**
 * The database, once it is known to hold a log. PostgreSQL is first reached here: an unreachable
 * server is one line naming BURSAR_DB (its password masked) and exit 2 (run turns the error into
 * it), as `bursar serve` reports it, not a pg-pool stack. A database with no log is refused
 * before it is opened for writing: exporting never starts a log, nor changes a file it refuses.
 */
async function openDatabase(env: Config): Promise<SqlDriver> {
  const postgres = isPostgresUrl(env.db);
  if (!postgres && env.db !== ":memory:" && !existsSync(env.db)) throw new UsageError(`no database at ${env.db} (set BURSAR_DB or BURSAR_DATA_DIR)`);
  const genesis = await storedGenesisIn(env.db, env);
  if (genesis === undefined) throw new CommandError(`BURSAR_DB=${maskedDb(env.db)} holds no evidence log: start 'bursar serve' on it first`);
  return openDriver(env.db, env);
}

/** Cuts a checkpoint at the current head when the key is here; else uses the latest stored one. */
async function finalCheckpoint(driver: SqlDriver, env: Config, io: CliIo): Promise<StoredCheckpoint | undefined> {
  let signer;
  try {
    const loaded = resolveSigningKey({ explicitPath: env.signing_key_path, dataDir: env.data_dir, create: false });
    signer = createLogSigner(loaded.privateKey, env.log_origin);
  } catch (error) {
    println(io.stderr, `bursar export: ${(error as Error).message}; exporting up to the latest stored checkpoint`);
    return driver.read((tx) => readLatestCheckpoint(tx));
  }
  const log = await EvidenceLog.open(driver, { signer, origin: env.log_origin, clock: systemClock });
  return log.checkpoint();
}

async function writeTo(stream: Writable, text: string): Promise<void> {
  if (!stream.write(text)) await once(stream, "drain");
}

/**
 * Refuses an output that exists and is not a regular file (through any symlink, so /dev/stdout
 * too): the output is emptied before it is written, which /dev/null refused with an EINVAL stack,
 * and opening a FIFO no one reads waits for ever. Checked before anything is opened. A path that
 * cannot be looked at (a parent that is a file, no permission) is left to opening it, which says why.
 */
function refuseNotRegularFile(option: string, path: string): void {
  const kind = notRegularFile(path);
  if (kind) throw new CommandError(`${option} ${path}: ${kind}, not a regular file; export writes a regular file (a new one, or one it overwrites): choose a file path`);
}

/** Refuses outputs that would overwrite a file Bursar owns, or each other, or are not regular files. */
function checkOutputs(out: string, checkpoint: string | undefined, env: Config): void {
  refuseOwnedTarget("--out", out, env);
  refuseNotRegularFile("--out", out);
  if (checkpoint === undefined) return;
  refuseOwnedTarget("--checkpoint", checkpoint, env);
  refuseNotRegularFile("--checkpoint", checkpoint);
  if (landingPath(checkpoint) === landingPath(out)) throw new CommandError(`--checkpoint ${checkpoint}: the same file as --out; choose another path`);
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseStrict({ args: argv, options: export_options, strict: true });
  if (!values.out) throw new UsageError("--out FILE is required");
  if (values.token !== undefined && values.from === undefined) throw new UsageError("--token is for --from URL: a database export needs no token");
  const env = loadConfig(io.env);
  checkOutputs(values.out, values.checkpoint, env);
  if (values.from !== undefined) return exportFrom(remoteLog(values.from, values.token, io.env), values.out, values.checkpoint, env, io);
  // A database that cannot be reached or read, wherever in the run it shows (a damaged page may
  // be met only by the export's reads), is one line naming BURSAR_DB, exit 2, not a stack.
  return exportTo(values.out, values.checkpoint, env, io).catch((error: unknown) => Promise.reject(databaseError(env.db, error)));
}

export const export_options = {
  out: { type: "string" },
  checkpoint: { type: "string" },
  from: { type: "string" },
  token: { type: "string" },
} as const;

/** The server --from names and the token that reads its log: --token, else an auditor token, else the operator's. */
function remoteLog(from: string, token_option: string | undefined, env: NodeJS.ProcessEnv): RemoteLog {
  const url = baseUrl(from, "--from", "BURSAR_AUDITOR_TOKEN (or --token)", "http://127.0.0.1:8787");
  const named = token_option !== undefined ? "--token" : env.BURSAR_AUDITOR_TOKEN ? "BURSAR_AUDITOR_TOKEN" : env.BURSAR_ADMIN_TOKEN ? "BURSAR_ADMIN_TOKEN" : undefined;
  const given = token_option ?? (env.BURSAR_AUDITOR_TOKEN || env.BURSAR_ADMIN_TOKEN);
  if (!named || !given) throw new UsageError("--from needs a token that reads the log: set BURSAR_AUDITOR_TOKEN (an auditor token) or BURSAR_ADMIN_TOKEN, or pass --token");
  return { base_url: url.href.replace(/\/+$/, ""), token: bearerToken(given, named, "auditor or operator token") };
}

async function exportFrom(log: RemoteLog, out: string, checkpoint_path: string | undefined, env: Config, io: CliIo): Promise<number> {
  const checkpoint = await remoteCheckpoint(log);
  await writeExport(out, checkpoint_path, checkpoint, env, io, (write) => exportRemote(log, checkpoint, io, write), true).catch((error: unknown) => {
    // What the server sent that nothing above foresaw, or a write that failed (a full disk), is
    // still one line, never a stack or the token; --out is as it was.
    if (error instanceof CommandError || error instanceof UsageError) throw error;
    throw new CommandError(redacted(`--from: the export failed, --out left as it was (${(error as Error).message})`, [log.token]));
  });
  return 0;
}

async function exportTo(out: string, checkpoint_path: string | undefined, env: Config, io: CliIo): Promise<number> {
  const driver = await openDatabase(env);
  try {
    await driver.migrate([migration]);
    const checkpoint = await finalCheckpoint(driver, env, io);
    if (!checkpoint) throw new UsageError("the log has no checkpoint yet: start 'bursar serve' once, or provide the signing key");
    const exported_at = systemClock().toISOString();
    await writeExport(out, checkpoint_path, checkpoint, env, io, (write) => exportLog(driver, { size: checkpoint.size, exported_at, write }));
    return 0;
  } finally {
    await driver.close();
  }
}

/**
 * Writes the export `produce` makes to `out`, then the checkpoint it ends on to `checkpoint_path`.
 * Both are opened before either is written: a --checkpoint that cannot be opened leaves --out as
 * it was. Opened here, not by the stream: a directory or a missing parent is one line, not a crash.
 * A `staged` export (--from, read over a network that may fail half way) is written beside --out
 * and renamed over it once whole, so a failure leaves an earlier --out as it was; the database's
 * is written in place (it needs no room for two copies). Either way, a failure removes a
 * --checkpoint file this run created.
 */
async function writeExport(
  out: string,
  checkpoint_path: string | undefined,
  checkpoint: { note: string; size: number },
  env: Config,
  io: CliIo,
  produce: (write: (text: string) => Promise<void>) => Promise<ExportSummary>,
  staged = false,
): Promise<void> {
  const checkpoint_new = checkpoint_path !== undefined && !existsSync(checkpoint_path);
  const checkpoint_fd = checkpoint_path ? usingPath(`--checkpoint ${checkpoint_path}`, () => openOutput("--checkpoint", checkpoint_path, env)) : undefined;
  const aside = staged ? stagedPath(landingPath(out)) : undefined;
  let written = false;
  try {
    const out_fd = usingPath(`--out ${out}`, () => (aside ? openSync(aside, "wx", 0o600) : openOutput("--out", out, env)));
    ftruncateSync(out_fd, 0);
    const stream = createWriteStream(out, { fd: out_fd, autoClose: false });
    try {
      const summary = await produce((text) => writeTo(stream, text));
      stream.end();
      await once(stream, "finish");
      if (aside) {
        fsyncSync(out_fd);
        renameSync(aside, landingPath(out));
      }
      if (checkpoint_fd !== undefined) {
        ftruncateSync(checkpoint_fd, 0);
        writeFileSync(checkpoint_fd, checkpoint.note);
      }
      written = true;
      println(io.stdout, `exported ${summary.entries} entries and ${summary.checkpoints} checkpoints to ${out} (${summary.bytes} bytes)`);
    } finally {
      // After a failure a write may still be under way: its error on the closed descriptor is
      // not this export's (which has failed already), and must not crash the command.
      stream.on("error", () => undefined);
      closeSync(out_fd);
    }
  } finally {
    if (checkpoint_fd !== undefined) closeSync(checkpoint_fd);
    if (!written) {
      if (aside) rmSync(aside, { force: true });
      // No empty --checkpoint file this run made is left behind.
      if (checkpoint_new) rmSync(checkpoint_path, { force: true });
    }
  }
  if (checkpoint_path) println(io.stdout, `signed checkpoint for size ${checkpoint.size} written to ${checkpoint_path}`);
}
