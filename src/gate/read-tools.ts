// The read-only tools: an agent sees only its own block, approvals, and the orders and
// payments it created through the gate. They move nothing, so they write no evidence.

import { isNoSuchResource, isOrderId, isPaymentId, type ProviderOutcome } from "../provider/port.js";
import { not_among_callers_orders as not_yours } from "../policy/index.js";
import { paymentView, type GateContext } from "./context.js";
import { orderView } from "./money.js";
import { approvalOutcomeText, blockForAgent, readError, readResult, refusal, type ToolResult } from "./results.js";

/** The tools that ask the provider, each counted against the agent's look-ups per minute. */
const lookup_tools = "fetch_order, fetch_payment, fetch_order_payments";

function providerProblem(outcome: Exclude<ProviderOutcome<unknown>, { kind: "ok" }>): ToolResult {
  if (outcome.kind === "unknown") return readError("provider_unknown", `the provider did not answer: ${outcome.reason}`);
  return readError("provider_refused", outcome.error.description);
}

/** The agent's look-ups of this minute are spent: the answer, with when to ask again. Otherwise one is taken. */
function lookupSpent(context: GateContext, agent_id: string, tool: string): ToolResult | undefined {
  const taken = context.lookups.take(agent_id);
  if (taken.ok) return undefined;
  context.observer?.lookupLimited(tool);
  const limit = context.lookups.per_minute;
  return readError(
    "rate_limited",
    `this agent has made its ${limit} provider look-ups (${lookup_tools}) of the last minute; ask again in ${taken.retry_after_s} s`,
    { retry_after_s: taken.retry_after_s },
  );
}

async function ownsOrder(context: GateContext, agent_id: string, order_id: string): Promise<boolean> {
  const row = await context.ledger.driver.read((tx) =>
    tx.get<{ agent_id: string }>("SELECT agent_id FROM reservations WHERE order_id = ?", [order_id]),
  );
  return row?.agent_id === agent_id;
}

/** The order_id argument when it names one of the agent's orders; else its refusal: R0 for a
 *  missing or malformed id, CALLER for an order that is not this agent's. */
async function ownOrderId(context: GateContext, agent_id: string, order_id: unknown): Promise<string | ToolResult> {
  if (order_id === undefined) return refusal({ rule: "R0", reason: "order_id is required" });
  if (!isOrderId(order_id)) return refusal({ rule: "R0", reason: "order_id must match ^order_[A-Za-z0-9]{1,40}$" });
  if (!(await ownsOrder(context, agent_id, order_id))) return refusal({ rule: "CALLER", reason: `order ${order_id} ${not_yours}` });
  return order_id;
}

/** Asks the provider about one of the agent's orders, as one of its look-ups: the answer, or what
 *  the agent is told instead (a refusal, rate_limited, the provider's problem). */
async function askAboutOwnOrder<T>(
  context: GateContext,
  agent_id: string,
  args: Record<string, unknown>,
  tool: string,
  ask: (order_id: string) => Promise<ProviderOutcome<T>>,
): Promise<{ order_id: string; value: T } | ToolResult> {
  const order_id = await ownOrderId(context, agent_id, args.order_id);
  if (typeof order_id !== "string") return order_id;
  const spent = lookupSpent(context, agent_id, tool);
  if (spent) return spent;
  const outcome = await ask(order_id);
  return outcome.kind === "ok" ? { order_id, value: outcome.value } : providerProblem(outcome);
}

export async function fetchOrder(context: GateContext, agent_id: string, args: Record<string, unknown>): Promise<ToolResult> {
  const asked = await askAboutOwnOrder(context, agent_id, args, "fetch_order", (order_id) => context.provider.fetchOrder(order_id));
  if ("content" in asked) return asked;
  const order = orderView(asked.value);
  return readResult(`Order ${order.id as string}: ${String(order.amount)} ${String(order.currency)}, ${String(order.status)}.`, { order });
}

/**
 * The payments on one of the agent's orders, as Razorpay's MCP server lists them: how an agent
 * finds the payment id to capture once its customer has paid. Only the order's own payments are
 * shown: one the provider lists with another order is not this agent's to see.
 */
export async function fetchOrderPayments(context: GateContext, agent_id: string, args: Record<string, unknown>): Promise<ToolResult> {
  const asked = await askAboutOwnOrder(context, agent_id, args, "fetch_order_payments", (order_id) => context.provider.fetchOrderPayments(order_id));
  if ("content" in asked) return asked;
  const { order_id } = asked;
  const payments = asked.value.filter((payment) => payment.order_id === order_id).map(paymentView);
  const listed = payments.map((payment) => `${payment.id} ${payment.amount} ${payment.currency} ${payment.status}`).join("; ");
  const text = payments.length === 0 ? `Order ${order_id} has no payments yet.` : `Order ${order_id} has ${payments.length} payment${payments.length === 1 ? "" : "s"}: ${listed}.`;
  return readResult(text, { order_id, count: payments.length, payments });
}

export async function fetchPayment(context: GateContext, agent_id: string, args: Record<string, unknown>): Promise<ToolResult> {
  const payment_id = args.payment_id;
  if (payment_id === undefined) return refusal({ rule: "R0", reason: "payment_id is required" });
  if (!isPaymentId(payment_id)) return refusal({ rule: "R0", reason: "payment_id must match ^pay_[A-Za-z0-9]{1,40}$" });
  const spent = lookupSpent(context, agent_id, "fetch_payment");
  if (spent) return spent;
  const outcome = await context.provider.fetchPayment(payment_id);
  // A payment the provider does not know gets the same answer as another agent's: the answer
  // must not tell which payment ids exist.
  const not_this_agents = refusal({ rule: "CALLER", reason: `payment ${payment_id} ${not_yours}` });
  if (isNoSuchResource(outcome)) return not_this_agents;
  if (outcome.kind !== "ok") return providerProblem(outcome);
  const order_id = outcome.value.order_id;
  if (!order_id || !(await ownsOrder(context, agent_id, order_id))) return not_this_agents;
  const payment = paymentView(outcome.value);
  return readResult(`Payment ${payment.id}: ${payment.amount} ${payment.currency}, ${payment.status}.`, { payment });
}

export async function getBlock(context: GateContext, agent_id: string): Promise<ToolResult> {
  let view = await context.ledger.agentBlock(agent_id);
  if (!view) return readError("no_block", "this agent has no spending block");
  // Money held for an approval that has run out is available again, as the next money call would find.
  if ((await context.ledger.expireDueApprovals(view.block_id)) > 0) view = (await context.ledger.agentBlock(agent_id)) ?? view;
  const block = blockForAgent(view);
  return readResult(
    `Block ${view.block_id}: available ${view.available} of ${view.reserved} ${view.currency}; spent ${view.spent}, held ${view.held}${view.revoked ? "; REVOKED" : ""}${view.frozen ? "; FROZEN" : ""}.`,
    block,
  );
}

/** What the ledger's ids look like (`apr_` and base62): anything else names no approval, and is
 *  not looked up (PostgreSQL text cannot even hold the NUL an agent may send). */
const approval_id_pattern = /^apr_[A-Za-z0-9]{1,40}$/;

export async function getApproval(context: GateContext, agent_id: string, args: Record<string, unknown>): Promise<ToolResult> {
  const approval_id = args.approval_id;
  // A wrong type is a malformed call (R0, as fetch_order's); a string that is not an id is one
  // that names no approval, and gets the same answer as another agent's.
  if (typeof approval_id !== "string") return refusal({ rule: "R0", reason: "approval_id must be a string" });
  let approval = approval_id_pattern.test(approval_id) ? await context.ledger.approval(approval_id) : undefined;
  if (!approval || approval.agent_id !== agent_id) {
    return refusal({ rule: "CALLER", reason: "no such approval for this agent" });
  }
  // Past its lifetime it is expired (its hold released), whether or not the sweep has run yet.
  const due = approval.state === "pending" && approval.expires_at_ms <= context.ledger.context.clock().getTime();
  if (due && (await context.ledger.expireDueApprovals(approval.block_id)) > 0) {
    approval = (await context.ledger.approval(approval.approval_id)) ?? approval;
  }
  // Forwarding is the instant between an operator's approval and the provider's answer.
  const state = approval.state === "forwarding" ? "approved" : approval.state;
  const structured: Record<string, unknown> = { approval_id: approval.approval_id, state };
  if (approval.result_json) structured.result = JSON.parse(approval.result_json);
  const outcome = approvalOutcomeText(state, structured.result as Record<string, unknown> | undefined);
  return readResult(`Approval ${approval.approval_id} is ${state}.${outcome}`, structured);
}
