// The secrets Bursar is configured with are redacted wherever they appear, whatever they look
// like: a bare key secret matches none of the secret-looking patterns. (Its own test file: the
// remembered values live for the life of the process.)

import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/evidence/canonical.js";
import { known_secret_chars_min, rememberSecretValues, scrub, scrubbedCanonicalJson } from "../../src/evidence/scrub.js";

const key_secret = "Kq8ZrT2mWx9LpB4nYc7VdF1s";

describe("configured secrets", () => {
  it("are plain text before they are remembered, and redacted after, inside text, as a key, and in canonical JSON alike", () => {
    const notes = { memo: `pay with ${key_secret} please`, ref: "order 42" };
    expect(scrub(notes)).toEqual(notes);
    rememberSecretValues([key_secret, undefined]);
    expect(scrub(notes)).toEqual({ memo: "[redacted]", ref: "order 42" });
    expect(scrub({ nested: [{ value: key_secret }] })).toEqual({ nested: [{ value: "[redacted]" }] });
    // As a key: the whole object goes, as for any key that holds a secret.
    expect(scrub({ outer: { [key_secret]: "x", other: 1 } })).toEqual({ outer: "[redacted]" });
    const body = { memo: `x${key_secret}y`, n: 1 };
    expect(scrubbedCanonicalJson(body).text).toBe(canonicalJson(scrub(body)));
  });

  it("shorter than the minimum are not remembered: they would redact ordinary text", () => {
    const short = "a".repeat(known_secret_chars_min - 1);
    rememberSecretValues([short]);
    expect(scrub({ memo: `${short}!` })).toEqual({ memo: `${short}!` });
  });
});
