// Stands the event loop still for good, as a native deadlock does.
import { it } from "vitest";

it("stands still", () => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
});
