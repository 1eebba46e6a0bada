// What every `bursar <command>` module exports, and small helpers they share.

import { accessSync, constants as fs_constants } from "node:fs";
import { constants } from "node:os";
import { Writable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { makeDirectories } from "../datadir.js";
import { redacted } from "../redact-tokens.js";
import { ConfigError, fileError, listen_host_expected, parseHttpUrl, refuseEdgeWhitespace, token_shape } from "../config.js";

// Redaction lives in src/redact-tokens.ts: the library's LLM buyer redacts its key the same way.
export { redacted, redacted_token_chars_min, redaction } from "../redact-tokens.js";

export interface CliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  /** True when stdout is a terminal and not under CI: the demo's and buyer's colour and pacing only then. */
  interactive: boolean;
  /** True when stderr is a terminal and not under CI: progress redrawn in place there only then
   *  (progress goes to stderr; with it a file, a bar's carriage returns would fill the file). */
  stderr_interactive: boolean;
}

export interface CommandModule {
  /** Full `--help` text: usage, every option, the environment variables it reads. */
  help: string;
  /** Returns the exit code. Throw `UsageError` for bad arguments. */
  run(argv: string[], io: CliIo): Promise<number>;
}

export class UsageError extends Error {
  override name = "UsageError";
}

/** An operating error the command reports as one line on stderr, exit 2, without a usage hint
 *  (an output the command refuses to write). */
export class CommandError extends Error {
  override name = "CommandError";
}

/** Runs `use`, turning its file system errors into one line naming `subject` (config.ts fileError, as `bursar serve` reports them). */
export function usingPath<T>(subject: string, use: () => T): T {
  try {
    return use();
  } catch (error) {
    throw fileError(error, subject);
  }
}

/** Makes an --out DIR (parents too) and checks it can be written into, before a long run writes there. */
export function outputDirectory(out: string): string {
  usingPath(`--out ${out}`, () => {
    makeDirectories(out);
    accessSync(out, fs_constants.W_OK);
  });
  return out;
}

/** Runs an argument parse (node:util parseArgs) and turns its errors into UsageError, so
 *  the message names the option and the command exits 2. */
function parsing<T>(parse: () => T, positionals: boolean): T {
  try {
    return parse();
  } catch (error) {
    const message = (error as Error).message;
    // parseArgs' own words leave a quote unclosed here ("… as in '-- "--out"").
    const unknown = (error as { code?: unknown }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? /'([^']+)'/.exec(message)?.[1] : undefined;
    if (unknown !== undefined) {
      const after = positionals ? `; an argument starting with "-" goes after "--" (as in -- ${unknown})` : "";
      throw new UsageError(`unknown option ${unknown}${after}`);
    }
    // parseArgs writes some messages over three lines ("--reserved -5": "… argument is ambiguous.\n…"): a usage error is one.
    throw new UsageError(message.replace(/\s*\n\s*/g, " "));
  }
}

type OptionsConfig = NonNullable<ParseArgsConfig["options"]>;

/** A value that reads as a negative number: `-5`, `-1.5`. */
const negative_number = /^-\d+(\.\d*)?$/;

/**
 * `--reserved -5` as `--reserved=-5`: parseArgs refuses a value starting with "-" unless it is
 * joined ("argument is ambiguous"), so the option never got to say its range, as it does for
 * `--reserved=-5`. Only a long string option's next argument that reads as a negative number is
 * joined, and nothing after a `--`.
 */
function negativeValuesJoined(args: readonly string[], options: OptionsConfig): string[] {
  const joined: string[] = [];
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    if (arg === "--") return [...joined, ...args.slice(index)];
    const next = args[index + 1];
    const name = arg.startsWith("--") && !arg.includes("=") ? arg.slice(2) : undefined;
    const takes_value = name !== undefined && Object.hasOwn(options, name) && options[name]?.type === "string";
    if (takes_value && next !== undefined && negative_number.test(next)) {
      joined.push(`${arg}=${next}`);
      index++;
    } else {
      joined.push(arg);
    }
  }
  return joined;
}
type Parsed<T extends OptionsConfig> = ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: true; strict: true }>>;

/**
 * parseArgs in strict mode, its errors turned into UsageError, and an option given twice refused:
 * parseArgs keeps the last value, so `block create --reserved 100 … --reserved 100000` would pass unnoticed.
 */
export function parseStrict<const C extends ParseArgsConfig & { args: string[]; strict: true }>(config: C, takes_positionals = config.allowPositionals === true): ReturnType<typeof parseArgs<C>> {
  const args = negativeValuesJoined(config.args, config.options ?? {});
  const parsed = parsing(() => parseArgs({ ...config, args, tokens: true }), takes_positionals);
  const given = new Map<string, string>();
  for (const token of parsed.tokens ?? []) {
    if (token.kind !== "option" || config.options?.[token.name]?.multiple) continue;
    const earlier = given.get(token.name);
    if (earlier !== undefined) {
      const as = earlier === token.rawName ? "" : ` (as ${earlier} and ${token.rawName})`;
      throw new UsageError(`option --${token.name} is given twice${as}; give it once`);
    }
    given.set(token.name, token.rawName);
  }
  return parsed as ReturnType<typeof parseArgs<C>>;
}

/** parseArgs in strict mode with errors turned into UsageError, each option at most once. */
export function parseOptions<const T extends OptionsConfig>(argv: string[], options: T): Parsed<T> {
  return parseStrict({ args: argv, options, allowPositionals: true, strict: true });
}

/** The options of a command that takes no positional arguments: one given is a usage error, not ignored. */
export function parseFlags<const T extends OptionsConfig>(argv: string[], options: T): Parsed<T>["values"] {
  const { values, positionals } = parseStrict({ args: argv, options, allowPositionals: true, strict: true }, false);
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  return values;
}

/** "1 record", "2 records". */
export const counted = (count: number, one: string, many: string): string => `${count} ${count === 1 ? one : many}`;

export function println(stream: NodeJS.WritableStream, line = ""): void {
  stream.write(`${line}\n`);
}

/** The shell's status for a process ended by `signal`: 128 + its number (130 for SIGINT, 143 for SIGTERM). */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/**
 * `raw` as an http(s) URL, or a usage error naming `name` (its option or variable), with an
 * example when given. A URL with `user:password@` is refused, as config.ts refuses it for
 * RAZORPAY_BASE_URL: fetch fails on one with a message that repeats the URL, password included,
 * to stderr. Neither that refusal nor that of an unparsable value with an `@` (which may hold
 * credentials) shows the value; `credentials_in` says where the command takes its secret instead.
 * Whitespace around it is refused (config.ts refuseEdgeWhitespace): the parser trims it, the raw
 * value would not be.
 */
export function httpUrl(raw: string, name: string, { example, credentials_in }: { example?: string; credentials_in: string }): URL {
  refuseEdgeWhitespace(name, raw, "a URL");
  const url = parseHttpUrl(raw);
  if (!url) {
    const shown = raw.includes("@") ? " (the value is not shown)" : ` ${JSON.stringify(raw)}`;
    throw new UsageError(`${name}${shown}: expected an http(s) URL${example ? `, e.g. ${example}` : ""}`);
  }
  if (url.username !== "" || url.password !== "") {
    throw new UsageError(`${name}: a URL with user:password@ is refused (the value is not shown); credentials go in ${credentials_in}`);
  }
  return url;
}

/**
 * A server's base URL (`name` says where it came from), without trailing slashes; a usage error
 * unless http(s) without credentials, query or fragment: the command appends its own path, which
 * would land in them. The value is not shown (a query can carry a token).
 */
export function baseUrl(raw: string, name: string, credentials_in: string, example?: string): URL {
  const url = httpUrl(raw, name, example === undefined ? { credentials_in } : { example, credentials_in });
  const query = queryRefusal(raw, name, example);
  if (query !== undefined) throw new UsageError(query);
  return url;
}

/** Why `raw`, a base URL named `name`, cannot be one: it has a query or fragment (see baseUrl); undefined when it has neither. */
export function queryRefusal(raw: string, name: string, example = base_url_example): string | undefined {
  return /[?#]/.test(raw) ? `${name}: a base URL has no query (?…) or fragment (#…) (the value is not shown), e.g. ${example}` : undefined;
}

const base_url_example = "http://127.0.0.1:8787";

/** A command's --url (a server's base URL, see baseUrl), without trailing slashes. */
export function baseUrlOption(raw: string, credentials_in: string): string {
  baseUrl(raw, "--url", credentials_in, base_url_example);
  return raw.replace(/\/+$/, "");
}

/**
 * A secret given as an option (`--token`, `--webhook-secret`): one of only whitespace is refused,
 * as config.ts `secret` refuses such a variable, without being shown. An empty one is returned
 * as given: the command refuses it as missing.
 */
export function secretOption(raw: string | undefined, name: string, what: string): string | undefined {
  if (raw !== undefined && raw !== "" && raw.trim() === "") throw new UsageError(`${name}: only whitespace; expected the ${what} itself`);
  return raw;
}

/**
 * A bearer token as given (`name` says where from: `--token`, `BURSAR_AGENT_TOKEN`), refused
 * unless it is one run of visible ASCII: a line break or space in it (a file with CRLF endings,
 * a two-line paste) makes a header fetch refuses, and fetch's message quotes the whole header,
 * token included, into what would be printed.
 */
export function bearerToken(token: string, name: string, what: string): string {
  if (!token_shape.test(token)) throw new ConfigError(`${name} holds whitespace or a control character (a pasted line break?): set it to the ${what} alone`);
  return token;
}

/**
 * `out` with `tokens` redacted from every write (see redacted), for a command that prints what
 * a server said in many places. Each write passes on at once (the callback is called in the
 * same turn), so lines written here and straight to `out` keep their order. Tokens are one run
 * of visible ASCII and every writer here writes whole lines, so none is split between writes.
 */
export function redactingStream(out: NodeJS.WritableStream, tokens: ReadonlyArray<string | undefined>): NodeJS.WritableStream {
  // Bytes piped in (a child's stderr) arrive as the pipe reads them: a character split between reads is joined.
  const decoder = new StringDecoder("utf8");
  return new Writable({
    decodeStrings: false,
    write(chunk: unknown, _encoding, done) {
      out.write(redacted(typeof chunk === "string" ? chunk : decoder.write(chunk as Buffer), tokens));
      done();
    },
    final(done) {
      const rest = decoder.end();
      if (rest) out.write(redacted(rest, tokens));
      done();
    },
  });
}

/**
 * A listen address given as an option (`bursar serve --host`, `bursar simulator --host`): an
 * empty or blank value is an error, never the default address and never every interface (an
 * empty host makes Node listen on all of them).
 */
export function listenHost(raw: string): string {
  if (raw === "" || /\s/.test(raw)) throw new UsageError(`--host ${JSON.stringify(raw)}: ${listen_host_expected}`);
  return raw;
}
