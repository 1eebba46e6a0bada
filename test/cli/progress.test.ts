// Progress on long commands (eval, mutate): a bar redrawn in place when stderr is a terminal, and
// only a line at the start and one at the end otherwise (CI logs, a file).

import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { Progress } from "../../src/eval/progress.js";

function written(interactive: boolean, steps: readonly number[]): string {
  const out = new PassThrough();
  const chunks: string[] = [];
  out.on("data", (chunk: Buffer) => chunks.push(chunk.toString()));
  const progress = new Progress(out, interactive, "eval cases", 4);
  for (const done of steps) progress.update(done);
  return chunks.join("");
}

describe("Progress", () => {
  it("redraws one bar in place on a terminal, ending the line when done", () => {
    expect(written(true, [0, 2, 4])).toBe(
      `\reval cases [${" ".repeat(30)}] 0/4\reval cases [${"#".repeat(15)}${" ".repeat(15)}] 2/4\reval cases [${"#".repeat(30)}] 4/4\n`,
    );
  });

  it("writes a line at the start and one at the end otherwise, nothing between and nothing twice", () => {
    expect(written(false, [0, 0, 1, 2, 3, 4, 4])).toBe("eval cases: 0/4\neval cases: 4/4\n");
  });
});
