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

/** The characters a URI may hold unescaped that name no delimiter (RFC 3986, section 2.3). */
const unreserved = /^[A-Za-z0-9._~-]$/;

/** The escapes of unreserved characters decoded, once ("%61pi" is "api"), every other escape kept:
 *  what a router reads before it matches a path. */
export function unreservedDecoded(path: string): string {
  return path.replace(/%([0-9a-f]{2})/gi, (escape, hex: string) => {
    const character = String.fromCharCode(parseInt(hex, 16));
    return unreserved.test(character) ? character : escape;
  });
}
