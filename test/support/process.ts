// Real `bursar` processes for tests: spawn, wait for the listen line, kill, collect output.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { bursar_bin } from "./build.js";

export interface BursarProcess {
  child: ChildProcessWithoutNullStreams;
  url: string;
  /** Both streams, interleaved as they arrived. */
  output(): string;
  stdout(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** The lowest port the kernel hands to outgoing connections (Linux; 32768 when unreadable). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isSafeInteger(low) ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function bindable(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      const bound = typeof address === "object" && address ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

/** Ports below the ephemeral range are tried from here up. */
const chosen_port_min = 10_000;

/**
 * A loopback port free right now, for a process the test starts later. It is chosen below the
 * kernel's ephemeral range, so no outgoing connection (another test's client, a load test on
 * the same machine) can take it meanwhile; the remaining race is another process binding that
 * very port on purpose. With no room below the range, any free port.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  if (low - chosen_port_min >= 1_000) {
    for (let attempt = 0; attempt < 100; attempt++) {
      const port = await bindable(chosen_port_min + Math.floor(Math.random() * (low - chosen_port_min)));
      if (port !== undefined) return port;
    }
  }
  const port = await bindable(0);
  if (port === undefined) throw new Error("no free loopback port");
  return port;
}

export async function startBursar(args: string[], env: Record<string, string>, timeout_ms = 20_000): Promise<BursarProcess> {
  const child = spawn(process.execPath, [bursar_bin, ...args], {
    env: { ...process.env, BURSAR_LOG_LEVEL: "warn", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listen line within ${timeout_ms} ms:\n${output}`)), timeout_ms);
    const check = () => {
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before listening:\n${output}`));
    });
  });
  return {
    child,
    url,
    output: () => output,
    stdout: () => stdout,
    stop: (signal = "SIGTERM") =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once("exit", (code) => resolve(code));
        child.kill(signal);
      }),
  };
}

/** Runs a bursar command to completion; `input` (default none) is written to its stdin, which is then closed.
 *  With `timeout_ms`, a command still running then is killed (code null), so a hang fails the test instead of stalling it. */
export async function runBursar(
  args: string[],
  env: Record<string, string> = {},
  input?: string | Buffer,
  timeout_ms?: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [bursar_bin, ...args], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"], timeout: timeout_ms, killSignal: "SIGKILL" });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  // A command that exits before reading all of it (a refused token) must not fail the test with EPIPE.
  child.stdin.on("error", () => undefined);
  child.stdin.end(input ?? "");
  return { code: await exited, stdout, stderr };
}

/**
 * Runs `command` in a process group of its own and collects its output. Past `timeout_ms` the
 * whole group is killed (npm's grandchildren too, which hold the output pipes open) and
 * `timed_out` is set, so a stuck step ends where the test can say which it was.
 */
export async function runGroup(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeout_ms: number },
): Promise<{ code: number | null; stdout: string; stderr: string; timed_out: boolean }> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  let timed_out = false;
  const timer = setTimeout(() => {
    timed_out = true;
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // Gone already.
    }
  }, options.timeout_ms);
  try {
    // "close": the output is whole once every process holding the pipes has let go of them.
    const [code] = (await once(child, "close")) as [number | null];
    return { code, stdout, stderr, timed_out };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `command` (shell text) as `command 2>&1 | head -1` under bash, its stdout and stderr one
 * pipe whose reader goes away after a line (or, given `stderr_file`, stdout alone, stderr written
 * to that file), and answers the command's own exit status; killed
 * (and answered null) if it is still running after `timeout_ms`, so a hang fails the test.
 */
export async function pipedThroughHead(command: string, env: Record<string, string>, timeout_ms = 30_000, stderr_file?: string): Promise<number | null> {
  const stderr = stderr_file === undefined ? "2>&1" : `2>${JSON.stringify(stderr_file)}`;
  const script = `${command} ${stderr} | head -1 >/dev/null; exit \${PIPESTATUS[0]}`;
  // Its own process group, so a timeout kills the command as well as bash.
  const child = spawn("bash", ["-c", script], { env: { ...process.env, ...env }, stdio: "ignore", detached: true });
  const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), timeout_ms);
  const [code, signal] = (await once(child, "exit")) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  return signal === null ? code : null;
}
