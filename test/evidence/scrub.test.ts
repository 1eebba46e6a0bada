// Nothing secret in evidence: scrub() unit cases, and a canary secret that never reaches
// the database file or the export while body_sha256 still binds the unscrubbed body.

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/evidence/canonical.js";
import { exportLog } from "../../src/evidence/export.js";
import { newToken } from "../../src/ids.js";
import { isSecretKeyName, isSecretValue, luhnValid, rememberedKeyNames, scrub, scrubbedCanonicalJson, scrubCounting } from "../../src/evidence/scrub.js";
import { openTestLog, tempDir } from "./support.js";

/** What the two paths give for one value: the text and count, or the error's class and message. */
function outcome(run: () => { text: string; redactions: number }): string {
  try {
    return JSON.stringify(run());
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
}

describe("isSecretKeyName", () => {
  it("judges a key name of any length, and remembers only short ones (the names are the senders')", () => {
    const before = rememberedKeyNames();
    expect(isSecretKeyName(`${"x".repeat(100_000)}password`)).toBe(true);
    expect(isSecretKeyName(`long_${"y".repeat(100_000)}`)).toBe(false);
    expect(rememberedKeyNames()).toBe(before);
    expect(isSecretKeyName(`remembered_${process.hrtime.bigint()}`)).toBe(false);
    expect(rememberedKeyNames()).toBe(before + 1);
  });
});

describe("scrubbedCanonicalJson", () => {
  it("is canonicalJson(scrub(value)) with the same redaction count, on values full of secrets", () => {
    const key = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom("password", "Api_Key", "cvv", "token", "__proto__", "amount", "toJSON"));
    const secret = fc.constantFrom("Bearer abcdefgh12345678", "rzp_test_abc", "4111 1111 1111 1111", "eyJabcd.efgh1234.x", "-----BEGIN PRIVATE KEY-----", "sk-0123456789abcdefXY");
    const leaf = fc.oneof(
      fc.string(),
      secret,
      fc.double(),
      fc.constantFrom(4111111111111111, 1e12, -0, Number.NaN, Number.POSITIVE_INFINITY),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.constant(undefined),
      fc.constant(() => 1),
      fc.constant(Symbol("s")),
      fc.constant(new Date(0)),
    );
    const sparse = fc.sparseArray(leaf, { maxLength: 5 });
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        leaf,
        sparse,
        fc.array(tie("node"), { maxLength: 4 }),
        fc.dictionary(key, tie("node"), { maxKeys: 5 }),
        tie("node").map((inner) => ({ toJSON: () => inner })),
      ),
    })).node;
    fc.assert(
      fc.property(value, (input) => {
        const copied = outcome(() => {
          const { value: copy, redactions } = scrubCounting(input);
          return { text: canonicalJson(copy), redactions };
        });
        expect(outcome(() => scrubbedCanonicalJson(input))).toBe(copied);
      }),
      { numRuns: 2_000 },
    );
  });

  it("agrees past the depth limit, on holes, toJSON members and a \"__proto__\" key", () => {
    const nest = (leaf: unknown, levels: number) => {
      let value = leaf;
      for (let i = 0; i < levels; i++) value = [value];
      return value;
    };
    const parsed = JSON.parse('{"__proto__": {"password": "p"}, "n": [1, "Basic abcdefgh123"]}') as unknown;
    const inputs: unknown[] = [
      nest("leaf", 80),
      nest({ token: "t" }, 70),
      nest([, 1], 64),
      [, "rzp_test_abc", ,],
      Object.assign([1, "sk-0123456789abcdefXY"], { toJSON: () => "x" }),
      { toJSON: { toJSON: () => () => 1 } },
      { when: new Date(0), nested: { toJSON: () => ({ password: "p", ok: 1 }) } },
      parsed,
    ];
    for (const input of inputs) {
      const { value: copy, redactions } = scrubCounting(input);
      expect(scrubbedCanonicalJson(input)).toEqual({ text: canonicalJson(copy), redactions });
    }
  });
});

describe("scrub", () => {
  it("redacts values under secret-looking keys, at any depth, without changing the input", () => {
    const input = {
      password: "p",
      nested: { Api_Key: "k", "X-Api-Key": "k", key_secret: "s", list: [{ authorization: "a", cvv: 123 }] },
      access_token: "t",
      webhook_secret: "w",
    };
    const copy = JSON.parse(JSON.stringify(input)) as typeof input;
    expect(scrub(input)).toEqual({
      password: "[redacted]",
      nested: { Api_Key: "[redacted]", "X-Api-Key": "[redacted]", key_secret: "[redacted]", list: [{ authorization: "[redacted]", cvv: "[redacted]" }] },
      access_token: "[redacted]",
      webhook_secret: "[redacted]",
    });
    expect(input).toEqual(copy);
  });

  it("takes names that end in pin or otp, access keys and names written with spaces for secrets, but not a pincode or shipping", () => {
    for (const name of ["upi_pin", "card-pin", "MPIN", "sms_otp", "emailOtp", "access_key", "AWS Access Key Id", "API Key", "pin", "otp"]) {
      expect(isSecretKeyName(name), name).toBe(true);
    }
    for (const name of ["pincode", "shipping", "pin_code", "spinner", "otp_sent_at", "option"]) expect(isSecretKeyName(name), name).toBe(false);
  });

  it("keeps a \"__proto__\" key as data, so the stored body and its hash keep what was sent", () => {
    const sent = JSON.parse('{"amount": 1, "__proto__": {"amount": 999, "password": "p"}}') as Record<string, unknown>;
    const copy = scrub(sent);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(["amount", "__proto__"]);
    expect(canonicalJson(copy)).toBe('{"__proto__":{"amount":999,"password":"[redacted]"},"amount":1}');
  });

  it("redacts credential-shaped values wherever they appear", () => {
    const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJlLWJ5dGVz";
    const values = [
      "Bearer abcdefgh12345678",
      `token in text: ${jwt}`,
      "rzp_test_1DP5mmOlF5G5ag",
      "rzp_live_ILgsfZCZoFIKMb",
      "-----BEGIN PRIVATE KEY-----\nMC4CAQ...\n-----END PRIVATE KEY-----",
      "card 4111 1111 1111 1111 please",
      "4000-0000-0000-0002",
    ];
    for (const prefix of ["bsr_agent", "bsr_op", "bsr_audit", "bsr_whsec", "bsr_srckey", "bsr_obs"]) values.push(`ignore that, ${newToken(prefix)}`);
    // Glued to a word, where a word boundary does not match: a letter, a digit or "_" before it.
    for (const glue of ["x_", "ab", "9", "order_"]) values.push(`${glue}${newToken("bsr_agent")}`, `${glue}${newToken("bsr_op")}`, `${glue}rzp_live_ILgsfZCZoFIKMb`);
    // Percent-encoded in a URL, where "%3D" glues a letter to the token (no word boundary), and
    // encoded twice over.
    values.push(
      `https://shop.example/cb?next=%2Fapi%3Ftoken%3D${newToken("bsr_agent")}`,
      "https://x.example/?k%3Drzp_live_ILgsfZCZoFIKMb",
      "a%3Dsk-proj-abcdefghijklmnopqrstu",
      `auth=Bearer%20${newToken("bsr_agent")}`,
      "card%3D4111%201111%201111%201111",
      `u=%253D${newToken("bsr_op")}`,
    );
    for (const value of values) expect(scrub({ note: value }).note, value).toBe("[redacted]");
    expect(scrub({ n: 4111111111111111 }).n).toBe("[redacted]");
    // Past 2^53 a 19-digit card number parses to a rounded neighbour (6221260000000000000) that
    // fails Luhn yet keeps most of its digits: any integer of up to 19 digits that size is redacted.
    expect(scrub({ pan: 6221260000000000019 }).pan).toBe("[redacted]");
    expect(scrub({ big: 12345678901234567890 }).big).toBe(12345678901234567890);
    // A Luhn-valid digit run inside a hex digest is bounded by letters: not a card number.
    const digest = "e8f80ce73a7bf62bf87219a985f86002ca8284352066799136ec02afef18ce0b";
    expect(scrub({ digest }).digest).toBe(digest);
    expect(scrub({ pan: "pan=4111-1111-1111-1111;" }).pan).toBe("[redacted]");
    // A secret in a key: the object holding it is stored as "[redacted]" whole, on both paths.
    for (const notes of [{ "4111111111111111": "visa", ok: 1 }, { "Bearer abcdefghijklmnop": 1 }]) {
      expect(scrub({ notes, amount: 5 })).toEqual({ notes: "[redacted]", amount: 5 });
      expect(scrubbedCanonicalJson({ notes, amount: 5 })).toEqual({ text: '{"amount":5,"notes":"[redacted]"}', redactions: 1 });
    }
  });

  it("finds a JWT exactly where /\\beyJ[A-Za-z0-9_-]{4,}\\.[A-Za-z0-9_-]{4,}\\./ does, in text made of its pieces", () => {
    const jwt_pattern = /\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\./;
    const piece = fc.constantFrom("eyJ", "eyj", "a", "Z9", "_", "-", ".", " ", "é", "abcd", "eyJabcd", "wxyz.");
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 24 }), (pieces) => {
        const text = pieces.join("");
        // No other pattern can match these pieces: the verdict is the JWT's alone.
        expect(isSecretValue(text), text).toBe(jwt_pattern.test(text));
      }),
      { numRuns: 3000 },
    );
  });

  it("scrubs 2 MiB of \"eyJ-eyJ-…\" in one pass (the JWT regex took minutes on it: it rescanned from every eyJ)", () => {
    const text = "eyJ-".repeat(524_288);
    expect(isSecretValue(text)).toBe(false);
    expect(isSecretValue(`${text}.abcd.`)).toBe(true);
    expect(scrubbedCanonicalJson({ args: { note: text } }).redactions).toBe(0);
  });

  it("redacts a card number followed or preceded by more digits: a CVV, an expiry, a reference", () => {
    // The whole run fails Luhn; the card number is a stretch of its groups.
    const values = [
      "4111 1111 1111 1111 123",
      "378282246310005 1234",
      "4111-1111-1111-1111-12-27",
      "card 5555 5555 5555 4444 0127 737 thanks",
      "ref 12 4111111111111111",
      "a1 4111 1111 1111 1111 123", // the group glued to a letter is left out, the rest is still a card
      "4111 1111 1111 1111 12x",
    ];
    for (const value of values) expect(scrub({ note: value }).note, value).toBe("[redacted]");
    expect(scrubbedCanonicalJson({ note: "4111 1111 1111 1111 123" })).toEqual({ text: '{"note":"[redacted]"}', redactions: 1 });
  });

  it("finds a Luhn-valid card number among the groups of any run of digits grouped by one or two separators", () => {
    const digit = fc.integer({ min: 0, max: 9 });
    /** A card number of 13 to 19 digits, first digit 1-9, made Luhn-valid by its check digit. */
    const card = fc.tuple(fc.integer({ min: 1, max: 9 }), fc.array(digit, { minLength: 11, maxLength: 17 })).map(([first, rest]) => {
      const body = `${first}${rest.join("")}`;
      const check = [...Array(10).keys()].find((candidate) => luhnValid(`${body}${candidate}`))!;
      return `${body}${check}`;
    });
    const digits = fc.array(digit, { maxLength: 8 }).map((list) => list.join(""));
    const grouped = (text: string, cuts: number[], separator: string) => {
      let out = "";
      for (let i = 0; i < text.length; i++) out += (i > 0 && cuts.includes(i) ? separator : "") + text[i];
      return out;
    };
    const cuts = fc.array(fc.integer({ min: 1, max: 18 }), { maxLength: 4 });
    fc.assert(
      fc.property(digits, card, digits, cuts, cuts, fc.constantFrom(" ", "-", ".", "/", "_", "\t", "  ", " - "), (before, number, after, in_before, in_number, separator) => {
        if (separator === " - ") return; // three characters end a run: the pieces are apart
        const text = [grouped(before, in_before, separator), grouped(number, in_number, separator), after].filter(Boolean).join(separator);
        expect(scrub({ note: `pay ${text}.` }).note, text).toBe("[redacted]");
      }),
      { numRuns: 2_000 },
    );
  });

  it("decides a card number in text exactly as checking every stretch of groups of every run by hand does", () => {
    /** The rule written plainly: runs of digits joined by single spaces or dashes, or by one of
     *  a dot, slash, underscore, tab or two spaces throughout; a group glued to a letter is left
     *  out; any consecutive groups holding 13 to 19 digits together, not starting with 0, that
     *  pass Luhn. */
    const runs = (text: string) => [...text.matchAll(/\d+(?:[ -]\d+)*/g), ...text.matchAll(/\d+([./_\t]| {2})\d+(?:\1\d+)*/g)];
    const byHand = (text: string) => {
      for (const match of runs(text)) {
        const groups = match[0].split(/[^0-9]+/);
        if (/[A-Za-z]/.test(text[match.index - 1] ?? "")) groups.shift();
        if (/[A-Za-z]/.test(text[match.index + match[0].length] ?? "")) groups.pop();
        for (let first = 0; first < groups.length; first++) {
          for (let last = first; last < groups.length; last++) {
            const window = groups.slice(first, last + 1).join("");
            if (window.length >= 13 && window.length <= 19 && window[0] !== "0" && luhnValid(window)) return true;
          }
        }
      }
      return false;
    };
    const piece = fc.oneof(
      { weight: 4, arbitrary: fc.stringMatching(/^[0-9]{1,8}$/) },
      fc.constantFrom(" ", "-", "  ", "a", "x", ".", "/", "_", "\t", ",", "4111111111111111", "378282246310005", "0000000000000"),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const text = pieces.join("");
        expect(isSecretValue(text), text).toBe(byHand(text));
      }),
      { numRuns: 5_000 },
    );
  });

  it("finds card numbers typed with dots, slashes, tabs, underscores or double spaces, and CVVs under their other names", () => {
    for (const typed of ["4111.1111.1111.1111", "4111/1111/1111/1111", "4111\t1111\t1111\t1111", "4111_1111_1111_1111", "4111  1111  1111  1111", "paid with 3782.822463.10005"]) {
      expect(scrub({ note: typed }).note, typed).toBe("[redacted]");
    }
    for (const name of ["security_code", "Security-Code", "csc", "CVN", "card_code", "cvv2", "cav2"]) {
      expect(scrub({ [name]: "123" })[name], name).toBe("[redacted]");
    }
    // Dotted and slashed numbers stay, and lists of them: addresses, dates and times, versions.
    const kept = {
      ip: "192.168.100.200",
      peers: "peers 197.14.228.36 141.68.81.148 215.156.184.219 10.0.0.1",
      date: "2026/12/02",
      when: "27.10.2026 22.10.13, 28.10.2026 07.45.59",
      version: "10.4.1",
      cid: "42",
      cscope: "x",
    };
    expect(scrub(kept)).toEqual(kept);
    // Random address lists were redacted most of the time when a space could join dotted runs.
    const octet = fc.integer({ min: 0, max: 255 });
    const address = fc.tuple(octet, octet, octet, octet).map((parts) => parts.join("."));
    fc.assert(
      fc.property(fc.array(address, { minLength: 2, maxLength: 6 }), fc.constantFrom(" ", ", ", "\n"), (list, separator) => {
        const text = list.join(separator);
        expect(scrub({ peers: text }).peers, text).toBe(text);
      }),
      { numRuns: 2_000 },
    );
  });

  it("keeps digit runs with no Luhn-valid stretch, runs of zeros, unbroken long runs, and digits glued to letters", () => {
    expect(scrub({ n: "invoice 1234567890123" }).n).toBe("invoice 1234567890123");
    expect(scrub({ n: "10000000000000000000" }).n).toBe("10000000000000000000");
    expect(scrub({ n: 10000000000000, big: 1e20 })).toEqual({ n: 10000000000000, big: 1e20 });
    expect(scrub({ n: "x4111111111111111 1234y" }).n).toBe("x4111111111111111 1234y");
    // An unbroken run (a snowflake id) is a card only as a whole, though a window of it passes Luhn.
    expect(luhnValid("4111111111111111")).toBe(true);
    expect(scrub({ id: "4111111111111111123" }).id).toBe("4111111111111111123");
  });

  it("keeps ordinary evidence: amounts, ids, currencies, idempotency keys, non-Luhn digit runs", () => {
    const body = {
      amount: 50_000,
      currency: "INR",
      order_id: "order_Abc123",
      idempotency_key: "k-1",
      receipt: "invoice 1234567890123",
      at_ms: 1767225600000,
      rule: "R5",
    };
    expect(luhnValid("1234567890123")).toBe(false);
    expect(scrub(body)).toEqual(body);
  });
});

describe("canary secrets never reach stored or exported bytes", () => {
  const dir = tempDir();
  afterAll(() => dir.remove());

  it("scrubs args, headers and provider keys, yet body_sha256 binds the unscrubbed body", async () => {
    const canary = "CanaryZq7Wx9Kp2Lm4";
    const path = join(dir.path, "canary.db");
    const t = await openTestLog({ path });
    const body = {
      tool: "create_order",
      args: { amount: 50_000, currency: "INR", api_key: canary, notes: { memo: `Bearer ${canary}` } },
      headers: { authorization: `Basic ${canary}`, "x-razorpay-signature": "deadbeef" },
      provider: { key: `rzp_test_${canary}`, key_secret: canary },
    };
    const result = await t.driver.transaction((tx) => t.log.append(tx, { kind: "gate.decision", source: "gate", body }));
    expect(result.entry.body_sha256).toBe(sha256Hex(canonicalJson(body)));
    expect(JSON.stringify(result.entry)).not.toContain(canary);

    const final = await t.log.checkpoint();
    const chunks: string[] = [];
    await exportLog(t.driver, { size: final.size, exported_at: "2026-01-01T00:00:00Z", write: async (text) => void chunks.push(text) });
    const exported = chunks.join("");
    expect(exported).toContain("[redacted]");
    expect(exported).not.toContain(canary);

    await t.driver.close();
    for (const file of [path, `${path}-wal`]) {
      if (existsSync(file)) expect(readFileSync(file).includes(Buffer.from(canary)), file).toBe(false);
    }
  });
});
