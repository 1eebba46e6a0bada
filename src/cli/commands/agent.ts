// `bursar agent create --name NAME`: issues an agent token through a running server's operator
// API. Also home of the small operator-API client that `bursar block` shares.

import { visibleText } from "../../policy/arguments.js";
import { token_shape } from "../../config.js";
import { agent_name_length_max } from "../../policy/limits.js";
import { baseUrl, bearerToken, parseOptions, println, redacted, UsageError, type CliIo } from "../command.js";

export const server_url_default = "http://127.0.0.1:8787";
/** Operator calls are single-row writes; a server that takes longer than this is not answering. */
export const operator_request_timeout_ms = 30_000;

/** Options every operator-API command takes, for parseOptions and --help. */
export const operator_options = {
  url: { type: "string" },
  token: { type: "string" },
} as const;

export const operator_help = `  --url URL     the server's base URL (default: BURSAR_URL, else ${server_url_default}); a URL
                with user:password@ is refused (exit 2) without being shown
  --token TOKEN the operator token (default: BURSAR_ADMIN_TOKEN); visible to other local
                users in the process list, so prefer the variable`;

export const operator_environment_help = `Environment:
  BURSAR_URL           the server's base URL (default ${server_url_default})
  BURSAR_ADMIN_TOKEN   the operator token printed by the first \`bursar serve\` or \`bursar admin rotate\``;

export const agent_options = { name: { type: "string" }, ...operator_options } as const;

export interface OperatorTarget {
  base_url: string;
  token: string;
}

export function operatorTarget(values: { url?: string | undefined; token?: string | undefined }, env: NodeJS.ProcessEnv): OperatorTarget {
  const raw = values.url ?? (env.BURSAR_URL || server_url_default);
  const url = baseUrl(raw, "--url/BURSAR_URL", "BURSAR_ADMIN_TOKEN (or --token)");
  const given = values.token ?? env.BURSAR_ADMIN_TOKEN;
  if (!given) throw new UsageError("no operator token: set BURSAR_ADMIN_TOKEN or pass --token");
  const token = bearerToken(given, values.token ? "--token" : "BURSAR_ADMIN_TOKEN", "operator token");
  return { base_url: url.href.replace(/\/+$/, ""), token };
}

/** A failed operator call, with the server's own error message when it sent one. */
export class OperatorApiError extends Error {
  override name = "OperatorApiError";
}

/** The server's error answer as one line, without the operator token it may quote back (`got auth Bearer …`). */
function serverError(status: number, text: string, token: string): OperatorApiError {
  // Redacted before serverErrorText cuts it short too: a token cut in two would no longer be found.
  return new OperatorApiError(redacted(serverErrorText(status, redacted(text, [token])), [token]));
}

function serverErrorText(status: number, text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: string; message?: string; details?: unknown } };
    if (parsed.error?.message) {
      const details = parsed.error.details === undefined ? "" : ` ${JSON.stringify(parsed.error.details)}`;
      return visibleText(`HTTP ${status} ${parsed.error.code ?? "error"}: ${parsed.error.message}${details}`);
    }
  } catch {
    // not JSON: fall through and show the raw text
  }
  // On one line, with control and invisible characters as escapes: printed as sent, the answer
  // of whatever server --url reaches could move the cursor or reorder the line.
  return visibleText(`HTTP ${status}: ${text.slice(0, 500) || "(empty body)"}`);
}

/** Calls the operator API; resolves to the parsed JSON body, or throws OperatorApiError. */
export async function operatorRequest(target: OperatorTarget, method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
  const url = `${target.base_url}${path}`;
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${target.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(operator_request_timeout_ms),
    });
  } catch (error) {
    const cause_of = (error as { cause?: { code?: string; message?: string } }).cause;
    const cause = cause_of?.code ?? cause_of?.message ?? (error as Error).message;
    throw new OperatorApiError(redacted(`cannot reach ${target.base_url} (${cause}); is \`bursar serve\` running? (set BURSAR_URL or --url)`, [target.token]));
  }
  const text = await response.text();
  if (!response.ok) throw serverError(response.status, text, target.token);
  return text ? (JSON.parse(text) as unknown) : {};
}

/**
 * Runs one operator call for a command: prints the JSON result, or the server's error (exit 1);
 * neither with the operator token (`target.token`) in it, should the server quote it back.
 */
export async function printOperatorCall(io: CliIo, command: string, target: OperatorTarget, call: () => Promise<unknown>): Promise<{ result: unknown } | undefined> {
  try {
    const result = await call();
    println(io.stdout, redacted(JSON.stringify(result, null, 2), [target.token]));
    return { result };
  } catch (error) {
    if (!(error instanceof OperatorApiError)) throw error;
    println(io.stderr, `bursar ${command}: ${error.message}`);
    return undefined;
  }
}

export const help = `usage: bursar agent create --name NAME [--url URL] [--token TOKEN]
       bursar agent disable ID [--url URL] [--token TOKEN]

create issues an agent through a running server's operator API (POST /api/v1/agents) and prints
the JSON result {agent_id, name, token} on stdout. The token is shown once: only its hash
is stored. On stderr it also prints an export line for BURSAR_AGENT_TOKEN and an MCP client
configuration for \`bursar mcp-stdio\`. An agent can spend nothing until it has a block:
\`bursar block create --agent <agent_id> --currency INR ...\`.

disable (POST /api/v1/agents/ID/disable) stops the agent's token for good: its calls are
refused before they reach the ledger or the log (401 at /mcp), on other instances sharing the
database within 5 s. Its calls waiting for approval can no longer be approved; its block is
left as it is: revoke it too to release what it holds.
Prints {agent_id, name, disabled_at}; disabling again changes nothing.

Exit codes: 0 created or disabled; 1 the server refused (its error message is printed) or is unreachable;
2 bad arguments or no operator token.

Options:
  --name NAME   the agent's label (1 to ${agent_name_length_max} characters)
${operator_help}

${operator_environment_help}`;

function printHints(io: CliIo, base_url: string, agent: { agent_id: string; token: string }): void {
  const token = agent.token;
  const config = { mcpServers: { bursar: { command: "bursar", args: ["mcp-stdio"], env: { BURSAR_URL: base_url, BURSAR_AGENT_TOKEN: token } } } };
  println(io.stderr, "");
  println(io.stderr, "The agent token is shown once. For the agent's shell:");
  println(io.stderr, `  export BURSAR_AGENT_TOKEN=${token}`);
  println(io.stderr, "");
  println(io.stderr, "MCP client configuration (e.g. Claude Desktop's claude_desktop_config.json):");
  println(io.stderr, JSON.stringify(config, null, 2).replace(/^/gm, "  "));
  println(io.stderr, "");
  println(io.stderr, `Next: bursar block create --agent ${agent.agent_id} --currency INR --reserved 1000000`);
}

/**
 * The server's answer to agent create, refused unless it holds an agent_id and a token: an
 * answer without (a server that is not Bursar's at --url) printed `export BURSAR_AGENT_TOKEN=undefined`.
 */
function createdAgent(result: unknown): { agent_id: string; token: string } {
  const agent = result as { agent_id?: unknown; token?: unknown } | null;
  const has_id = typeof agent?.agent_id === "string" && agent.agent_id !== "";
  if (!has_id || typeof agent.token !== "string" || !token_shape.test(agent.token)) {
    throw new OperatorApiError("the server answered without an agent_id and an agent token (is --url/BURSAR_URL a Bursar server?); no agent to show");
  }
  return agent as { agent_id: string; token: string };
}

async function disable(rest: string[], values: { name?: string | undefined; url?: string | undefined; token?: string | undefined }, io: CliIo): Promise<number> {
  const [id, ...extra] = rest;
  if (!id) throw new UsageError("expected: agent disable ID");
  if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
  if (values.name !== undefined) throw new UsageError("--name applies to agent create, not agent disable");
  const target = operatorTarget(values, io.env);
  const disabled = await printOperatorCall(io, "agent disable", target, () => operatorRequest(target, "POST", `/api/v1/agents/${encodeURIComponent(id)}/disable`));
  return disabled === undefined ? 1 : 0;
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseOptions(argv, agent_options);
  const [action, ...extra] = positionals;
  if (action === "disable") return disable(extra, values, io);
  if (action !== "create") {
    throw new UsageError(action === undefined ? "expected: agent create --name NAME, or agent disable ID" : `unknown action ${JSON.stringify(action)} (expected create or disable)`);
  }
  if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
  const name = values.name;
  if (!name) throw new UsageError(`--name is required (1 to ${agent_name_length_max} characters)`);
  if (name.length > agent_name_length_max) throw new UsageError(`--name: ${name.length} characters; at most ${agent_name_length_max}`);
  const target = operatorTarget(values, io.env);
  const created = await printOperatorCall(io, "agent create", target, async () => createdAgent(await operatorRequest(target, "POST", "/api/v1/agents", { name })));
  if (created === undefined) return 1;
  printHints(io, target.base_url, created.result as { agent_id: string; token: string });
  return 0;
}
