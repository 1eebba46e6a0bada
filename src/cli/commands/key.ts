// `bursar key`: prints the evidence log's public verifier key (generating the signing key
// into the data directory if this is the first use, as `serve` does on first start).

import { loadConfig, maskedDb, type Config } from "../../config.js";
import { createLogSigner, resolveSigningKey } from "../../evidence/keys.js";
import { CommandError, parseStrict, println, usingPath, type CliIo } from "../command.js";
import { storedGenesisIn } from "../stored-log.js";

export const help = `
usage: bursar key

Prints the evidence log's public verifier key, <name>+<hex key id>+<base64 key>, the value
'bursar verify --key' takes and GET /.well-known/bursar/log-key serves. The name is the log
origin. It is public: publish it where auditors can find it.

If no signing key exists yet in the data directory, one is generated there (mode 0600),
exactly as the first 'bursar serve' would; a note saying so goes to stderr. When BURSAR_DB
already holds a log, the key must be the one it was started with: none is generated, and a
missing or other key is one line saying so, exit 2. A database it cannot read is said on
stderr and an existing key printed unchecked; none is generated then (that log may have been
started with another key), and with no key it is one line saying so, exit 2.

Environment:
  BURSAR_SIGNING_KEY   Ed25519 private key PEM file to use (never generated; must exist)
  BURSAR_DATA_DIR      data directory holding signing-key.pem (default ./.bursar)
  BURSAR_DB            database whose log the key must be: a SQLite path (default $BURSAR_DATA_DIR/bursar.db) or a postgres:// URL
  BURSAR_LOG_ORIGIN    log origin and key name (default bursar.local/log)
`;

/** What the log in BURSAR_DB was started under: its genesis entry's origin and verifier key. */
interface LogIdentity {
  origin: string;
  key: string;
}

/**
 * The identity of the log in BURSAR_DB; undefined when there is no log yet (no database, or none
 * in it). A database that cannot be read answers its error's message as `unread`.
 */
async function logIdentity(env: Config): Promise<{ log?: LogIdentity; unread?: string }> {
  try {
    const body = (await storedGenesisIn(env.db, env))?.body as { origin?: unknown; key?: unknown } | undefined;
    return typeof body?.origin === "string" && typeof body.key === "string" ? { log: { origin: body.origin, key: body.key } } : {};
  } catch (error) {
    return { unread: (error as Error).message };
  }
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  parseStrict({ args: argv, options: {}, strict: true });
  const env = loadConfig(io.env);
  const source = env.signing_key_path ? `BURSAR_SIGNING_KEY=${env.signing_key_path}` : `BURSAR_DATA_DIR=${env.data_dir}`;
  const { log, unread } = await logIdentity(env);
  const where = `the log in BURSAR_DB=${maskedDb(env.db)}`;
  if (log !== undefined && log.origin !== env.log_origin) {
    throw new CommandError(`BURSAR_LOG_ORIGIN is ${JSON.stringify(env.log_origin)}, but ${where} has the origin ${JSON.stringify(log.origin)}: set it back`);
  }
  // A log already started names its key: a new one would be no one's (every checkpoint fails under it).
  const restore = `restore the key ${where} was started with (${log?.key})`;
  const loaded = usingPath(source, () => {
    try {
      // An unread database may hold a log started under another key: none is generated for it.
      return resolveSigningKey({ explicitPath: env.signing_key_path, dataDir: env.data_dir, create: log === undefined && unread === undefined });
    } catch (error) {
      if (unread !== undefined) {
        throw new CommandError(`BURSAR_DB=${maskedDb(env.db)}: cannot read its log (${unread}), and ${(error as Error).message}: no key is generated while the log it may already have cannot be read`);
      }
      throw log === undefined ? error : new CommandError(`${(error as Error).message}: ${restore}`);
    }
  });
  if (unread !== undefined) println(io.stderr, `bursar key: BURSAR_DB=${maskedDb(env.db)}: cannot read its log (${unread}); the key below is not checked against it`);
  const verifier = createLogSigner(loaded.privateKey, env.log_origin).verifierKey;
  if (log !== undefined && verifier !== log.key) throw new CommandError(`the signing key (${verifier}) is not the log's: ${restore}`);
  if (loaded.created) println(io.stderr, `bursar key: generated a new signing key at ${loaded.path}`);
  println(io.stdout, verifier);
  return 0;
}
