// One delivery, one transaction: split and validate everything first (all or nothing), then,
// under the log's sequence lock, deduplicate by (source, event_id), append the new records,
// sign one receipt listing every record, and remember it for retries.

import type { Clock } from "../clock.js";
import {
  buildEntry,
  entry_bytes_max,
  EntryTooLargeError,
  jsonListBytes,
  readTreeSize,
  type AppendInput,
  type AppendResult,
  type DeliveryReceipt,
  type DeliveryRecord,
  type EvidenceLog,
} from "../evidence/index.js";
import { HttpError } from "../errors.js";
import { randomIds, type IdSource } from "../ids.js";
import type { SqlDriver, SqlTx } from "../ledger/driver.js";
import { checkCredentialStillValid, lockEnabledSource } from "../sources/store.js";
import { splitDelivery } from "./delivery.js";
import { approvalVerified, invalidRecords, validateRecords, type RecordProblem, type ValidRecord } from "./validate.js";

/** Event ids looked up per query, and rows per multi-row INSERT (well under both dialects' parameter limits). */
const lookup_ids_per_query = 100;
const insert_rows_per_statement = 50;

export interface IngestDependencies {
  driver: SqlDriver;
  log: EvidenceLog;
  clock: Clock;
  ids?: IdSource;
}

export interface IngestAnswer {
  source: string;
  /** Null when every record was a retry: nothing was written. */
  delivery_id: string | null;
  records: number;
  written: number;
  duplicates: number;
  receipt: DeliveryReceipt;
}

interface StoredRecord extends DeliveryRecord {
  delivery_id: string;
}

/** Collapses identical repeats inside one delivery; the same event_id with other bytes is a conflict. */
function uniqueRecords(records: readonly ValidRecord[]): ValidRecord[] {
  const seen = new Map<string, ValidRecord>();
  for (const record of records) {
    const earlier = seen.get(record.value.event_id);
    if (!earlier) seen.set(record.value.event_id, record);
    else if (earlier.sha256 !== record.sha256) throw conflict([{ index: record.index, event_id: record.value.event_id }]);
  }
  return [...seen.values()];
}

function conflict(records: Array<{ index: number; event_id: string }>): HttpError {
  return new HttpError(409, "event_id_conflict", `event_id ${JSON.stringify(records[0]!.event_id)} was already received with different bytes (an array element counts as its RFC 8785 JSON, a line or object as its text: the same record sent in the other form differs); nothing was stored`, { records });
}

async function storedRecords(tx: SqlTx, source_id: string, event_ids: readonly string[]): Promise<Map<string, StoredRecord>> {
  const found = new Map<string, StoredRecord>();
  for (let start = 0; start < event_ids.length; start += lookup_ids_per_query) {
    const chunk = event_ids.slice(start, start + lookup_ids_per_query);
    const rows = await tx.all<StoredRecord & { seq: number | string }>(
      `SELECT event_id, seq, leaf_hash, sha256, occurred_at, received_at, delivery_id FROM ingest_records WHERE source_id = ? AND event_id IN (${chunk.map(() => "?").join(", ")})`,
      [source_id, ...chunk],
    );
    for (const row of rows) found.set(row.event_id, { ...row, seq: Number(row.seq) });
  }
  return found;
}

function entryOf(source_id: string, record: ValidRecord): AppendInput {
  const verified = approvalVerified(record.value);
  const body: Record<string, unknown> = { record: record.value, args_hash: record.args_hash };
  if (verified !== null) body.approval_verified = verified;
  return { kind: "ingest.decision", source: source_id, occurred_at: record.value.occurred_at, body_sha256: record.sha256, body };
}

/** The problem of a record whose entry is over entry_bytes_max; none when it fits. */
function sizeProblem(record: ValidRecord, input: AppendInput, seq: number, received_at: string): RecordProblem[] {
  try {
    buildEntry(input, seq, received_at);
    return [];
  } catch (error) {
    if (!(error instanceof EntryTooLargeError)) throw error;
    return [{ index: record.index, field: "(record)", message: `as evidence it would be ${error.bytes} bytes; one entry is at most ${entry_bytes_max} bytes` }];
  }
}

/**
 * Appends the new records' entries. RFC 8785 can write a record longer than it was sent (9e20 as
 * 21 digits, a short secret as "[redacted]"), so a record under the delivery limit can still make
 * an entry over entry_bytes_max: the sender's problem, a 422 naming every such record. Thrown
 * inside the delivery's transaction, it stores nothing.
 */
async function appendRecords(deps: IngestDependencies, tx: SqlTx, source_id: string, fresh: readonly ValidRecord[], first_seq: number, record_count: number) {
  const inputs = fresh.map((record) => entryOf(source_id, record));
  try {
    return await deps.log.appendMany(tx, inputs, { receipts: false });
  } catch (error) {
    if (!(error instanceof EntryTooLargeError)) throw error;
    // Rebuilt one by one to list them all: received_at is a fixed-width time, so sizes agree.
    const received_at = deps.clock().toISOString();
    const problems = fresh.flatMap((record, i) => sizeProblem(record, inputs[i]!, first_seq + i, received_at));
    if (problems.length === 0) throw error;
    throw invalidRecords(problems, record_count);
  }
}

function receiptRecord(record: ValidRecord, result: AppendResult): DeliveryRecord {
  return {
    event_id: record.value.event_id,
    seq: result.seq,
    leaf_hash: result.leaf_hash,
    sha256: record.sha256,
    occurred_at: record.value.occurred_at,
    received_at: result.entry.received_at,
  };
}

/**
 * A delivery's receipt as stored for retries, as it was signed: v2 with its `log`, or v1 (stored
 * before receipts named their log) without. When every listed record was written by the
 * delivery itself (nothing repeated, nothing received earlier), the listing is exactly the
 * delivery's ingest_records rows in seq order, so only the fields around it are stored and the
 * listing is rebuilt from those rows; otherwise the whole receipt is stored.
 */
type StoredReceipt = DeliveryReceipt | Omit<DeliveryReceipt, "records">;

function storedReceipt(receipt: DeliveryReceipt, listed_by_delivery: boolean): string {
  if (!listed_by_delivery) return JSON.stringify(receipt);
  const { source, received_at, log, key_id, signature } = receipt;
  return JSON.stringify({ source, received_at, log, key_id, signature });
}

/** A receipt with its listing, keys in the order signing writes them (`log` only where it was stored). */
function withListing(receipt: Omit<DeliveryReceipt, "records">, records: DeliveryRecord[]): DeliveryReceipt {
  const { source, received_at, log, key_id, signature } = receipt;
  return log === undefined ? { source, received_at, records, key_id, signature } : { source, received_at, records, log, key_id, signature };
}

/**
 * A retry of an earlier delivery gets that delivery's receipt back, byte for byte. That delivery
 * wrote the newest of the records (the rest it repeated were written before it, and no later
 * delivery writes a record again; one that wrote none stored no receipt): only the delivery
 * of the record with the highest seq can have listed exactly these, in this order.
 */
async function firstReceipt(tx: SqlTx, records: readonly ValidRecord[], stored: Map<string, StoredRecord>): Promise<DeliveryReceipt | undefined> {
  const rows = records.map((record) => stored.get(record.value.event_id)!);
  const delivery_id = rows.reduce((newest, row) => (row.seq > newest.seq ? row : newest)).delivery_id;
  const row = await tx.get<{ receipt_json: string; records: number | string }>("SELECT receipt_json, records FROM ingest_deliveries WHERE delivery_id = ?", [delivery_id]);
  if (!row) return undefined;
  const receipt = JSON.parse(row.receipt_json) as StoredReceipt;
  if ("records" in receipt) {
    const same = receipt.records.length === records.length && receipt.records.every((listed, i) => listed.event_id === records[i]!.value.event_id);
    return same ? receipt : undefined;
  }
  // The delivery's own rows, all of them (as many as it listed) and in seq order, are its listing.
  const own = Number(row.records) === rows.length && rows.every((listed, i) => listed.delivery_id === delivery_id && (i === 0 || listed.seq > rows[i - 1]!.seq));
  if (!own) return undefined;
  const listed = rows.map(({ event_id, seq, leaf_hash, sha256, occurred_at, received_at: at }) => ({ event_id, seq, leaf_hash, sha256, occurred_at, received_at: at }));
  return withListing(receipt, listed);
}

async function insertRecords(tx: SqlTx, source_id: string, delivery_id: string, listed: readonly DeliveryRecord[]): Promise<void> {
  for (let start = 0; start < listed.length; start += insert_rows_per_statement) {
    const chunk = listed.slice(start, start + insert_rows_per_statement);
    await tx.run(
      `INSERT INTO ingest_records (source_id, event_id, sha256, seq, leaf_hash, occurred_at, received_at, delivery_id) VALUES ${chunk.map(() => "(?, ?, ?, ?, ?, ?, ?, ?)").join(", ")}`,
      chunk.flatMap((r) => [source_id, r.event_id, r.sha256, r.seq, r.leaf_hash, r.occurred_at, r.received_at, delivery_id]),
    );
  }
}

/**
 * Parses, validates and stores one delivery from `source_id` (already authenticated, with the
 * secrets in `credential`: checked again once the source's row is held; none for the operator's upload).
 */
export async function ingestDelivery(deps: IngestDependencies, source_id: string, raw: Buffer, credential: readonly string[] = []): Promise<IngestAnswer> {
  const records = validateRecords(splitDelivery(raw).records);
  const unique = uniqueRecords(records);
  const ids = deps.ids ?? randomIds;
  return deps.driver.transaction(async (tx) => {
    // The source row before the log lock, the order a source change takes them in.
    await lockEnabledSource(tx, source_id);
    await checkCredentialStillValid(tx, credential, deps.clock().getTime());
    // The log's sequence lock next: it serializes ingests, so the duplicate check below cannot race.
    const first_seq = await readTreeSize(tx, true);
    const stored = await storedRecords(tx, source_id, unique.map((record) => record.value.event_id));
    const conflicts = unique.filter((record) => stored.has(record.value.event_id) && stored.get(record.value.event_id)!.sha256 !== record.sha256);
    if (conflicts.length > 0) throw conflict(conflicts.map((record) => ({ index: record.index, event_id: record.value.event_id })));
    const fresh = unique.filter((record) => !stored.has(record.value.event_id));
    // One signed receipt lists every record of the delivery, so entries skip their own.
    const results = await appendRecords(deps, tx, source_id, fresh, first_seq, records.length);
    const listedBy = new Map<string, DeliveryRecord>(stored);
    fresh.forEach((record, i) => listedBy.set(record.value.event_id, receiptRecord(record, results[i]!)));
    const listed = records.map((record) => listedBy.get(record.value.event_id)!);
    const answer = { source: source_id, records: records.length, written: fresh.length, duplicates: records.length - fresh.length };
    if (fresh.length === 0) {
      const receipt = (await firstReceipt(tx, records, stored)) ?? deps.log.signDelivery({ source: source_id, received_at: deps.clock().toISOString(), records: listed });
      return { ...answer, delivery_id: null, receipt };
    }
    const delivery_id = ids("dlv");
    const receipt = deps.log.signDelivery({ source: source_id, received_at: results[0]!.entry.received_at, records: listed });
    await tx.run("INSERT INTO ingest_deliveries (delivery_id, source_id, received_at, records, receipt_json) VALUES (?, ?, ?, ?, ?)", [
      delivery_id,
      source_id,
      receipt.received_at,
      records.length,
      storedReceipt(receipt, fresh.length === records.length),
    ]);
    await insertRecords(tx, source_id, delivery_id, fresh.map((record) => listedBy.get(record.value.event_id)!));
    return { ...answer, delivery_id, receipt };
  });
}

/**
 * The answer's JSON, as JSON.stringify writes it, in bytes: the receipt's records are written
 * one by one into the buffer, so the ~130 KB text of a full delivery's answer is never one string.
 */
export function answerBytes(answer: IngestAnswer): Buffer {
  const { receipt } = answer;
  const head =
    `{"source":${JSON.stringify(answer.source)},"records":${answer.records},"written":${answer.written},"duplicates":${answer.duplicates},` +
    `"delivery_id":${JSON.stringify(answer.delivery_id)},"receipt":{"source":${JSON.stringify(receipt.source)},"received_at":${JSON.stringify(receipt.received_at)},"records":[`;
  const listed = receipt.records.map((r) =>
    JSON.stringify({ event_id: r.event_id, seq: r.seq, leaf_hash: r.leaf_hash, sha256: r.sha256, occurred_at: r.occurred_at, received_at: r.received_at }),
  );
  // A v1 receipt (stored before receipts named their log) is returned as it was signed, without `log`.
  const log = receipt.log === undefined ? "" : `"log":${JSON.stringify(receipt.log)},`;
  return jsonListBytes(head, listed, `],${log}"key_id":${JSON.stringify(receipt.key_id)},"signature":${JSON.stringify(receipt.signature)}}}`);
}
