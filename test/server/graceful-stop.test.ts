// GracefulStop's reading of signals, without a process to kill: the same signal again within
// same_signal_window_ms of the first is that one delivered twice (coreutils timeout sends it to
// the process and to its process group), a later one or another signal exits at once. Signals
// are emitted on `process` itself, so the kernel cannot merge two into one as it may for a child.

import { afterEach, describe, expect, it, vi } from "vitest";
import { GracefulStop, same_signal_window_ms } from "../../src/server/app.js";

describe("GracefulStop", () => {
  let stop: GracefulStop | undefined;
  afterEach(() => {
    stop?.dispose();
    vi.restoreAllMocks();
  });

  function watched() {
    const exits: (number | string | null | undefined)[] = [];
    vi.spyOn(process, "exit").mockImplementation(((code?: number) => void exits.push(code)) as never);
    const lines: string[] = [];
    stop = new GracefulStop((line) => lines.push(line));
    return { exits, lines };
  }

  it("takes the same signal twice at once for one", () => {
    const { exits, lines } = watched();
    process.emit("SIGTERM", "SIGTERM");
    process.emit("SIGTERM", "SIGTERM");
    expect(exits).toEqual([]);
    expect(lines).toEqual(["SIGTERM while starting: stopping once started (a second signal exits at once)"]);
  });

  it("exits at once on the same signal past the window, or on another signal", async () => {
    const { exits } = watched();
    process.emit("SIGTERM", "SIGTERM");
    process.emit("SIGINT", "SIGINT");
    expect(exits).toEqual([130]);
    await new Promise((resolve) => setTimeout(resolve, same_signal_window_ms + 20));
    process.emit("SIGTERM", "SIGTERM");
    expect(exits).toEqual([130, 143]);
  });
});
