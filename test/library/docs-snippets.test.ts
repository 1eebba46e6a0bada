// The library snippets in README.md and docs/evidence.md run as written, against the built
// package imported by its name ("bursar", the package's own exports map), in a Node process of
// their own: a name the package does not export, or a call that changed shape, fails here.

import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, repo_root } from "../support/build.js";

let dir: string;
beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), "bursar-library-docs-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The first ```ts block after `heading` in a file of the repository. */
function snippetAfter(file: string, heading: string): string {
  const text = readFileSync(join(repo_root, file), "utf8");
  const from = text.indexOf(heading);
  expect(from, `${file} has ${heading}`).toBeGreaterThanOrEqual(0);
  const block = /```ts\n([\s\S]*?)```/.exec(text.slice(from));
  expect(block, `${file} has a ts block after ${heading}`).not.toBeNull();
  return block![1]!;
}

/** Runs `code` as an ES module whose imports resolve as the package's own ("bursar" is this package). */
function runModule(code: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ["--input-type=module", "-e", code], { cwd: repo_root, timeout: 30_000 }, (_error, stdout, stderr) =>
      resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

describe("library snippets", () => {
  it("README's: createBursar, an agent, a block and an allowed create_order", async () => {
    const snippet = snippetAfter("README.md", "### Library");
    const result = await runModule(`${snippet}\nconsole.log(JSON.stringify(r.structuredContent.effect));\nawait b.close();\n`);
    expect(result.stderr).toBe("");
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 0, stdout: '"ALLOW"\n' });
  });

  it("docs/evidence.md's writer: a log on its own database, an appended entry with its receipt", async () => {
    const database = join(dir, "evidence.db");
    // The snippet's database is put in the test's directory.
    const snippet = snippetAfter("docs/evidence.md", "## For writers (library)").replace('"evidence.db"', JSON.stringify(database));
    const probe = `${snippet}\nconsole.log(JSON.stringify({ seq: appended.seq, leaf_hash: appended.leaf_hash, signed: typeof appended.receipt.signature }));\n`;
    const result = await runModule(probe);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    // Entry 0 is the log's genesis; the snippet's entry is the next.
    expect(JSON.parse(result.stdout)).toEqual({ seq: 1, leaf_hash: expect.stringMatching(/^[0-9a-f]{64}$/), signed: "string" });
    expect(existsSync(database)).toBe(true);
  });

  it("docs/simulator.md's embedding imports from the package", async () => {
    const snippet = snippetAfter("docs/simulator.md", "## Embedding (library)");
    const imports = snippet.split("\n").filter((line) => line.startsWith("import "));
    expect(imports).toEqual(['import { acceptOnlyKey, createSimulator } from "bursar";']);
    const result = await runModule(`${imports.join("\n")}\nconsole.log(typeof acceptOnlyKey, typeof createSimulator({ webhook_secret: "whsec_docs" }).plugin);\n`);
    expect({ code: result.code, stdout: result.stdout, stderr: result.stderr }).toEqual({ code: 0, stdout: "function function\n", stderr: "" });
  });
});
