// `bursar simulator` on a port already in use: one line naming --host/--port, exit 2, no stack
// trace; an empty or blank --host is a usage error, as for `bursar serve`, not every interface.

import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

describe("bursar simulator listen errors", () => {
  let holder: Server;
  let port: number;
  beforeAll(async () => {
    ensureBuilt();
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const address = holder.address();
    if (typeof address !== "object" || !address) throw new Error("no port");
    port = address.port;
  });
  afterAll(() => new Promise<void>((resolve) => holder.close(() => resolve())));

  it("reports a port already in use as one line naming --port, exit 2, without a stack trace", async () => {
    const result = await runBursar(["simulator", "--port", String(port), "--webhook-secret", "s"]);
    expect(result.code).toBe(2);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toBe(`bursar simulator: --host 127.0.0.1 --port ${port}: the address is already in use (another bursar simulator?)`);
    expect(result.stderr).not.toMatch(/^\s+at /m);
  });

  it.each(["", " ", "127.0.0.1 ", "\t"])("refuses --host %j in the words of bursar serve, exit 2, instead of listening on every interface", async (host) => {
    // Before, an empty --host listened on http://[::]:PORT. Killed after 5 s should it listen.
    const result = await runBursar(["simulator", `--host=${host}`, "--port", "0", "--webhook-secret", "s"], {}, "", 5_000);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar simulator: --host ${JSON.stringify(host)}: expected a host name or IP address to listen on, e.g. 127.0.0.1 or 0.0.0.0`);
    expect(result.stdout).not.toContain("listening");
  });
});
