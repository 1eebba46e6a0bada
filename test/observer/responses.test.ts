// What the observer takes as a call's answer is what the MCP SDK's client takes: a well-formed
// JSON-RPC 2.0 response (JSONRPCMessageSchema). A message the client refuses answers nothing, so
// the later well-formed message with the same id, which the client does take, is recorded; a JSON
// body with one refused member answers nothing at all, and an SSE event holding an array neither.

import { describe, expect, it } from "vitest";
import { responses } from "../../src/observer/calls.js";

/** As a JSON body (`batch`) or as an SSE event's data. */
const ids = (parsed: unknown, batch = true) => (responses(parsed, 200, batch) ?? []).map((found) => [found.id, found.outcome.type]);
const answer = { jsonrpc: "2.0", id: 1, result: { ok: true } };

describe("responses", () => {
  it("takes a result or an error of JSON-RPC 2.0 with a string or integer id", () => {
    expect(ids({ jsonrpc: "2.0", id: 1, result: { content: [] } })).toEqual([[1, "result"]]);
    expect(ids({ jsonrpc: "2.0", id: "a", error: { code: -32602, message: "bad", data: { x: 1 } } })).toEqual([["a", "error"]]);
    // The client checks an error's code and message only: another member of it is let through.
    expect(ids({ jsonrpc: "2.0", id: 2, error: { code: -32000, message: "boom", name: "McpError" } })).toEqual([[2, "error"]]);
    expect(ids([{ jsonrpc: "2.0", id: 1, result: {} }, { jsonrpc: "2.0", id: 2, result: {} }])).toEqual([
      [1, "result"],
      [2, "result"],
    ]);
  });

  const refused: Array<[string, unknown]> = [
    ["no jsonrpc", { id: 1, result: {} }],
    ["another version", { jsonrpc: "1.0", id: 1, result: {} }],
    ["a member beside the others", { jsonrpc: "2.0", id: 1, result: {}, x: 1 }],
    ["a fractional id", { jsonrpc: "2.0", id: 1.5, result: {} }],
    ["a null id", { jsonrpc: "2.0", id: null, result: {} }],
    ["a result that is no object", { jsonrpc: "2.0", id: 1, result: "text" }],
    ["an array result", { jsonrpc: "2.0", id: 1, result: [] }],
    ["both a result and an error", { jsonrpc: "2.0", id: 1, result: {}, error: { code: 1, message: "m" } }],
    ["neither", { jsonrpc: "2.0", id: 1 }],
    ["an error without a message", { jsonrpc: "2.0", id: 1, error: { code: 1 } }],
    ["an error with a fractional code", { jsonrpc: "2.0", id: 1, error: { code: 1.5, message: "m" } }],
    // The client checks a result's _meta (RequestMetaSchema), not only that the result is an object.
    ["a result whose _meta is no object", { jsonrpc: "2.0", id: 1, result: { _meta: 5, content: [] } }],
    ["a result whose _meta has an object progressToken", { jsonrpc: "2.0", id: 1, result: { _meta: { progressToken: {} }, content: [] } }],
  ];
  for (const [name, message] of refused) {
    it(`answers nothing with ${name}, and a JSON body holding it answers nothing at all`, () => {
      expect(ids(message)).toEqual([]);
      expect(ids(message, false)).toEqual([]);
      // The client parses every member of a JSON body before it takes any: one refused, none taken.
      expect(ids([message, answer])).toEqual([]);
    });
  }

  it("answers nothing with a request, and takes the response beside it in a JSON body", () => {
    expect(ids({ jsonrpc: "2.0", id: 1, method: "ping" })).toEqual([]);
    expect(ids([{ jsonrpc: "2.0", id: 1, method: "ping" }, answer])).toEqual([[1, "result"]]);
  });

  it("takes no array from an SSE event: the client parses an event's data as one message", () => {
    expect(ids([answer], false)).toEqual([]);
    expect(ids(answer, false)).toEqual([[1, "result"]]);
  });
});
