// Tests that spawn processes run the compiled CLI and library; `npm test` builds first,
// and this builds once more when dist/ is missing (e.g. a lone `npx vitest run`).

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";

export const repo_root = join(import.meta.dirname, "../..");
export const dist_index = join(repo_root, "dist/src/index.js");
export const bursar_bin = join(repo_root, "dist/src/cli/bin.js");

export function ensureBuilt(): void {
  if (existsSync(dist_index) && existsSync(bursar_bin)) return;
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: repo_root, stdio: "inherit", timeout: 240_000 });
}

/**
 * For a suite that runs the built CLI or server: builds once before it, and gives it a temporary
 * directory (named after `prefix`) removed after it. Returns the directory's path, once set.
 */
export function builtSuiteDir(prefix: string): () => string {
  let dir: string | undefined;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), prefix));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    if (!dir) throw new Error("builtSuiteDir: the suite has not started");
    return dir;
  };
}

/**
 * A data directory under `parent` that a first start has filled (database with its log and a
 * signed checkpoint, key, secrets), the server closed again: what export and key read.
 */
export async function servedDataDir(parent: string, name = "data"): Promise<string> {
  // Imported here: every test file imports this module, few start a server.
  const { loadConfig } = await import("../../src/config.js");
  const { startServer } = await import("../../src/server/start.js");
  const data_dir = join(parent, name);
  const started = await startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false });
  await started.app.close();
  return data_dir;
}
