// The money tools' arguments are written twice: as the input schemas a model reads (tools.ts)
// and as the lists the policy checks (limits.ts). They must say the same, or a model would be
// told of an argument that R0 refuses, or not told of one the gate takes.

import { describe, expect, it } from "vitest";
import { tool_declarations } from "../../src/gate/tools.js";
import { declared_arguments, required_arguments } from "../../src/policy/limits.js";

describe("the money tools' declarations", () => {
  for (const tool of Object.keys(declared_arguments)) {
    it(`${tool}: the input schema's arguments and required ones are the policy's`, () => {
      const declared = tool_declarations.find((declaration) => declaration.name === tool);
      expect(declared).toBeDefined();
      const schema = declared!.inputSchema as { properties: Record<string, unknown>; required?: readonly string[] };
      expect(Object.keys(schema.properties).sort()).toEqual([...declared_arguments[tool]!].sort());
      expect([...(schema.required ?? [])].sort()).toEqual([...required_arguments[tool]!].sort());
    });
  }
});
