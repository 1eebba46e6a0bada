// `bursar export --from URL`: the same JSONL export, read from a running server's log routes
// with an auditor (or operator) token instead of from the database, so an auditor who holds no
// database can still check the whole log offline with `bursar verify`. It ends on the server's
// latest signed checkpoint; the entries are written as their canonical bytes, each checked
// against the leaf hash the server sent with it.

import { setTimeout as sleep } from "node:timers/promises";
import { CanonicalJsonError, canonicalJson } from "../evidence/canonical.js";
import { exportCheckpointLine, exportHeaderLine, type ExportSummary } from "../evidence/export.js";
import { leafHash } from "../evidence/merkle.js";
import { NoteError, parseCheckpoint, parseNote } from "../evidence/note.js";
import { Progress } from "../eval/progress.js";
import { visibleText } from "../policy/arguments.js";
import { CommandError, redacted, type CliIo } from "./command.js";

/** How long one GET (the checkpoint, or a page of the log) may take, its body read to the end
 *  (the signal aborts the body's stream too); past it the export fails, naming the route. */
const request_timeout_ms = 60_000;
/** How often a 503 `busy` page is asked again (the server says when, in Retry-After). */
const busy_retries_max = 10;
const busy_wait_ms_max = 5_000;

export interface RemoteLog {
  base_url: string;
  token: string;
}

interface Page {
  start: number;
  end: number;
  entries: Array<{ seq: number; leaf_hash: string; entry: unknown; receipt: unknown }>;
}

/** A page holds at most 1,000 entries and stops once they hold 16 MiB; a body past this is no page. */
const response_bytes_max = 64 * 1024 * 1024;

/** The body as text, read up to `max` bytes: a server that sends more is refused, not buffered. */
async function cappedText(response: Response, path: string, max: number): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    if (bytes > max) {
      await reader.cancel();
      throw new CommandError(`--from: GET ${path} sent more than ${max} bytes, more than any page of the log`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * One GET against the server; the body as text, or a CommandError naming the route, never the
 * token. Redirects are not followed (the token goes to the URL given, nowhere else); a 503 that
 * says when to ask again (Retry-After, as a busy page does) is asked again.
 */
async function get(log: RemoteLog, path: string, authorized: boolean): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${log.base_url}${path}`, {
        headers: authorized ? { authorization: `Bearer ${log.token}` } : {},
        redirect: "manual",
        signal: AbortSignal.timeout(request_timeout_ms),
      });
      text = await cappedText(response, path, response_bytes_max);
    } catch (error) {
      if (error instanceof CommandError) throw error;
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new CommandError(redacted(`--from: GET ${path} from ${log.base_url} failed (${cause?.code ?? cause?.message ?? (error as Error).message})`, [log.token]));
    }
    if (response.ok) return text;
    const retry_after = response.headers.get("retry-after");
    if (response.status === 503 && retry_after !== null && attempt < busy_retries_max) {
      const after = Number(retry_after);
      await sleep(Number.isFinite(after) && after > 0 ? Math.min(after * 1000, busy_wait_ms_max) : 1000);
      continue;
    }
    if (response.status >= 300 && response.status < 400) {
      throw new CommandError(`--from: GET ${path} answered HTTP ${response.status}, a redirect, which is not followed (the token goes only to --from): give --from the server's own URL`);
    }
    // Redacted before it is cut short: a token cut in two would no longer be found.
    const shown = visibleText(redacted(text, [log.token]).slice(0, 300) || "(empty body)");
    const hint = response.status === 401 || response.status === 403 ? " (an auditor or operator token: BURSAR_AUDITOR_TOKEN, BURSAR_ADMIN_TOKEN or --token)" : "";
    throw new CommandError(`--from: GET ${path} answered HTTP ${response.status}${hint}: ${shown}`);
  }
}

/** The page `path` asked for, of at most `asked` entries, each an object. */
function parsePage(text: string, path: string, asked: number): Page {
  let page: Page;
  try {
    page = JSON.parse(text) as Page;
  } catch {
    throw new CommandError(`--from: GET ${path} is not JSON, so not a page of log entries`);
  }
  const entries = (page as { entries?: unknown } | null)?.entries;
  if (!Array.isArray(entries) || !entries.every((one) => typeof one === "object" && one !== null && !Array.isArray(one))) {
    throw new CommandError(`--from: GET ${path} is not a page of log entries`);
  }
  if (entries.length > asked) throw new CommandError(`--from: GET ${path} sent ${entries.length} entries, more than the ${asked} asked for`);
  return page;
}

/** The server's latest signed checkpoint: its note text and the tree size it signs. */
export async function remoteCheckpoint(log: RemoteLog): Promise<{ note: string; size: number }> {
  const note = await get(log, "/api/v1/log/checkpoint", false);
  try {
    return { note, size: parseCheckpoint(parseNote(note).text).size };
  } catch (error) {
    if (error instanceof NoteError) throw new CommandError(`--from: GET /api/v1/log/checkpoint is not a signed checkpoint (${error.message})`);
    throw error;
  }
}

/**
 * Writes entries [0, size) as `bursar export` does (header, each entry's canonical bytes and its
 * receipt), then the checkpoint `note` after the last. An entry whose canonical bytes do not
 * hash to the leaf hash the server sent stops the export: what is written would not verify.
 */
export async function exportRemote(
  log: RemoteLog,
  checkpoint: { note: string; size: number },
  io: CliIo,
  write: (text: string) => Promise<void>,
): Promise<ExportSummary> {
  const progress = new Progress(io.stderr, io.stderr_interactive, "exported entries", checkpoint.size);
  let bytes = 0;
  const emit = async (text: string) => {
    bytes += Buffer.byteLength(text, "utf8");
    await write(text);
  };
  if (checkpoint.size === 0) throw new CommandError("--from: the server's latest checkpoint signs an empty log");
  progress.update(0);
  for (let start = 0; start < checkpoint.size; ) {
    const end = Math.min(checkpoint.size, start + 1000);
    const path = `/api/v1/log/entries?start=${start}&end=${end}`;
    const page = parsePage(await get(log, path, true), path, end - start);
    if (page.entries.length === 0) throw new CommandError(`--from: the server's log ends at ${start} entries, before its checkpoint's ${checkpoint.size}`);
    let text = "";
    for (const [index, { seq, leaf_hash, entry, receipt }] of page.entries.entries()) {
      if (seq !== start + index) throw new CommandError(`--from: GET ${path} sent entry ${seq} where ${start + index} belongs`);
      const line = canonicalLine(entry, `entry ${seq}`);
      if (leafHash(line).toString("hex") !== leaf_hash) throw new CommandError(`--from: entry ${seq}'s canonical bytes do not hash to the leaf hash the server sent with it`);
      if (seq === 0) text += exportHeaderLine((entry as { body?: unknown }).body, checkpoint.size, new Date().toISOString());
      text += `${line}\n${receipt ? `${canonicalLine({ receipt }, `entry ${seq}'s receipt`)}\n` : ""}`;
    }
    start += page.entries.length;
    if (start === checkpoint.size) text += exportCheckpointLine(checkpoint.note);
    await emit(text);
    progress.update(start);
  }
  return { entries: checkpoint.size, checkpoints: 1, bytes };
}

/** The canonical bytes of `value` (`what` the server sent); what has none (a lone surrogate, nesting too deep) is refused. */
function canonicalLine(value: unknown, what: string): string {
  try {
    return canonicalJson(value);
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new CommandError(`--from: ${what} has no canonical JSON (${error.message}), so it is not what a log holds`);
    throw error;
  }
}
