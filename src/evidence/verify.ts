// Offline verification of an exported log: recomputes every leaf and root, checks every
// signed checkpoint, and the receipts of entries no signed checkpoint covers (v2 receipts of
// this log only), and names the first bad entry or checkpoint range.

import { closeSync, openSync, readSync } from "node:fs";
import { jsonPreview } from "../json-text.js";
import { entry_bytes_max, entryShapeProblem, type Entry } from "./entry.js";
import {
  checkpoint_line_prefix,
  entry_line_prefix,
  export_format_version,
  header_line_prefix,
  receipt_line_prefix,
} from "./export.js";
import { CompactRange, emptyRoot, leafHash } from "./merkle.js";
import { CheckpointError, keyIdHex, openCheckpoint, originProblem, parseVerifierKey, type NoteVerifier, type SignedCheckpoint } from "./note.js";
import { verifyReceipt, type Receipt } from "./receipt.js";

/** File reads happen in chunks of this size; lines may span chunks. */
export const verify_read_chunk_bytes = 1 << 20;
/** No line an export holds is longer than an entry may be: a longer one is refused, and read no further. */
export const export_line_bytes_max = entry_bytes_max;
/**
 * Receipts of entries past every signed root seen so far wait (copied) for the next checkpoint
 * line, which makes checking their signatures unnecessary; past either limit the oldest is
 * checked at once. A log cuts a checkpoint every 1000 entries by default, well inside both.
 */
export const tail_receipts_deferred_max = 4096;
export const tail_receipt_bytes_deferred_max = 4 << 20;

export interface VerifyOptions {
  /** The trusted signed checkpoint (note text), e.g. fetched from GET /api/v1/log/checkpoint. */
  checkpoint: string;
  /** The trusted verifier key `<name>+<hex id>+<base64>`. */
  key: string;
  /**
   * The origin every checkpoint must name; by default the key's name (Bursar names its key
   * after BURSAR_LOG_ORIGIN). The signature line's key name is not signed, so without this a
   * checkpoint of another log under the same key would pass for this one.
   */
  origin?: string;
  /**
   * Also verify the signature of every receipt (slower). By default a receipt's signature is
   * checked when it disagrees with its entry or when no signed checkpoint covers its entry.
   */
  allReceipts?: boolean;
  /** Verify the signature of every receipt of an entry in [start, end) (verifyExport's second read). */
  receiptsIn?: [number, number] | undefined;
  /** Called with every entry's seq and recomputed leaf hash as it is read (trust them only once the report is ok). */
  onLeaf?: (seq: number, leaf: Buffer) => void;
}

export interface VerifyFailure {
  /** The first entry known bad, when it can be pinpointed. */
  seq?: number;
  /** Half-open [start, end) entry range a signed root disagrees with, when only that is known. */
  range?: [number, number];
  /** 1-based line in the export file. */
  line?: number;
  /**
   * The file is damaged apart from its entries, not one entry or range: as a whole (line endings,
   * a byte order mark), or in a checkpoint or receipt line that cannot be read or is not one the
   * key signed for this log. The entries are not known bad.
   */
  file?: true;
  message: string;
}

export interface VerifyReport {
  ok: boolean;
  /** Entry lines read and hashed. */
  entries: number;
  /** Signed checkpoints verified, the trusted one included. */
  checkpoints: number;
  /** Receipts whose signature was checked and verified. */
  receipts: number;
  /** Receipts that matched their entry but whose signature was not checked: a signed checkpoint covers the entry. */
  receipts_unchecked: number;
  /** The log origin every verified checkpoint names. */
  origin: string;
  /** The log's id: the hex leaf hash of the export's entry 0, which every v2 receipt must name ("" without entries). */
  log: string;
  /** Size and base64 root of the trusted checkpoint. */
  tree_size: number;
  root_hash: string;
  /**
   * Entries past the trusted checkpoint and every checkpoint in the file: no signed root covers
   * them, so each rests on its own v2 receipt of this log, whose signature was checked.
   */
  uncovered: number;
  failure?: VerifyFailure;
}

class VerifyStop extends Error {
  constructor(readonly failure: VerifyFailure) {
    super(failure.message);
  }
}

/** The entry just read, waiting for the receipt line that normally follows it. */
interface PendingEntry {
  seq: number;
  line: Buffer;
  leaf: Buffer;
  /** 1-based line of the entry in the export file. */
  lineNumber: number;
}

/** An entry past every signed root read so far, waiting for a checkpoint line to cover it. */
interface TailEntry {
  seq: number;
  /** The entry's leaf hash: what its receipt must sign. */
  leaf: Buffer;
  /** The receipt line (a copy: file chunks must not be held), or undefined when it had none. */
  receipt: Buffer | undefined;
  /** 1-based line of the receipt, else of the entry. */
  lineNumber: number;
}

/**
 * A receipt naming another log than the export's, held until the check can tell who is to blame.
 * A held receipt always fails the export; it only waits to learn whether a signed root, the
 * receipt line or entry 0 is to blame:
 * - a signed root that disagrees with the entries is named instead (it covers the entry, or entry 0);
 * - a receipt whose signature does not verify is a damaged line once a verified signed root binds
 *   its entry (the entry is intact); until then it names its entry;
 * - a genuine receipt (the key signed it for that other log) names its entry once a verified
 *   signed root binds entry 0, whose leaf hash is the log id; until then entry 0 may be the one altered.
 */
interface HeldOtherLogReceipt {
  /** The seq of the entry it follows. */
  seq: number;
  /** 1-based line of the receipt. */
  lineNumber: number;
  receipt: Receipt;
  /** Why its signature does not verify; undefined when it does (the key signed it for that other log). */
  problem: string | undefined;
}

/** Byte-wise prefix test: cheaper than decoding the start of every line. */
function startsWith(line: Buffer, prefix: string): boolean {
  if (line.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (line[i] !== prefix.charCodeAt(i)) return false;
  return true;
}

/** EF BB BF, as startsWith compares: byte by byte with each character's code. */
const utf8_byte_order_mark = "\xef\xbb\xbf";
const receipt_leaf_marker = '","leaf_hash":"';
const receipt_log_marker = '","log":"';
const receipt_seq_marker = '","seq":';
const receipt_signature_marker = ',"signature":"';
const receipt_head = '{"receipt":{"at":"';

function hasAt(line: Buffer, offset: number, text: string): boolean {
  if (offset < 0 || offset + text.length > line.length) return false;
  for (let i = 0; i < text.length; i++) if (line[offset + i] !== text.charCodeAt(i)) return false;
  return true;
}

const receipt_key_id_marker = '","key_id":"';
const receipt_kind_marker = '","kind":"';

/** A receipt line read by position (quickReceipt): its at and kind as [start, end) byte ranges. */
interface QuickReceipt {
  seq: number;
  leaf_hash: string;
  log: string | undefined;
  at: [number, number];
  kind: [number, number];
}

/**
 * Reads a receipt line by position when it has exactly the exporter's canonical layout
 * (`{"receipt":{"at":"…","key_id":"…","kind":"…","leaf_hash":"<64 hex>"[,"log":"<64 hex>"],"seq":<digits>,"signature":"…"}}`):
 * every key at its place, no backslash, and no quote in a value, so it reads as JSON.parse reads
 * it (a repeated key, whose last copy JSON.parse keeps, cannot hide behind the first). Anything
 * else returns undefined and goes through JSON.parse. Where a signed checkpoint covers the entry,
 * the receipt adds nothing to that signature, and its own is checked only when it disagrees with
 * its entry; past every signed root it is the only signature, and always checked.
 */
function quickReceipt(line: Buffer): QuickReceipt | undefined {
  if (!hasAt(line, 0, receipt_head) || !hasAt(line, line.length - 3, '"}}') || line.indexOf(0x5c) >= 0) return undefined;
  const at_start = receipt_head.length;
  const at_end = line.indexOf(0x22, at_start);
  if (!hasAt(line, at_end, receipt_key_id_marker)) return undefined;
  const key_id_end = line.indexOf(0x22, at_end + receipt_key_id_marker.length);
  if (!hasAt(line, key_id_end, receipt_kind_marker)) return undefined;
  const kind_start = key_id_end + receipt_kind_marker.length;
  const kind_end = line.indexOf(0x22, kind_start);
  if (!hasAt(line, kind_end, receipt_leaf_marker)) return undefined;
  const hexStart = kind_end + receipt_leaf_marker.length;
  let cursor = hexStart + 64;
  let log: string | undefined;
  if (hasAt(line, cursor, receipt_log_marker)) {
    // Read as is: the caller compares it with the export's log id, so only hex can match.
    const logStart = cursor + receipt_log_marker.length;
    log = line.toString("latin1", logStart, logStart + 64);
    cursor = logStart + 64;
  }
  if (!hasAt(line, cursor, receipt_seq_marker)) return undefined;
  cursor += receipt_seq_marker.length;
  let seq = 0;
  const digitsStart = cursor;
  while (cursor < line.length && line[cursor]! >= 48 && line[cursor]! <= 57 && cursor - digitsStart < 16) {
    seq = seq * 10 + (line[cursor]! - 48);
    cursor += 1;
  }
  if (cursor === digitsStart || (line[digitsStart] === 48 && cursor - digitsStart > 1)) return undefined;
  if (!hasAt(line, cursor, receipt_signature_marker)) return undefined;
  // The signature's closing quote is the line's last one: another would open another key.
  if (line.indexOf(0x22, cursor + receipt_signature_marker.length) !== line.length - 3) return undefined;
  return { seq, leaf_hash: line.toString("latin1", hexStart, hexStart + 64), log, at: [at_start, at_end], kind: [kind_start, kind_end] };
}

/** An entry's kind follows the same bytes as a receipt's. */
const entry_kind_marker = Buffer.from(receipt_kind_marker, "latin1");
const entry_received_at_marker = Buffer.from('","received_at":"', "latin1");

/**
 * Whether a receipt read by position names its entry's own kind and received_at: the entry's
 * are its last `"received_at":"` and the last `"kind":"` before it, since no string in
 * canonical JSON holds a bare quote and these keys come after the body. False sends the line to
 * the slow path, which says what differs.
 */
function quickFieldsMatch(receiptLine: Buffer, quick: QuickReceipt, entryLine: Buffer): boolean {
  const entry_at = entryLine.lastIndexOf(entry_received_at_marker);
  const entry_kind = entry_at < 0 ? -1 : entryLine.lastIndexOf(entry_kind_marker, entry_at);
  if (entry_kind < 0) return false;
  const kind_start = entry_kind + entry_kind_marker.length;
  const at_start = entry_at + entry_received_at_marker.length;
  return sameString(receiptLine, quick.kind, entryLine, kind_start) && sameString(receiptLine, quick.at, entryLine, at_start);
}

/** Whether the string value at `range` of `a` is the one that starts at `at` in `b` (its closing quote included). */
function sameString(a: Buffer, [start, end]: [number, number], b: Buffer, at: number): boolean {
  const length = end - start;
  return at + length < b.length && b[at + length] === 0x22 && a.compare(b, at, at + length, start, end) === 0;
}

function parseJson(line: Buffer): unknown {
  try {
    return JSON.parse(line.toString("utf8"));
  } catch {
    return undefined;
  }
}

/**
 * Streams one export, line by line, keeping O(log n) state plus a bounded queue of tail
 * receipts. The fast path only hashes an entry and compares it with its receipt; entries are
 * parsed when something disagrees (to say precisely what), when no receipt follows them, or
 * when no signed root read so far covers them (to check their shape and seq).
 */
class ExportVerifier {
  private readonly range = new CompactRange();
  private readonly verifier: NoteVerifier;
  private readonly trusted: SignedCheckpoint;
  private lineNumber = 0;
  private sawHeader = false;
  /** The header's tree_size, which must be the number of entries the file holds. */
  private headerSize: unknown;
  private pending: PendingEntry | undefined;
  /** Size of the last verified checkpoint: entries below it are covered by a signed root. */
  private coveredSize = 0;
  /** The last checkpoint note verified (at coveredSize). */
  private lastCheckpoint: string | undefined;
  /** Root computed at the trusted size, and the last verified checkpoint size below it. */
  private trustedRoot: Buffer | undefined;
  private coveredBelowTrusted = 0;
  private trustedChecked = false;
  /** The trusted checkpoint's root matched the entries it covers. */
  private trustedVerified = false;
  /** The first receipt naming another log, held until its verdict is known (see HeldOtherLogReceipt). */
  private heldOtherLog: HeldOtherLogReceipt | undefined;
  /** The 1-based number of a line that is neither an entry nor a known meta line, judged by the line after it. */
  private junkLine: number | undefined;
  /** The hex leaf hash of entry 0: the log's id, which every v2 receipt must name. */
  private logId = "";
  /** Entries past every signed root so far, oldest first, at most tail_receipts_deferred_max. */
  private tail: TailEntry[] = [];
  private tailBytes = 0;
  /** The first tail entry without a receipt that left the queue: fails unless a checkpoint covers it. */
  private tailUnreceipted: TailEntry | undefined;
  checkpoints = 0;
  /** Receipt lines that matched their entry. */
  receiptsRead = 0;
  /** Of those, receipts whose signature was checked. */
  receiptsVerified = 0;

  /** The entries whose receipt signatures are all checked: every one with allReceipts, else receiptsIn's, else none. */
  private readonly every_receipt: readonly [number, number];

  constructor(private readonly options: VerifyOptions) {
    this.every_receipt = options.allReceipts ? [0, Infinity] : (options.receiptsIn ?? [0, 0]);
    try {
      this.verifier = parseVerifierKey(options.key);
    } catch (error) {
      throw new VerifyStop({ message: `--key: ${(error as Error).message}` });
    }
    try {
      this.trusted = openCheckpoint(options.checkpoint, this.verifier, { from_file: true });
    } catch (error) {
      if (!(error instanceof CheckpointError)) throw error;
      const key = `${this.verifier.name}+${keyIdHex(this.verifier.keyId)}`;
      const what = { syntax: "is not a signed note", signature: `is not signed by ${key}`, body: `is signed by ${key}, but its body is not a checkpoint` }[error.stage];
      throw new VerifyStop({ message: `the checkpoint ${what}: ${error.message}` });
    }
    const wrongOrigin = originProblem(this.trusted.origin, options.origin, this.verifier);
    if (wrongOrigin) throw new VerifyStop({ message: `the checkpoint is ${wrongOrigin}` });
    if (this.trusted.size === 0) this.trustedRoot = emptyRoot();
  }

  get size(): number {
    return this.range.size;
  }

  /**
   * Runs one step of the check; anything but a VerifyStop it throws (a value nested deeper than
   * the call stack, one that cannot be made text) fails the export at the line being read, by the
   * file, as a line the verifier cannot check (an earlier forged tail receipt still comes first):
   * hostile input never ends in a stack trace, nor in a pass. The error is named, cut short, so
   * that a fault of the verifier's own can be told apart.
   */
  checked(step: () => void): void {
    try {
      step();
    } catch (error) {
      if (error instanceof VerifyStop) throw error;
      const why = error instanceof Error ? `${error.name}: ${error.message.slice(0, 120)}` : "an error that is not an Error";
      this.stop({ file: true, message: `line ${this.lineNumber} cannot be checked (${why}); no export line is made so` });
    }
  }

  /**
   * Stops with `failure`, unless something read before it comes first: a held receipt naming
   * another log (see heldComesFirst), or a waiting tail receipt that turns out forged, whose entry
   * that receipt alone could have spoken for.
   */
  private stop(failure: Omit<VerifyFailure, "line">, line = this.lineNumber): never {
    const held = this.heldOtherLog;
    if (held && this.heldComesFirst(held, failure)) {
      this.heldOtherLog = undefined;
      this.throwUnlessTailForgedBefore(this.heldOtherLogFailure(held), held.seq);
    }
    this.throwUnlessTailForgedBefore({ ...failure, line }, failure.seq ?? Infinity);
  }

  /** Stops with a failure that names its own line. */
  private stopWith(failure: VerifyFailure): never {
    const { line, ...rest } = failure;
    this.stop(rest, line);
  }

  /**
   * Whether the held receipt is named before `failure`. It comes before a failure at a later
   * entry or of the file. A signed root that disagrees comes before it, as it covers the held
   * receipt's entry or entry 0; except where every receipt of that entry is checked and this one
   * does not verify: it is then named at its entry, as any receipt that does not verify there is
   * (so verifyExport's second read names it as the suspect beside the range).
   */
  private heldComesFirst(held: HeldOtherLogReceipt, failure: Omit<VerifyFailure, "line">): boolean {
    const range = failure.range;
    if (!range) return failure.seq === undefined || failure.seq > held.seq;
    return held.problem !== undefined && this.checksEveryReceipt(held.seq) && held.seq >= range[0] && held.seq < range[1];
  }

  /** Throws `failure`, unless the receipt of a waiting tail entry before seq `before` is forged: that comes first. */
  private throwUnlessTailForgedBefore(failure: VerifyFailure, before: number): never {
    for (const waiting of this.tail) {
      if (waiting.seq >= before) break;
      const earlier = waiting.receipt ? this.tailReceiptProblem(waiting) : undefined;
      if (earlier) {
        this.tail = [];
        throw new VerifyStop(earlier);
      }
    }
    throw new VerifyStop(failure);
  }

  /** Entries below this seq are bound by a signed root already verified: the file's checkpoints', or the trusted one's. */
  private get verifiedSize(): number {
    return Math.max(this.coveredSize, this.trustedVerified ? this.trusted.size : 0);
  }

  /** Entries at or past this seq lie beyond the trusted checkpoint and every checkpoint read so far (verified or not). */
  private get signedSize(): number {
    return Math.max(this.coveredSize, this.trusted.size);
  }

  line(line: Buffer): void {
    this.lineNumber += 1;
    if (this.junkLine !== undefined) this.stopOnJunk(line);
    // No export line ends in CR or is empty: the file went through a text conversion or an editor.
    if (line.length === 0) this.stop({ file: true, message: "an empty line, which no export holds" });
    if (line[line.length - 1] === 13) {
      this.stop({ file: true, message: "the export has CRLF line endings (converted in transfer?); an export's lines end in LF alone, which no hash includes: convert it back, e.g. with dos2unix" });
    }
    if (line.length > export_line_bytes_max) {
      this.settlePending();
      // Only an entry line names an entry: a meta line so long tells nothing of the next one.
      const where = this.sawHeader && startsWith(line, entry_line_prefix) ? { seq: this.size } : { file: true as const };
      this.stop({ ...where, message: `line ${this.lineNumber} is longer than ${export_line_bytes_max} bytes, which no export line is` });
    }
    if (!this.sawHeader) return this.header(line);
    if (startsWith(line, entry_line_prefix)) return this.entry(line);
    if (startsWith(line, receipt_line_prefix)) return this.receipt(line);
    if (startsWith(line, checkpoint_line_prefix)) return this.checkpoint(line);
    this.settlePending();
    this.junkLine = this.lineNumber;
  }

  /**
   * Stops on a line that is neither an entry nor a known meta line, given the line after it
   * (undefined at the end). It is damage to the file, not an entry: the entries around it may be
   * intact, and a later signed root still binds them. Only where a genuine receipt of this log
   * for the entry due next follows it does it stand in that entry's place (an entry line whose
   * start was altered), and that entry is named.
   */
  private stopOnJunk(next: Buffer | undefined): never {
    const line = this.junkLine!;
    this.junkLine = undefined;
    const message = `line ${line} is neither an entry nor a known meta line`;
    const readable = next !== undefined && next.length <= export_line_bytes_max && startsWith(next, receipt_line_prefix);
    const receipt = readable ? (parseJson(next) as { receipt?: Receipt } | undefined)?.receipt : undefined;
    const seq = this.size;
    const due = typeof receipt === "object" && receipt !== null && receipt.seq === seq;
    if (due && this.isGenuineReceiptOfThisLog(receipt)) {
      this.stop({ seq, message: `seq ${seq}: ${message}, and the receipt of entry ${seq} follows it (the entry altered or missing)` }, line);
    }
    this.stop({ file: true, message }, line);
  }

  private header(line: Buffer): void {
    if (startsWith(line, utf8_byte_order_mark)) this.stop({ file: true, message: "the export starts with a byte order mark, which no export has (added by an editor?): remove it" });
    const parsed = startsWith(line, header_line_prefix) ? (parseJson(line) as { bursar_export?: { v?: unknown; origin?: unknown; tree_size?: unknown } }) : undefined;
    const header = parsed?.bursar_export;
    if (!header || header.v !== export_format_version) this.stop({ file: true, message: "line 1 is not a bursar export header (v 1)" });
    if (header.origin !== this.trusted.origin) {
      this.stop({ message: `the export is of log ${jsonPreview(header.origin)}, the checkpoint of ${JSON.stringify(this.trusted.origin)}` });
    }
    this.headerSize = header.tree_size;
    this.sawHeader = true;
  }

  private entry(line: Buffer): void {
    this.settlePending();
    if (this.size === this.trusted.size) this.checkTrusted();
    const leaf = leafHash(line);
    if (this.size === 0) this.logId = leaf.toString("hex");
    this.options.onLeaf?.(this.size, leaf);
    this.pending = { seq: this.size, line, leaf, lineNumber: this.lineNumber };
    this.range.append(leaf);
    if (this.range.size === this.trusted.size) this.trustedRoot = this.range.root();
  }

  /** Parses an entry to name exactly what is wrong with it, by the entry's own line (not the line
   *  being read: its receipt, or the next entry); returns it when nothing is. */
  private inspect(pending: PendingEntry): Entry {
    const value = parseJson(pending.line);
    const { seq, lineNumber } = pending;
    if (value === undefined) this.stop({ seq, message: `seq ${seq}: entry line is not valid JSON` }, lineNumber);
    const problem = entryShapeProblem(value);
    if (problem) this.stop({ seq, message: `seq ${seq}: not a valid entry (${problem})` }, lineNumber);
    const entry = value as Entry;
    if (entry.seq !== seq) {
      const what = entry.seq < seq ? "a duplicate or reordered entry" : "entries missing or reordered";
      this.stop({ seq, message: `seq ${seq}: found seq ${entry.seq} instead (${what})` }, lineNumber);
    }
    return entry;
  }

  /**
   * An entry with no receipt (a batch writer's, or one whose receipt was stripped): its seq is
   * checked from its own bytes, and a signed checkpoint must cover its content. Past every
   * signed root so far it waits in the tail for one.
   */
  private settlePending(): void {
    const pending = this.pending;
    if (!pending) return;
    this.pending = undefined;
    this.inspect(pending);
    if (pending.seq >= this.signedSize) this.deferTail({ seq: pending.seq, leaf: pending.leaf, receipt: undefined, lineNumber: pending.lineNumber });
  }

  /** Queues a tail entry until a checkpoint line covers it; past the limits the oldest is settled now. */
  private deferTail(waiting: TailEntry): void {
    this.tail.push(waiting);
    this.tailBytes += waiting.receipt?.length ?? 0;
    while (this.tail.length > tail_receipts_deferred_max || this.tailBytes > tail_receipt_bytes_deferred_max) {
      const oldest = this.tail.shift()!;
      this.tailBytes -= oldest.receipt?.length ?? 0;
      this.settleTail(oldest);
    }
  }

  /** A tail entry with a receipt is vouched for once that receipt's signature verifies. */
  private settleTail(waiting: TailEntry): void {
    if (!waiting.receipt) {
      this.tailUnreceipted ??= waiting;
      return;
    }
    const problem = this.tailReceiptProblem(waiting);
    if (problem) this.stopWith(problem);
  }

  /**
   * Checks a waiting receipt's signature, and that the receipt it parses to names its entry: the
   * fast path read seq and leaf hash by position, while JSON.parse keeps a repeated key's last
   * value, so a line naming the entry first and another entry's genuine receipt after it would
   * otherwise vouch for an entry nobody signed.
   */
  private tailReceiptProblem(waiting: TailEntry): VerifyFailure | undefined {
    const { seq, lineNumber: line } = waiting;
    const receipt = (parseJson(waiting.receipt!) as { receipt?: Receipt } | undefined)?.receipt;
    if (!receipt || typeof receipt !== "object") return { seq, line, message: `line ${line}: malformed receipt line` };
    if (receipt.seq !== seq || receipt.leaf_hash !== waiting.leaf.toString("hex")) {
      return { seq, line, message: `seq ${seq}: its receipt line names another entry (seq ${jsonPreview(receipt.seq)}), and no signed checkpoint covers the entry` };
    }
    // A v1 receipt signs no log: one of another log under the same key would verify as well.
    if (receipt.log === undefined) {
      return { seq, line, message: `seq ${seq}: its receipt is v1, which does not name its log, and no signed checkpoint covers the entry (only a v2 receipt of this log vouches for it)` };
    }
    // The signature first: the log a receipt names is signed, so only a genuine receipt tells of another log.
    const signature = verifyReceipt(receipt, this.verifier, this.trusted.origin);
    if (!signature.ok) return { seq, line, message: `seq ${seq}: receipt does not verify (${signature.reason}), and no signed checkpoint covers the entry` };
    if (this.namesOtherLog(receipt)) return { seq, line, message: `${this.otherLogMessage(seq, receipt)}, and no signed checkpoint covers the entry` };
    this.receiptsVerified += 1;
    return undefined;
  }

  /** Whether a v2 receipt names another log than this one (another entry 0); a v1 receipt names none. */
  private namesOtherLog(receipt: Receipt): boolean {
    return receipt.log !== undefined && receipt.log !== this.logId;
  }

  /** Why a receipt that names another log is not one of this log. */
  private otherLogMessage(seq: number, receipt: Receipt): string {
    return `seq ${seq}: its receipt is of another log (log ${jsonPreview(receipt.log)}; this export's entry 0 has leaf hash ${this.logId})`;
  }

  /**
   * Whether `receipt` is one the key signed for this log. Before entry 0 is read the log has no
   * id yet, and a receipt of this log's is not told from another's: any the key signed passes.
   */
  private isGenuineReceiptOfThisLog(receipt: Receipt): boolean {
    const ours = this.size === 0 || !this.namesOtherLog(receipt);
    return ours && verifyReceipt(receipt, this.verifier, this.trusted.origin).ok;
  }

  /**
   * A receipt whose seq and leaf hash are its entry's, but which names another log. It fails the
   * export whatever follows; what it is named as waits on what is verified. The log is signed, so
   * the signature is checked first. A genuine receipt is named at its entry at once if a verified
   * signed root binds entry 0 already; otherwise it is held (see HeldOtherLogReceipt), as is one
   * that does not verify.
   */
  private otherLogReceipt(pending: PendingEntry, receipt: Receipt): void {
    const signature = verifyReceipt(receipt, this.verifier, this.trusted.origin);
    if (signature.ok) this.receiptsVerified += 1;
    if (signature.ok && this.verifiedSize > 0) this.stop({ seq: pending.seq, message: this.otherLogMessage(pending.seq, receipt) });
    if (pending.seq >= this.signedSize) this.inspect(pending);
    this.holdOtherLogReceipt(pending.seq, receipt, signature.ok ? undefined : signature.reason);
  }

  /** Holds a receipt naming another log until its verdict is known; only the first is kept, as the first failure. */
  private holdOtherLogReceipt(seq: number, receipt: Receipt, problem: string | undefined): void {
    this.heldOtherLog ??= { seq, lineNumber: this.lineNumber, receipt, problem };
  }

  /** The held receipt's failure, by what is verified so far. */
  private heldOtherLogFailure(held: HeldOtherLogReceipt): VerifyFailure {
    const { seq, lineNumber: line, receipt, problem } = held;
    if (problem === undefined) {
      if (this.verifiedSize > 0) return { seq, line, message: this.otherLogMessage(seq, receipt) };
      // Entry 0 may be the altered one, which makes this genuine receipt look another log's: the
      // range holds both. The entry is not named as known bad.
      const orEntryZero = ", or entry 0 was altered (the log id is entry 0's leaf hash, and no signed checkpoint verified binds it)";
      return { range: [0, seq + 1], line, message: `${this.otherLogMessage(seq, receipt)}${orEntryZero}` };
    }
    const fails = `names another log (log ${jsonPreview(receipt.log)}) and does not verify (${problem})`;
    // A verified signed root binds the entry, so it is intact: the receipt line is what was altered.
    if (seq < this.verifiedSize) {
      return { file: true, line, message: `line ${line}: the receipt of seq ${seq} ${fails}: the receipt line was altered; a signed checkpoint covers the entry` };
    }
    // Nothing verified vouches for the entry: its receipt does not.
    const uncovered = seq >= this.signedSize ? ", and no signed checkpoint covers the entry" : "";
    return { seq, line, message: `seq ${seq}: its receipt ${fails}${uncovered}` };
  }

  /** Names the held receipt, if any, now: a signed root was just verified, or the check ends. */
  private stopOnHeldOtherLog(): void {
    const held = this.heldOtherLog;
    if (!held) return;
    this.heldOtherLog = undefined;
    this.stopWith(this.heldOtherLogFailure(held));
  }

  /** Fails on the first tail entry that nothing signed vouches for, or on a receipt naming another log. */
  private settleWholeTail(): void {
    const unreceipted = this.tailUnreceipted ?? this.tail.find((waiting) => !waiting.receipt);
    if (unreceipted) {
      const { seq, lineNumber } = unreceipted;
      const message = `seq ${seq}: no receipt, and no signed checkpoint covers it (the signed roots end at size ${this.signedSize})`;
      this.stop({ seq, message }, lineNumber);
    }
    this.stopOnHeldOtherLog();
    while (this.tail.length > 0) this.settleTail(this.tail.shift()!);
  }

  /** Whether the receipt of entry `seq` has its signature checked even where it matches its entry. */
  private checksEveryReceipt(seq: number): boolean {
    const [start, end] = this.every_receipt;
    return seq >= start && seq < end;
  }

  private receipt(line: Buffer): void {
    const pending = this.pending;
    if (pending && !this.checksEveryReceipt(pending.seq)) {
      const quick = quickReceipt(line);
      const ours = quick !== undefined && (quick.log === undefined || quick.log === this.logId);
      const named = quick && ours && quick.seq === pending.seq && quick.leaf_hash === pending.leaf.toString("hex");
      if (named && quickFieldsMatch(line, quick, pending.line)) {
        this.pending = undefined;
        this.receiptsRead += 1;
        this.matchedReceipt(pending, line);
        return;
      }
    }
    const receipt = (parseJson(line) as { receipt?: Receipt } | undefined)?.receipt;
    if (!receipt || typeof receipt.seq !== "number") {
      // The line is damaged, not the entry before it: the entry may yet be bound by a checkpoint.
      this.stop({ file: true, message: `line ${this.lineNumber}: malformed receipt line` });
    }
    if (!pending) this.strayReceipt(receipt);
    this.pending = undefined;
    this.receiptsRead += 1;
    const agrees = receipt.seq === pending.seq && receipt.leaf_hash === pending.leaf.toString("hex");
    // Covered or not, a receipt of this entry that names a log must name this one. (One that
    // disagrees with its entry is checked below: an altered entry 0 changes the log id too.)
    if (agrees && this.namesOtherLog(receipt)) return this.otherLogReceipt(pending, receipt);
    if (agrees && !this.checksEveryReceipt(pending.seq)) {
      this.checkReceiptFields(pending, receipt);
      return this.matchedReceipt(pending, line);
    }
    const entry = agrees ? undefined : this.inspect(pending);
    if (agrees && pending.seq >= this.signedSize) this.inspect(pending);
    const signature = verifyReceipt(receipt, this.verifier, this.trusted.origin);
    if (!signature.ok) this.stop({ seq: pending.seq, message: `seq ${pending.seq}: receipt does not verify (${signature.reason})` });
    this.receiptsVerified += 1;
    if (entry) return this.signedReceiptDisagrees(pending, receipt);
    // A v1 receipt names no log, so past every signed root so far it vouches for nothing: the
    // entry waits for a checkpoint line like an entry without a receipt, and fails without one.
    if (receipt.log === undefined && pending.seq >= this.signedSize) {
      this.deferTail({ seq: pending.seq, leaf: pending.leaf, receipt: Buffer.from(line), lineNumber: this.lineNumber });
    }
  }

  /**
   * A receipt that names its entry's seq and leaf hash must name its kind and received_at too:
   * its signature, checked only when it disagrees with its entry, covers them, so one altered
   * there alone read as a genuine receipt of that entry.
   */
  private checkReceiptFields(pending: PendingEntry, receipt: Receipt): void {
    const entry = this.inspect(pending);
    if (receipt.kind === entry.kind && receipt.at === entry.received_at) return;
    const says = `says kind ${jsonPreview(receipt.kind)} at ${jsonPreview(receipt.at)}`;
    const holds = `its entry holds kind ${jsonPreview(entry.kind)} received_at ${jsonPreview(entry.received_at)}`;
    this.stop({ file: true, message: `line ${this.lineNumber}: the receipt of seq ${pending.seq} ${says}, but ${holds}: the receipt line was altered` });
  }

  /**
   * A receipt the key signed, after an entry whose seq is right and which it does not match. At
   * the entry's seq it signs other content for that seq: the entry was altered. At another seq
   * it is another entry's receipt, moved or copied here, and tells nothing of this entry's content.
   */
  private signedReceiptDisagrees(pending: PendingEntry, receipt: Receipt): void {
    const seq = pending.seq;
    // Another log's receipt tells nothing of this entry's content, at its seq or another. Entry 0
    // makes the log id: an altered one would make every receipt look another log's, so until a
    // verified signed root binds entry 0 the receipt waits for one.
    if (seq > 0 && this.namesOtherLog(receipt)) {
      if (this.verifiedSize > 0) this.stop({ seq, message: this.otherLogMessage(seq, receipt) });
      return this.holdOtherLogReceipt(seq, receipt, undefined);
    }
    // Named by the entry's own line (the one to look at), not by its receipt's, the line after.
    // Entry 0's receipt names the log by entry 0's own leaf hash, so an altered entry 0 and the
    // genesis receipt of another log under the same key look alike here.
    const orOtherLog = seq === 0 && receipt.log !== undefined ? ", or its receipt is entry 0's of another log under the same key" : "";
    if (receipt.seq === seq) this.stop({ seq, message: `seq ${seq}: entry altered${orOtherLog}: its leaf hash differs from its signed receipt` }, pending.lineNumber);
    if (receipt.leaf_hash === pending.leaf.toString("hex")) {
      this.stop({ seq, message: `seq ${seq}: its receipt is signed for this entry's leaf hash at seq ${receipt.seq}, but the entry holds seq ${seq}` });
    }
    this.stop({
      seq,
      message: `seq ${seq}: carries the receipt of another entry (seq ${receipt.seq}, leaf hash ${receipt.leaf_hash}): a receipt moved or copied from that entry, not a sign that this entry was altered`,
    });
  }

  /**
   * A receipt line no entry precedes (it follows a receipt or checkpoint line). Only a genuine
   * receipt of this log names an entry: when that entry's place was read already, the receipt was
   * moved or copied away from it; otherwise the entries from here on are missing or reordered.
   * Any other such line is damage to the file: the seq it claims is not trusted to name an entry.
   */
  private strayReceipt(receipt: Receipt): never {
    const seq = receipt.seq;
    if (!this.isGenuineReceiptOfThisLog(receipt)) {
      this.stop({ file: true, message: `line ${this.lineNumber}: a receipt line that follows no entry and is not a receipt the key signed for this log` });
    }
    if (seq < this.size) {
      const message = `seq ${seq}: its receipt stands where no entry precedes it, after entry ${this.size - 1} (entry ${seq} is earlier in the export): a receipt moved or copied away from its entry`;
      this.stop({ seq, message });
    }
    const of = seq === this.size ? "" : ` of seq ${seq}`;
    this.stop({ seq: this.size, message: `seq ${this.size}: receipt${of} without its entry (entry missing or reordered)` });
  }

  /**
   * A receipt whose seq and leaf hash match its entry, signature not yet checked. Under a signed
   * root that is enough; past every signed root so far, the entry's shape and seq are checked
   * now and the receipt waits for a checkpoint line, its signature checked if none comes.
   */
  private matchedReceipt(pending: PendingEntry, line: Buffer): void {
    if (pending.seq < this.signedSize) return;
    this.inspect(pending);
    this.deferTail({ seq: pending.seq, leaf: pending.leaf, receipt: Buffer.from(line), lineNumber: this.lineNumber });
  }

  private checkpoint(line: Buffer): void {
    this.settlePending();
    const note = (parseJson(line) as { checkpoint?: unknown } | undefined)?.checkpoint;
    const range: [number, number] = [this.coveredSize, this.size];
    // A line that is no checkpoint the key signed for this log is damage to the file: it says
    // nothing of the entries before it (a later signed root still binds them).
    if (typeof note !== "string") this.stop({ file: true, message: `line ${this.lineNumber}: malformed checkpoint line` });
    // The same signed note again, with no entry since: already verified and counted (10,000
    // copies of one line cost 10,000 signature checks, and read as 10,000 checkpoints).
    if (note === this.lastCheckpoint && this.coveredSize === this.size) return;
    let checkpoint: SignedCheckpoint;
    try {
      checkpoint = openCheckpoint(note, this.verifier);
    } catch (error) {
      this.stop({ file: true, message: `checkpoint at line ${this.lineNumber}: ${(error as Error).message}` });
    }
    if (checkpoint.origin !== this.trusted.origin) {
      this.stop({ file: true, message: `checkpoint at line ${this.lineNumber} is for origin ${jsonPreview(checkpoint.origin)}, not ${JSON.stringify(this.trusted.origin)}` });
    }
    if (checkpoint.size !== this.size) {
      // Up to the larger size: where entries are missing, the checkpoint covers the ones not read.
      const reach: [number, number] = [this.coveredSize, Math.max(this.size, checkpoint.size)];
      this.stop({ range: reach, message: `checkpoint of size ${checkpoint.size} found after ${this.size} entries (entries missing, added or moved)` });
    }
    if (!checkpoint.rootHash.equals(this.range.root())) {
      this.stop({ range, message: `entries ${this.coveredSize}..${this.size - 1} do not match the signed checkpoint of size ${this.size}` });
    }
    this.coveredSize = this.size;
    this.lastCheckpoint = note;
    if (this.size < this.trusted.size) this.coveredBelowTrusted = this.size;
    this.checkpoints += 1;
    // The signed root covers every waiting tail entry: their receipts need no checking.
    this.tail = [];
    this.tailBytes = 0;
    this.tailUnreceipted = undefined;
    this.stopOnHeldOtherLog();
  }

  finish(): void {
    if (!this.sawHeader) this.stop({ file: true, message: "the export is empty" });
    if (this.junkLine !== undefined) this.stopOnJunk(undefined);
    this.settlePending();
    if (this.size < this.trusted.size) {
      this.stop({
        seq: this.size,
        message: `the export ends after ${this.size} entries but the checkpoint covers ${this.trusted.size}: truncated from seq ${this.size}, or the checkpoint is of another history or log`,
      });
    }
    this.checkTrusted();
    this.settleWholeTail();
    // Last: every entry checked, the header is what is wrong (an export whose last entries were
    // cut off together with their checkpoints still says how many it was written with).
    if (this.headerSize !== this.size) {
      this.stop({ file: true, message: `line 1: the header says tree_size ${jsonPreview(this.headerSize)}, but the export holds ${this.size} entries` }, 1);
    }
  }

  /** Runs once the entries up to the trusted size, their receipts and checkpoint lines were read. */
  private checkTrusted(): void {
    if (this.trustedChecked) return;
    this.trustedChecked = true;
    if (!this.trustedRoot || !this.trustedRoot.equals(this.trusted.rootHash)) {
      // The export's own checkpoints below the given one agree with its entries, but that says
      // nothing of the given checkpoint's history before them: a fork may part anywhere.
      const own = this.coveredBelowTrusted;
      const agreeing =
        own > 0
          ? ` (the export's own signed checkpoints, up to size ${own}, agree with its entries; the entries after them were altered, or the given checkpoint is of another history, a fork or another log; where the two part cannot be told from this export)`
          : "";
      this.stop({
        range: [0, this.trusted.size],
        message: `root mismatch: entries 0..${this.trusted.size - 1} do not make the root of the given checkpoint of size ${this.trusted.size}${agreeing}`,
      });
    }
    this.checkpoints += 1;
    this.trustedVerified = true;
    this.stopOnHeldOtherLog();
  }

  report(failure?: VerifyFailure): VerifyReport {
    const covered = this.signedSize;
    return {
      ok: failure === undefined,
      entries: this.size,
      checkpoints: this.checkpoints,
      receipts: this.receiptsVerified,
      receipts_unchecked: this.receiptsRead - this.receiptsVerified,
      origin: this.trusted.origin,
      log: this.logId,
      tree_size: this.trusted.size,
      root_hash: this.trusted.rootHash.toString("base64"),
      uncovered: Math.max(0, this.size - covered),
      ...(failure ? { failure } : {}),
    };
  }
}

/** Verifies an export given as a sequence of lines (without their newline bytes). */
export function verifyExportLines(lines: Iterable<Buffer>, options: VerifyOptions): VerifyReport {
  let verifier: ExportVerifier;
  try {
    verifier = new ExportVerifier(options);
  } catch (error) {
    if (error instanceof VerifyStop) return emptyReport(error.failure);
    throw error;
  }
  try {
    // Reading (the iterator) may fail on its own terms; checking a line never throws but to stop.
    for (const line of lines) verifier.checked(() => verifier.line(line));
    verifier.checked(() => verifier.finish());
    return verifier.report();
  } catch (error) {
    if (error instanceof VerifyStop) return verifier.report(error.failure);
    throw error;
  }
}

function emptyReport(failure: VerifyFailure): VerifyReport {
  return { ok: false, entries: 0, checkpoints: 0, receipts: 0, receipts_unchecked: 0, origin: "", log: "", tree_size: 0, root_hash: "", uncovered: 0, failure };
}

/** Splits bytes into lines on 0x0A; a final line without a newline is still a line, a final empty one is not. */
export function* bufferLines(data: Buffer): Generator<Buffer> {
  let start = 0;
  for (let newline = data.indexOf(10, start); newline >= 0; newline = data.indexOf(10, start)) {
    yield data.subarray(start, newline);
    start = newline + 1;
  }
  if (start < data.length) yield data.subarray(start);
}

/**
 * Reads a file's lines in chunks of verify_read_chunk_bytes; lines may span chunks. Of a line
 * longer than export_line_bytes_max only its first export_line_bytes_max + 1 bytes are kept, so
 * memory stays bounded whatever the file holds, and the verifier refuses that line; reading
 * ends there, so time is bounded too.
 */
export function* fileLines(path: string): Generator<Buffer> {
  const fd = openSync(path, "r");
  try {
    // The start of a line not yet ended, in the chunks it spans. Only new bytes are searched for
    // a newline, and a long line is joined once, when it ends: copying the carry onto every
    // chunk made a file without newlines quadratic (256 MiB took minutes).
    let carry: Buffer[] = [];
    let carried = 0;
    const keep = (bytes: Buffer) => {
      const room = export_line_bytes_max + 1 - carried;
      if (room <= 0) return;
      carry.push(bytes.length > room ? bytes.subarray(0, room) : bytes);
      carried += Math.min(bytes.length, room);
    };
    for (;;) {
      // A fresh chunk per read: a line yielded earlier may still be held (awaiting its receipt).
      const chunk = Buffer.allocUnsafe(verify_read_chunk_bytes);
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) break;
      const data = chunk.subarray(0, read);
      let start = 0;
      for (let newline = data.indexOf(10, start); newline >= 0; newline = data.indexOf(10, start)) {
        const end = data.subarray(start, newline);
        if (carry.length === 0) yield end;
        else {
          keep(end);
          yield Buffer.concat(carry);
        }
        carry = [];
        carried = 0;
        start = newline + 1;
      }
      if (start < data.length) keep(data.subarray(start));
      // A line past the limit is refused whatever follows: it is yielded cut there, and nothing
      // more is read (a source with no newline at all, /dev/zero, would otherwise be read for ever).
      if (carried > export_line_bytes_max) {
        yield Buffer.concat(carry);
        return;
      }
    }
    if (carry.length > 0) yield Buffer.concat(carry);
  } finally {
    closeSync(fd);
  }
}

/**
 * Verifies an export that `lines` reads afresh on each call. When a signed root disagrees with a
 * range of entries, and receipt signatures were checked only where a receipt disagrees with its
 * entry, the export is read once more checking the signature of every receipt in that range: an
 * entry altered along with its receipt's leaf hash then leaves a receipt that does not verify,
 * named beside the range. Only as a suspect: a forged receipt of an intact entry (a decoy) looks
 * the same, so the failure stays the range's.
 */
export function verifyExport(lines: () => Iterable<Buffer>, options: VerifyOptions): VerifyReport {
  const report = verifyExportLines(lines(), options);
  const failure = report.failure;
  if (!failure?.range || failure.seq !== undefined || options.allReceipts) return report;
  const range = failure.range;
  const thorough = verifyExportLines(lines(), { ...options, onLeaf: undefined, receiptsIn: range }).failure;
  if (thorough?.seq === undefined || thorough.seq < range[0] || thorough.seq >= range[1]) return report;
  const suspect = `within them, ${thorough.message}: that entry, or its receipt, was altered`;
  return { ...report, failure: { ...failure, ...(thorough.line === undefined ? {} : { line: thorough.line }), message: `${failure.message}; ${suspect}` } };
}

export function verifyExportFile(path: string, options: VerifyOptions): VerifyReport {
  return verifyExport(() => fileLines(path), options);
}
