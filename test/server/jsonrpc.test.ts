// The JSON-RPC envelopes /mcp and the stdio bridge answer before the MCP SDK reads a message.

import { describe, expect, it } from "vitest";
import { parseError } from "../../src/server/jsonrpc.js";

describe("parseError", () => {
  it("writes the control and invisible characters of the text the parser quotes as escapes", () => {
    let detail = "";
    try {
      JSON.parse("\u001b[31m\u202ex");
    } catch (error) {
      detail = (error as Error).message;
    }
    // The parser's message quotes the body: sent back raw, it repainted the client's terminal.
    expect(detail).toContain("\u001b");
    const { message } = parseError(detail).error;
    expect(message).not.toMatch(/[\u001b\u202e]/);
    expect(message).toContain("\\u{1b}[31m\\u{202e}x");
  });
});
