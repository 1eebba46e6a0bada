// Numbers in received JSON that JSON.parse does not keep as sent. It reads every number as the
// nearest double: `12345678901234567891` becomes 12345678901234567000, `0.100000000000000000001`
// becomes 0.1, and `1e-400` becomes 0.
// Stored, such a record would show a value its sender never sent, and two records differing only
// there would parse (and, as array elements, hash) alike: a different decision under a known
// event_id would pass for a retry. They are refused instead, naming the place.

import { stringEnd } from "../json-text.js";

const minus = 0x2d;
const quote = 0x22;

/** A double holds any decimal of this many significant digits exactly enough to give it back. */
const digits_always_kept = 15;
/** What a double needs to be written exactly: its decimal to this many significant digits reads
 *  as the double its writer meant (C's %.17g, for one, writes 1/3 as 0.33333333333333331). */
const digits_of_a_double = 17;

const isDigit = (code: number) => code >= 0x30 && code <= 0x39;

/** True for a character that can start a JSON number: a value starting so is one. */
export function startsNumber(code: number): boolean {
  return code === minus || isDigit(code);
}

/** Index just past the number token starting at `start` (valid JSON: digits, ".", "e", "E", "+", "-"). */
export function numberEnd(text: string, start: number): number {
  let end = start + 1;
  for (; end < text.length; end++) {
    const code = text.charCodeAt(end);
    if (!isDigit(code) && code !== 0x2e && code !== 0x65 && code !== 0x45 && code !== 0x2b && code !== minus) break;
  }
  return end;
}

/** A number's significant digits and decimal exponent, its sign and spelling dropped: "-1.20e3" and "1200" are both "12e2". */
function decimalForm(token: string): { digits: string; exponent: number } {
  const match = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(token);
  if (!match) return { digits: token, exponent: 0 };
  const [, whole, fraction = "", exponent = "0"] = match;
  const digits = `${whole}${fraction}`.replace(/^0+/, "");
  // Trailing zeros trimmed by a loop: /0+$/ tried every run of zeros to the end, quadratic in a
  // number of 100,000 zeros and a 1 (one /mcp body of 128 KiB held the event loop 14 s).
  let end = digits.length;
  while (end > 0 && digits.charCodeAt(end - 1) === 0x30) end--;
  const significant = digits.slice(0, end);
  if (significant === "") return { digits: "0", exponent: 0 };
  return { digits: significant, exponent: Number(exponent) - fraction.length + (digits.length - significant.length) };
}

/**
 * True when JSON.parse keeps the number text[start, end) as its sender meant it: it reads back in
 * the same digits (the double's shortest form, as the log writes it: an int64 id of 19 digits
 * does not), or, written with a fraction or exponent, it is the double's own 17 significant
 * digits (as %.17g writes it; 99.999999999999999, 17 digits that read as 100, is not); and it
 * does not read as 0 unless it is 0. A number out of range (1e400
 * parses to Infinity) counts as kept: it is refused as such elsewhere.
 */
export function keptExactly(text: string, start: number, end: number): boolean {
  let fraction = false;
  let exponent = false;
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x2e) fraction = true;
    else if ((code | 0x20) === 0x65) exponent = true;
  }
  if (!exponent && end - start <= digits_always_kept) return true;
  const token = text.slice(start, end);
  const value = Number(token);
  if (!Number.isFinite(value)) return true;
  const sent = decimalForm(token);
  if (value === 0) return sent.digits === "0";
  if (fraction || exponent) {
    const written = decimalForm(Math.abs(value).toPrecision(digits_of_a_double));
    if (sent.digits === written.digits && sent.exponent === written.exponent) return true;
  }
  const read = decimalForm(String(Math.abs(value)));
  return sent.digits === read.digits && sent.exponent === read.exponent;
}

/** Whether `text` (valid JSON) holds a number JSON.parse does not keep as sent; strings are skipped whole. */
export function holdsInexactNumber(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === quote) i = stringEnd(text, i);
    else if (startsNumber(code)) {
      const end = numberEnd(text, i);
      if (!keptExactly(text, i, end)) return true;
      i = end - 1;
    }
  }
  return false;
}
