// `bursar send-decisions`: what integrators copy. Reads a .jsonl file of decision records,
// checks that each line is one JSON record, posts it to a source's webhook in deliveries of at
// most 500 records (and 2 MiB), each signed with Bursar-Signature, and appends every delivery
// receipt it gets back.

import { appendFileSync, closeSync, openSync, readFileSync, statSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { systemClock } from "../../clock.js";
import { secret } from "../../config.js";
import { deadline } from "../../deadline.js";
import { delivery_bytes_max, isBlankLine, records_per_delivery_max } from "../../ingest/delivery.js";
import { signature_header, signatureHeader } from "../../ingest/signature.js";
import { isPlainObject } from "../../policy/index.js";
import { visibleText } from "../../policy/arguments.js";
import { baseUrlOption, CommandError, counted, parseOptions, println, signalExitCode, UsageError, type CliIo } from "../command.js";

export const signing_key_variable = "BURSAR_SOURCE_SIGNING_KEY";
export const file_bytes_max = 1_073_741_824;
const progress_width = 30;
/** A delivery answered 503 with Retry-After is sent this many times at most, waiting at most retry_after_seconds_max between. */
export const busy_attempts_max = 5;
export const retry_after_seconds_max = 60;
/** How long one delivery may wait for its whole answer (--timeout), by default and at most. */
export const timeout_seconds_default = 60;
export const timeout_seconds_max = 3600;

export const help = `
usage: bursar send-decisions FILE --url URL --source ID [--batch N] [--receipts FILE] [--timeout S]

Signs and posts FILE (JSON Lines: one bursar.gateway-decision/1 record per line) to the
source's webhook POST {URL}/ingest/{ID}, in deliveries of at most N records (default and
maximum ${records_per_delivery_max}) and at most ${delivery_bytes_max} bytes. Each delivery carries
  Bursar-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(signing key, t + "." + body)>
Every non-blank line must be one whole JSON record: FILE is checked before anything is
sent, and a record written over several lines (pretty-printed) is refused, naming its
first line. One UTF-8 byte order mark (EF BB BF) at the start of FILE, as PowerShell 5 and
some Windows editors write, is left out. Lines are sent byte for byte; each record's hash
is over its JSON text exactly as you wrote it (the line ending and the spaces, tabs and
CRs around the text excluded).
A repeated run is safe: records already received return their first receipt.
Interrupted (SIGINT, Ctrl-C, or SIGTERM), it stops the delivery in flight and says in one line
how many records were accepted so far, in how many deliveries, and that their receipts are in
the receipts file; it exits 130 (SIGINT) or 143 (SIGTERM). Re-run the same command to finish.
A delivery answered 503 with Retry-After (a server busy reading other deliveries) is sent
again after the seconds it names (at most ${retry_after_seconds_max}), up to ${busy_attempts_max} attempts in all,
with one line on stderr each time.
Stops at the first refused delivery and prints the server's answer (with file line numbers).
An answer of 2xx is taken only when it is the delivery's receipt: a JSON object with whole
numbers records, written and duplicates, and a receipt whose records list the event_ids sent,
in order. Anything else (a proxy's or login page's HTML, an empty object) stops the run with
one line naming the delivery and what was wrong, and writes nothing to the receipts file for it.
Redirects are not followed: a delivery answered 3xx (a proxy moving the server, or http to
https) stops the run with one line naming the Location, saying nothing was stored by that
delivery, and which --url reaches the server it points to.
A delivery not answered whole within --timeout seconds is given up: one line saying the server
may have stored it (re-run to learn), exit 1.
Exit codes: 0 all sent; 1 a delivery was refused, redirected, answered without its receipt or
not in time, or the server could not be reached (a connection lost after a delivery was sent
says it may have been stored: re-run to learn); 2 bad arguments (a --url with user:password@, a query or a fragment, a
${signing_key_variable} unset or of only whitespace), an unreadable FILE, a line of FILE
that is not JSON on its own, or a receipts file that cannot be written or is FILE itself
(by any path, symlink or hard link; both checked before anything is sent).

options:
  --url URL          the Bursar server, e.g. http://127.0.0.1:8787 (no query or fragment; no
                     user:password@: such a URL is refused without being shown)
  --source ID        the decisions source id (src_…)
  --batch N          records per delivery, 1..${records_per_delivery_max} (default ${records_per_delivery_max})
  --receipts FILE    append each delivery's signed receipt to FILE, one JSON per line, as
                     it arrives; receipts already in FILE are kept (a re-run appends the
                     first receipts again for records already received); never FILE itself
  --timeout S        seconds to wait for each delivery's whole answer, 1..${timeout_seconds_max}
                     (default ${timeout_seconds_default})

Environment:
  ${signing_key_variable}   the source's signing key (shown once when the source was created);
                             one of only whitespace is refused (exit 2) without being shown
`;

interface FileRecord {
  /** 1-based file line number. */
  line: number;
  bytes: Buffer;
}

interface Delivery {
  /** 1-based file line number of each record. */
  lines: number[];
  /** Each record's event_id (undefined where it is not a string: the server refuses that record). */
  event_ids: Array<string | undefined>;
  body: Buffer;
}

const utf8_byte_order_mark = Buffer.from([0xef, 0xbb, 0xbf]);


/**
 * Non-blank lines with their 1-based numbers, each kept byte for byte (without its line ending),
 * after one leading byte order mark: the server would read it as part of line 1's JSON.
 */
function fileRecords(path: string): FileRecord[] {
  const read = readOrExplain(path);
  if (read.length > file_bytes_max) throw new UsageError(`${path} is larger than ${file_bytes_max} bytes; split it`);
  const data = read.subarray(0, utf8_byte_order_mark.length).equals(utf8_byte_order_mark) ? read.subarray(utf8_byte_order_mark.length) : read;
  const records: FileRecord[] = [];
  let start = 0;
  for (let line = 1; start < data.length; line++) {
    let end = data.indexOf(0x0a, start);
    if (end === -1) end = data.length;
    const bytes = data.subarray(start, end > start && data[end - 1] === 0x0d ? end - 1 : end);
    if (!isBlankLine(bytes)) records.push({ line, bytes });
    start = end + 1;
  }
  return records;
}

/**
 * Refuses FILE, before anything is sent, at its first line that is not JSON on its own. The server
 * may read a delivery whose lines are pieces of one pretty-printed object as that one object, and
 * refuses both halves of one cut by a delivery boundary, while this command counts lines as records.
 * Returns each record's event_id, which its delivery's receipt must list.
 */
function checkOneRecordPerLine(records: readonly FileRecord[]): Array<string | undefined> {
  return records.map((record) => {
    let value: unknown;
    try {
      // JSON.parse skips the same whitespace the server leaves out around the line's text.
      value = JSON.parse(record.bytes.toString("utf8")) as unknown;
    } catch {
      throw new UsageError(`line ${record.line} is not JSON on its own: each record must be one line of JSON (write a pretty-printed record on one line, e.g. with jq -c)`);
    }
    // An array would be read by the server as a delivery of its own records (a whole body that is one array).
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new UsageError(`line ${record.line} is not a JSON object: each line must hold one record, not ${Array.isArray(value) ? "an array of them" : "a bare value"}`);
    }
    const event_id = (value as { event_id?: unknown }).event_id;
    return typeof event_id === "string" ? event_id : undefined;
  });
}

function systemMessage(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return (error as { code?: string }).code ?? cause?.code ?? cause?.message ?? (error as Error).message;
}

function readOrExplain(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new UsageError(`cannot read ${path} (${systemMessage(error)})`);
  }
}

/**
 * Refuses a receipts file that is FILE itself (by device and inode, so another spelling of the
 * path, a symlink or a hard link is caught too): receipts appended to it would be read by the
 * next run as records and sent. A receipts file that does not exist yet cannot be FILE.
 */
function refuseReceiptsIntoFile(receipts: string, file: string): void {
  const receipts_stats = statSync(receipts, { throwIfNoEntry: false });
  if (receipts_stats === undefined) return;
  const file_stats = statSync(file);
  if (receipts_stats.dev === file_stats.dev && receipts_stats.ino === file_stats.ino) {
    throw new CommandError(`--receipts ${receipts}: the same file as FILE ${file} (receipts appended to it would be sent as records by the next run); choose another path; nothing was sent`);
  }
}

/** Opens (creating it if missing) the receipts file for appending before anything is sent: one
 *  that cannot be written would otherwise stop the run only after its first delivery was stored. */
function checkReceiptsWritable(path: string): void {
  try {
    closeSync(openSync(path, "a"));
  } catch (error) {
    throw new UsageError(`cannot write receipts to ${path} (${systemMessage(error)}); nothing was sent`);
  }
}

/** Appends one receipt line; never truncates, so receipts of earlier runs survive a failed re-run. */
function appendReceipt(path: string, receipt: unknown): void {
  try {
    appendFileSync(path, `${JSON.stringify(receipt)}\n`);
  } catch (error) {
    throw new UsageError(`cannot write receipts to ${path} (${systemMessage(error)})`);
  }
}

interface Answer {
  status: number;
  ok: boolean;
  content_type: string;
  text: string;
  /** The Retry-After header, when the answer had one. */
  retry_after: string | null;
  /** The Location header, when the answer had one (a 3xx names where it redirects). */
  location: string | null;
}

/** Failures that happen before a request leaves (no connection made): nothing of the delivery reached the server. */
const unsent_failure_codes: ReadonlySet<string> = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "UND_ERR_CONNECT_TIMEOUT"]);

interface Failed {
  failed: string;
  /** False when no connection was made; true when the connection failed after the delivery may have been sent. */
  maybe_stored: boolean;
  /** The delivery was given up after --timeout seconds without its whole answer. */
  timed_out?: true;
}

/**
 * One POST; a network failure (refused, reset, DNS) becomes one line naming the endpoint.
 * Redirects are not followed: following a 307/308 sends the body again, which fetch cannot do
 * with this one (it failed as "cannot reach … detached ArrayBuffer … may have stored them"),
 * and the records would go to a server the user did not name. A 3xx is answered as it came.
 */
async function post(endpoint: string, key: string, delivery: Delivery, abort: AbortSignal, timeout_seconds: number): Promise<Answer | Failed> {
  // A server that takes the delivery and never answers would otherwise hold the run for ever.
  const limit = deadline(timeout_seconds * 1000, `no answer within ${timeout_seconds} s`, abort);
  try {
    const response = await fetch(endpoint, {
      method: "POST",
      redirect: "manual",
      signal: limit.signal,
      headers: { "content-type": "application/x-ndjson", [signature_header]: signatureHeader([key], delivery.body, systemClock()) },
      body: new Uint8Array(delivery.body),
    });
    const content_type = response.headers.get("content-type") ?? "no content-type";
    return { status: response.status, ok: response.ok, content_type, text: await response.text(), retry_after: response.headers.get("retry-after"), location: response.headers.get("location") };
  } catch (error) {
    if ((error as Error).name === "TimeoutError") return { failed: `no whole answer from ${endpoint} within ${timeout_seconds} s (--timeout)`, maybe_stored: true, timed_out: true };
    const reason = systemMessage(error);
    return { failed: `cannot reach ${endpoint} (${reason})`, maybe_stored: !unsent_failure_codes.has(reason) };
  } finally {
    limit.release();
  }
}

/** The seconds a 503 asks to wait before the delivery is sent again (Retry-After in seconds), or undefined. */
function busyWait(response: Answer | Failed): number | undefined {
  if ("failed" in response || response.status !== 503 || response.retry_after === null || !/^\d{1,9}$/.test(response.retry_after.trim())) return undefined;
  return Math.min(Number(response.retry_after.trim()), retry_after_seconds_max);
}

/** Posts a delivery, sending it again after the wait a busy server's 503 names (busy_attempts_max in all). */
async function postPatiently(io: CliIo, { endpoint, key, abort, timeout_seconds }: Sending, delivery: Delivery): Promise<Answer | Failed> {
  for (let attempt = 1; ; attempt++) {
    const response = await post(endpoint, key, delivery, abort, timeout_seconds);
    const wait = attempt < busy_attempts_max ? busyWait(response) : undefined;
    if (wait === undefined || abort.aborted) return response;
    if (io.stderr_interactive) io.stderr.write("\n");
    println(io.stderr, `bursar send-decisions: lines ${delivery.lines[0]}..${delivery.lines.at(-1)}: the server is busy (HTTP 503); sending them again in ${wait} s (attempt ${attempt + 1} of ${busy_attempts_max})`);
    await sleep(wait * 1000, undefined, { signal: abort }).catch(() => undefined);
    if (abort.aborted) return response;
  }
}

function deliveries(records: readonly FileRecord[], event_ids: ReadonlyArray<string | undefined>, batch: number): Delivery[] {
  const out: Delivery[] = [];
  let current: { lines: number[]; event_ids: Array<string | undefined>; parts: Buffer[]; bytes: number } = { lines: [], event_ids: [], parts: [], bytes: 0 };
  const flush = () => {
    if (current.lines.length > 0) out.push({ lines: current.lines, event_ids: current.event_ids, body: Buffer.concat(current.parts) });
    current = { lines: [], event_ids: [], parts: [], bytes: 0 };
  };
  for (const [index, record] of records.entries()) {
    const size = record.bytes.length + 1;
    if (size > delivery_bytes_max) throw new UsageError(`line ${record.line} is larger than one delivery (${delivery_bytes_max} bytes)`);
    if (current.lines.length >= batch || current.bytes + size > delivery_bytes_max) flush();
    current.lines.push(record.line);
    current.event_ids.push(event_ids[index]);
    current.parts.push(record.bytes, Buffer.from("\n"));
    current.bytes += size;
  }
  flush();
  return out;
}

function progress(io: CliIo, done: number, total: number): void {
  if (!io.stderr_interactive) return;
  const filled = total === 0 ? progress_width : Math.round((done / total) * progress_width);
  io.stderr.write(`\r[${"#".repeat(filled)}${" ".repeat(progress_width - filled)}] ${done}/${total} records`);
  if (done === total) io.stderr.write("\n");
}

/** The server's refusal, with record indexes mapped to file line numbers. */
function describeRefusal(status: number, text: string, delivery: Delivery): string {
  let body: { error?: { code?: string; message?: string; details?: { problems?: Array<{ index: number; field: string; message: string }>; records?: Array<{ index: number; event_id: string }> } } };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return `HTTP ${status}: ${text.slice(0, 500)}`;
  }
  const lines = [`HTTP ${status} ${body.error?.code ?? ""}: ${body.error?.message ?? ""}`];
  for (const problem of body.error?.details?.problems ?? []) lines.push(`  line ${delivery.lines[problem.index] ?? "?"}: ${problem.field}: ${problem.message}`);
  for (const record of body.error?.details?.records ?? []) lines.push(`  line ${delivery.lines[record.index] ?? "?"}: event_id ${record.event_id}`);
  // Bursar answers an unknown source id as it answers a wrong key (ids are not probeable).
  if (status === 401 && body.error?.code === "signature_mismatch") {
    lines.push("  check BURSAR_SOURCE_SIGNING_KEY, and that --source is the id of an enabled decisions source (an unknown id is answered the same way)");
  }
  return lines.join("\n");
}

/** A 2xx answer as the command uses it: the counts and the receipt it appends. */
interface Accepted {
  written: number;
  receipt: Record<string, unknown>;
}

/** A value from an answer, shown short on one line. */
function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > answer_shown_chars_max ? `${text.slice(0, answer_shown_chars_max)}…` : text;
}

const answer_shown_chars_max = 80;
const answer_counts = ["records", "written", "duplicates"] as const;

/**
 * The delivery's receipt from a 2xx answer, or what is wrong with the answer. A proxy, a captive
 * portal or another server on --url can answer 200 with HTML or with JSON of another shape: taken
 * for a receipt, it made a stack trace, or "NaN new" and a receipts line reading `undefined`.
 */
function acceptedAnswer(answer: Answer, delivery: Delivery): Accepted | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(answer.text) as unknown;
  } catch {
    return { problem: `the answer is not JSON (${answer.content_type}: ${shown(answer.text.slice(0, answer_shown_chars_max))})` };
  }
  if (!isPlainObject(value)) return { problem: `the answer is not a JSON object: ${shown(value)}` };
  for (const count of answer_counts) {
    const number = value[count];
    if (typeof number !== "number" || !Number.isSafeInteger(number) || number < 0) return { problem: `"${count}" is ${number === undefined ? "missing" : shown(number)}, not a whole number` };
  }
  const { records, written, duplicates, receipt } = value as { records: number; written: number; duplicates: number; receipt: unknown };
  const sent = delivery.lines.length;
  if (records !== sent || written + duplicates !== records) return { problem: `it counts ${records} records, ${written} written and ${duplicates} duplicates, for ${sent} sent` };
  if (!isPlainObject(receipt) || !Array.isArray(receipt.records)) return { problem: `"receipt" is ${receipt === undefined ? "missing" : "not an object with a records list"}` };
  if (receipt.records.length !== sent) return { problem: `the receipt lists ${receipt.records.length} records for ${sent} sent` };
  for (const [index, listed] of (receipt.records as unknown[]).entries()) {
    const event_id = isPlainObject(listed) ? listed.event_id : undefined;
    if (event_id === undefined || event_id !== delivery.event_ids[index]) {
      return { problem: `the receipt lists ${shown(event_id)} where line ${delivery.lines[index]}'s event_id ${shown(delivery.event_ids[index])} was sent` };
    }
  }
  return { written, receipt };
}

const interrupting_signals = ["SIGINT", "SIGTERM"] as const;

/** The one line an interrupted run ends with, worded as the summary of a whole run ("sent N records in M deliveries"). */
function interruptedLine(signal: NodeJS.Signals, sent: number, total: number, delivered: number, receipts: string | undefined): string {
  const deliveries_text = counted(delivered, "delivery", "deliveries");
  const held = receipts === undefined ? "" : `; their receipts are in ${receipts}`;
  return `bursar send-decisions: interrupted (${signal}): sent ${sent} of ${total} records in ${deliveries_text} before stopping${held}; re-running the same command is safe (records already received return their first receipts)`;
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseOptions(argv, {
    url: { type: "string" },
    source: { type: "string" },
    batch: { type: "string" },
    receipts: { type: "string" },
    timeout: { type: "string" },
  });
  const file = positionals[0];
  if (!file || positionals.length > 1) throw new UsageError("give exactly one FILE");
  if (!values.url || !values.source) throw new UsageError("--url URL and --source ID are required");
  const batch = values.batch === undefined ? records_per_delivery_max : Number(values.batch);
  if (!Number.isSafeInteger(batch) || batch < 1 || batch > records_per_delivery_max) throw new UsageError(`--batch must be an integer from 1 to ${records_per_delivery_max}`);
  const timeout_seconds = values.timeout === undefined ? timeout_seconds_default : Number(values.timeout);
  if (!/^\d+$/.test(values.timeout ?? "1") || !Number.isSafeInteger(timeout_seconds) || timeout_seconds < 1 || timeout_seconds > timeout_seconds_max) {
    throw new UsageError(`--timeout must be a whole number of seconds from 1 to ${timeout_seconds_max}`);
  }
  const key = secret(io.env, signing_key_variable);
  if (!key) throw new UsageError(`${signing_key_variable} must hold the source's signing key`);
  const endpoint = `${baseUrlOption(values.url, signing_key_variable)}/ingest/${encodeURIComponent(values.source)}`;
  const records = fileRecords(file);
  const event_ids = checkOneRecordPerLine(records);
  const planned = deliveries(records, event_ids, batch);
  if (values.receipts !== undefined) {
    refuseReceiptsIntoFile(values.receipts, file);
    checkReceiptsWritable(values.receipts);
  }
  const total = planned.reduce((sum, delivery) => sum + delivery.lines.length, 0);
  // SIGINT/SIGTERM abort the delivery in flight; the loop then reports what was accepted.
  const abort = new AbortController();
  let interrupted: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    interrupted ??= signal;
    abort.abort();
  };
  for (const signal of interrupting_signals) process.once(signal, onSignal);
  try {
    return await send(io, { endpoint, key, planned, total, receipts: values.receipts, timeout_seconds, abort: abort.signal, interrupted: () => interrupted });
  } finally {
    for (const signal of interrupting_signals) process.off(signal, onSignal);
  }
}

interface Sending {
  endpoint: string;
  key: string;
  planned: Delivery[];
  total: number;
  receipts: string | undefined;
  timeout_seconds: number;
  abort: AbortSignal;
  /** The signal that interrupted the run, once one has. */
  interrupted(): NodeJS.Signals | undefined;
}

async function send(io: CliIo, sending: Sending): Promise<number> {
  const { endpoint, planned, total, receipts, abort, interrupted } = sending;
  let sent = 0;
  let written = 0;
  let delivered = 0;
  progress(io, 0, total);
  for (const delivery of planned) {
    // Interrupted between deliveries, or during one (aborted, so its answer is lost): stop here.
    // A delivery answered with its receipt before the signal was heard is still counted and its receipt kept.
    const response = abort.aborted ? undefined : await postPatiently(io, sending, delivery);
    const accepted = response === undefined || "failed" in response || !response.ok ? undefined : acceptedAnswer(response, delivery);
    const signal = interrupted();
    if (signal && (accepted === undefined || "problem" in accepted)) {
      if (io.stderr_interactive) io.stderr.write("\n");
      println(io.stderr, interruptedLine(signal, sent, total, delivered, receipts));
      return signalExitCode(signal);
    }
    if (response === undefined) throw new Error("unreachable: no delivery without an interruption");
    if (accepted === undefined || "problem" in accepted) {
      if (io.stderr_interactive) io.stderr.write("\n");
      // What the server answered is quoted in it (a field name, an event_id, its message, a page):
      // control and invisible characters are written as escapes, line by line.
      println(io.stderr, failureLines(response, accepted, { endpoint, delivery, sent, receipts }).split("\n").map(visibleText).join("\n"));
      return 1;
    }
    if (receipts) appendReceipt(receipts, accepted.receipt);
    sent += delivery.lines.length;
    written += accepted.written;
    delivered += 1;
    progress(io, sent, total);
  }
  println(io.stdout, `sent ${counted(sent, "record", "records")} in ${counted(planned.length, "delivery", "deliveries")}: ${written} new, ${sent - written} already received`);
  return 0;
}

/** Why the run stops at `delivery`: the server unreachable, a refusal, or a 2xx answer that is not its receipt. */
function failureLines(
  response: Answer | Failed,
  accepted: { problem: string } | undefined,
  { endpoint, delivery, sent, receipts }: { endpoint: string; delivery: Delivery; sent: number; receipts: string | undefined },
): string {
  const lines = `lines ${delivery.lines[0]}..${delivery.lines.at(-1)}`;
  if ("failed" in response && !response.maybe_stored) return `bursar send-decisions: ${response.failed}; ${lines} not sent, ${sent} records accepted before them`;
  if ("failed" in response) {
    return `bursar send-decisions: ${response.failed} while sending ${lines}: the server may have stored them${response.timed_out ? "" : " before the connection failed"} (${sent} records accepted before them); re-run the same command to learn which (records already received return their first receipts)`;
  }
  if (response.status >= 300 && response.status < 400) return `bursar send-decisions: delivery of ${lines} ${redirected(response, endpoint, sent)}`;
  if (accepted !== undefined) {
    const kept = receipts === undefined ? "" : `nothing written to ${receipts} for it; `;
    return `bursar send-decisions: delivery of ${lines} was answered HTTP ${response.status} without its receipt: ${accepted.problem}; ${kept}${sent} records accepted before it (is --url the Bursar server, not a proxy or a login page?)`;
  }
  return `bursar send-decisions: delivery of ${lines} refused; ${sent} records accepted before it\n${describeRefusal(response.status, response.text, delivery)}`;
}

/** A Location longer than this is shown cut (a header can be kilobytes). */
const location_shown_chars_max = 200;

/**
 * What a 3xx answer (a proxy moving the server elsewhere, or from http to https) means for the
 * delivery: where it pointed, that it was not followed, so nothing was stored by it, and the
 * --url that reaches that server (the Location less the /ingest/ID this command appends).
 */
function redirected(answer: Answer, endpoint: string, sent: number): string {
  const answered = `was answered HTTP ${answer.status}, a redirect`;
  const not_stored = `not followed: nothing was stored by it (${sent} records accepted before it)`;
  if (answer.location === null) return `${answered} without a Location, ${not_stored}`;
  const target = URL.canParse(answer.location, endpoint) ? new URL(answer.location, endpoint) : undefined;
  // Not shown, as --url's own are not: credentials go in no URL this command prints.
  if (target !== undefined) [target.username, target.password] = ["", ""];
  const location = (target?.href ?? answer.location).slice(0, location_shown_chars_max);
  const ingest_path = endpoint.slice(endpoint.lastIndexOf("/ingest/"));
  const base = target !== undefined && target.search === "" && target.hash === "" && target.pathname.endsWith(ingest_path) ? `${target.origin}${target.pathname.slice(0, -ingest_path.length)}` : undefined;
  const advice = base === undefined ? "pass the Bursar server's own address as --url" : `to send there, pass --url ${base}`;
  return `${answered} to ${location}, ${not_stored}; ${advice}`;
}
