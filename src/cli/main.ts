// `bursar <command>`: a thin dispatcher; each command lives in ./commands/<name>.ts.

import { fileURLToPath } from "node:url";
import type { CliIo, CommandModule } from "./command.js";
import { UsageError } from "./command.js";
import { version } from "../version.js";

export const commands: ReadonlyArray<{ name: string; summary: string }> = [
  { name: "serve", summary: "run the gate, operator API, evidence log and (by default) the mounted simulator" },
  { name: "demo", summary: "one-command tour: simulator + gate + scripted buyer on a temporary database" },
  { name: "buyer", summary: "an MCP buyer: --scripted [--overspend] or --llm" },
  { name: "simulator", summary: "run the Razorpay-compatible simulator standalone" },
  { name: "mcp-stdio", summary: "bridge stdio MCP to a running gate's /mcp with BURSAR_AGENT_TOKEN" },
  { name: "agent", summary: "agent create --name NAME | disable ID: issue an agent token, or stop one for good" },
  { name: "block", summary: "block create | show | revoke | unfreeze: manage spending blocks" },
  { name: "admin", summary: "admin rotate: issue a new operator token" },
  { name: "key", summary: "print the evidence log's public verifier key" },
  { name: "migrate", summary: "apply database migrations and exit" },
  { name: "send-decisions", summary: "sign and post a .jsonl file of decision records to a source" },
  { name: "export", summary: "the evidence log as JSONL with receipts and checkpoints (--from URL: read from a server)" },
  { name: "verify", summary: "verify an exported log offline against a checkpoint and verifier key" },
  { name: "eval", summary: "run the labelled adversarial cases and write ./eval/report.md" },
  { name: "mutate", summary: "remove each guard in turn and show which cases catch it" },
  { name: "bench", summary: "bench NAME: run one benchmark (ledger, evidence, gate, pg, ingest, observer)" },
];

function usage(): string {
  const width = Math.max(...commands.map((command) => command.name.length));
  const lines = commands.map((command) => `  ${command.name.padEnd(width)}  ${command.summary}`);
  return [
    "usage: bursar <command> [options]",
    "",
    "commands:",
    ...lines,
    "",
    "options:",
    "  --help, -h  this list (also: bursar help)",
    "  --version   print bursar's version",
    "",
    "Run `bursar <command> --help` for a command's options and environment variables.",
    "Each option is given at most once (twice is a usage error, exit 2).",
    "Configuration is read from BURSAR_* environment variables; see docs/configuration.md.",
  ].join("\n");
}

async function load(name: string): Promise<CommandModule | undefined> {
  if (!commands.some((command) => command.name === name)) return undefined;
  try {
    return (await import(`./commands/${name}.js`)) as CommandModule;
  } catch (error) {
    if (isMissingModule(error, new URL(`./commands/${name}.js`, import.meta.url))) return undefined;
    throw error;
  }
}

/**
 * Whether `error` says the module at `url` itself is missing, not a package or file it imports
 * (whose error names the command's file too, as the importer: a broken install is reported as
 * what it is, not as an unknown command).
 */
export function isMissingModule(error: unknown, url: URL): boolean {
  return (error as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND" && String((error as Error).message).startsWith(`Cannot find module '${fileURLToPath(url)}'`);
}

/** A usage error of bursar itself (no command, or what a top-level word cannot take): exit 2. */
function refuse(io: CliIo, message: string): number {
  io.stderr.write(`bursar: ${message}\n\n${usage()}\n`);
  return 2;
}

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  // `bursar help serve` is `bursar serve --help`.
  if (name === "help" && rest.length > 0) {
    if (rest.length > 1) return refuse(io, `help takes one command name, not ${rest.length} words`);
    if (rest[0]?.startsWith("-")) return refuse(io, `help takes a command name, not an option (given ${JSON.stringify(rest[0])})`);
    return main([rest[0] as string, "--help"], io);
  }
  // Asked for nothing: the list, as an error on stderr (a script that forgot its command sees why).
  if (!name) return refuse(io, "no command given");
  if (name === "--help" || name === "-h" || name === "help") {
    if (rest.length > 0) return refuse(io, `${name} takes no arguments (given ${JSON.stringify(rest[0])})`);
    io.stdout.write(`${usage()}\n`);
    return 0;
  }
  if (name === "--version") {
    if (rest.length > 0) return refuse(io, `--version takes no arguments (given ${JSON.stringify(rest[0])})`);
    io.stdout.write(`bursar ${version}\n`);
    return 0;
  }
  const command = await load(name);
  if (!command) {
    io.stderr.write(`bursar: unknown or unavailable command '${name}'\n\n${usage()}\n`);
    return 2;
  }
  // Only options ask for help: after `--` every word is an argument (a file named --help, say).
  const options = rest.includes("--") ? rest.slice(0, rest.indexOf("--")) : rest;
  if (options.includes("--help") || options.includes("-h")) {
    io.stdout.write(`${command.help.trim()}\n`);
    return 0;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof UsageError || (error instanceof Error && error.name === "UsageError")) {
      io.stderr.write(`bursar ${name}: ${error.message}\n(see bursar ${name} --help)\n`);
      return 2;
    }
    if (error instanceof Error && (error.name === "ConfigError" || error.name === "CommandError")) {
      io.stderr.write(`bursar ${name}: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}
