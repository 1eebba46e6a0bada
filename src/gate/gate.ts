// The gate: one entry point for every tool call an agent makes, by token or by agent id.
// Money tools go through the policy and the ledger; read tools only read.

import { canonicalJson, representable } from "../evidence/canonical.js";
import { sentKey, type Ledger } from "../ledger/index.js";
import { argument_values_max, holdsMoreValues, isPlainObject, unread_arguments } from "../policy/index.js";
import type { Provider } from "../provider/port.js";
import type { GateContext, WorkInFlight } from "./context.js";
import type { LookupBudget } from "./lookups.js";
import type { GateObserver } from "./observer.js";
import { capturePayment, createOrder } from "./money.js";
import { fetchOrder, fetchOrderPayments, fetchPayment, getApproval, getBlock } from "./read-tools.js";
import { readError, refusal, type ToolResult } from "./results.js";

/** The name a call whose name holds more values than arguments may is decided under, unread. */
export const unread_tool_name = `[name not read: more than ${argument_values_max} values]`;

/**
 * The name a call is decided and recorded under. A call without a string name names no tool, so
 * it is no money tool: it is decided under the name's JSON text (`5`, `null`, `["create_order"]`;
 * "" when there is none), which no declared tool has, so ALLOWLIST refuses it with an evidence
 * entry showing what was sent, and it counts toward R6 like every call that reaches the policy.
 * A name holding more values than arguments may is not read, as such arguments are not: written
 * out, a name of 90,000 members took ~0.3 s of the one thread.
 */
function toolName(name: unknown): string {
  if (typeof name === "string") return name;
  if (name === undefined) return "";
  return holdsMoreValues(name) ? unread_tool_name : canonicalJson(representable(name));
}

export class Gate {
  private readonly context: GateContext;

  /** `work`: shared with whatever else settles through the ledger (the embedded simulator's webhooks). */
  constructor(ledger: Ledger, provider: Provider, observer: GateObserver | undefined, lookups: LookupBudget, work: WorkInFlight) {
    this.context = { ledger, provider, lookups, undecided_captures: new Map(), work, ...(observer ? { observer } : {}) };
  }

  /** Resolves once no tool call, approval, check or webhook is under way (see WorkInFlight). */
  idle(): Promise<void> {
    return this.context.work.idle();
  }

  /** The ledger, provider and observer the gate's steps share (for the HTTP routes). */
  get gateContext(): GateContext {
    return this.context;
  }

  get provider(): Provider {
    return this.context.provider;
  }

  /** Calls a tool as the agent holding `token`. An unknown token gets a CALLER refusal. */
  async callTool(token: string, name: string, args: unknown): Promise<ToolResult> {
    const agent = await this.context.ledger.authenticateAgent(token);
    if (!agent) return refusal({ rule: "CALLER", reason: "no agent holds this token" });
    return this.callToolAs(agent.agent_id, name, args);
  }

  /**
   * Calls a tool as an already-authenticated agent. Arguments JSON parsed but canonical JSON
   * cannot write (1e400 parsed to Infinity, a lone surrogate, nesting too deep) are made
   * representable first, and so is an undeclared tool's name, so the call still reaches the
   * policy and its evidence is recorded. An idempotency_key that changed so is handed on as sent
   * too (SentKey): the call's key is derived from it, so two keys that differ only in a lone
   * surrogate stay two keys, and R0 refuses it. Arguments holding more than argument_values_max
   * values are not read: the call is decided and recorded on the unread_arguments stand-in, which
   * R0 refuses. `name` is whatever the call carried (see toolName).
   */
  callToolAs(agent_id: string, name: unknown, received: unknown): Promise<ToolResult> {
    return this.context.work.run(() => this.dispatch(agent_id, name, received));
  }

  private async dispatch(agent_id: string, name: unknown, received: unknown): Promise<ToolResult> {
    const unread = holdsMoreValues(received);
    const args = unread ? unread_arguments : representable(received);
    // Unread arguments carry no idempotency_key: the call's key is derived from the stand-in.
    const sent = unread ? {} : sentKey(received, args);
    const plain = isPlainObject(args) ? args : {};
    const tool = toolName(name);
    switch (tool) {
      case "create_order":
        return this.commitKnown(tool, () => createOrder(this.context, agent_id, args ?? {}, sent));
      case "capture_payment":
        return this.commitKnown(tool, () => capturePayment(this.context, agent_id, args ?? {}, sent));
      case "fetch_order":
        return fetchOrder(this.context, agent_id, plain);
      case "fetch_payment":
        return fetchPayment(this.context, agent_id, plain);
      case "fetch_order_payments":
        return fetchOrderPayments(this.context, agent_id, plain);
      case "get_block":
        return getBlock(this.context, agent_id);
      case "get_approval":
        return getApproval(this.context, agent_id, plain);
      default:
        // The name is recorded too: a lone surrogate in it becomes U+FFFD like one in args.
        return this.unknownTool(agent_id, representable(tool) as string, args);
    }
  }

  /**
   * A money call whose database COMMIT went unconfirmed (PostgreSQL's connection broke during
   * COMMIT) is answered as a tool result, not a protocol error: the step may or may not have
   * committed. Repeating the call with the same key settles it: a decision that committed holds
   * the key in flight (refused until its lease ends, then outcome-unknown in the operator inbox),
   * one that did not is decided again; money never moves on a guess.
   */
  private async commitKnown(tool: string, call: () => Promise<ToolResult>): Promise<ToolResult> {
    try {
      return await call();
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code !== "commit_outcome_unknown") throw error;
      this.context.observer?.unknownOutcome(tool);
      return readError(
        "commit_unknown",
        "UNKNOWN: the database did not confirm this call's last step, so it may or may not have taken effect. Repeat the call with the same idempotency key; do not assume it failed or succeeded.",
      );
    }
  }

  /** Any other tool name reaches the policy too, so ALLOWLIST refuses it with evidence. */
  private async unknownTool(agent_id: string, name: string, args: unknown): Promise<ToolResult> {
    const auth = await this.context.ledger.authorize({ agent_id, tool: name, args: args ?? {} });
    this.context.observer?.decision(name, auth.verdict);
    if (auth.verdict.effect !== "BLOCK") return readError("internal", "an undeclared tool was not refused");
    return refusal(auth.verdict, auth.evidence);
  }
}
