// Reading JSON text as written, beside what JSON.parse makes of it: where a string ends, and
// whether the text writes a key twice in one object (JSON.parse keeps the last, silently).

const backslash = 0x5c;

/** Index of the quote that closes the string opening at `open`; -1 when none does. */
export function stringEnd(text: string, open: number): number {
  let at = text.indexOf('"', open + 1);
  for (;;) {
    let slashes = 0;
    while (text.charCodeAt(at - 1 - slashes) === backslash) slashes++;
    if (slashes % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
}

/** JSON white space, which may stand between a key and its ":". */
function isJsonSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

/** How many object members `text` (valid JSON) writes, a key written twice counted twice: in
 *  valid JSON a string is a key exactly when a ":" follows it. */
function writtenMembers(text: string): number {
  let members = 0;
  for (let at = text.indexOf('"'); at !== -1; ) {
    let next = stringEnd(text, at) + 1;
    while (isJsonSpace(text.charCodeAt(next))) next++;
    if (text.charCodeAt(next) === 0x3a /* : */) members++;
    at = text.indexOf('"', next);
  }
  return members;
}

/** How many members the objects in `value` hold (a parsed value, so each key once), walked
 *  without recursion: JSON.parse takes nesting deeper than the call stack. */
function parsedMembers(value: unknown): number {
  let members = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (item === null || typeof item !== "object") continue;
    if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i++) pending.push(item[i]);
      continue;
    }
    const keys = Object.keys(item);
    members += keys.length;
    for (let i = 0; i < keys.length; i++) pending.push((item as Record<string, unknown>)[keys[i]!]);
  }
  return members;
}

/**
 * Whether `text`, the valid JSON text that parsed to `value`, writes a key twice in one object:
 * JSON.parse keeps one member per key, so it does exactly when it writes more members than the
 * parsed value holds. Counting allocates nothing per key.
 */
export function writesKeyTwice(text: string, value: unknown): boolean {
  return writtenMembers(text) !== parsedMembers(value);
}

/** Characters of an untrusted string that a message quotes; the rest is cut. */
export const preview_chars_max = 80;

/**
 * Characters JSON.stringify leaves as they are that would change how a printed message reads:
 * DEL and the C1 controls (U+009B is a terminal's CSI, as ESC [ is); the bidirectional controls
 * (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069), which reorder the rest of the
 * line on screen; and the line and paragraph separators U+2028 and U+2029.
 */
const unprintable_characters = /[\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

/** `text` as a JSON string literal with every such character escaped, so that printed it moves no cursor and reorders nothing. */
function quoted(text: string): string {
  return JSON.stringify(text).replace(unprintable_characters, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * How a message names a value parsed from untrusted JSON: a string quoted as JSON and cut at
 * preview_chars_max characters, a number, boolean or null as written, an array or an object by
 * its kind. The value is never walked or converted: JSON.parse takes nesting deeper than the call
 * stack, which JSON.stringify and template literals then overflow, and a member named toString
 * breaks String().
 */
export function jsonPreview(value: unknown): string {
  if (typeof value === "string") return value.length > preview_chars_max ? `${quoted(value.slice(0, preview_chars_max))}…` : quoted(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  if (Array.isArray(value)) return "an array";
  return value === undefined ? "nothing" : "an object";
}
