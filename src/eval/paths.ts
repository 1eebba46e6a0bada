// Where the eval's data and reports live: eval/ at the package root, wherever it runs from.

import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/** The package root: the nearest folder above this file that has package.json and eval/. */
export function packageRoot(): string {
  let dir = import.meta.dirname;
  for (let depth = 0; depth < 6; depth++) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "eval"))) return dir;
    dir = dirname(dir);
  }
  return resolve(".");
}
