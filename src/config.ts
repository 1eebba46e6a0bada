// Configuration from the environment, validated at start: a bad value stops the start with
// one line naming the variable and what it accepts.

import { join, resolve } from "node:path";
import { ClockBehindLogError } from "./clock.js";
import { LogRolledBackError, WitnessError } from "./evidence/witness.js";
import { lookups_per_minute_default, lookups_per_minute_max } from "./gate/lookups.js";
import { DatabaseFileError, NoSchemaError, SchemaNewerError } from "./ledger/driver.js";
import { nameCharacterProblem } from "./policy/arguments.js";

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * A file system error (a Node system error: it has a `syscall`) on a path the user chose, as a
 * ConfigError naming where the path came from (`BURSAR_DATA_DIR=/srv/x`, `--out /tmp/log`):
 * ENOTDIR, EISDIR, EACCES… are the user's to fix, not a stack trace. Other errors pass through.
 */
export function fileError(error: unknown, subject: string): unknown {
  if (!(error instanceof Error) || !("syscall" in error)) return error;
  return new ConfigError(`${subject}: cannot use it (${error.message})`);
}

export interface Config {
  data_dir: string;
  db: string;
  host: string;
  port: number;
  /** Where host and port came from, as errors name them: `BURSAR_HOST=` (the default), or an option such as `--port `. */
  listen_names?: { host: string; port: string };
  admin_token: string | undefined;
  provider: "simulator" | "razorpay";
  razorpay: {
    key_id: string | undefined;
    key_secret: string | undefined;
    base_url: string;
    webhook_secret: string | undefined;
    webhook_secret_previous: string | undefined;
  };
  allow_live: boolean;
  /** BURSAR_CLOCK_FROM_HOST: start on the clock as it reads even when the log's newest entry is over an hour later. */
  clock_from_host: boolean;
  /** PostgreSQL only: run statements as named prepared statements (BURSAR_PG_PREPARED_STATEMENTS, default 1). */
  pg_prepared_statements: boolean;
  signing_key_path: string | undefined;
  master_key: string | undefined;
  log_origin: string;
  checkpoint_every: number;
  checkpoint_seconds: number;
  /** Provider request timeout; an in-flight key's lease is three times this. */
  provider_timeout_ms: number;
  /** Provider look-ups (fetch_order, fetch_payment, fetch_order_payments) per agent per minute; 0: unlimited. */
  lookups_per_minute: number;
  /** pino level for the server's log (BURSAR_LOG_LEVEL). */
  log_level: LogLevel;
}

/** pino's levels; a name outside these makes pino throw at start with a message naming none of ours. */
export const log_levels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof log_levels)[number];

/** The master key's shortest length; the sealer (src/sources/sealed.ts) asserts it too. */
export const master_key_chars_min = 16;

type Env = NodeJS.ProcessEnv;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected an integer from ${min} to ${max}`);
  }
  return value;
}

/**
 * The Fetch standard's "bad ports", which fetch (Node's, as browsers') refuses to connect to. A
 * server listening on one starts, but every client Bursar ships (agent create, buyer,
 * mcp-stdio, send-decisions), the simulator's webhooks and the Razorpay client use fetch, and
 * none of them could reach it: it answered "bad port" to each, long after the start.
 */
const fetch_refused_ports: ReadonlySet<number> = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119,
  123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990,
  993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** Why `port`, given as `subject` (`BURSAR_PORT=6667`), cannot be listened on for fetch clients; undefined when it can. */
export function fetchRefusedPort(port: number, subject: string): string | undefined {
  if (!fetch_refused_ports.has(port)) return undefined;
  return `${subject}: fetch refuses to connect to this port (the Fetch standard's bad ports), so Bursar's own clients and browsers could not reach the server; choose another`;
}

function listenPort(env: Env, name: string, fallback: number): number {
  const port = integer(env, name, fallback, 0, 65_535);
  const refused = fetchRefusedPort(port, `${name}=${port}`);
  if (refused !== undefined) throw new ConfigError(refused);
  return port;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected one of ${allowed.join(", ")}`);
  }
  return raw as T;
}

/** BURSAR_LOG_LEVEL, checked: pino throws a stack naming none of ours at a level it does not know. For `bursar simulator` too. */
export function logLevel(env: Env): LogLevel {
  return oneOf(env, "BURSAR_LOG_LEVEL", log_levels, "info");
}

/** `raw` parsed, when it is an http(s) URL. */
export function parseHttpUrl(raw: string): URL | undefined {
  try {
    const url = new URL(raw);
    return url.protocol === "http:" || url.protocol === "https:" ? url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A base URL: http(s), without `user:password@` (fetch refuses such a URL with a message that
 * repeats it, password included, into the provider's reason and so into the evidence log) and
 * without `?query` or `#fragment` (request paths are appended to it). Neither refusal echoes
 * the value, which may hold a secret.
 */
function url(env: Env, name: string, fallback: string, credentials_in: string): string {
  const raw = env[name] || fallback;
  refuseEdgeWhitespace(name, raw, "a URL");
  const parsed = parseHttpUrl(raw);
  if (!parsed) {
    // An unparsable value is echoed unless it may hold credentials (an `@` anywhere).
    const shown = raw.includes("@") ? "" : `=${JSON.stringify(raw)}`;
    throw new ConfigError(`${name}${shown}: expected an http(s) URL`);
  }
  if (parsed.username !== "" || parsed.password !== "") {
    throw new ConfigError(`${name}: a URL with user:password@ is refused (the value is not shown); credentials go in ${credentials_in}`);
  }
  if (/[?#]/.test(raw)) {
    throw new ConfigError(`${name}: expected a base URL without ?query or #fragment (the value is not shown), e.g. ${fallback}`);
  }
  return raw.replace(/\/+$/, "");
}

/**
 * A secret variable: unset or empty is "not set"; a value of only whitespace is refused, not
 * taken for a secret (a webhook secret of one space would let anyone sign webhooks). The value
 * is never shown.
 */
export function secret(env: Env, name: string): string | undefined {
  return unlessBlank(env, name, "the secret itself");
}

/** A variable's value; unset or empty is undefined, only whitespace is refused as not `expected`. */
function unlessBlank(env: Env, name: string, expected: string): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  if (raw.trim() === "") throw new ConfigError(`${name}: only whitespace; expected ${expected}, or leave it unset`);
  return raw;
}

/**
 * Refuses a value with whitespace before or after it: a URL parser trims it while the raw value
 * is used (` http://h/ ` sent every request to `/%20/…`), and a path keeps it, so ` /srv/bursar`
 * became the relative `./ /srv/bursar`. The value is not shown: it may be a URL with a password.
 */
export function refuseEdgeWhitespace(name: string, raw: string, expected: string): void {
  if (raw !== raw.trim()) throw new ConfigError(`${name}: begins or ends with whitespace (the value is not shown); expected ${expected} without it`);
}

/** A path variable: only whitespace is refused, not taken for a file or directory named " " in
 *  the working directory, and so is whitespace around a path (refuseEdgeWhitespace). */
function pathVariable(env: Env, name: string): string | undefined {
  const raw = unlessBlank(env, name, "a path");
  if (raw !== undefined) refuseEdgeWhitespace(name, raw, "a path");
  return raw;
}

/** Whether BURSAR_DB names PostgreSQL (a postgres:// or postgresql:// URL) rather than a SQLite file. */
export function isPostgresUrl(db: string): boolean {
  return /^postgres(ql)?:\/\//.test(db);
}

/** Visible ASCII, as any bearer token is: whitespace or a control character would not survive a header. */
export const token_shape = /^[\x21-\x7e]+$/;

/** The value of a postgres URL's query parameter that carries a secret, any case; `passfile` is a path, not one. */
const postgres_secret_parameter = /([?&](?:ssl)?password=)[^&#]*/gi;

/** BURSAR_DB as shown to a person: a postgres URL with its password masked (`***`), in `user:pass@` and in `?password=`. */
export function maskedDb(db: string): string {
  if (!isPostgresUrl(db)) return db;
  try {
    const shown = new URL(db);
    if (shown.password) shown.password = "***";
    // Replaced in the text, not through searchParams, which would re-encode every other parameter.
    return shown.toString().replace(postgres_secret_parameter, "$1***");
  } catch {
    return "postgres://…";
  }
}

/** What a failed connection to PostgreSQL carries: the server is down, unknown, refuses these credentials or this database. */
const postgres_unreachable_codes: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ECONNRESET",
  "28P01",
  "28000",
  "3D000",
]);

/**
 * A database that cannot be opened or reached, as a ConfigError of one line naming BURSAR_DB
 * (a postgres URL without its password): for `bursar serve` and the commands that open the
 * database themselves (`migrate`, `export`). Other errors pass through.
 */
export function databaseError(db: string, error: unknown): unknown {
  if (error instanceof ConfigError) return error;
  if (error instanceof ClockBehindLogError) return new ConfigError(`BURSAR_DB=${maskedDb(db)}: ${error.message}`);
  if (error instanceof SchemaNewerError) {
    return new ConfigError(
      `BURSAR_DB=${maskedDb(db)}: the database's schema is at version ${error.database_version}, newer than this bursar knows (version ${error.known_version}); run the bursar release that migrated it, or point BURSAR_DB at another database`,
    );
  }
  if (error instanceof WitnessError) return new ConfigError(error.message);
  if (error instanceof NoSchemaError || error instanceof DatabaseFileError || error instanceof LogRolledBackError) return new ConfigError(`BURSAR_DB=${maskedDb(db)}: ${error.message}`);
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  const code_text = typeof code === "string" ? code : "";
  if (isPostgresUrl(db)) {
    // A URL loadConfig let through but node-postgres cannot parse (its message says only "Invalid URL").
    if (code_text === "ERR_INVALID_URL" || error instanceof URIError) return new ConfigError(postgres_url_invalid);
    // A file the URL names (?sslrootcert=, ?sslcert=, ?sslkey=) that node-postgres cannot read: its message names the file.
    // (Opening or reading a file, ENOENT or EISDIR, a directory read having no path; not a
    // network error, whose syscall is connect, ECONNREFUSED or a unix socket's ENOENT.)
    const syscall = (error as { syscall?: unknown } | null)?.syscall;
    if (error instanceof Error && (syscall === "open" || syscall === "read")) return new ConfigError(`BURSAR_DB=${maskedDb(db)}: cannot read a file the URL names (${message})`);
    // Reached, but a lock wait or a statement ran out of time: not "cannot reach".
    if (code_text === "55P03") {
      return new ConfigError(
        `BURSAR_DB=${maskedDb(db)}: waited too long for a lock another session holds (another bursar migrating, or a transaction using a table a migration changes; ${message}); nothing was changed: run it again once that session has ended`,
      );
    }
    if (code_text === "57014") return new ConfigError(`BURSAR_DB=${maskedDb(db)}: PostgreSQL cancelled a statement that ran past its time limit (${message})`);
    if (!postgres_unreachable_codes.has(code_text) && !/timeout|connect|terminated/i.test(message)) return error;
    return new ConfigError(`BURSAR_DB=${maskedDb(db)}: cannot reach PostgreSQL (${message})`);
  }
  // Its write lock held past the busy timeout: another process on the file (a second serve, a
  // migrate, or one stopped with SIGSTOP while it held the lock). Refused, and nothing changed.
  if (/^SQLITE_(BUSY|LOCKED)/.test(code_text)) {
    return new ConfigError(
      `BURSAR_DB=${db}: the SQLite database is locked by another process (another bursar serve or migrate on it, or one stopped while writing; ${message}); nothing was changed: stop that process, or point BURSAR_DB elsewhere`,
    );
  }
  // A write the disk had no room for (a migration, the start's own entries, the WAL, an export's
  // checkpoint or SQLite's temporary files): nothing is wrong with the database, and once space
  // is freed the command goes on from it.
  if (code_text === "SQLITE_FULL") return new ConfigError(`BURSAR_DB=${db}: the disk is full (${message}); nothing was lost: free space on it and try again`);
  // A file SQLite opened but cannot read: damaged or cut short (CORRUPT and its extended codes).
  if (/^SQLITE_CORRUPT/.test(code_text)) return new ConfigError(`BURSAR_DB=${db}: cannot read the SQLite database (${message})`);
  // A read or a write the system failed (IOERR and its extended codes: IOERR_SHORT_READ, a write
  // or fsync refused, a full disk reported as an I/O error). Met by serve's PRAGMAs or a migration.
  if (/^SQLITE_IOERR/.test(code_text)) return new ConfigError(`BURSAR_DB=${db}: cannot read or write the SQLite database (${message}); check the disk (its space, its errors)`);
  const cannot_open = /^SQLITE_(CANTOPEN|READONLY|PERM|NOTADB|AUTH)/.test(code_text) || /directory does not exist/.test(message);
  return cannot_open ? new ConfigError(`BURSAR_DB=${db}: cannot open the SQLite database (${message})`) : error;
}

/** The one line for a postgres URL that cannot be parsed; it is not shown, since it may hold a password. */
const postgres_url_invalid =
  "BURSAR_DB: not a valid postgres:// URL (the value is not shown: it may hold a password); expected postgres://user:password@host:5432/database, with special characters in the password percent-encoded";

/**
 * Whether node-postgres can parse `db` as its connection string parser (pg-connection-string)
 * does: spaces and stray `%` encoded first, a retry with a stand-in host for `user@/database`,
 * then the user, password and database percent-decoded. What it cannot parse would otherwise
 * throw a bare "Invalid URL" stack at the first connection.
 */
function parsesAsPostgresUrl(db: string): boolean {
  const text = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(db) ? encodeURI(db).replace(/%25(\d\d)/g, "%$1") : db;
  for (const candidate of [text, text.replace("@/", "@___DUMMY___/")]) {
    try {
      const url = new URL(candidate, "postgres://base");
      decodeURIComponent(url.username);
      decodeURIComponent(url.password);
      decodeURI(url.pathname);
      return true;
    } catch {
      // The next candidate, as the parser retries.
    }
  }
  return false;
}

/** BURSAR_DB: a postgres:// (or postgresql://) URL, ":memory:", or a SQLite file path; any
 *  other scheme (mysql://, sqlite://, file://) would otherwise be taken for a file path. */
function database(env: Env, data_dir: string): string {
  const raw = unlessBlank(env, "BURSAR_DB", "a SQLite file path or a postgres:// URL") ?? join(data_dir, "bursar.db");
  refuseEdgeWhitespace("BURSAR_DB", raw, "a SQLite file path or a postgres:// URL");
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(raw)?.[1];
  if (scheme !== undefined && !/^postgres(ql)?$/.test(scheme)) {
    throw new ConfigError(`BURSAR_DB: scheme ${scheme}:// is not supported; expected a postgres:// URL or a SQLite file path`);
  }
  if (isPostgresUrl(raw) && !parsesAsPostgresUrl(raw)) throw new ConfigError(postgres_url_invalid);
  if (!isPostgresUrl(raw) && looksLikeUrl(raw)) throw new ConfigError(postgres_url_mistyped);
  return raw;
}

/**
 * Whether a BURSAR_DB that is not a postgres URL still looks like a URL: `://` anywhere, a
 * scheme of two or more letters then `:/` (`postgres:/u:pw@h/x`), or a postgres scheme then `:`.
 * Taken for a SQLite path, it would be created as a file and shown, password included, in every
 * error about it. (One letter then `:/` is a drive letter, not a scheme.)
 */
function looksLikeUrl(db: string): boolean {
  return db.includes("://") || /^[A-Za-z][A-Za-z0-9+.-]+:\//.test(db) || /^postgres(ql)?:/i.test(db);
}

/** The one line for a BURSAR_DB that looks like a URL but is not a postgres:// one; not shown, as it may hold a password. */
const postgres_url_mistyped =
  "BURSAR_DB: looks like a URL but is not a postgres:// URL (the value is not shown: it may hold a password); expected postgres://user:password@host:5432/database, or a SQLite file path";

/** An on/off variable: 1 or true is on, 0 is off, unset or empty is the default; nothing else
 *  (not yes, false or TRUE), and the message lists exactly that. */
function flag(env: Env, name: string, fallback = false): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (raw === "0") return false;
  if (raw === "1" || raw === "true") return true;
  throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected 1 or true (on), or 0 (off)`);
}

function razorpayChecks(config: Config): void {
  const { key_id, key_secret, webhook_secret } = config.razorpay;
  // Checked for the mounted simulator too: the docs refuse it whatever the provider.
  if (webhook_secret !== undefined && config.razorpay.webhook_secret_previous === webhook_secret) {
    throw new ConfigError("RAZORPAY_WEBHOOK_SECRET_PREVIOUS equals RAZORPAY_WEBHOOK_SECRET (the value is not shown): set it to the secret the rotation replaced, or leave it unset");
  }
  if (config.provider !== "razorpay") {
    // Razorpay keys with the default provider ran the built-in simulator, and the operator took its payments for real ones.
    const set = key_id !== undefined ? "RAZORPAY_KEY_ID" : key_secret !== undefined ? "RAZORPAY_KEY_SECRET" : undefined;
    if (set !== undefined) {
      throw new ConfigError(`${set} is set but BURSAR_PROVIDER is ${config.provider}: set BURSAR_PROVIDER=razorpay, or unset the RAZORPAY_KEY_* variables`);
    }
    return;
  }
  if (!key_id) throw new ConfigError("RAZORPAY_KEY_ID is required when BURSAR_PROVIDER=razorpay");
  if (!/^rzp_(test|live)_[A-Za-z0-9]+$/.test(key_id)) {
    throw new ConfigError("RAZORPAY_KEY_ID: expected a key id starting rzp_test_ (or rzp_live_)");
  }
  if (key_id.startsWith("rzp_live_") && !config.allow_live) {
    throw new ConfigError("RAZORPAY_KEY_ID is a live key (rzp_live_): refused unless BURSAR_ALLOW_LIVE=1");
  }
  if (!key_secret) throw new ConfigError("RAZORPAY_KEY_SECRET is required when BURSAR_PROVIDER=razorpay");
  if (!webhook_secret) throw new ConfigError("RAZORPAY_WEBHOOK_SECRET is required when BURSAR_PROVIDER=razorpay");
  // Razorpay keeps its orders and payments: holds and evidence that vanish at exit would leave
  // money the provider moved with no reservation to settle and no record of the decision.
  if (config.db === ":memory:") {
    throw new ConfigError("BURSAR_DB=:memory: is refused with BURSAR_PROVIDER=razorpay: Razorpay keeps its orders and payments, but the holds and evidence log would be lost when bursar exits; set BURSAR_DB to a file or a postgres:// URL");
  }
  // Every request carries the key secret (HTTP Basic): a live one goes over TLS, or stays on this machine.
  const base = new URL(config.razorpay.base_url);
  if (key_id.startsWith("rzp_live_") && base.protocol !== "https:" && !loopback_hosts.has(base.hostname)) {
    throw new ConfigError(`RAZORPAY_BASE_URL=${JSON.stringify(config.razorpay.base_url)}: a live key's secret is sent only over https (or to this machine)`);
  }
}

/** Host names (as URL.hostname gives them) that reach this machine only. */
export const loopback_hosts: ReadonlySet<string> = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** What a listen address must be, as BURSAR_HOST's and --host's refusals say it. */
export const listen_host_expected = "expected a host name or IP address to listen on, e.g. 127.0.0.1 or 0.0.0.0";

export function loadConfig(env: Env = process.env): Config {
  const data_dir = resolve(pathVariable(env, "BURSAR_DATA_DIR") ?? "./.bursar");
  const host = env.BURSAR_HOST || "127.0.0.1";
  // Checked as --host is, before anything is created: white space is in no host, and would fail only at listen.
  if (/\s/.test(host)) throw new ConfigError(`BURSAR_HOST=${JSON.stringify(host)}: ${listen_host_expected}`);
  const config: Config = {
    data_dir,
    db: database(env, data_dir),
    host,
    port: listenPort(env, "BURSAR_PORT", 8787),
    admin_token: secret(env, "BURSAR_ADMIN_TOKEN"),
    provider: oneOf(env, "BURSAR_PROVIDER", ["simulator", "razorpay"] as const, "simulator"),
    razorpay: {
      key_id: env.RAZORPAY_KEY_ID || undefined,
      key_secret: secret(env, "RAZORPAY_KEY_SECRET"),
      base_url: url(env, "RAZORPAY_BASE_URL", "https://api.razorpay.com", "RAZORPAY_KEY_ID and RAZORPAY_KEY_SECRET"),
      webhook_secret: secret(env, "RAZORPAY_WEBHOOK_SECRET"),
      webhook_secret_previous: secret(env, "RAZORPAY_WEBHOOK_SECRET_PREVIOUS"),
    },
    allow_live: flag(env, "BURSAR_ALLOW_LIVE"),
    clock_from_host: flag(env, "BURSAR_CLOCK_FROM_HOST"),
    pg_prepared_statements: flag(env, "BURSAR_PG_PREPARED_STATEMENTS", true),
    signing_key_path: pathVariable(env, "BURSAR_SIGNING_KEY"),
    master_key: secret(env, "BURSAR_MASTER_KEY"),
    log_origin: env.BURSAR_LOG_ORIGIN || "bursar.local/log",
    checkpoint_every: integer(env, "BURSAR_CHECKPOINT_EVERY", 1000, 1, 1_000_000),
    checkpoint_seconds: integer(env, "BURSAR_CHECKPOINT_SECONDS", 10, 1, 86_400),
    provider_timeout_ms: integer(env, "BURSAR_PROVIDER_TIMEOUT_MS", 10_000, 100, 120_000),
    lookups_per_minute: integer(env, "BURSAR_LOOKUPS_PER_MINUTE", lookups_per_minute_default, 0, lookups_per_minute_max),
    log_level: logLevel(env),
  };
  if (config.admin_token !== undefined && config.admin_token.length < 16) {
    throw new ConfigError("BURSAR_ADMIN_TOKEN: expected at least 16 characters");
  }
  // A bearer token is one run of visible ASCII: one with a space or other characters could be set but never sent.
  if (config.admin_token !== undefined && !token_shape.test(config.admin_token)) {
    throw new ConfigError("BURSAR_ADMIN_TOKEN: expected visible ASCII characters only (no spaces)");
  }
  if (config.master_key !== undefined && config.master_key.length < master_key_chars_min) {
    throw new ConfigError(`BURSAR_MASTER_KEY: expected at least ${master_key_chars_min} characters`);
  }
  if (/[\s+]/.test(config.log_origin)) {
    throw new ConfigError("BURSAR_LOG_ORIGIN: expected one line without spaces or '+' (it is also the key name)");
  }
  // Checkpoints and verify's answers show the origin: an invisible character makes one read as another.
  const hidden = nameCharacterProblem(config.log_origin);
  if (hidden) throw new ConfigError(`BURSAR_LOG_ORIGIN: ${hidden}; it is shown in every checkpoint and verify answer`);
  razorpayChecks(config);
  return config;
}

/** The documented variables, for `--help` texts. */
export const environment_help = `Environment:
  BURSAR_DATA_DIR            data directory (default ./.bursar): database, signing key, master key, operator token hash
  BURSAR_DB                  SQLite path (default $BURSAR_DATA_DIR/bursar.db) or a postgres:// URL; a value that looks like
                             another URL (postgres:/…, …://…) is refused without being shown
  BURSAR_PG_PREPARED_STATEMENTS  0 to send PostgreSQL statements unprepared (a pooler without prepared statements); default 1 (1 or true: prepared)
  BURSAR_HOST, BURSAR_PORT   listen address (default 127.0.0.1:8787)
  BURSAR_ADMIN_TOKEN         operator token; unset: generated when the data directory holds no token hash, printed once on stderr
  BURSAR_PROVIDER            simulator (default, mounted in-process) or razorpay
  RAZORPAY_KEY_ID, RAZORPAY_KEY_SECRET, RAZORPAY_BASE_URL (default https://api.razorpay.com; no user:password@, ?query, #fragment or whitespace around it);
                             the keys are refused unless BURSAR_PROVIDER=razorpay
  RAZORPAY_WEBHOOK_SECRET    required for razorpay; generated into the data directory for the simulator
  RAZORPAY_WEBHOOK_SECRET_PREVIOUS
                             razorpay only: the webhook secret a rotation replaced, also accepted
                             (Razorpay signs an event's retries, for 24 hours, with its first secret)
  BURSAR_ALLOW_LIVE          1 or true to accept rzp_live_ keys (0 or unset: refused)
  BURSAR_CLOCK_FROM_HOST     1 or true to start on the clock as it reads when the log's newest entry is over an hour later (unset: refused at start)
  BURSAR_SIGNING_KEY         Ed25519 private key PEM file, a regular file (default: generated into the data directory)
  BURSAR_MASTER_KEY          key for encrypting stored source secrets, at least 16 characters (default: generated into the data directory)
  BURSAR_LOG_ORIGIN          checkpoint origin line (default bursar.local/log)
  BURSAR_CHECKPOINT_EVERY    entries between checkpoints (default 1000)
  BURSAR_CHECKPOINT_SECONDS  seconds between checkpoints while entries are pending (default 10)
  BURSAR_PROVIDER_TIMEOUT_MS provider request timeout (default 10000); an in-flight call's lease is three times this
  BURSAR_LOOKUPS_PER_MINUTE  fetch_order, fetch_payment and fetch_order_payments calls that reach the provider, per agent per minute (default 60; 0: unlimited)
  BURSAR_LOG_LEVEL           log level: fatal, error, warn, info (default), debug, trace or silent
  BURSAR_URL                 the gate a client command talks to (agent, block, buyer, mcp-stdio; default http://127.0.0.1:8787)
  BURSAR_AGENT_TOKEN         the agent token for mcp-stdio and buyer
  BURSAR_LLM_BASE_URL, BURSAR_LLM_API_KEY, BURSAR_LLM_MODEL   for buyer --llm (any OpenAI-compatible endpoint)
  BURSAR_SOURCE_SIGNING_KEY  the evidence source's signing key for send-decisions (shown once when the source was created)
  BURSAR_BENCH_PG            the PostgreSQL URL for bench pg (else BURSAR_TEST_PG, else postgres://postgres@127.0.0.1:5432/test)`;
