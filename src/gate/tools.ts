// The tools an agent sees, declared by hand and reviewed: names and fields follow Razorpay's
// own MCP server, less what moves money in ways a block cannot bound (its create_order's
// partial_payment and first_payment_min_amount are refused under R0, as any undeclared
// argument is). A new provider money tool is unavailable until someone writes its declaration
// here (and the policy's allowlist).
// No outputSchema is declared: SDK clients validate structuredContent against it even on
// isError results, which would hide a refusal's rule from the agent.

import { amount_max_minor, amount_min_minor, note_key_length_max, note_value_length_max, notes_keys_max, receipt_length_max, receipt_note_key } from "../policy/limits.js";

const idempotency_key = {
  type: "string",
  description:
    "Optional. Your key for this purchase: the same key with the same arguments replays the first result. Without one, the same call (amount, currency, and for a capture the payment) made again within 5 minutes replays the first result even with another receipt or notes: send a key of your own to make two purchases of the same amount.",
};

export const tool_declarations = [
  {
    name: "create_order",
    description:
      "Create a payment order. Bursar decides it against your spending block first: ALLOW creates the order, HOLD waits for a human, BLOCK names the rule that refused it.",
    inputSchema: {
      type: "object",
      properties: {
        amount: { type: "number", description: `Amount in the smallest currency sub-unit (e.g. paise): an integer from ${amount_min_minor} to ${amount_max_minor.toLocaleString("en")}.` },
        currency: { type: "string", description: "Three-letter ISO currency code, e.g. INR: your block's currency." },
        receipt: { type: "string", description: `Your reference for the order, at most ${receipt_length_max} characters (it travels as the note ${receipt_note_key}).` },
        notes: {
          type: "object",
          description: `Key-value notes: at most ${notes_keys_max}, keys of at most ${note_key_length_max} characters (not ${receipt_note_key}), values strings or numbers of at most ${note_value_length_max} characters.`,
          additionalProperties: { type: ["string", "number"] },
        },
        idempotency_key,
      },
      required: ["amount", "currency"],
    },
  },
  {
    name: "capture_payment",
    description: "Capture an authorized payment on an order you created. The amount must equal the authorized amount.",
    inputSchema: {
      type: "object",
      properties: {
        payment_id: { type: "string", description: "The payment id, pay_…" },
        amount: { type: "number", description: "Amount in the smallest currency sub-unit." },
        currency: { type: "string", description: "Three-letter ISO currency code." },
        idempotency_key,
      },
      required: ["payment_id", "amount", "currency"],
    },
  },
  {
    name: "fetch_order",
    description: "Fetch an order you created through Bursar.",
    inputSchema: { type: "object", properties: { order_id: { type: "string", description: "The order id, order_…" } }, required: ["order_id"] },
  },
  {
    name: "fetch_order_payments",
    description: "List the payments on an order you created through Bursar: how you find the payment id to capture once the order is paid.",
    inputSchema: { type: "object", properties: { order_id: { type: "string", description: "The order id, order_…" } }, required: ["order_id"] },
  },
  {
    name: "fetch_payment",
    description: "Fetch a payment on one of your orders.",
    inputSchema: { type: "object", properties: { payment_id: { type: "string", description: "The payment id, pay_…" } }, required: ["payment_id"] },
  },
  {
    name: "get_block",
    description: "Your spending block: reserved, spent, held, available, expiry and limits.",
    inputSchema: { type: "object", properties: {} },
  },
  {
    name: "get_approval",
    description: "The state of a held purchase: pending, approved (with the result), denied or expired.",
    inputSchema: { type: "object", properties: { approval_id: { type: "string" } }, required: ["approval_id"] },
  },
] as const;

const declared_names: ReadonlySet<unknown> = new Set(tool_declarations.map((tool) => tool.name));

/** How logs and metrics name a tool an agent asked for: its name when declared, else
 *  "(undeclared)" (the agent picks the name, so it never becomes a log field or a label value). */
export function declaredToolName(tool: unknown): string {
  return declared_names.has(tool) ? (tool as string) : "(undeclared)";
}
