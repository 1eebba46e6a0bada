// Places in received JSON that JSON.parse does not keep as sent. It keeps the last of two equal
// keys, while a record's hash binds its bytes, where another parser may read the first:
// `{"decision":"deny",…,"decision":"allow"}` would be stored as allow under a hash of bytes that
// say deny too. And it reads a number as the nearest double (see numbers.ts). A record with
// either is refused instead, naming the place.

import { shown_segments_max, shownPath } from "../policy/text.js";
import { stringEnd, writesKeyTwice } from "../json-text.js";
import { holdsInexactNumber, keptExactly, numberEnd, startsNumber } from "./numbers.js";

interface Frame {
  /** Keys seen so far in this object; null for an array. */
  keys: Set<string> | null;
  /** This value's place in its parent: a key, an array index, or "" for the root. */
  segment: string;
  /** Objects: the next string is a key. */
  expect_key: boolean;
  /** Arrays: the index of the element being read. */
  index: number;
  /** Objects: the key whose value is being read. */
  key: string;
}

const quote = 0x22;

/**
 * The path of a duplicate key, as shownPath shows it: only the segments it shows are read, so
 * a key a megabyte long, or nesting thousands deep, costs no more to name than a short one.
 */
function duplicatePath(stack: readonly Frame[], key: string): string {
  const segments = stack.slice(1, 1 + shown_segments_max + 1).map((frame) => frame.segment);
  if (segments.length <= shown_segments_max) segments.push(key);
  return shownPath(segments);
}

/**
 * The first duplicate key's path in `text`, the JSON text that parsed to `value`, or undefined.
 * JSON.parse keeps one member per key, so the text has a duplicate exactly when it writes more
 * members than the parsed value holds: that count, which allocates nothing per key, answers for
 * the common record, and only a record with a duplicate is read again to name it.
 */
export function firstDuplicateKeyPath(text: string, value: unknown): string | undefined {
  if (!writesKeyTwice(text, value)) return undefined;
  return duplicateKeyPaths(text, 1)[0];
}

/**
 * Why a JSON-RPC message is not read (at /mcp and by the stdio bridge), or undefined when JSON.parse
 * keeps it as sent: a key written twice in one object (JSON.parse keeps the last, a reader in
 * front of Bursar may take the first), or a number JSON.parse reads as another
 * (99.999999999999999 as 100), where a reader that keeps decimals exactly sees what was sent.
 * Either way the two would decide on other arguments. `text` is the valid JSON that parsed to `value`.
 */
export function unreadMessageReason(text: string, value: unknown): string | undefined {
  const twice = firstDuplicateKeyPath(text, value);
  if (twice !== undefined) return `it writes the key ${twice} twice in one object, and JSON readers differ on which one counts (JSON.parse keeps the last), so neither is read`;
  if (!holdsInexactNumber(text)) return undefined;
  // No key is written twice, so the first place found is the number.
  const [place] = unkeptPlaces(text, 1);
  return `it writes the number at ${place?.path ?? "(the body)"} with digits no double holds, so JSON.parse would read another number than the one sent`;
}

/** Duplicates reported per text at most: one per record of the largest delivery is enough. */
export const duplicate_keys_reported_max = 500;

/** A place in received JSON that JSON.parse does not keep as sent: a key written twice in one
 *  object (the last kept), or a number it reads as another (see numbers.ts). */
export interface UnkeptPlace {
  path: string;
  problem: "duplicate_key" | "inexact_number";
}

/**
 * The places (`agent.id`, `args.items.2.sku`, `3.decision` inside an array) in `text`, which
 * must be valid JSON, that JSON.parse does not keep as sent: keys that occur a second time in
 * one object, compared as decoded (`"a"` and `"\u0061"` are the same key), and, when `numbers`,
 * numbers it reads as another. When `text` is an array (a delivery of records), only each
 * element's first such place is named: one element with thousands of them must not use up
 * `reported_max` before the next element is read. Stops after `reported_max` of them.
 */
export function unkeptPlaces(text: string, reported_max = duplicate_keys_reported_max, numbers = true): UnkeptPlace[] {
  const found: UnkeptPlace[] = [];
  const stack: Frame[] = [];
  /** The root array's element whose place was named last. */
  let named_element = -1;
  const report = (segment: string, problem: UnkeptPlace["problem"]) => {
    const root = stack[0]!;
    if (root.keys !== null) found.push({ path: duplicatePath(stack, segment), problem });
    else if (root.index !== named_element) {
      named_element = root.index;
      found.push({ path: duplicatePath(stack, segment), problem });
    }
  };
  for (let i = 0; i < text.length && found.length < reported_max; i++) {
    const code = text.charCodeAt(i);
    const top = stack[stack.length - 1];
    if (code === quote) {
      const end = stringEnd(text, i);
      if (top?.keys && top.expect_key) {
        const raw = text.slice(i + 1, end);
        const key = raw.includes("\\") ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        if (top.keys.has(key)) report(key, "duplicate_key");
        top.keys.add(key);
        top.key = key;
        top.expect_key = false;
      }
      i = end;
    } else if (startsNumber(code)) {
      const end = numberEnd(text, i);
      if (numbers && top && !keptExactly(text, i, end)) report(top.keys ? top.key : String(top.index), "inexact_number");
      i = end - 1;
    } else if (code === 0x7b /* { */ || code === 0x5b /* [ */) {
      const segment = top ? (top.keys ? top.key : String(top.index)) : "";
      stack.push({ keys: code === 0x7b ? new Set() : null, segment, expect_key: true, index: 0, key: "" });
    } else if (code === 0x7d /* } */ || code === 0x5d /* ] */) {
      stack.pop();
    } else if (code === 0x2c /* , */ && top) {
      if (top.keys) top.expect_key = true;
      else top.index++;
    }
  }
  return found;
}

/** The paths of keys that occur a second time in one object of `text` (see unkeptPlaces). */
export function duplicateKeyPaths(text: string, reported_max = duplicate_keys_reported_max): string[] {
  return unkeptPlaces(text, reported_max, false).map((place) => place.path);
}
