// `bursar verify`: checks an exported log, or a proof fetched from the HTTP routes, offline
// with only the public verifier key. Exit 0 verified, 1 not verified, 2 bad usage or a file
// that cannot be read.

import { closeSync, openSync, readSync } from "node:fs";
import { keyIdHex, note_bytes_max, parseVerifierKey, type NoteVerifier } from "../../evidence/note.js";
import { verifyDeliveryReceipt, verifyReceipt, type DeliveryReceipt, type Receipt } from "../../evidence/receipt.js";
import {
  checkConsistencyDocument,
  checkInclusionDocument,
  consistencyProofSchema,
  inclusionProofSchema,
} from "../../evidence/proof.js";
import { export_line_bytes_max, fileLines, verifyExportFile, type VerifyOptions, type VerifyReport } from "../../evidence/verify.js";
import { jsonPreview } from "../../json-text.js";
import { parseStrict, println, usingPath, UsageError, type CliIo } from "../command.js";
import type { z } from "zod";

export const help = `
usage: bursar verify FILE --checkpoint CP --key KEY [--origin ORIGIN] [--all-receipts]
       bursar verify --inclusion PROOF --key KEY [--origin ORIGIN] [--checkpoint CP]
                     [--index N] [--leaf-hash HASH]
       bursar verify --consistency PROOF --key KEY [--origin ORIGIN] [--checkpoint CP]
                     [--from-checkpoint KEPT]
       bursar verify --delivery-receipts RECEIPTS --key KEY [--origin ORIGIN] [FILE --checkpoint CP]
       bursar verify --receipts RECEIPTS --key KEY [--origin ORIGIN] [FILE --checkpoint CP]

Verifies offline; needs no secret, no network and no environment variable.

With FILE (a 'bursar export' JSONL): recomputes every entry's leaf hash and the tree root,
checks every signed checkpoint in the file and the trusted checkpoint CP against KEY, and
each receipt against its entry. A receipt that names its log (v2) must name this one: the leaf
hash of the export's entry 0, printed as "log". Entries past every signed checkpoint rest on
their receipts alone: each must have a v2 receipt of this log, whose signature is checked (a
v1 receipt does not name its log, and vouches for no such entry). On failure it names the
first bad entry (seq) where it can be pinpointed, else the checkpoint range [start, end) that
does not match, else the root mismatch, and exits 1. A checkpoint line that cannot be read or
verified, a receipt line that cannot be parsed, a receipt line that follows no entry and is not
this log's, one naming another log whose signature does not verify, and a line that is no
export line are named by their line ("the export file"), not as bad entries. Text quoted from
the file is cut at 80 characters, its control characters escaped.

With --inclusion / --consistency: checks a JSON proof exactly as returned by
GET /api/v1/log/proof/inclusion or /api/v1/log/proof/consistency, and that its roots are
signed by KEY (the checkpoint embedded in the proof, or CP when given). The OK line prints
what was proved, to compare by hand: for inclusion the entry's index, its leaf hash, the tree
size and root; for consistency both tree sizes and roots (roots in base64, as in a
checkpoint), and which checkpoint vouched for each. With --index or --leaf-hash the proof
must be of that entry. A consistency proof is only as good as its older root: pass the
checkpoint you kept earlier as KEPT (or as CP: a CP whose size is the proof's "from", not its
"to", is taken as the older side), and the proof must start at its size and root; a root that
differs there means the log's history differs from the one you saw (a fork or a rewrite).
Without it, the older root is the one the proof document itself carries.

With --delivery-receipts: checks the signature of every ingest delivery receipt in RECEIPTS
against KEY: one JSON per line, as 'bursar send-decisions --receipts' writes them (a whole
answer of POST /ingest/{source_id}, with its "receipt", will do too; blank lines are
skipped). A v2 receipt signs the log's origin (ORIGIN, else KEY's name) and its log id, which
is printed; a v1 receipt names no log and verifies under KEY alone, with a note. With FILE
and CP as well, FILE is verified as above, every v2 receipt must name its log, and every
record a receipt lists must name an entry of it: the entry at its seq has its leaf hash. It
names the first bad receipt by its line in RECEIPTS and exits 1.

With --receipts: the same for entry receipts, such as the "evidence.receipt" of a gate tool's
result (one JSON per line: the receipt, the "evidence" object, the result's structuredContent,
the whole CallToolResult, or the JSON-RPC response carrying it).
Its signature covers seq, leaf_hash, kind and at (and a v2 receipt's log and origin); with FILE
and CP, the export's entry at its seq must have its leaf hash.

Every checkpoint must name the log's origin: ORIGIN, or else KEY's name (Bursar names its
key after BURSAR_LOG_ORIGIN). The signature line's key name is not signed, so this is what
keeps a checkpoint (or a v2 receipt) of another log signed with the same key from passing for
this one.

options:
  --checkpoint CP     trusted signed checkpoint (note text), e.g. saved from
                      GET /api/v1/log/checkpoint or written by 'bursar export --checkpoint'
  --key KEY           trusted verifier key <name>+<hex id>+<base64> ('bursar key',
                      GET /.well-known/bursar/log-key)
  --origin ORIGIN     the log origin every checkpoint and v2 receipt must name
                      (default: KEY's name)
  --all-receipts      verify every receipt's signature (slower; by default a receipt's signature
                      is checked when it disagrees with its entry or when no signed
                      checkpoint covers its entry)
  --inclusion PROOF   verify an inclusion proof JSON file
  --index N           with --inclusion: the proof must be of entry N (its seq)
  --leaf-hash HASH    with --inclusion: the proof must be of the entry with this leaf hash
                      (64 hex digits, as in its receipt)
  --consistency PROOF verify a consistency proof JSON file
  --from-checkpoint KEPT
                      with --consistency: the signed checkpoint you kept earlier; the
                      proof must run from its size and root
  --delivery-receipts RECEIPTS
                      verify ingest delivery receipts (JSON lines), and with FILE that each
                      listed record is in the verified export
  --receipts RECEIPTS verify entry receipts (JSON lines: a tool result's evidence.receipt), and
                      with FILE that each names an entry of the verified export
`;

/** The most a checkpoint file or a proof document may hold: a signed note's own limit, and that
 *  again for a proof's hashes and fields around its checkpoint. */
const checkpoint_bytes_max = note_bytes_max;
const proof_bytes_max = 2 * note_bytes_max;

/** A file's text, read up to `bytes_max`: a longer one (/dev/zero, a pipe that never ends) is
 *  refused there, not read on for ever. */
function readText(path: string, what: string, bytes_max: number): string {
  if (path === "") throw new UsageError(`cannot read ${what}: the path given is empty`);
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw new UsageError(`cannot read ${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  }
  try {
    const chunks: Buffer[] = [];
    for (let total = 0; ; ) {
      const chunk = Buffer.allocUnsafe(65_536);
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) return Buffer.concat(chunks).toString("utf8");
      total += read;
      if (total > bytes_max) throw new UsageError(`cannot read ${what} ${path}: longer than ${bytes_max} bytes, which no ${what} is`);
      chunks.push(chunk.subarray(0, read));
    }
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`cannot read ${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  } finally {
    closeSync(fd);
  }
}

/** An origin is one checkpoint line: non-empty, no control characters. */
function originOf(origin: string | undefined): string | undefined {
  if (origin === undefined) return undefined;
  if (origin === "" || /[\u0000-\u001f]/.test(origin)) throw new UsageError("--origin: expected a checkpoint origin line (non-empty, no control characters)");
  return origin;
}

function verifierOf(key: string | undefined): NoteVerifier {
  if (!key) throw new UsageError("--key VERIFIER_KEY is required");
  try {
    return parseVerifierKey(key.trim());
  } catch (error) {
    throw new UsageError(`--key: ${(error as Error).message}`);
  }
}

/** First line: what failed; second line: where, in a fixed shape scripts can grep. */
function describeFailure(report: VerifyReport): string {
  const failure = report.failure!;
  const line = failure.line ? ` (line ${failure.line})` : "";
  const where = failure.file
    ? "the export file"
    : failure.seq !== undefined
      ? `first bad entry: seq ${failure.seq}`
      : failure.range
        ? `bad range: entries [${failure.range[0]}, ${failure.range[1]})`
        : "the checkpoint or key";
  return `FAIL ${failure.message}${line}\n  ${where}`;
}

type ExportArguments = ProofArguments & { "all-receipts"?: boolean | undefined };

/** What verifying an export takes from the command line; a usage error when CP or KEY is missing or bad. */
function exportOptions(values: ExportArguments): VerifyOptions {
  if (values.checkpoint === "") throw new UsageError('--checkpoint "": expected the path of a checkpoint file (an empty path names none)');
  if (values.checkpoint === undefined) throw new UsageError("--checkpoint CP is required to verify an export");
  verifierOf(values.key);
  const origin = originOf(values.origin);
  return { checkpoint: readText(values.checkpoint, "checkpoint", checkpoint_bytes_max), key: values.key!.trim(), ...(origin === undefined ? {} : { origin }), allReceipts: values["all-receipts"] ?? false };
}

/** The report of an export that verifies; undefined once its failure is printed. */
function verifiedExport(file: string, options: VerifyOptions, io: CliIo): VerifyReport | undefined {
  // Unreadable, missing or a directory (EISDIR): one line naming the file, exit 2.
  const report = usingPath(`export ${file}`, () => verifyExportFile(file, options));
  if (report.ok) return report;
  println(io.stderr, describeFailure(report));
  return undefined;
}

function verifyFile(file: string, values: ExportArguments, io: CliIo): number {
  const report = verifiedExport(file, exportOptions(values), io);
  if (!report) return 1;
  println(io.stdout, `OK ${report.entries} entries, ${report.checkpoints} checkpoints, ${receiptsChecked(report)}; origin ${report.origin}, log ${report.log}, tree size ${report.tree_size}, root ${report.root_hash}`);
  if (report.uncovered > 0) {
    println(io.stdout, `note: ${report.uncovered} entries after the last signed checkpoint rest on their own receipts of this log (signatures checked)`);
  }
  return 0;
}

/** Counts only receipts whose signature was verified; the rest matched an entry a checkpoint signs. */
function receiptsChecked(report: VerifyReport): string {
  const checked = `receipt signatures checked: ${report.receipts} of ${report.receipts + report.receipts_unchecked}`;
  return report.receipts_unchecked > 0 ? `${checked} (the rest match entries a signed checkpoint covers)` : checked;
}

interface ProofArguments {
  key?: string | undefined;
  origin?: string | undefined;
  checkpoint?: string | undefined;
  "from-checkpoint"?: string | undefined;
  index?: string | undefined;
  "leaf-hash"?: string | undefined;
}

/** The proof document in `path`, parsed to the route's shape; a failure line when it is not. */
function readProof<T>(kind: "inclusion" | "consistency", path: string, schema: z.ZodType<T>): { doc: T } | { failure: string } {
  let json: unknown;
  try {
    json = JSON.parse(readText(path, "proof", proof_bytes_max));
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`${path} is not JSON`);
  }
  const parsed = schema.safeParse(json);
  if (parsed.success) return { doc: parsed.data };
  const issue = parsed.error.issues[0];
  return { failure: `FAIL ${kind} proof: not the route's JSON shape (${issue?.path.join(".") ?? ""}: ${issue ? issueText(issue) : ""})` };
}

/**
 * What is wrong with a proof document, for its FAIL line. zod writes an unknown key into its
 * message as it is, at any length and with any control character; the key is quoted as every
 * value from a file is. (Paths hold only the schema's own keys and array indexes.)
 */
function issueText(issue: z.core.$ZodIssue): string {
  if (issue.code !== "unrecognized_keys") return issue.message;
  const more = issue.keys.length > 1 ? ` and ${issue.keys.length - 1} more` : "";
  return `unrecognized key ${jsonPreview(issue.keys[0])}${more}`;
}

/** --index: an entry's 0-based seq, as the inclusion route's `index`. */
function indexOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^(0|[1-9][0-9]{0,15})$/.test(text) || !Number.isSafeInteger(Number(text))) throw new UsageError(`--index: expected an entry's seq, a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`);
  return Number(text);
}

/** --leaf-hash: 64 hex digits, as a receipt's or the route's `leaf_hash`. */
function leafHashOf(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  if (!/^[0-9a-fA-F]{64}$/.test(text)) throw new UsageError("--leaf-hash: expected 64 hex digits (a receipt's leaf_hash)");
  return text.toLowerCase();
}

/** Who signed what was verified: "of ORIGIN signed by NAME+KEYID". */
function signedBy(verifier: NoteVerifier, origin: string | undefined): string {
  return `of ${origin ?? verifier.name} signed by ${verifier.name}+${keyIdHex(verifier.keyId)}`;
}

const base64 = (hex: string) => Buffer.from(hex, "hex").toString("base64");

interface ProofInputs<T> {
  doc: T;
  verifier: NoteVerifier;
  origin: string | undefined;
  /** --checkpoint's text, when given. */
  checkpoint: string | undefined;
}

/** What both proof checks start from: the key, the origin, the proof document and --checkpoint; a failure line when the document is not the route's shape. */
function proofInputs<T>(kind: "inclusion" | "consistency", path: string, schema: z.ZodType<T>, values: ProofArguments): ProofInputs<T> | { failure: string } {
  const verifier = verifierOf(values.key);
  const origin = originOf(values.origin);
  const read = readProof(kind, path, schema);
  // Not a truthiness test: an empty path must fail to read, not quietly drop the checkpoint.
  const checkpoint = values.checkpoint !== undefined ? readText(values.checkpoint, "checkpoint", checkpoint_bytes_max) : undefined;
  return "failure" in read ? read : { doc: read.doc, verifier, origin, checkpoint };
}

/** Prints a proof check's outcome: its FAIL line (exit 1), or the OK lines `ok` gives (exit 0). */
function reportProof<Verified extends { ok: true }>(
  kind: "inclusion" | "consistency",
  result: Verified | { ok: false; reason: string },
  io: CliIo,
  ok: (verified: Verified) => string[],
): number {
  if (!result.ok) {
    println(io.stderr, `FAIL ${kind} proof: ${result.reason}`);
    return 1;
  }
  for (const line of ok(result)) println(io.stdout, line);
  return 0;
}

function verifyInclusionProof(path: string, values: ProofArguments, io: CliIo): number {
  const expected = { index: indexOf(values.index), leaf_hash: leafHashOf(values["leaf-hash"]) };
  const inputs = proofInputs("inclusion", path, inclusionProofSchema, values);
  if ("failure" in inputs) {
    println(io.stderr, inputs.failure);
    return 1;
  }
  const { doc, verifier, origin, checkpoint } = inputs;
  const trusted = checkpoint === undefined ? "the proof's checkpoint" : "your checkpoint, --checkpoint";
  return reportProof("inclusion", checkInclusionDocument(doc, verifier, checkpoint, origin, expected), io, () => [
    `OK inclusion proof verifies against a checkpoint ${signedBy(verifier, origin)}: entry ${doc.index}, leaf hash ${doc.leaf_hash}, is in the tree of size ${doc.size}, root ${base64(doc.root_hash)} (${trusted})`,
  ]);
}

function verifyConsistencyProof(path: string, values: ProofArguments, io: CliIo): number {
  const inputs = proofInputs("consistency", path, consistencyProofSchema, values);
  // Not a truthiness test: an empty path must fail to read, not quietly drop the kept checkpoint.
  const fromCheckpoint = values["from-checkpoint"] !== undefined ? readText(values["from-checkpoint"], "checkpoint", checkpoint_bytes_max) : undefined;
  if ("failure" in inputs) {
    println(io.stderr, inputs.failure);
    return 1;
  }
  const { doc, verifier, origin, checkpoint } = inputs;
  return reportProof("consistency", checkConsistencyDocument(doc, verifier, checkpoint, origin, fromCheckpoint), io, ({ older, newer }) => {
    const lines = [
      `OK consistency proof verifies against checkpoints ${signedBy(verifier, origin)}: tree size ${doc.from}, root ${base64(doc.from_root)} (${older === null ? "the proof's checkpoint" : `the checkpoint you kept, ${older}`}) -> tree size ${doc.to}, root ${base64(doc.to_root)} (${newer === null ? "the proof's checkpoint" : `your checkpoint, ${newer}`})`,
    ];
    if (older === null) lines.push("note: the older root is the proof's own; to tie it to the history you saw, pass the checkpoint you kept as --from-checkpoint");
    return lines;
  });
}

/** A receipt in RECEIPTS whose signature verified: its line, the log it names (v2) and the entries it names. */
interface Verified {
  line: number;
  /** Undefined for a v1 receipt, which does not name its log. */
  log: string | undefined;
  /** `event_id` names an ingest record in a failure, where a delivery receipt lists one. */
  records: Array<{ event_id?: string; seq: number; leaf_hash: string }>;
}

/** What a receipts file holds: ingest delivery receipts, or the receipts of single entries. */
interface ReceiptKind {
  /** As `--delivery-receipts` or `--receipts` names what it reads. */
  what: string;
  /** Checks one receipt; the entries it names when its signature verifies. */
  check(value: unknown, verifier: NoteVerifier, origin: string): { ok: true; log: string | undefined; records: Verified["records"] } | { ok: false; reason: string };
  /** The OK line's first words, for `count` receipts naming `named` entries. */
  counted(count: number, named: number): string;
}

const delivery_receipts: ReceiptKind = {
  what: "delivery receipts",
  check(value, verifier, origin) {
    const entry = value as { records?: unknown; leaf_hash?: unknown } | null;
    if (typeof entry === "object" && entry !== null && entry.records === undefined && typeof entry.leaf_hash === "string") {
      return { ok: false, reason: "an entry's receipt, not a delivery receipt: check it with --receipts" };
    }
    const check = verifyDeliveryReceipt(value as DeliveryReceipt, verifier, origin);
    if (!check.ok) return check;
    const receipt = value as DeliveryReceipt;
    return { ok: true, log: receipt.log, records: receipt.records.map(({ event_id, seq, leaf_hash }) => ({ event_id, seq, leaf_hash })) };
  },
  counted: (count, named) => `${count} delivery receipts listing ${named} records`,
};

/** An entry's receipt: a gate tool result's `evidence.receipt`, alone or in its `evidence` object or result. */
const entry_receipts: ReceiptKind = {
  what: "receipts",
  check(value, verifier, origin) {
    const receipt = (typeof value === "object" && value !== null ? value : {}) as Partial<Receipt> & { records?: unknown };
    if (receipt.records !== undefined) return { ok: false, reason: "a delivery receipt, not an entry's: check it with --delivery-receipts" };
    if (typeof receipt.key_id !== "string" || typeof receipt.signature !== "string") {
      return { ok: false, reason: "not an entry receipt (seq, leaf_hash, kind, at, key_id and signature are required)" };
    }
    const check = verifyReceipt(receipt as Receipt, verifier, origin);
    if (!check.ok) return check;
    return { ok: true, log: receipt.log, records: [{ seq: receipt.seq as number, leaf_hash: receipt.leaf_hash as string }] };
  },
  counted: (count) => `${count} entry receipts`,
};

/**
 * The receipts in a file, read line by line as they are checked: one JSON per line (blank lines
 * skipped), each a receipt or an ingest answer holding one. A line longer than any export line
 * comes as `too_long`, and nothing after it is read (fileLines), so an endless source ends there.
 * A file that cannot be read is a UsageError naming it.
 */
function* receiptLines(path: string, what: string): Generator<{ line: number; value: unknown; too_long?: true }> {
  if (path === "") throw new UsageError(`cannot read ${what}: the path given is empty`);
  let number = 0;
  try {
    for (const bytes of fileLines(path)) {
      number += 1;
      if (bytes.length > export_line_bytes_max) {
        yield { line: number, value: undefined, too_long: true };
        return;
      }
      const line = bytes.toString("utf8").trim();
      if (line === "") continue;
      let value: unknown;
      try {
        value = JSON.parse(line) as unknown;
      } catch {
        value = undefined;
      }
      yield { line: number, value: receiptIn(value) };
    }
  } catch (error) {
    // Only fileLines' errors reach here: a consumer that stops early returns, never throws, into this.
    throw new UsageError(`cannot read ${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  }
}

/** Where a line may hold its receipt: an ingest answer's or an `evidence` object's `receipt`, a
 *  tool result's structuredContent, a whole CallToolResult, or a JSON-RPC response carrying one. */
const receipt_paths = [["receipt"], ["evidence", "receipt"], ["structuredContent", "evidence", "receipt"], ["result", "structuredContent", "evidence", "receipt"]];

/** The receipt a line holds (receipt_paths, the first that leads to an object), else the line itself. */
function receiptIn(value: unknown): unknown {
  for (const path of receipt_paths) {
    let found: unknown = value;
    for (const key of path) found = typeof found === "object" && found !== null ? (found as Record<string, unknown>)[key] : undefined;
    if (typeof found === "object" && found !== null) return found;
  }
  return value;
}

/** Which logs the receipts name, and a note for those that name none (v1). */
function logsNamed(verified: readonly Verified[], origin: string): { logs: string; note: string | undefined } {
  const named = [...new Set(verified.flatMap((receipt) => (receipt.log === undefined ? [] : [receipt.log])))];
  const unnamed = verified.filter((receipt) => receipt.log === undefined).map((receipt) => receipt.line);
  const logs = named.length === 0 ? "" : ` for ${named.length === 1 ? "log" : `${named.length} logs`} ${named.join(", ")} of origin ${origin}`;
  const note =
    unnamed.length === 0
      ? undefined
      : `note: ${unnamed.length} v1 receipts (${unnamed.length === 1 ? "line" : "lines"} ${unnamed.join(", ")}) do not name their log: they verify under the key alone, as a receipt of any log signed with it would`;
  return { logs, note };
}

/** The first v2 receipt that names another log than the export's, as a failure line. */
function otherLog(path: string, verified: readonly Verified[], report: VerifyReport): string | undefined {
  const other = verified.find((receipt) => receipt.log !== undefined && receipt.log !== report.log);
  if (!other) return undefined;
  return `FAIL ${path} line ${other.line}: the receipt is of log ${other.log}, not this export's log ${report.log} (the leaf hash of its entry 0)`;
}

function verifyReceipts(kind: ReceiptKind, path: string, file: string | undefined, values: ExportArguments, io: CliIo): number {
  const verifier = verifierOf(values.key);
  const origin = originOf(values.origin) ?? verifier.name;
  if (file === undefined && (values.checkpoint !== undefined || values["all-receipts"] !== undefined)) {
    throw new UsageError("--checkpoint and --all-receipts check an export: give its FILE after RECEIPTS, or leave them out");
  }
  const options = file === undefined ? undefined : exportOptions(values);
  const verified: Verified[] = [];
  for (const { line, value, too_long } of receiptLines(path, kind.what)) {
    if (too_long) {
      println(io.stderr, `FAIL ${path} line ${line}: longer than ${export_line_bytes_max} bytes, which no receipt line is`);
      return 1;
    }
    const check = kind.check(value, verifier, origin);
    if (!check.ok) {
      println(io.stderr, `FAIL ${path} line ${line}: ${check.reason}`);
      return 1;
    }
    verified.push({ line, log: check.log, records: check.records });
  }
  if (verified.length === 0) throw new UsageError(`${path} holds no ${kind === delivery_receipts ? "delivery receipt" : "receipt"}`);
  const listed = verified.reduce((sum, receipt) => sum + receipt.records.length, 0);
  const { logs, note } = logsNamed(verified, origin);
  const signed = `OK ${kind.counted(verified.length, listed)}, signed by ${verifier.name}+${keyIdHex(verifier.keyId)}${logs}`;
  if (file === undefined || options === undefined) {
    println(io.stdout, signed);
    if (note) println(io.stdout, note);
    return 0;
  }
  const wanted = new Set(verified.flatMap((receipt) => receipt.records.map((record) => record.seq)));
  const leaves = new Map<number, string>();
  const onLeaf = (seq: number, leaf: Buffer) => void (wanted.has(seq) && leaves.set(seq, leaf.toString("hex")));
  const report = verifiedExport(file, { ...options, onLeaf }, io);
  if (!report) return 1;
  const foreign = otherLog(path, verified, report);
  if (foreign) {
    println(io.stderr, foreign);
    return 1;
  }
  for (const { line, records } of verified) {
    for (const record of records) {
      const leaf = leaves.get(record.seq);
      if (leaf === record.leaf_hash) continue;
      const found = leaf === undefined ? `the export holds no entry ${record.seq} (it has ${report.entries})` : `entry ${record.seq} of the export has leaf hash ${leaf}, the receipt ${record.leaf_hash}`;
      const which = record.event_id === undefined ? "" : `record ${jsonPreview(record.event_id)}: `;
      println(io.stderr, `FAIL ${path} line ${line}: ${which}${found}`);
      return 1;
    }
  }
  const every = kind === delivery_receipts ? "every record" : "every entry it names";
  println(io.stdout, `${signed}; ${every} is in ${file} at its seq with its leaf hash, and the export verifies (${report.entries} entries, tree size ${report.tree_size}, root ${report.root_hash})`);
  if (note) println(io.stdout, note);
  return 0;
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseStrict({
    args: argv,
    options: {
      checkpoint: { type: "string" },
      key: { type: "string" },
      origin: { type: "string" },
      "all-receipts": { type: "boolean" },
      inclusion: { type: "string" },
      consistency: { type: "string" },
      "delivery-receipts": { type: "string" },
      receipts: { type: "string" },
      "from-checkpoint": { type: "string" },
      index: { type: "string" },
      "leaf-hash": { type: "string" },
    },
    allowPositionals: true,
    strict: true,
  });
  for (const [option, kind] of [["delivery-receipts", delivery_receipts], ["receipts", entry_receipts]] as const) {
    const path = values[option];
    if (path === undefined) continue;
    const proofOptions = [values.inclusion, values.consistency, values["from-checkpoint"], values.index, values["leaf-hash"]];
    if (proofOptions.some((value) => value !== undefined) || positionals.length > 1 || (option === "delivery-receipts" && values.receipts !== undefined)) {
      throw new UsageError(`--${option} takes at most one export FILE, and no --inclusion, --consistency, their options or the other receipts option`);
    }
    return verifyReceipts(kind, path, positionals[0], values, io);
  }
  const modes = [positionals.length > 0, values.inclusion !== undefined, values.consistency !== undefined].filter(Boolean).length;
  if (modes !== 1 || positionals.length > 1) throw new UsageError("give exactly one of: FILE, --inclusion PROOF, --consistency PROOF, --delivery-receipts RECEIPTS, --receipts RECEIPTS");
  if (values["from-checkpoint"] !== undefined && values.consistency === undefined) throw new UsageError("--from-checkpoint goes with --consistency PROOF");
  if ((values.index !== undefined || values["leaf-hash"] !== undefined) && values.inclusion === undefined) {
    throw new UsageError("--index and --leaf-hash go with --inclusion PROOF");
  }
  if (values["all-receipts"] !== undefined && positionals.length === 0) throw new UsageError("--all-receipts checks an export's receipts: it goes with FILE (alone or after --delivery-receipts or --receipts)");
  if (values.inclusion !== undefined) return verifyInclusionProof(values.inclusion, values, io);
  if (values.consistency !== undefined) return verifyConsistencyProof(values.consistency, values, io);
  return verifyFile(positionals[0]!, values, io);
}
