// Waits synchronously for a child process that never ends: the event loop stands still too.
import { execFileSync } from "node:child_process";
import { it } from "vitest";

it("waits on a child", () => {
  execFileSync("sleep", [process.env.BURSAR_TEST_STALL_SLEEP ?? "3599"]);
});
