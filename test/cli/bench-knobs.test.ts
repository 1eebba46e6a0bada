// Every BENCH_* variable a benchmark reads is in the README's table of knobs, which
// `bursar bench --help` points to: none of them was documented anywhere.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");

describe("benchmark knobs", () => {
  it("are each documented in the README's Benchmarks section", () => {
    const read = new Set<string>();
    for (const file of readdirSync(join(root, "bench")).filter((name) => name.endsWith(".ts"))) {
      for (const match of readFileSync(join(root, "bench", file), "utf8").matchAll(/process\.env\.(BENCH_[A-Z_]+)/g)) read.add(match[1]!);
    }
    // Passed from bench:pg to its own child processes, not set by a user.
    read.delete("BENCH_SIGNING_KEY");
    expect(read.size).toBeGreaterThan(10);
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Benchmarks"), readme.indexOf("## Tests"));
    const undocumented = [...read].filter((name) => !section.includes(`| \`${name}\` |`));
    expect(undocumented).toEqual([]);
  });
});
