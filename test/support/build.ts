// Tests that spawn processes run the compiled CLI and library; `npm test` builds first,
// and this builds once more when dist/ is missing (e.g. a lone `npx vitest run`).

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

export const repo_root = join(import.meta.dirname, "../..");
export const dist_index = join(repo_root, "dist/src/index.js");
export const bursar_bin = join(repo_root, "dist/src/cli/bin.js");

export function ensureBuilt(): void {
  if (existsSync(dist_index) && existsSync(bursar_bin)) return;
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: repo_root, stdio: "inherit" });
}
