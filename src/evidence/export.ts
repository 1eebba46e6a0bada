// Writes the evidence log as JSONL: each entry line is exactly its stored canonical bytes,
// interleaved with meta lines (header, per-entry receipts, signed checkpoints) for `verify`.

import type { SqlDriver } from "../ledger/driver.js";
import { canonicalJson } from "./canonical.js";
import { readCheckpoints, readEntryRows, readGenesis, receiptOfRow, type EntryRow, type StoredCheckpoint } from "./store.js";

export const export_format_version = 1;
/** Rows read per snapshot while exporting; entries are immutable, so pages need not share one. */
export const export_page_rows = 1000;

/**
 * Meta lines are one-key objects whose key is never "body"; an entry's canonical JSON always
 * starts with `{"body":`, so the first bytes tell the two apart without parsing.
 */
export const entry_line_prefix = '{"body":';
export const header_line_prefix = '{"bursar_export":';
export const receipt_line_prefix = '{"receipt":';
export const checkpoint_line_prefix = '{"checkpoint":';

export interface ExportHeader {
  v: number;
  origin: string;
  /** The verifier key recorded in system.genesis; informative only: verify trusts --key. */
  key: string;
  tree_size: number;
  exported_at: string;
}

export interface ExportSummary {
  entries: number;
  checkpoints: number;
  bytes: number;
}

export interface ExportOptions {
  /** Entries [0, size) are written; pass a stored checkpoint's size so the export ends on a signed root. */
  size: number;
  exported_at: string;
  /** Receives the text in pieces of at most about one page; await it for back-pressure. */
  write: (text: string) => Promise<void>;
}

/** The export's first line, from the body of the log's system.genesis (entry 0): its origin and key. */
export function exportHeaderLine(genesis_body: unknown, size: number, exported_at: string): string {
  const body = (genesis_body ?? {}) as { origin?: unknown; key?: unknown };
  const header: ExportHeader = { v: export_format_version, origin: String(body.origin ?? ""), key: String(body.key ?? ""), tree_size: size, exported_at };
  return `${canonicalJson({ bursar_export: header })}\n`;
}

/** The line a signed checkpoint stands on, after the entry that completes its size. */
export function exportCheckpointLine(note: string): string {
  return `${canonicalJson({ checkpoint: note })}\n`;
}

/** The receipt line after an entry that has its own receipt (v2 ones carry `log`); "" for one that has none. */
function receiptLine(row: EntryRow, key_id: string, log: string): string {
  const receipt = receiptOfRow(row, key_id, log);
  return receipt ? `${canonicalJson({ receipt })}\n` : "";
}

export async function exportLog(driver: SqlDriver, options: ExportOptions): Promise<ExportSummary> {
  const { genesis, checkpoints } = await driver.read(async (tx) => ({
    genesis: await readGenesis(tx),
    checkpoints: await readCheckpoints(tx, 0, options.size),
  }));
  const log = genesis?.log ?? "";
  const key_id = String((genesis?.entry.body as { key_id?: unknown } | undefined)?.key_id ?? "");
  const bySize = new Map<number, StoredCheckpoint>(checkpoints.map((c) => [c.size, c]));
  let bytes = 0;
  const emit = async (text: string) => {
    bytes += Buffer.byteLength(text, "utf8");
    await options.write(text);
  };
  const checkpointLine = (size: number) => {
    const stored = bySize.get(size);
    return stored ? exportCheckpointLine(stored.note) : "";
  };
  await emit(`${exportHeaderLine(genesis?.entry.body, options.size, options.exported_at)}${checkpointLine(0)}`);
  for (let start = 0; start < options.size; start += export_page_rows) {
    const end = Math.min(options.size, start + export_page_rows);
    const rows = await driver.read((tx) => readEntryRows(tx, start, end));
    if (rows.length !== end - start) throw new Error(`log_entries lacks rows in ${start}..${end - 1}`);
    // Entries appended without their own receipt (batch writers) have an empty signature.
    const lines = rows.map((row) => `${row.entry_text}\n${receiptLine(row, key_id, log)}${checkpointLine(row.seq + 1)}`);
    await emit(lines.join(""));
  }
  return { entries: options.size, checkpoints: checkpoints.length, bytes };
}
