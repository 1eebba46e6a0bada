// The duplicate-key scanner against received JSON text: paths as validation names them, keys
// compared as decoded, and no duplicate ever reported for text JSON.stringify wrote.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { duplicateKeyPaths, firstDuplicateKeyPath } from "../../src/ingest/duplicate-keys.js";

describe("duplicateKeyPaths", () => {
  it("names each key that occurs twice in one object, by its path", () => {
    const cases: Array<[string, string[]]> = [
      ['{"a":1,"a":2}', ["a"]],
      ['{"a":1,"b":{"a":2}}', []],
      ['{"agent":{"id":"x","type":"agent","id":"y"}}', ["agent.id"]],
      ['{"args":{"items":[{"sku":"a"},{"sku":"b","sku":"c"}]}}', ["args.items.1.sku"]],
      ['[{"a":1},{"a":1,"a":2}]', ["1.a"]],
      ['{"a":1,"\\u0061":2}', ["a"]],
      ['{"q\\"":1,"q\\"":2,"x":"{\\"a\\":1,\\"a\\":2}"}', ['q"']],
      ['{"s":"\\\\","s":"c"}', ["s"]],
      ['{"a":[1,2,{"b":[],"b":{}}],"c":"[,{"}', ["a.2.b"]],
      ['{ "k" : 1 , "k" : 2 , "k" : 3 }', ["k", "k"]],
      // In an array (a delivery), each element's first duplicate only.
      ['[{"k":1,"k":2,"k":3,"j":1,"j":2},{"a":1},{"q":{"z":1,"z":2},"q":3}]', ["0.k", "2.q.z"]],
    ];
    for (const [text, paths] of cases) {
      JSON.parse(text);
      expect(duplicateKeyPaths(text), text).toEqual(paths);
    }
  });

  it("names a duplicate under a huge key or deep nesting by a shortened path, and stops at reported_max", () => {
    const key = "k".repeat(100_000);
    expect(duplicateKeyPaths(`{"${key}":{"a":1,"a":2}}`)).toEqual([`${"k".repeat(64)}….a`]);
    const deep = `${'{"d":'.repeat(40)}{"a":1,"a":2}${"}".repeat(40)}`;
    expect(duplicateKeyPaths(deep)).toEqual([`${Array(16).fill("d").join(".")}.…`]);
    expect(duplicateKeyPaths('{"k":1,"k":2,"k":3}', 1)).toEqual(["k"]);
    // 600 duplicates in the first element leave room to name the second element's.
    const many = `[{${Array.from({ length: 601 }, () => '"z":1').join(",")}},{"q":1,"q":2}]`;
    expect(duplicateKeyPaths(many)).toEqual(["0.z", "1.q"]);
  });

  it("finds none in JSON that JSON.stringify wrote, with or without indentation", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(0, 2), (value, indent) => {
        expect(duplicateKeyPaths(JSON.stringify(value, null, indent) ?? "null")).toEqual([]);
      }),
      { numRuns: 2_000 },
    );
  });

  it("finds a key written twice into any object of any JSON value", () => {
    const object = fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1, maxKeys: 5 });
    fc.assert(
      fc.property(object, fc.jsonValue(), (inner, outer) => {
        const [key] = Object.keys(inner) as [string];
        // The object's text with its first key repeated at the end, inside an array and an object.
        const text = JSON.stringify(inner);
        const doubled = `${text.slice(0, -1)},${JSON.stringify(key)}:0}`;
        const wrapped = `[${JSON.stringify(outer)},{"x":${doubled}}]`;
        expect(duplicateKeyPaths(wrapped)).toEqual([`1.x.${key}`]);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("firstDuplicateKeyPath", () => {
  it("names what duplicateKeyPaths names first, for text with and without a duplicate, spaced any way", () => {
    const object = fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1, maxKeys: 5 });
    fc.assert(
      fc.property(object, fc.jsonValue(), fc.boolean(), fc.constantFrom(0, 2), (inner, outer, doubled, indent) => {
        const [key] = Object.keys(inner) as [string];
        const text = JSON.stringify(inner, null, indent);
        const written = doubled ? `${text.slice(0, -1)} ,\n ${JSON.stringify(key)} \t:\r\n 0}` : text;
        const wrapped = `{"outer":${JSON.stringify(outer, null, indent)}, "x" : ${written}}`;
        const expected = doubled ? `x.${key}` : undefined;
        expect(duplicateKeyPaths(wrapped, 1)[0]).toBe(expected);
        expect(firstDuplicateKeyPath(wrapped, JSON.parse(wrapped))).toBe(expected);
      }),
      { numRuns: 2_000 },
    );
  });

  it("counts members through nesting deeper than the call stack, and strings that look like keys are not keys", () => {
    const depth = 200_000;
    const deep = `${'{"d":['.repeat(depth)}{"a":1,"a":2}${"]}".repeat(depth)}`;
    expect(firstDuplicateKeyPath(deep, JSON.parse(deep))).toBe(`${Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? "d" : "0")).join(".")}.…`);
    const tricky = JSON.stringify({ a: '\\":', b: ['":', ":"], "c\\": { '"': 1 } });
    expect(firstDuplicateKeyPath(tricky, JSON.parse(tricky))).toBeUndefined();
  });
});
