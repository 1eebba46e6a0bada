// Waits synchronously for a child process that never ends: the event loop stands still too.
import { execFileSync } from "node:child_process";
import { it } from "vitest";

it("waits on a child", () => {
  execFileSync("sleep", ["3599"]);
});
