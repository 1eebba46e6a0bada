// The tools an agent sees, declared by hand and reviewed: names and fields follow Razorpay's
// own MCP server, less what moves money in ways a block cannot bound (its create_order's
// partial_payment and first_payment_min_amount are refused under R0, as any undeclared
// argument is). A new provider money tool is unavailable until someone writes its declaration
// here (and the policy's allowlist).
// No outputSchema is declared: SDK clients validate structuredContent against it even on
// isError results, which would hide a refusal's rule from the agent.

const idempotency_key = {
  type: "string",
  description: "Optional. Your key for this purchase: the same key with the same arguments replays the first result.",
};

export const tool_declarations = [
  {
    name: "create_order",
    description:
      "Create a payment order. Bursar decides it against your spending block first: ALLOW creates the order, HOLD waits for a human, BLOCK names the rule that refused it.",
    inputSchema: {
      type: "object",
      properties: {
        amount: { type: "number", description: "Amount in the smallest currency sub-unit (e.g. paise): an integer." },
        currency: { type: "string", description: "Three-letter ISO currency code, e.g. INR." },
        receipt: { type: "string", description: "Your reference for the order." },
        notes: { type: "object", description: "Key-value notes (strings).", additionalProperties: { type: "string" } },
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
