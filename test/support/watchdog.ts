// Ends a test process whose event loop has stood still for minutes, after printing which test
// it was running and every thread's native stack. A blocked event loop cannot time out by
// itself (vitest's timeouts are timers on that loop), so without this a native deadlock in one
// file (Node 20 once had one in Ed25519 key export, see note.ts) hangs the whole run until CI's
// own limit, with nothing said. A worker thread keeps running while the main thread is stuck:
// it watches a heartbeat the main thread writes each second. Loaded by vitest's setupFiles.

import { relative } from "node:path";
import inspector from "node:inspector";
import { isMainThread, Worker } from "node:worker_threads";
import { afterEach, beforeEach, expect } from "vitest";

/** How long the event loop may stand still (BURSAR_TEST_STALL_MS overrides, for the watchdog's own test). */
const stall_ms = Number(process.env.BURSAR_TEST_STALL_MS) || 300_000;

// The watcher, as a CommonJS script. It writes with writeSync to fd 2 because a worker's
// process.stderr goes through the main thread, which is the one that is stuck.
const watcher = `
const { workerData, parentPort } = require("node:worker_threads");
const { writeSync } = require("node:fs");
const { spawnSync } = require("node:child_process");
const beat = new BigInt64Array(workerData.heartbeat);
let running = "(before the first test)";
parentPort.on("message", (name) => { running = name; });
// Every process started under this one, from ps: a synchronous child that never ends stops the
// event loop too, and is what needs looking at then.
function descendants() {
  const ps = spawnSync("ps", ["-e", "-o", "pid=,ppid=,comm="], { encoding: "utf8", timeout: 10000 });
  const rows = (ps.stdout || "").trim().split("\\n").map((line) => line.trim().split(/\\s+/)).filter((row) => row[0] !== String(ps.pid));
  const found = [];
  for (let parents = [String(process.pid)]; parents.length > 0; ) {
    const children = rows.filter((row) => parents.includes(row[1]));
    found.push(...children);
    parents = children.map((row) => row[0]);
  }
  return found;
}
function stacks(pid) {
  const gdb = spawnSync("gdb", ["-p", pid, "-batch", "-ex", "thread apply all bt"], { stdio: ["ignore", 2, 2], timeout: 60000 });
  if (gdb.error) writeSync(2, "watchdog: no native stacks of " + pid + " (gdb: " + gdb.error.message + ")\\n");
}
function check() {
  const stood_ms = Number(process.hrtime.bigint() / 1000000n - Atomics.load(beat, 0));
  if (stood_ms < workerData.stall_ms) return setTimeout(check, 1000);
  const below = descendants();
  // Stopped at once, so no pid of theirs is freed (and reused) while stacks are taken.
  for (const [pid] of below) {
    try { process.kill(Number(pid), "SIGSTOP"); } catch {}
  }
  writeSync(2, "\\nwatchdog: test process " + process.pid + " stood still for " + Math.round(stood_ms / 1000) + " s in " + running + "; its threads' native stacks follow, then it is killed" + (below.length > 0 ? " with the processes it started" : "") + "\\n");
  stacks(String(process.pid));
  for (const [pid] of below) {
    spawnSync("ps", ["-o", "pid,etime,args", "-p", pid], { stdio: ["ignore", 2, 2], timeout: 10000 });
    stacks(pid);
  }
  for (const [pid] of below) {
    try { process.kill(Number(pid), "SIGKILL"); } catch {}
  }
  process.kill(process.pid, "SIGKILL");
}
check();
`;

const slot = Symbol.for("bursar.test.watchdog");
const holder = globalThis as typeof globalThis & { [slot]?: Worker };

// The monotonic clock, in ms, taken now: it stands still while the machine sleeps, a step of the
// wall clock does not move it, and a test that fakes timers later does not replace it.
const hrtime = process.hrtime.bigint.bind(process.hrtime);
const now_ms = () => hrtime() / 1_000_000n;

function start(): Worker {
  const heartbeat = new SharedArrayBuffer(8);
  const beat = new BigInt64Array(heartbeat);
  const tick = () => Atomics.store(beat, 0, now_ms());
  tick();
  setInterval(tick, 1000).unref();
  const worker = new Worker(watcher, { eval: true, workerData: { heartbeat, stall_ms } });
  worker.unref();
  return worker;
}

// setupFiles run before every file; a process that runs several files keeps one watcher. Not
// when tests run on worker threads (killing the process would end the whole run) or under a
// debugger (a breakpoint stands the loop still on purpose).
const watching = isMainThread && inspector.url() === undefined;
const watcher_thread = watching ? (holder[slot] ??= start()) : undefined;

function running(test?: string): string {
  const state = expect.getState();
  const file = state.testPath === undefined ? "(unknown file)" : relative(process.cwd(), state.testPath);
  return test === undefined ? `${file} (outside a test)` : `${file} > ${test}`;
}

watcher_thread?.postMessage(running());
beforeEach(() => {
  watcher_thread?.postMessage(running(expect.getState().currentTestName ?? "(unnamed test)"));
});
// A stall in afterAll, or between tests, is not laid at the last test's door.
afterEach(() => {
  watcher_thread?.postMessage(running());
});
