// Progress on long commands (eval, mutate): a bar redrawn in place when stderr is a terminal, and
// only a line at the start and one at the end otherwise (CI logs, a file).

import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { run as runEval } from "../../src/cli/commands/eval.js";
import { Progress } from "../../src/eval/progress.js";
import { capturedIo, tempDir } from "../evidence/support.js";

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

describe("bursar eval's progress", () => {
  it("is redrawn in place when stderr is a terminal, whatever stdout is, and written plainly when it is not", async () => {
    const dir = tempDir("bursar-progress-");
    try {
      mkdirSync(join(dir.path, "cases"));
      copyFileSync(new URL("../../eval/cases/boundaries.jsonl", import.meta.url), join(dir.path, "cases", "boundaries.jsonl"));
      const stderrOf = async (interactive: boolean, stderr_interactive: boolean) => {
        const io = { ...capturedIo(), interactive, stderr_interactive };
        expect(await runEval(["--cases", join(dir.path, "cases"), "--out", join(dir.path, "out")], io)).toBe(0);
        return io.err();
      };
      expect(await stderrOf(false, true)).toMatch(/\reval cases \[#+\] \d+\/\d+\n/);
      const plain = await stderrOf(true, false);
      expect(plain).not.toContain("\r");
      expect(plain).toMatch(/^eval cases: 0\/\d+\neval cases: (\d+)\/\1\n/);
    } finally {
      dir.remove();
    }
  }, 60_000);
});
