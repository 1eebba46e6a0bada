// URL text read as the servers it passes through may read it: percent-escapes decoded, again and
// again (`%252F` is `%2F` to one reader and `/` to the next).

/** Rounds of percent-decoding before looking again: `%252F` is `/` after two. */
const decode_rounds_max = 4;

/** Percent-decodes byte by byte, tolerating malformed escapes, until stable or out of rounds. */
export function percentDecoded(url: string): string {
  let text = url;
  for (let round = 0; round < decode_rounds_max && text.includes("%"); round++) {
    const next = text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (next === text) break;
    text = next;
  }
  return text;
}
