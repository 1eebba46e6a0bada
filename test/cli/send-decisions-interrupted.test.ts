// `bursar send-decisions` interrupted mid-run (SIGINT, SIGTERM) as a real process: one stderr
// line saying how many records were accepted and in how many deliveries, where their receipts
// are, and that a re-run is safe; exit 128 + the signal's number. A local node:http server
// stands in for the gate: it accepts the first delivery and never answers the second.

import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { builtSuiteDir, bursar_bin } from "../support/build.js";
import { waitUntil, within } from "../support/wait.js";

const dir = builtSuiteDir("bursar-send-interrupted-");

/** The receipt the first delivery gets: it lists the one record sent (send-decisions checks that). */
const first_receipt = { delivery: 1, records: [{ event_id: "evt_1" }] };

/** A gate that answers the first delivery with a receipt and holds every later one open. */
async function stallingGate(): Promise<{ url: string; requests(): number; close(): Promise<void> }> {
  let requests = 0;
  const server: Server = createServer((request, response) => {
    requests++;
    const number = requests;
    request.resume();
    request.on("end", () => {
      if (number > 1) return; // in flight for good
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ records: 1, written: 1, duplicates: 0, receipt: first_receipt }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("bursar send-decisions interrupted", () => {
  for (const [signal, status, with_receipts] of [["SIGINT", 130, true], ["SIGTERM", 143, false]] as const) {
    it(`on ${signal} mid-delivery says what was accepted${with_receipts ? " and where the receipts are" : ""}, exit ${status}`, async () => {
      const gate = await stallingGate();
      const file = join(dir(), `${signal}.jsonl`);
      const receipts = join(dir(), `${signal}-receipts.jsonl`);
      writeFileSync(file, '{"event_id":"evt_1"}\n{"event_id":"evt_2"}\n{"event_id":"evt_3"}\n');
      const args = ["send-decisions", file, "--url", gate.url, "--source", "src_test", "--batch", "1", ...(with_receipts ? ["--receipts", receipts] : [])];
      const child = spawn(process.execPath, [bursar_bin, ...args], { env: { ...process.env, BURSAR_SOURCE_SIGNING_KEY: "bsr_whsec_test", CI: "1" }, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, by) => resolve({ code, signal: by })));
      try {
        await waitUntil("the second delivery to reach the gate", () => gate.requests() >= 2 || child.exitCode !== null);
        expect(gate.requests(), stderr).toBe(2);
        child.kill(signal);
        const exit = await within("send-decisions to exit", exited);
        const held = with_receipts ? `; their receipts are in ${receipts}` : "";
        expect(stderr).toBe(
          `bursar send-decisions: interrupted (${signal}): sent 1 of 3 records in 1 delivery before stopping${held}; re-running the same command is safe (records already received return their first receipts)\n`,
        );
        expect(exit).toEqual({ code: status, signal: null });
        expect(stdout).toBe("");
        if (with_receipts) expect(readFileSync(receipts, "utf8")).toBe(`${JSON.stringify(first_receipt)}\n`);
        expect(gate.requests()).toBe(2);
      } finally {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
        await gate.close();
      }
    });
  }
});
