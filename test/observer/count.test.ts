// The count of tools/call requests in a body too large to parse, read chunk by chunk, equals
// what parsing the whole body finds, however the bytes are split.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { toolCalls } from "../../src/observer/calls.js";
import { string_bytes_max, ToolCallCounter } from "../../src/observer/count.js";
import { escapedJson, unicodeEscaped } from "./support.js";

function counted(body: Buffer, cuts: readonly number[]): number {
  const counter = new ToolCallCounter();
  let from = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    counter.push(body.subarray(from, cut));
    from = cut;
  }
  counter.push(body.subarray(from));
  return counter.calls;
}

const text = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom("tools/call", "method", "id", '"method":"tools/call"', "\\", '\\"', "tools\\/call", "💸"));
const value = fc.oneof(text, fc.integer(), fc.constant(null), fc.jsonValue({ maxDepth: 2 }), fc.record({ method: fc.constant("tools/call"), id: fc.integer() }));
const message = fc.record(
  {
    jsonrpc: fc.constant("2.0"),
    id: fc.oneof(fc.integer(), text, fc.constant(null), fc.double(), fc.constant({ id: 1 })),
    method: fc.constantFrom("tools/call", "tools/list", "notifications/message", "tools/callx"),
    params: fc.record({ name: text, arguments: fc.dictionary(text, value, { maxKeys: 4 }) }),
  },
  { requiredKeys: ["jsonrpc"] },
);
const body = fc.oneof(message, fc.array(message, { maxLength: 6 }), fc.jsonValue({ maxDepth: 3 }));

describe("ToolCallCounter", () => {
  it("counts what parsing finds, for any JSON-RPC body split anywhere", () => {
    fc.assert(
      fc.property(body, fc.boolean(), fc.array(fc.nat(), { maxLength: 6 }), (parsed, spaced, positions) => {
        const bytes = Buffer.from(spaced ? JSON.stringify(parsed, null, 1) : JSON.stringify(parsed));
        const cuts = positions.map((position) => position % (bytes.length + 1));
        expect(counted(bytes, cuts)).toBe(toolCalls(parsed).length);
      }),
      { numRuns: 2_000 },
    );
  });

  it("counts what parsing finds when strings are written with \\u escapes, keys and values alike, split anywhere", () => {
    fc.assert(
      fc.property(body, fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }), fc.array(fc.nat(), { maxLength: 6 }), (parsed, pattern, positions) => {
        const bytes = Buffer.from(escapedJson(parsed, pattern));
        const cuts = positions.map((position) => position % (bytes.length + 1));
        expect(counted(bytes, cuts)).toBe(toolCalls(parsed).length);
      }),
      { numRuns: 1_000 },
    );
  });

  it(`keeps strings up to ${string_bytes_max} bytes: "tools/call" with every character escaped`, () => {
    expect(Buffer.byteLength(unicodeEscaped("tools/call"))).toBe(string_bytes_max);
  });

  const method = unicodeEscaped("method");
  const tools_call = unicodeEscaped("tools/call");
  const cases: Array<[string, string | Buffer, number]> = [
    ["a call", '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}', 1],
    ["a notification of the same method (no id)", '{"jsonrpc":"2.0","method":"tools/call","params":{}}', 0],
    ["a null id", '{"id":null,"method":"tools/call"}', 0],
    ["an escaped method name", '{"id":"a","method":"tools\\/call"}', 1],
    ["a unicode-escaped method name", '{"id":"a","method":"\\u0074ools/call"}', 1],
    ["the method text inside an argument", '{"id":1,"method":"ping","params":{"text":"\\"method\\":\\"tools/call\\""}}', 0],
    ["a nested method member", '{"id":1,"method":"ping","params":{"method":"tools/call","id":2}}', 0],
    ["a batch of three", '[{"id":1,"method":"tools/call"},{"id":2,"method":"tools/call"},{"method":"notifications/x"},{"id":3,"method":"tools/call"}]', 3],
    ["a method value with every character escaped (60 bytes)", `{"jsonrpc":"2.0","id":41,"method":"${tools_call}","params":{"name":"x"}}`, 1],
    ["a method key with every character escaped", `{"id":41,"${method}":"tools/call"}`, 1],
    ["a method key and value and the id key escaped", `{"${unicodeEscaped("id")}":"a","${method}":"${tools_call}"}`, 1],
    ["an escaped method value longer than the call's (an escaped space after it)", `{"id":1,"${method}":"${tools_call}\\u0020"}`, 0],
    ["a batch of three escaped calls", `[${[1, 2, 3].map((id) => `{"id":${id},"${method}":"${tools_call}"}`).join(",")},{"${method}":"${tools_call}"}]`, 3],
    ["an ISO-8859-1 body (a charset the server decodes) with an escaped call", Buffer.from(`{"id":1,"${method}":"${tools_call}","params":{"name":"caf\u00e9","arguments":{"note":"d\u00e9j\u00e0 vu"}}}`, "latin1"), 1],
  ];
  for (const [name, json, calls] of cases) {
    it(`counts ${calls} for ${name}, one byte at a time too`, () => {
      const bytes = Buffer.from(json);
      expect(counted(bytes, [])).toBe(calls);
      expect(counted(bytes, Array.from({ length: bytes.length }, (_, i) => i))).toBe(calls);
    });
  }
});
