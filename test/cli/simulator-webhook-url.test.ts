// `bursar simulator --webhook-url` with user:password@ is refused, as every command's --url is
// (command.ts httpUrl): one line, exit 2, without the value, so the password is never printed in
// the banner nor written to a log; the simulator does not start.

import { beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

beforeAll(() => ensureBuilt());

const refused = "bursar simulator: --webhook-url: a URL with user:password@ is refused (the value is not shown); credentials go in --webhook-secret (or RAZORPAY_WEBHOOK_SECRET)";

describe("bursar simulator --webhook-url", () => {
  it.each(["http://hook-user:hunter2@127.0.0.1:8787/webhooks/razorpay", "https://hook-user@127.0.0.1/hook", "http://:hunter2@127.0.0.1/hook"])(
    "refuses %s without showing it, exit 2, and does not listen",
    async (url) => {
      // Killed after 5 s should it start listening.
      const result = await runBursar(["simulator", "--port", "0", "--webhook-secret", "s", "--webhook-url", url], {}, "", 5_000);
      expect({ code: result.code, stdout: result.stdout, first: result.stderr.split("\n")[0] }).toEqual({ code: 2, stdout: "", first: refused });
      expect(result.stderr).not.toContain("hunter2");
      expect(result.stderr).not.toContain("hook-user");
    },
  );

  it("refuses a value that is not an http(s) URL, naming --webhook-url, exit 2", async () => {
    const result = await runBursar(["simulator", "--port", "0", "--webhook-secret", "s", "--webhook-url", "ftp://127.0.0.1/hook"], {}, "", 5_000);
    expect({ code: result.code, first: result.stderr.split("\n")[0] }).toEqual({
      code: 2,
      first: 'bursar simulator: --webhook-url "ftp://127.0.0.1/hook": expected an http(s) URL, e.g. http://127.0.0.1:8787/webhooks/razorpay',
    });
  });
});
