// bursar buyer: an MCP buyer against any running gate — scripted (a fixed basket, or
// --overspend to meet every rule) or driven by a real model through an OpenAI-compatible API.

import { join } from "node:path";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { connect, refusedTokenStatus, type Connection } from "../../buyer/connect.js";
import { parseHttpUrl, refuseEdgeWhitespace, secret } from "../../config.js";
import { LlmCallError, runLlmBuyer } from "../../buyer/llm.js";
import { buyBasket, distinctRules, emptyReport, overspend, overspend_rules } from "../../buyer/scripted.js";
import { Story } from "../../buyer/story.js";
import { baseUrlOption, bearerToken, CommandError, parseFlags, println, queryRefusal, redacted, redactingStream, secretOption, UsageError, type CliIo } from "../command.js";
import { describeFailure, oneLine } from "./mcp-stdio.js";

export const help = `usage: bursar buyer --scripted [--overspend] [--url URL] [--token T] [--stdio]
       bursar buyer --llm [--task TEXT] [--url URL] [--token T] [--stdio]

An MCP buyer that spends through a running gate with an agent token.

  --scripted         buy a fixed basket (three items under the approval threshold, one above it)
  --overspend        with --scripted: then try to overspend in every way the rules name — per-call
                     cap (R5), another currency (R0), capture of a payment on none of its orders
                     (CALLER), a reused idempotency key (R7), the block cap (R1), a runaway loop
                     (R6) and, when an operator token is given, revocation mid-run (R4) — and
                     print each rule by name
  --llm              a real model proposes the purchases through tool calls; the gate decides.
                     Needs BURSAR_LLM_BASE_URL, BURSAR_LLM_API_KEY and BURSAR_LLM_MODEL (any
                     OpenAI-compatible chat-completions endpoint)
  --task TEXT        with --llm: the shopping task (default: a basket whose product page carries
                     an injected instruction)
  --url URL          the gate (default $BURSAR_URL or http://127.0.0.1:8787); a URL with
                     user:password@ is refused without being shown: the token goes in --token
  --token T          the agent token (default $BURSAR_AGENT_TOKEN)
  --operator-token T lets --overspend revoke the block mid-run (default $BURSAR_ADMIN_TOKEN)
  --stdio            speak MCP over stdio through 'bursar mcp-stdio' (given the agent token)
                     instead of HTTP

Exit codes: 0 done; 1 the gate could not be reached, or refused the agent token (one line
naming the URL), or with --llm a model call failed (one line naming BURSAR_LLM_BASE_URL and
the HTTP status or connection error); 2 bad arguments (a --url or BURSAR_URL with
user:password@ included; an agent token, --token or BURSAR_AGENT_TOKEN, or a BURSAR_LLM_API_KEY
of only whitespace, or holding a line break or control character, refused without being shown),
or BURSAR_LLM_BASE_URL is not an http(s) base URL (with ?query, #fragment or whitespace around
it: refused without being shown). A BURSAR_LLM_API_KEY of 8 characters or more is redacted from
what the endpoint says; a shorter one is taken for a placeholder and left as is.

Environment: BURSAR_URL, BURSAR_AGENT_TOKEN, BURSAR_ADMIN_TOKEN, BURSAR_LLM_BASE_URL,
BURSAR_LLM_API_KEY, BURSAR_LLM_MODEL.`;

const options = {
  scripted: { type: "boolean" },
  overspend: { type: "boolean" },
  llm: { type: "boolean" },
  task: { type: "string" },
  url: { type: "string" },
  token: { type: "string" },
  "operator-token": { type: "string" },
  stdio: { type: "boolean" },
} as const;

const llm_base_url_example = "https://api.openai.com/v1";

function llmSettings(io: CliIo): { base_url: string; api_key: string; model: string } {
  const base_url = io.env.BURSAR_LLM_BASE_URL;
  const api_key = secret(io.env, "BURSAR_LLM_API_KEY");
  const model = io.env.BURSAR_LLM_MODEL;
  const missing = [!base_url && "BURSAR_LLM_BASE_URL", !api_key && "BURSAR_LLM_API_KEY", !model && "BURSAR_LLM_MODEL"].filter(Boolean);
  if (missing.length > 0) {
    throw new UsageError(`--llm needs ${missing.join(", ")} (an OpenAI-compatible endpoint, e.g. https://api.openai.com/v1, its key and a model name)`);
  }
  // Sent as a header: a line break in it made the model client throw a stack quoting the header, key included.
  return { base_url: llmBaseUrl(base_url as string), api_key: bearerToken(api_key as string, "BURSAR_LLM_API_KEY", "API key"), model: model as string };
}

/**
 * BURSAR_LLM_BASE_URL must be an http(s) URL; anything else fails at the first model call with a
 * bare "Invalid URL". The client appends its path to it: after a ?query it landed inside the
 * query, and the URL (which a query may carry a key in) was repeated in every failure.
 */
function llmBaseUrl(raw: string): string {
  refuseEdgeWhitespace("BURSAR_LLM_BASE_URL", raw, "a URL");
  const query = queryRefusal(raw, "BURSAR_LLM_BASE_URL", llm_base_url_example);
  if (query !== undefined) throw new CommandError(query);
  const url = parseHttpUrl(raw);
  // One with an @ may hold credentials: not shown, as httpUrl does for the other URLs.
  if (!url) throw new CommandError(`BURSAR_LLM_BASE_URL${raw.includes("@") ? " (the value is not shown)" : ` ${JSON.stringify(raw)}`}: expected an http(s) URL, e.g. ${llm_base_url_example}`);
  // Not echoed: they are credentials. fetch refuses such a URL, and the key has its own variable.
  if (url.username !== "" || url.password !== "") throw new CommandError("BURSAR_LLM_BASE_URL: a URL with user:password@ is not supported; put the key in BURSAR_LLM_API_KEY");
  return raw;
}

/** The system's short reason (ECONNREFUSED, ENOTFOUND) or the first line of the message. */
function reason(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const text = cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
  return text.split("\n")[0] ?? text;
}

/**
 * The line saying which rules an --overspend run did not meet, and why; undefined when it met
 * them all. Each attempt is refused by the first rule it breaks: an agent whose earlier calls
 * still fill its velocity window (R6), or whose block is spent (R1) or revoked (R4), has its
 * attempts refused by that rule instead of the one each aims at.
 */
function unreached(rules: readonly string[], with_operator: boolean): string | undefined {
  const expected: string[] = [...overspend_rules, ...(with_operator ? ["R4"] : [])].sort();
  const missed = expected.filter((rule) => !rules.includes(rule));
  if (missed.length === 0) return undefined;
  const why = rules.some((rule) => rule === "R6" || rule === "R4" || rule === "R1")
    ? "their attempts were refused by another rule first (see above): this agent's earlier calls still count in its velocity window (R6), or its block was spent (R1) or revoked (R4)"
    : "their attempts got another answer (see above)";
  const without_operator = with_operator ? "" : "; R4 needs --operator-token";
  return `not reached: ${missed.join(", ")} (${why}); for every rule, run it with a fresh agent and block${without_operator}`;
}

/** What the gate answered a refused token with, in \`bursar mcp-stdio\`'s words (over stdio, the bridge's own). */
function tokenRefusal(error: unknown, url: string): string {
  if (error instanceof McpError) return error.message.replace(/^MCP error -?\d+: /, "");
  return describeFailure(error, new URL(`${url}/mcp`)).message;
}

function isNetworkFailure(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } }).cause;
  return (error instanceof TypeError && error.message === "fetch failed") || typeof cause?.code === "string";
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const values = parseFlags(argv, options);
  if (values.scripted === values.llm) throw new UsageError("choose one of --scripted or --llm");
  if (values.overspend && !values.scripted) throw new UsageError("--overspend goes with --scripted");
  // The scripted buyer has no task to take: ignored, the option read as if it had been used.
  if (values.task !== undefined && !values.llm) throw new UsageError("--task goes with --llm");
  const llm = values.llm ? llmSettings(io) : undefined;
  const given = secretOption(values.token, "--token", "agent token") ?? secret(io.env, "BURSAR_AGENT_TOKEN");
  if (!given) throw new UsageError("an agent token is required: --token T or BURSAR_AGENT_TOKEN");
  const token = bearerToken(given, values.token ? "--token" : "BURSAR_AGENT_TOKEN", "agent token");
  const operator_given = values["operator-token"] ?? io.env.BURSAR_ADMIN_TOKEN;
  const operator_token = values.overspend && operator_given ? bearerToken(operator_given, values["operator-token"] ? "--operator-token" : "BURSAR_ADMIN_TOKEN", "operator token") : undefined;
  const url = baseUrlOption(values.url ?? (io.env.BURSAR_URL || "http://127.0.0.1:8787"), "BURSAR_AGENT_TOKEN (or --token)");
  const bin = join(import.meta.dirname, "..", "bin.js");
  const connection: Connection = values.stdio ? { kind: "stdio", url, token, bin } : { kind: "http", url, token };
  // Whatever the gate (or a server posing as one) answers may quote the tokens sent to it.
  const out = redactingStream(io.stdout, [token, operator_token]);
  const err = redactingStream(io.stderr, [token, operator_token]);
  const story = new Story({ out, interactive: io.interactive });
  let client: Awaited<ReturnType<typeof connect>>;
  try {
    client = await connect(connection, err);
  } catch (error) {
    // The gate answered but refused the token: say so, in `bursar mcp-stdio`'s words, rather
    // than suggest it is not running.
    if (refusedTokenStatus(error) !== undefined) {
      println(err, `bursar buyer: ${oneLine(tokenRefusal(error, url))}; the agent token (${values.token ? "--token" : "BURSAR_AGENT_TOKEN"}) was refused`);
      return 1;
    }
    println(err, `bursar buyer: cannot connect to the gate at ${url}/mcp (${oneLine(reason(error))}); is \`bursar serve\` running? (set BURSAR_URL or --url)`);
    return 1;
  }
  try {
    if (llm) {
      const report = await runLlmBuyer(client, { ...llm, story, ...(values.task ? { task: values.task } : {}) });
      println(out, `${report.tool_calls} tool calls, ${report.refusals.length} refused (${[...new Set(report.refusals.map((refusal) => refusal.rule))].join(", ") || "none"})`);
      return 0;
    }
    const report = await buyBasket(client, { story }, emptyReport());
    if (values.overspend) {
      await overspend(client, { story, ...(operator_token ? { operator: { url, token: operator_token } } : {}) }, report);
    }
    const rules = distinctRules(report);
    println(out, `${report.allowed} allowed, ${report.held.length} held, ${report.refusals.length} refused; rules: ${rules.join(", ") || "none"}`);
    if (values.overspend) {
      const missed = unreached(rules, operator_token !== undefined);
      if (missed !== undefined) println(out, missed);
    }
    return 0;
  } catch (error) {
    if (error instanceof LlmCallError && llm) {
      const key_hint = error.status === 401 || error.status === 403 ? "; check BURSAR_LLM_API_KEY" : "";
      // The endpoint's own words are quoted: escaped onto one line, and without the key.
      const line = `the model endpoint BURSAR_LLM_BASE_URL (${llm.base_url}) ${error.message}${key_hint}`;
      println(err, `bursar buyer: ${oneLine(redacted(line, [llm.api_key]))}`);
      return 1;
    }
    // The gate went away mid-run: one line, as for a failed connect. Anything else is a bug.
    if (!isNetworkFailure(error)) throw error;
    println(err, `bursar buyer: lost the gate at ${url}/mcp (${reason(error)})`);
    return 1;
  } finally {
    await client.close().catch(() => undefined);
  }
}
