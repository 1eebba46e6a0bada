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

/** A double's exact value has at most this many digits before its decimal point (2^1024 has 309). */
const integer_digits_max = 309;

/**
 * True when JSON.parse keeps the number text[start, end) as its sender meant it: the digits sent
 * are the double it reads, rounded to as many significant digits (or its shortest form). So a
 * double is kept however its writer wrote it: shortest (JSON.stringify, Python, Java), or to 15,
 * 16 or 17 digits (C's %.15g, %.16g, %.17g: 0.07000000000000001, 0.33333333333333331), with
 * any spelling (1.50, 1E21, 100.000). Digits no double holds are not: 99.999999999999999 reads
 * as 100 and 12345678901234567891 as 12345678901234567168, while a reader that keeps decimals
 * exactly sees what was sent. More than 17 digits are kept only as a double's exact integer
 * value (2^56 written whole by %.17g is; an int64 id of 19 digits is not). A number that reads
 * as 0 is kept only if it is 0; one out of range (1e400 parses to Infinity) counts as kept: it
 * is refused as such elsewhere.
 */
export function keptExactly(text: string, start: number, end: number): boolean {
  let exponent = false;
  for (let i = start; i < end; i++) if ((text.charCodeAt(i) | 0x20) === 0x65) exponent = true;
  if (!exponent && end - start <= digits_always_kept) return true;
  const token = text.slice(start, end);
  const value = Number(token);
  if (!Number.isFinite(value)) return true;
  const sent = decimalForm(token);
  if (value === 0) return sent.digits === "0";
  const magnitude = Math.abs(value);
  if (sameDecimal(sent, decimalForm(String(magnitude)))) return true;
  if (sent.digits.length <= digits_of_a_double) {
    if (sameDecimal(sent, decimalForm(magnitude.toPrecision(sent.digits.length)))) return true;
    // Halfway between the digits sent and the next ones up: toPrecision rounds such a tie up,
    // C's printf to even, and either is the double's own. Its exact value (toPrecision(100) has
    // room for any that ends this soon) is then the digits sent with a 5 after them.
    return sameDecimal({ digits: `${sent.digits}5`, exponent: sent.exponent - 1 }, decimalForm(magnitude.toPrecision(100)));
  }
  // Longer digits (bounded, so BigInt never parses megabytes) name an integer exactly or not at all.
  if (!Number.isInteger(value) || sent.exponent < 0 || sent.digits.length + sent.exponent > integer_digits_max) return false;
  return BigInt(sent.digits) * 10n ** BigInt(sent.exponent) === BigInt(magnitude);
}

function sameDecimal(a: { digits: string; exponent: number }, b: { digits: string; exponent: number }): boolean {
  return a.digits === b.digits && a.exponent === b.exponent;
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
