// Nothing secret in evidence: scrub() unit cases, and a canary secret that never reaches
// the database file or the export while body_sha256 still binds the unscrubbed body.

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { canonicalJson, canonicalSha256Hex, sha256Hex } from "../../src/evidence/canonical.js";
import { exportLog } from "../../src/evidence/export.js";
import { newToken } from "../../src/ids.js";
import { isSecretKeyName, isSecretValue, luhnValid, rememberedKeyNames, scrub, scrubbedCanonicalJson, scrubCounting } from "../../src/evidence/scrub.js";
import { decisionsSource, deliver, harness, ndjson, record } from "../ingest/support.js";
import { openTestLog, tempDir } from "./support.js";

const digit = fc.integer({ min: 0, max: 9 });
/** A card number of 13 to 19 digits, first digit 1-9, made Luhn-valid by its check digit. */
const card = fc.tuple(fc.integer({ min: 1, max: 9 }), fc.array(digit, { minLength: 11, maxLength: 17 })).map(([first, rest]) => {
  const body = `${first}${rest.join("")}`;
  const check = [...Array(10).keys()].find((candidate) => luhnValid(`${body}${candidate}`))!;
  return `${body}${check}`;
});
/** The digits with `separator` before each position in `cuts`. */
const grouped = (text: string, cuts: number[], separator: string) => {
  let out = "";
  for (let i = 0; i < text.length; i++) out += (i > 0 && cuts.includes(i) ? separator : "") + text[i];
  return out;
};
const cuts = fc.array(fc.integer({ min: 1, max: 18 }), { maxLength: 4 });
/** Every joint a card number's groups may be written with. */
const card_joints = [" ", "-", "\u00a0", "\u2009", "\u202f", ".", "/", "_", "\t", "  "] as const;

/** What the two paths give for one value: the text and count, or the error's class and message. */
function outcome(run: () => { text: string; redactions: number }): string {
  try {
    return JSON.stringify(run());
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
}

/** Both scrubbing paths store `input` as `stored`, with `redactions` values replaced. */
function expectScrubbed(input: unknown, stored: unknown, redactions: number, what?: string): void {
  expect(scrubCounting(input), what).toEqual({ value: stored, redactions });
  expect(scrubbedCanonicalJson(input), what).toEqual({ text: canonicalJson(stored), redactions });
}

/** `text` with each of `replaced` (what was sent, what is stored) replaced once. */
function storedAs(text: string, replaced: [string, string][]): string {
  return replaced.reduce((stored, [sent, kept]) => stored.replace(sent, kept), text);
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
    const key = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom("password", "Api_Key", "cvv", "token", "__proto__", "amount", "toJSON", "name", "Value", "text"));
    const secret = fc.constantFrom("Bearer abcdefgh12345678", "rzp_test_abc", "4111 1111 1111 1111", "eyJabcd.efgh1234.x", "-----BEGIN PRIVATE KEY-----", "sk-0123456789abcdefXY", "password: hunter2", 'X-Api-Key: k1\nnote: {"pin": 1234}', "DB_PASSWORD", "max_tokens", "- name: DB_PASSWORD\n  value: |\n    hunter2", '<input type="password" value="x">');
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
        // JSON text in a string, as a tool result carries its data.
        tie("node").map((inner) => JSON.stringify(inner) ?? "null"),
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

  it("redacts the value of a name/value pair held apart whose name is a secret's, and keeps the name", () => {
    const cases: [string, unknown, unknown][] = [
      ["a Kubernetes env list", { env: [{ name: "DB_PASSWORD", value: "hunter2" }, { name: "LOG_LEVEL", value: "debug" }] }, { env: [{ name: "DB_PASSWORD", value: "[redacted]" }, { name: "LOG_LEVEL", value: "debug" }] }],
      ["Vercel's env variable", { key: "API_TOKEN", value: "abc", type: "encrypted", target: ["production"] }, { key: "API_TOKEN", value: "[redacted]", type: "encrypted", target: ["production"] }],
      ["CloudFormation's parameter", { ParameterKey: "DbPassword", ParameterValue: "x1" }, { ParameterKey: "DbPassword", ParameterValue: "[redacted]" }],
      ["Elastic Beanstalk's option", { Namespace: "aws:elasticbeanstalk:application:environment", OptionName: "DB_PASS", Value: "x1" }, { Namespace: "aws:elasticbeanstalk:application:environment", OptionName: "DB_PASS", Value: "[redacted]" }],
      ["a HAR header", { name: "Cookie", value: "sid=abc" }, { name: "Cookie", value: "[redacted]" }],
      ["a form field", { name: "Password", type: "textbox", ref: "e12", value: "hunter2" }, { name: "Password", type: "textbox", ref: "e12", value: "[redacted]" }],
      ["a browser tool's typing", { element: "Password input", ref: "e5", text: "hunter2" }, { element: "Password input", ref: "e5", text: "[redacted]" }],
      ["an input's type", { type: "password", val: 1234 }, { type: "password", val: "[redacted]" }],
      ["a pair in JSON text", { content: '[{"name":"DB_PASSWORD","value":"hunter2"}]' }, { content: '[{"name":"DB_PASSWORD","value":"[redacted]"}]' }],
      ["CloudFormation's output", { OutputKey: "DBPassword", OutputValue: "x1" }, { OutputKey: "DBPassword", OutputValue: "[redacted]" }],
      ["AWS SSM's encrypted parameter", { Name: "/prod/app/db", Type: "SecureString", Value: "plain-pw" }, { Name: "/prod/app/db", Type: "SecureString", Value: "[redacted]" }],
      ["a fill tool's selector", { selector: "input[name=api_key]", value: "k1" }, { selector: "input[name=api_key]", value: "[redacted]" }],
      ["GitLab's masked variable", { key: "STRIPE", value: "plain", masked: true }, { key: "STRIPE", value: "[redacted]", masked: true }],
      ["a one-time code's field", { label: "One-time code", value: "482913" }, { label: "One-time code", value: "[redacted]" }],
      ["Django's CSRF field", { name: "csrfmiddlewaretoken", value: "q1w2" }, { name: "csrfmiddlewaretoken", value: "[redacted]" }],
      ["a PIN's name as its own word", { label: "UPI PIN", value: "1234" }, { label: "UPI PIN", value: "[redacted]" }],
      ["a count's name before a PIN's", { label: "max_tokens", name: "PIN", value: 1234 }, { label: "max_tokens", name: "PIN", value: "[redacted]" }],
      ["a count's name after a PIN's", { name: "PIN", label: "max_tokens", value: 1234 }, { name: "PIN", label: "max_tokens", value: "[redacted]" }],
    ];
    for (const [what, input, stored] of cases) expectScrubbed(input, stored, 1, what);
  });

  it("keeps a pair's value when its name is no secret's, it holds nothing or a count of tokens, or the object has no value member", () => {
    const kept: [string, unknown][] = [
      ["an ordinary setting", { name: "colour", value: "red" }],
      ["a count of a model's tokens", { name: "max_tokens", value: 4096 }],
      ["a null value", { name: "DB_PASSWORD", value: null }],
      ["an MCP text block", { type: "text", text: "hello" }],
      ["an MCP tools/call's params", { name: "rotate_secret", arguments: { id: "k1" } }],
      ["a name that is no member's name", { title: "password", value: "shown" }],
      ["a name that is not text", { name: ["password"], value: "shown" }],
      ["a flag that is not true", { key: "STRIPE", value: "plain", masked: false }],
      ["a grid's hidden column", { text: "Name", value: "name", hidden: true }],
      // A name held as data is a secret's only by its end: such names are often prose.
      ["a note's description", { type: "API token top-up", value: "500k tokens for the support bot" }],
      ["a product", { name: "Fortune cookies", value: "12 boxes, office party" }],
      ["a gift", { label: "Secret Santa", text: "gift for Priya" }],
      ["a consent", { key: "cookie_consent", value: "accepted" }],
      ["a role", { label: "Secretary", value: "Jane Doe" }],
      ["a setting about passwords", { name: "password_min_length", value: 12 }],
      ["a metric", { name: "gen_ai.client.token.usage", value: 1234 }],
      ["a search", { element: "Search for tokens", text: "how do I rotate my key" }],
      ["a file", { name: "tokenizer.py", text: "def tokenize(): ..." }],
      ["a word ending in pin", { label: "Spin", value: "fast" }],
    ];
    for (const [what, input] of kept) expectScrubbed(input, input, 0, what);
  });

  it("redacts the value of a YAML name/value pair whose name is a secret's, written as text", () => {
    const manifest = [
      "spec:",
      "  containers:",
      "  - name: api",
      "    env:",
      "    - name: LOG_LEVEL",
      "      value: debug",
      "    - name: DB_PASSWORD # from the vault",
      "      value: hunter2 # rotated monthly",
      "    - name: \"API_TOKEN\"",
      "      type: plain",
      "      value: 'tok en'",
      "    - name: DB_PASS",
      "      valueFrom:",
      "        configMapKeyRef: {name: db, key: user}",
      "    - name: TLS_PRIVATE_KEY",
      "      value: |",
      "        line one",
      "        line two",
      "    - name: SMTP_PASSWORD",
      "    - value: not the pair's",
      "  - ParameterKey: DbPassword\r\n    ParameterValue: s3cret\r\n",
    ].join("\n");
    const stored = storedAs(manifest, [
      ["value: hunter2 # rotated monthly", "value: [redacted] # rotated monthly"],
      ["value: 'tok en'", "value: '[redacted]'"],
      ["value: |\n        line one\n        line two", "value: |\n        [redacted]"],
      ["ParameterValue: s3cret", "ParameterValue: [redacted]"],
    ]);
    expectScrubbed({ manifest }, { manifest: stored }, 4);
  });

  it("replaces a YAML pair's whole value, however it is written, counting it once", () => {
    const pair = (value: string) => `- name: api_token\n  value: ${value}\nnext: kept`;
    const cases: [string, string, string, number][] = [
      ["a folded block with a comment", ">- # folded\n    s3cr3t\n    more", ">- # folded\n    [redacted]", 1],
      ["a block with an anchor", "&tok |\n    s3cr3t", "&tok |\n    [redacted]", 1],
      ["a block with a tag", "!!binary |\n    c2VjcmV0", "!!binary |\n    [redacted]", 1],
      ["a quoted value holding ' #'", '"hunter2 #tail" # rotated', '"[redacted]" # rotated', 1],
      ["a quoted value before a comment holding quotes", '"hunter2" # was "old"', '"[redacted]" # was "old"', 1],
      ["a single-quoted value holding a quote", "'pa''ss' # c", "'[redacted]' # c", 1],
      ["a plain value over two lines", "abc\n    def", "[redacted]", 1],
      ["a quoted value over two lines", '"abc\n    def"', '"[redacted]"', 1],
      ["a value that looks like a tag", "!hunter2", "[redacted]", 1],
      ["a URL with a password", "postgres://u:pw123456@h/db", "[redacted]", 1],
      ["a name and value in text", '"password: hunter2"', '"[redacted]"', 1],
      ["a block under a long comment", `|  # ${"rotated every 90 days by the platform team, ".repeat(3)}\n    c2VjcmV0`, `|  # ${"rotated every 90 days by the platform team, ".repeat(3)}\n    [redacted]`, 1],
      ["a block under a long comment alone", `# ${"c".repeat(130)}\n    c2VjcmV0`, `# ${"c".repeat(130)}\n    [redacted]`, 1],
      ["a quoted value left open", '"hunter2\n    more\nnext: "kept"', '"[redacted]\nnext: "kept"', 1],
      ["a list at the mapping's indentation", "\n  - hunter2\n  - second", "\n  - [redacted]", 1],
      ["an empty value", '""', '""', 0],
      ["an empty block", "|", "|", 0],
      ["a null", "~", "~", 0],
      ["nothing but a long comment", `# ${"c".repeat(130)}`, `# ${"c".repeat(130)}`, 0],
    ];
    for (const [what, value, stored, redactions] of cases) expectScrubbed({ note: pair(value) }, { note: pair(stored) }, redactions, what);
    expectScrubbed({ note: "key:pw\nval:1" }, { note: "key:pw\nval:[redacted]" }, 1, "the shortest pair");
    for (const kept of ["name: DB_PASSWORD\n---\nvalue: next document", "- type: password\n  label: Password\n  text: Enter your password here"]) {
      expectScrubbed({ note: kept }, { note: kept }, 0, kept);
    }
  });

  it("redacts the value an HTML tag holds beside a secret's name, and keeps the rest of the page", () => {
    const page = [
      '<form action="/session" method="post">',
      '<input type="hidden" name="authenticity_token" value="Zm9vYmFyYmF6cXV4" autocomplete="off">',
      '<input type="text" name="login" value="asha">',
      "<input type=password id=pw value=hunter2>",
      '<input aria-label="API key" value=\'k-123\'>',
      '<meta name="csrf-token" content="q1w2e3r4">',
      '<meta name="description" content="Set your password here">',
      "</form>",
    ].join("\n");
    const secrets = ["Zm9vYmFyYmF6cXV4", "hunter2", "k-123", "q1w2e3r4"];
    expectScrubbed({ page }, { page: storedAs(page, secrets.map((secret) => [secret, "[redacted]"])) }, 4);
    const size = 1 << 20;
    // Each text and the values it holds beside a secret's name.
    const adversarial: [string, number][] = [
      [`<input name=password value=${"x".repeat(size)}>`, 1],
      ...[
        "<a value=".repeat(size / 9),
        "<i value=1 ".repeat(size / 11),
        // A long word no "=" follows, inside a tag (it was read again from each of its characters).
        `value=\n<a ${"a".repeat(size)}>`,
        `<input name=csrf value=x><a href=/cb?state=${"0f".repeat(size / 2)}>`,
        // Quotes that never close, and "<" where a quoted value would be ("value=" lets the rule read them).
        `value=\n${"<a \"'".repeat(size / 4)}`,
        `value=\n${"<a x=\"'<b y='\"".repeat(size / 14)}`,
        `value=\n${"<a x=\"\n".repeat(size / 6)}`,
        `value=\n<a x="${"<".repeat(size)}`,
      ].map((text): [string, number] => [text, 0]),
    ];
    for (const [text, redactions] of adversarial) expect(scrubCounting({ text }).redactions, text.slice(0, 20)).toBe(redactions);
    expectScrubbed({ page: "<input name=password value= class=x>" }, { page: "<input name=password value= [redacted]>" }, 1);
    expectScrubbed({ page: "<input name=password value=hun\"ter'2>" }, { page: "<input name=password value=[redacted]>" }, 1);
    // Markup held in another attribute's value is read as tags of its own, as in a log line.
    const embedded = `<div data-html="<input name='password' value='hunter2xyz'>">`;
    expectScrubbed({ page: embedded }, { page: embedded.replace("hunter2xyz", "[redacted]") }, 1);
    expectScrubbed({ page: '<input type="password" value="https://u:pw123456@h/">' }, { page: '<input type="password" value="[redacted]">' }, 1);
    // JSX is not HTML: its braces are kept as they are, not cut through.
    expectScrubbed({ page: '<Input type="password" value={"x"} />' }, { page: '<Input type="password" value={"x"} />' }, 0);
    expectScrubbed({ page: '<input id="spin" type="range" value="0.5">' }, { page: '<input id="spin" type="range" value="0.5">' }, 0);
  });

  it("reads YAML pairs in linear time: names with no value below, and block values nested in block values", () => {
    const size = 1 << 20;
    const unanswered = "- name: password\n  # nothing\n".repeat(size / 30);
    expect(scrubCounting({ note: unanswered }).redactions).toBe(0);
    let nested = "";
    for (let depth = 0; nested.length < size; depth++) nested += `${"  ".repeat(depth)}name: password\n${"  ".repeat(depth)}value:\n`;
    expect(scrubCounting({ note: `${nested}${" ".repeat(nested.length)}x` }).redactions).toBe(1);
    // Plain values with a comment, or replaced already, nested 500 deep over a tail of blank lines:
    // each level's block below was found again by every level inside it.
    // Each level's "a" is replaced; the outermost "[redacted]", continued over the lines below, is replaced whole.
    for (const [value, redactions] of [["a #c", 500], ["[redacted]", 1]] as const) {
      let levels = "";
      for (let depth = 0; depth < 500; depth++) levels += `${" ".repeat(depth)}name: password\n${" ".repeat(depth)}value: ${value}\n`;
      expect(scrubCounting({ note: `${levels}${" ".repeat(500)}x\n${"\n".repeat(size - levels.length)}` }).redactions).toBe(redactions);
    }
  });

  it("does not remember the names pairs hold, only their keys", () => {
    scrub({ name: "the keys remembered first", value: "v" });
    const before = rememberedKeyNames();
    for (let i = 0; i < 100; i++) scrub({ name: `user ${process.hrtime.bigint()} ${i}`, value: "v" });
    expect(rememberedKeyNames()).toBe(before);
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
    const digits = fc.array(digit, { maxLength: 8 }).map((list) => list.join(""));
    fc.assert(
      fc.property(digits, card, digits, cuts, cuts, fc.constantFrom(" ", "-", "+", ".", "/", "_", "\t", "  ", " - ", "\u00a0", "\u2009", "\u202f"), (before, number, after, in_before, in_number, separator) => {
        if (separator === " - ") return; // three characters end a run: the pieces are apart
        const text = [grouped(before, in_before, separator), grouped(number, in_number, separator), after].filter(Boolean).join(separator);
        expect(scrub({ note: `pay ${text}.` }).note, text).toBe("[redacted]");
      }),
      { numRuns: 2_000 },
    );
  });

  it("decides a card number in text exactly as checking every stretch of groups of every run by hand does", () => {
    /** The rule written plainly: runs of digits joined by single spaces (any Unicode space, or
     *  "+", a form-encoded space) or dashes, or by one of a dot, slash, underscore, tab or two spaces throughout; a group glued
     *  to a letter is left out; any consecutive groups holding 13 to 19 digits together, not
     *  starting with 0, that pass Luhn. */
    // One search per kind of joint: runs joined differently may share a group ("0.8851651  001909").
    const joints = [/\d+(?:[\p{Zs}+-]\d+)*/gu, ...[".", "/", "_", "\t", "  "].map((joint) => new RegExp(`\\d+(?:${joint.replace(/[./]/g, "\\$&")}\\d+)+`, "g"))];
    const runs = (text: string) => joints.flatMap((joint) => [...text.matchAll(joint)]);
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
      fc.constantFrom(" ", "-", "+", "  ", "a", "x", ".", "/", "_", "\t", ",", "\u00a0", "\u2009", "\u202f", "4111111111111111", "378282246310005", "0000000000000"),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const text = pieces.join("");
        expect(isSecretValue(text), text).toBe(byHand(text));
      }),
      // Runs joined differently that share a group, either way round: the reference once read
      // past the first, the scrubber past the second (its table is the next test).
      { numRuns: 5_000, examples: [[["a", "0", ".", "8851651", "  ", "001909"]], [["0", "  ", "481", ".", "7462464911"]]] },
    );
  });

  it("finds a card number whose first group also ends a run joined another way", () => {
    // One regex per kind of joint consumed the shared group with the first run, and the search
    // for the next run started after it: all of these were missed.
    const shared = [
      "0  481.7462464911", // found by the property test: 4817462464911 after "0  481"
      "0.481  7462464911",
      "12/4111.1111.1111.1111",
      "paid 2026/12/4111.1111.1111.1111 ok",
      "7_4111\t1111\t1111\t1111",
      "1.2.4111  1111  1111  1111",
      "9/3782.822463.10005",
    ];
    for (const value of shared) {
      expect(isSecretValue(value), JSON.stringify(value)).toBe(true);
      expect(scrub({ note: value }).note, JSON.stringify(value)).toBe("[redacted]");
    }
    // Still kept: no Luhn-valid stretch, or a card number written with mixed joints, or one
    // whose last group is glued to a letter.
    for (const kept of ["0  481.7462464912", "12/4111.1111.1111.1112", "1.2.4111  1111  1111  1112", "4111.1111/1111.1111", "4111  1111.1111  1111", "4111.1111.1111.1111x"]) {
      expect(scrub({ note: kept }).note, JSON.stringify(kept)).toBe(kept);
    }
  });

  it("finds a card number among 100 kB of digit groups joined every way, and nothing in the groups alone", () => {
    // Groups of ones: no stretch of 13 to 19 ones passes Luhn, so the filler holds no card number.
    for (let length = 13; length <= 19; length++) expect(luhnValid("1".repeat(length))).toBe(false);
    const joint = fc.constantFrom(...card_joints);
    const filler_unit = fc.array(fc.tuple(fc.integer({ min: 1, max: 6 }), joint), { minLength: 1, maxLength: 40 });
    const filler_chars = 100_000;
    fc.assert(
      fc.property(filler_unit, card, cuts, joint, joint, (unit, number, in_number, card_joint, after_joint) => {
        const piece = unit.map(([ones, separator]) => "1".repeat(ones) + separator).join("");
        // Ends with a joint, so the card number's first group is shared with the filler's last run.
        const filler = piece.repeat(Math.ceil(filler_chars / piece.length));
        const text = `${filler}${grouped(number, in_number, card_joint)}${after_joint}${filler}`;
        expect(isSecretValue(filler)).toBe(false);
        expect(isSecretValue(text), number).toBe(true);
      }),
      { numRuns: 50 },
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

  it("finds card numbers grouped by Unicode spaces: no-break, thin and narrow no-break, as sent or percent-encoded", () => {
    for (const space of ["\u00a0", "\u2009", "\u202f", "\u2007", "\u3000"]) {
      const typed = ["4111", "1111", "1111", "1111"].join(space);
      expect(scrub({ note: typed }).note, JSON.stringify(typed)).toBe("[redacted]");
      expect(scrub({ note: `paid with ${typed} 123, thanks` }).note, JSON.stringify(typed)).toBe("[redacted]");
    }
    expect(scrub({ note: "3782\u00a0822463\u00a010005" }).note).toBe("[redacted]");
    // Percent-encoded as UTF-8 (a no-break space is %C2%A0), or byte by byte as Latin-1 (%A0).
    expect(scrub({ note: "card%3D4111%C2%A01111%C2%A01111%C2%A01111" }).note).toBe("[redacted]");
    expect(scrub({ note: "card=4111%A01111%A01111%A01111" }).note).toBe("[redacted]");
    // Not Luhn-valid, or 12 digits: kept.
    for (const kept of ["4111\u00a01111\u00a01111\u00a01112", "1234\u202f5678\u202f9012"]) expect(scrub({ note: kept }).note).toBe(kept);
  });

  it("finds card numbers grouped by Unicode dashes, a minus sign or invisible format characters, which would otherwise hide them", () => {
    // Hyphen, non-breaking hyphen, figure dash, en dash, em dash, minus sign; zero-width space, word joiner, soft hyphen, BOM.
    for (const joint of ["\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2212", "\u200b", "\u2060", "\u00ad", "\ufeff"]) {
      const typed = ["4111", "1111", "1111", "1111"].join(joint);
      expect(scrub({ note: typed }).note, JSON.stringify(typed)).toBe("[redacted]");
      expect(scrub({ note: `paid with ${typed} 123, thanks` }).note, JSON.stringify(typed)).toBe("[redacted]");
    }
    // A zero-width space inside a group, beside spaces between them: still one run.
    expect(scrub({ note: "41\u200b11 1111 1111 1111" }).note).toBe("[redacted]");
    // Format characters beside a space or dash, or one outside the BMP (a tag character), as the joint.
    for (const joint of ["\u200b ", " \u200b", "\u00ad-", "\u{E0001}", "\u200b\u2060"]) {
      const typed = ["4111", "1111", "1111", "1111"].join(joint);
      expect(scrub({ note: typed }).note, JSON.stringify(typed)).toBe("[redacted]");
    }
    // Two visible joints with a format character between them are no joint, as two dashes are not.
    expect(scrub({ note: ["4111", "1111", "1111", "1111"].join("-\u200b-") }).note).toBe(["4111", "1111", "1111", "1111"].join("-\u200b-"));
    // Not Luhn-valid, or 12 digits: kept.
    for (const kept of ["4111\u20131111\u20131111\u20131112", "1234\u200b5678\u200b9012"]) expect(scrub({ note: kept }).note).toBe(kept);
  });

  it("finds card numbers grouped by '+', a space in a form body or a query", () => {
    // Both were stored as sent (only cvc was redacted): '+' joined no groups.
    const form = "name=Asha+Rao&number=4111+1111+1111+1111&cvc=123&exp=12%2F27";
    const url = "https://shop.example/pay?card=4111+1111+1111+1111&exp=12%2F27";
    for (const value of [form, url, "4111+1111-1111+1111", "card=3782+822463+10005"]) {
      expect(scrub({ body: value }).body, value).toBe("[redacted]");
    }
    // Not Luhn-valid, or a sum of small numbers: kept.
    for (const kept of ["number=4111+1111+1111+1112", "1+2+3+4"]) expect(scrub({ body: kept }).body).toBe(kept);
  });

  it("replaces a URL's password in place, keeping its scheme, user, host and path", () => {
    const cases: Array<[string, string]> = [
      ["postgres://admin:hunter2@db/prod", "postgres://admin:[redacted]@db/prod"],
      ["connect with postgresql://app:s3cr%40t@db.internal:5432/orders?sslmode=require now", "connect with postgresql://app:[redacted]@db.internal:5432/orders?sslmode=require now"],
      ["redis://:hunter2@cache:6379/0", "redis://:[redacted]@cache:6379/0"],
      // As a URL parser splits it: the password runs to the authority's last "@".
      ["https://u:p@ss@example.com/x", "https://u:[redacted]@example.com/x"],
      ["a https://x:1@h b ftp://y:2@k", "a https://x:[redacted]@h b ftp://y:[redacted]@k"],
      // The authority's last ":" starts the next URL.
      ["see://postgres://u:p@h", "see://postgres://u:[redacted]@h"],
    ];
    for (const [sent, stored] of cases) {
      expect(scrub({ url: sent }).url, sent).toBe(stored);
      expect(isSecretValue(sent), sent).toBe(true);
    }
    expect(scrubbedCanonicalJson({ url: "a https://x:1@h b ftp://y:2@k" })).toEqual({ text: '{"url":"a https://x:[redacted]@h b ftp://y:[redacted]@k"}', redactions: 2 });
    // No password: a user alone, a port, an "@" in the path or the query, an e-mail address.
    for (const kept of ["ssh://git@github.com/acme/api", "https://host:443/@someone", "https://h/p?from=a@b.example", "mailto:dev@acme.com", "https://:@h/", "http://u:@h/"]) {
      expect(scrub({ url: kept }).url, kept).toBe(kept);
    }
    // Scrubbing what was stored changes nothing more.
    expect(scrubCounting({ url: "postgres://admin:[redacted]@db/prod" })).toEqual({ value: { url: "postgres://admin:[redacted]@db/prod" }, redactions: 0 });
  });

  it("replaces the values of query parameters named like secrets, by the key-name rule, and keeps the rest of the URL", () => {
    const cases: Array<[string, string]> = [
      ["https://api.example/cb?access_token=ya29.abc&state=xyz", "https://api.example/cb?access_token=[redacted]&state=xyz"],
      ["https://api.example/v1?api_key=k123&page=2", "https://api.example/v1?api_key=[redacted]&page=2"],
      ["https://x.example/?token=t1", "https://x.example/?token=[redacted]"],
      ["https://x.example/login?user=ann&password=hunter2", "https://x.example/login?user=ann&password=[redacted]"],
      ["https://x.example/hook?secret=s1#top", "https://x.example/hook?secret=[redacted]#top"],
      ["https://maps.example/js?key=k-98765&v=3", "https://maps.example/js?key=[redacted]&v=3"],
      ["https://x.example/?pass=p1&pw=p2&otp_code=123456&X-Api-Key=k", "https://x.example/?pass=[redacted]&pw=[redacted]&otp_code=[redacted]&X-Api-Key=[redacted]"],
      // An OAuth fragment, an HTML-escaped "&", a percent-encoded name, an unencoded URL in a value.
      ["https://app.example/cb#access_token=ya29.abc&expires_in=3600", "https://app.example/cb#access_token=[redacted]&expires_in=3600"],
      ['<a href="https://x.example/?a=1&amp;token=t2">x</a>', '<a href="https://x.example/?a=1&amp;token=[redacted]">x</a>'],
      ["https://x.example/?api%5Fkey=k1", "https://x.example/?api%5Fkey=[redacted]"],
      ["https://x.example/?next=/cb?token=t3&q=1", "https://x.example/?next=/cb?token=[redacted]&q=1"],
      // A query or form body on its own.
      ["client_id=app&client_secret=s2&grant_type=client_credentials", "client_id=app&client_secret=[redacted]&grant_type=client_credentials"],
      ["GET /v1/orders?token=t4 HTTP/1.1", "GET /v1/orders?token=[redacted] HTTP/1.1"],
      // An escape elsewhere in the URL costs it nothing.
      ["https://x.example/?q=a%20b&token=t5", "https://x.example/?q=a%20b&token=[redacted]"],
    ];
    for (const [sent, stored] of cases) {
      expect(scrub({ url: sent }).url, sent).toBe(stored);
      expect(canonicalJson(JSON.parse(scrubbedCanonicalJson({ url: sent }).text))).toBe(canonicalJson({ url: stored }));
    }
    // Names that are not secret keep their values, as object keys do; "key" is secret in a query only.
    for (const kept of ["https://x.example/?keyword=shoes&monkey=1&sort=asc", "https://x.example/?token=", "https://x.example/?pincode=560001&shipping=fast", "a=b&c=d"]) {
      expect(scrub({ url: kept }).url, kept).toBe(kept);
    }
    expect(isSecretKeyName("key")).toBe(false);
    // Percent-encoded inside another parameter, the secret cannot be replaced in place: the value is, whole.
    expect(scrub({ url: "https://x.example/?next=%2Fcb%3Faccess_token%3Dt6" }).url).toBe("[redacted]");
    expect(scrub({ url: "https://x.example/?r=postgres%3A%2F%2Fa%3Ahunter2%40db%2Fp" }).url).toBe("[redacted]");
    // A key holding one: the object is replaced whole, as for any secret in a key; the second
    // time from the remembered verdict on that key.
    for (let pass = 0; pass < 2; pass++) {
      expect(scrub({ links: { "https://x.example/?token=t7": 1 }, amount: 5 })).toEqual({ links: "[redacted]", amount: 5 });
      expect(scrubbedCanonicalJson({ links: { "postgres://a:b@h/d": 1 }, amount: 5 })).toEqual({ text: '{"amount":5,"links":"[redacted]"}', redactions: 1 });
    }
  });

  it("redacts Stripe secret and restricted keys and Google API keys, but not words that merely contain their prefixes", () => {
    const stripe_tail = "4eC39HqLyjWDarjtT1zdp7dc";
    const google = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY";
    expect(google).toHaveLength(39);
    for (const value of [`sk_live_${stripe_tail}`, `sk_test_${stripe_tail}`, `rk_live_${stripe_tail}`, `rk_test_${stripe_tail}`, `stripe key_sk_live_${stripe_tail}`, `(${google})`, `x${google}`, `https://maps.example/api/js?v=3&k=${google}`]) {
      expect(scrub({ note: value }).note, value).toBe("[redacted]");
    }
    for (const kept of ["task_test_environmentvariable1", "disk_live_migration_enabled_x", "sk_live_short", "AIzaTooShort", "ask_test_results"]) expect(scrub({ note: kept }).note, kept).toBe(kept);
  });

  it("takes pass, pw, otp, otp_code and passcode for secret key names, but not bypass, compass, passenger or top_w", () => {
    for (const name of ["pass", "PASS", "pw", "PW", "otp", "otp_code", "OTP-Code", "sms_otp_code", "passcode", "device_passcode"]) {
      expect(isSecretKeyName(name), name).toBe(true);
      expect(scrub({ [name]: "1234" })[name], name).toBe("[redacted]");
    }
    for (const name of ["bypass", "cache_bypass", "compass", "passenger", "passport_country", "top_w", "pwm", "pass_count", "otp_sent_at"]) expect(isSecretKeyName(name), name).toBe(false);
    // A password's name as the last part of a longer one, and the names of keys in headers and connection strings.
    for (const name of ["DB_PASS", "smtp-pass", "MYSQL_PWD", "ftp.pw", "X-Auth-Key", "AccountKey", "Ocp-Apim-Subscription-Key", "x-functions-key", "encryption_key", "X-Master-Key"]) {
      expect(isSecretKeyName(name), name).toBe(true);
    }
    // A ticket or a step is no password; an id or fingerprint is no key.
    for (const name of ["boarding_pass", "season_pass", "first_pass", "signing_key_id", "master_key_id", "encryption_key_fingerprint"]) expect(isSecretKeyName(name), name).toBe(false);
  });

  it("scrubs 1 MiB adversarial strings for each new rule correctly (each scanned once, no backtracking blow-up)", () => {
    const size = 1 << 20;
    const fill = (unit: string) => unit.repeat(Math.floor(size / unit.length));
    // Text that starts each rule many times over and never completes it: nothing to redact ...
    const near_misses = [
      fill("://"),
      fill("x://a:"),
      `x://a:${"b".repeat(size)}`,
      fill("?a"),
      fill("?="),
      fill("&token"),
      `?${"a".repeat(size)}=1`,
      fill("%C2"),
      fill("1\u00a0"),
      fill("4111\u202f1111\u202f1111x"),
      fill("sk_live_"),
      fill("xrk_test_"),
      fill(`AIza${"a".repeat(30)} `),
      `token:${" ".repeat(size)}x`,
      fill("Basic subscription "),
      `[${"[".repeat(size)}`,
    ];
    // Balanced, and nested half a million deep: replaced whole, without parsing it.
    expect(scrubbedCanonicalJson({ note: `${"[".repeat(size / 2)}${"]".repeat(size / 2)}` }).redactions).toBe(1);
    for (const text of near_misses) {
      expect(scrubbedCanonicalJson({ note: text }).redactions, text.slice(0, 20)).toBe(0);
    }
    // ... and the secret after them is still found, in place or whole.
    expect(scrub({ note: `${fill("?a")}&token=t` }).note).toBe(`${fill("?a")}&token=[redacted]`);
    expect(scrub({ note: `${fill("://")}postgres://u:p@h` }).note).toBe(`${fill("://")}postgres://u:[redacted]@h`);
    expect(scrub({ note: `${fill("1\u00a0")}4111\u00a01111\u00a01111\u00a01111` }).note).toBe("[redacted]");
    expect(scrub({ note: `${fill("sk_live_")} sk_live_${"a".repeat(24)}` }).note).toBe("[redacted]");
    expect(scrub({ note: `${fill("Basic subscription ")}Bearer ya29.a0AfH6` }).note).toBe("[redacted]");
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

  it("scrubs JSON carried in a string as the data it holds, and leaves such a string with no secret as sent", () => {
    const result = { content: [{ type: "text", text: '{"access_token": "ya29.a0AfH6", "refresh_token": "1//0g", "user": "asha"}' }] };
    expect(scrub(result)).toEqual({ content: [{ type: "text", text: '{"access_token":"[redacted]","refresh_token":"[redacted]","user":"asha"}' }] });
    const memo = JSON.stringify({ password: "hunter2", note: JSON.stringify({ client_secret: "cs_9f8e", link: "https://u:pw@h.example/a" }) });
    expect(JSON.parse((scrub({ memo }) as { memo: string }).memo)).toEqual({
      password: "[redacted]",
      note: JSON.stringify({ client_secret: "[redacted]", link: "https://u:[redacted]@h.example/a" }),
    });
    for (const plain of ['{ "sku": "A-1", "qty": 2 }', " [1, 2] ", "[not json", '{"a": "left open}', "{}", '"{\"sku\":1}"']) expect(scrub({ plain })).toEqual({ plain });
    // A member written twice parses to the last one only: what the first held was never looked at.
    const repeated = '{"creds": {"password": "hunter2", "access_token": "ya29.AbC"}, "creds": "ok", "n": 1}';
    for (const scrubbed of [scrub({ repeated }).repeated, JSON.parse(scrubbedCanonicalJson({ repeated }).text).repeated]) expect(scrubbed).toBe('{"creds":"ok","n":1}');
    // Nested deeper than values are scrubbed: replaced whole, never parsed.
    const deep = `${"[".repeat(65)}"x"${"]".repeat(65)}`;
    expect(scrub({ deep })).toEqual({ deep: "[redacted]" });
    const shallow = `${"[".repeat(60)}"x"${"]".repeat(60)}`;
    expect(scrub({ shallow })).toEqual({ shallow });
  });

  it("takes PIN and OTP numbers and values, verification codes, CVN2 and CVD for secret names, and whsec_ secrets for secrets anywhere", () => {
    const secrets = { pin_number: "1234", otpValue: "987654", email_verification_code: "55", cvn2: "123", CVD: "321", note: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" };
    expect(scrub(secrets)).toEqual(Object.fromEntries(Object.keys(secrets).map((key) => [key, "[redacted]"])));
    const kept = { pincode: "560001", shipping: "express", verification_status: "done" };
    expect(scrub(kept)).toEqual(kept);
  });

  it("keeps product names and prose that start with an Authorization scheme's word, and token counts", () => {
    const kept = { plan: "Basic subscription plan, monthly", title: "Basic Subscription Plan", sale: "Token reservation for Diwali sale", prose: "bearer instruments accepted", input_tokens: 1200, max_tokens: 4096 };
    expect(scrub(kept)).toEqual(kept);
    const credentials = ["Bearer ya29.a0AfH6SMBx", "Basic dXNlcjpwYXNz", "token: 3f9a0c1d2e4b5a6f", "Token abcdEfghijkl", "Bearer: abc-def-ghi", "Bearer abcdefghijklmnop", "Bearer ABCDEFGHIJKLMNOPQRSTUVWXYZ"];
    for (const value of credentials) expect(scrub({ value }), value).toEqual({ value: "[redacted]" });
    expect(scrub({ access_tokens: ["t1"], tokens: "abc", token_count: "12" })).toEqual({ access_tokens: "[redacted]", tokens: "[redacted]", token_count: "[redacted]" });
  });

  it("replaces a secret written after its name in text in place: headers, YAML, environment lines, JSON and dicts in prose", () => {
    const cases: Array<[string, string, number]> = [
      ["password: hunter2", "password: [redacted]", 1],
      ["login as ann, password: letmein\nthen pay", "login as ann, password: [redacted]\nthen pay", 1],
      ["X-Api-Key: 3f9a8b7c6d5e\r\nAccept: */*", "X-Api-Key: [redacted]\r\nAccept: */*", 1],
      ["Cookie: sid=abc123; theme=dark", "Cookie: [redacted]", 1],
      ["db:\n  host: db.internal\n  password: hunter2  \n  port: 5432", "db:\n  host: db.internal\n  password: [redacted]  \n  port: 5432", 1],
      ["DB_PASSWORD=hunter2 PORT=5432", "DB_PASSWORD=[redacted] PORT=5432", 1],
      ['export AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG" # prod', 'export AWS_SECRET_ACCESS_KEY="[redacted]" # prod', 1],
      ['config {"api_key": "k-123", "region": "in"} end', 'config {"api_key": "[redacted]", "region": "in"} end', 1],
      ["{'client_secret': 'cs_9f8e', 'user': 'asha'}", "{'client_secret': '[redacted]', 'user': 'asha'}", 1],
      ['note: {\\"pin\\": 1234, \\"qty\\": 1}', 'note: {\\"pin\\": [redacted], \\"qty\\": 1}', 1],
      ['note: {\\"password\\": \\"hun\\\\\\"ter\\"}', 'note: {\\"password\\": \\"[redacted]\\"}', 1],
      // JSON in a JSON string's text, not parsed as an object: read as text, as any other.
      ['"{\"password\":1}"', '"{\"password\":[redacted]}"', 1],
      // Two words read as one name, as key names are ("API key" is apikey).
      ["API key: AbC123xyz", "API key: [redacted]", 1],
      ["Secret key: plain words too", "Secret key: [redacted]", 1],
      ["Session ID: 9f8e7d", "Session ID: [redacted]", 1],
      ["Enter UPI PIN: 1234 to pay", "Enter UPI PIN: [redacted]", 1],
      ["OTP: 482913", "OTP: [redacted]", 1],
      ["passphrase: correct horse battery staple", "passphrase: [redacted]", 1],
      ["password: a\nX-Api-Key: b", "password: [redacted]\nX-Api-Key: [redacted]", 2],
      // A URL's password is replaced first; its name is not taken for a label again.
      ["https://token:abc@h.example/x", "https://token:[redacted]@h.example/x", 1],
      // Code: "=>", "==", "===", subscripts; markup, a parenthesis or "is" between the name and its ":".
      ["'password' => 'hunter2'", "'password' => '[redacted]'", 1],
      [':password => "hunter2"', ':password => "[redacted]"', 1],
      ['if password == "hunter2":', 'if password == "[redacted]":', 1],
      ["password === 'hunter2'", "password === '[redacted]'", 1],
      ["config['password'] = 'hunter2'", "config['password'] = '[redacted]'", 1],
      ['os.environ["API_KEY"] = "abc123"', 'os.environ["API_KEY"] = "[redacted]"', 1],
      ["**Password**: hunter2", "**Password**: [redacted]", 1],
      ["**Password:** hunter2", "**Password:** [redacted]", 1],
      ["- **API Key**: abc123", "- **API Key**: [redacted]", 1],
      ["`password`: hunter2", "`password`: [redacted]", 1],
      ["Password (case sensitive): hunter2", "Password (case sensitive): [redacted]", 1],
      ["Your password is: hunter2", "Your password is: [redacted]", 1],
      // Aligned columns, a no-break space before the colon, a full-width colon.
      ["username       = admin\npassword       = hunter2", "username       = admin\npassword       = [redacted]", 1],
      ["Secret   Key: abc", "Secret   Key: [redacted]", 1],
      ["password\u00a0: hunter2", "password\u00a0: [redacted]", 1],
      ["password\uff1ahunter2", "password\uff1a[redacted]", 1],
      // Any Authorization header, whatever its scheme; a quoted name of two words.
      ["Authorization: OAuth ya29.a0AfH6SMBxyz", "Authorization: [redacted]", 1],
      ["Authorization: Apikey abc123def456", "Authorization: [redacted]", 1],
      ['Config: {"API Key": "abc123"}', 'Config: {"API Key": "[redacted]"}', 1],
      ["{'Client Secret': 'abc123'} ok", "{'Client Secret': '[redacted]'} ok", 1],
      // Names of passwords and keys in .env files and headers.
      ["DB_PASS=hunter2\nSMTP_PASS: hunter2\nDB_PWD: hunter2", "DB_PASS=[redacted]\nSMTP_PASS: [redacted]\nDB_PWD: [redacted]", 3],
      ["Server=x;AccountKey=abc123==;EndpointSuffix=core", "Server=x;AccountKey=[redacted];EndpointSuffix=core", 1],
      ["Ocp-Apim-Subscription-Key: 0123abcd\nX-Auth-Key: k\nX-Master-Key: m", "Ocp-Apim-Subscription-Key: [redacted]\nX-Auth-Key: [redacted]\nX-Master-Key: [redacted]", 3],
      // YAML: the value on the indented lines below, plain or a block scalar.
      ["password:\n  hunter2\nnext: 1", "password:\n  [redacted]\nnext: 1", 1],
      ["db:\n  password:\n    hunter2\n\n    more\n  host: x", "db:\n  password:\n    [redacted]\n  host: x", 1],
      ["api_key: >-\n  abc123secret\n  more\nother: x", "api_key: >-\n  [redacted]\nother: x", 1],
      // A list, and quotes that are part of the value, taken whole.
      ['{"api_keys": ["k1secret", "k2secret"]}  noted', '{"api_keys": [redacted]}  noted', 1],
      ["password: 'don't-tell-anyone'", "password: '[redacted]", 1],
      ['password: "k9#Lm"2pQ', 'password: "[redacted]', 1],
      // An ordinary word names a credential after a qualifier, or when the value looks like one.
      ["Client secret: hunter2\nAccess token: abcdefgh\nAuth token: letmein", "Client secret: [redacted]\nAccess token: [redacted]\nAuth token: [redacted]", 3],
      ["secret: hunter2", "secret: [redacted]", 1],
      ["PIN: 1234\nCVV: 123", "PIN: [redacted]\nCVV: [redacted]", 2],
      ["Key Secret: abcdefgh\nSession cookie: abc", "Key Secret: [redacted]\nSession cookie: [redacted]", 2],
      // A quoted value after "=" at the start of the text, and a pair ending at ",".
      ["PASSWORD='correct horse battery staple'", "PASSWORD='[redacted]'", 1],
      ["password=hunter2,user=bob", "password=[redacted],user=bob", 1],
      // YAML: blank lines, a comment or a tag before the value below; a list at the name's indentation.
      ["password:\n\n  hunter2", "password:\n\n  [redacted]", 1],
      ["password: # rotated monthly\n  hunter2\nx: 1", "password: # rotated monthly\n  [redacted]\nx: 1", 1],
      ["password: !!str |\n  hunter2", "password: !!str |\n  [redacted]", 1],
      ["passwords:\n- hunter2\n- swordfish\nother: 1", "passwords:\n- [redacted]\nother: 1", 1],
      // A Markdown table's row; a long parenthesis; a parenthesis then "is".
      ["| Name | Value |\n|---|---|\n| password | hunter2 |\n| user | bob |", "| Name | Value |\n|---|---|\n| password | [redacted] |\n| user | bob |", 1],
      ["API key (found in the Razorpay Dashboard, Settings, API Keys): abc123def", "API key (found in the Razorpay Dashboard, Settings, API Keys): [redacted]", 1],
      ["Password (temp) is: hunter2", "Password (temp) is: [redacted]", 1],
      ["| Admin Password (temp) | hunter2 |\n| `pin` | 1234 |", "| Admin Password (temp) | [redacted] |\n| `pin` | [redacted] |", 2],
      // A quoted value in a query; a value that only starts with the replacement's text.
      ["url?x=1&PASSWORD='correct horse'", "url?x=1&PASSWORD='[redacted]'", 1],
      ["?password=hunter2[redacted]&x=1", "?password=[redacted]&x=1", 1],
      ['password: "[redacted]hunter2"', 'password: "[redacted]"', 1],
      ["password: [redacted] correct horse", "password: [redacted]", 1],
      ["| password | [redacted] hunter2 |", "| password | [redacted] |", 1],
      // A password that starts with a bracket, or with what reads as a placeholder.
      ["password: [2024]Summer!", "password: [redacted]", 1],
      ["PASSWORD=[2024]Summer! x", "PASSWORD=[redacted] x", 1],
      ["password: [none] hunter2", "password: [redacted]", 1],
      ["password: |\n  ***\n  hunter2", "password: |\n  [redacted]", 1],
      // A list's items keep the first "- ", so that scrubbing again changes nothing.
      ["password: # note\n- hunter2\n- swordfish", "password: # note\n- [redacted]", 1],
      // YAML: an anchor, a comment line before the value below.
      ["password: &creds\n  hunter2", "password: &creds\n  [redacted]", 1],
      ["password:\n# rotated monthly\n  hunter2", "password:\n# rotated monthly\n  [redacted]", 1],
      ["ANSIBLE_BECOME_PASS=hunter2\nvault_pass: x", "ANSIBLE_BECOME_PASS=[redacted]\nvault_pass: [redacted]", 2],
      ['{"secret": "abc"} in text', '{"secret": "[redacted]"} in text', 1],
    ];
    for (const [sent, stored, redactions] of cases) {
      expect(scrubCounting({ note: sent }), sent).toEqual({ value: { note: stored }, redactions });
      expect(scrubbedCanonicalJson({ note: sent }), sent).toEqual({ text: canonicalJson({ note: stored }), redactions });
      // Scrubbing what was stored changes nothing more.
      expect(scrubCounting({ note: stored }).redactions, stored).toBe(0);
    }
    // A name that is an ordinary word too, alone, takes only a value that looks like a credential;
    // a name that only starts with a secret's word is not one; token counts and other names keep theirs.
    const kept = [
      "Token: reservation for Diwali sale",
      "Cookie: oatmeal raisin",
      "Cookie: 2 dozen chocolate chip",
      "Fortune cookie: 3 pieces",
      "Auth: pending",
      "Season pass: $99 until March",
      "Day pass: 2 adults, 1 child",
      "Spin: 1400 rpm, Capacity: 8kg",
      "Chopin: Nocturnes Op. 9 (vinyl)",
      "Rolling pin: 45cm beech",
      "Bobby pin: 12 pack",
      "Victoria's Secret: Bombshell 50ml",
      "Secret: Clinical Strength deodorant",
      "Here's the secret: nobody reads the docs.",
      "Otp: 1 unit",
      "CVV: M",
      "cvc_check: pass",
      "password_reset: sent",
      "tokens: ~4k",
      "max_tokens: 4096.",
      "max_tokens=4096",
      "https://x.example/v1?max_tokens=4096",
      "Authorization: approved",
      "Card authorization: declined (insufficient funds)",
      "Password: not required",
      "password: null",
      "API Key: <your key>",
      "boarding_pass: 12A",
      "cat token | grep x",
      "| Field | Type | Required |\n| password | string | yes |\n| api_key | string | no |",
      "| token | The session-token returned by /login |",
      "Cookie: oatmeal-raisin",
      "Secret Santa: gift wrap included",
      "Password manager: 1 year licence",
      "PIN code: 560001",
      "Pincode: 560001",
      "Shipping: 2 days",
      "max_tokens: 4096, temperature: 0.2",
      "input tokens: 1,200",
      "Order id: order_Abc123",
      "Idempotency-Key: k-1",
      "https://shop.example:8443/p?sku=A-1",
      "time: 10:30",
      "password:",
      "password: \n",
    ];
    for (const note of kept) expect(scrubCounting({ note }), note).toEqual({ value: { note }, redactions: 0 });
    // A name and value percent-encoded together are not read (a URL's path or query holds
    // "secret%3A+santa" and "cookies%3A-12-pack" as words).
    for (const note of ["q=password%3A%20hunter2", "https://shop.example/search?q=secret%3A+santa+gifts see results", "https://shop.example/p/cookies%3A-12-pack"]) {
      expect(scrub({ note }).note, note).toBe(note);
    }
    // A key holding one: its object is replaced whole, as for any secret in a key. A key that
    // merely reads "name: value" keeps its object (its value goes by the key-name rule, as before).
    expect(scrub({ links: { "password: hunter2": 1 }, amount: 5 })).toEqual({ links: "[redacted]", amount: 5 });
    const counts = { cache: { "password_reset:user:42": 1, "orders:user:42": 7 }, items: { "Cookie: 2 dozen": 499, "pin: 2": 3 } };
    expect(scrub(counts)).toEqual({ cache: { "password_reset:user:42": "[redacted]", "orders:user:42": 7 }, items: { "Cookie: 2 dozen": "[redacted]", "pin: 2": 3 } });
  });

  it("scrubs 1 MiB lines full of names, kept values and unclosed quotes in one pass", () => {
    const mib = 1 << 20;
    const fill = (unit: string) => unit.repeat(Math.ceil(mib / unit.length));
    // Each kept whole (compared by a flag: a failing diff of 1 MiB is unreadable).
    for (const kept of [fill("Token: word "), `${fill("PIN: ab ")}${" ".repeat(mib)}`, fill("max_tokens: 1 "), fill("pin: 'ab ")]) {
      expect(scrub({ kept }).kept === kept, kept.slice(0, 12)).toBe(true);
    }
    expect(scrubCounting({ open: `password: "${"x".repeat(mib)}` })).toEqual({ value: { open: 'password: "[redacted]' }, redactions: 1 });
    expect(scrubCounting({ glued: fill("key:key=") }).redactions).toBe(0);
    // Lists left open, quotes of every kind left open, parentheses never opened, blank lines,
    // table cells, names on lines indented ever deeper.
    const kept_shapes = [fill("token: [a "), fill("token: 'a token: \"a token: `a "), fill("Cookie: {x "), fill("password ):"), fill("password ) :\n")];
    // Values kept after reading far: a replacement's text, counts.
    kept_shapes.push(fill("#password:\n"), fill("  # api_key:\r\n"), fill(`#${"#otp:".repeat(22)}${" ".repeat(2000)}\n  hello\n`), fill(`max_tokens=${"1".repeat(34)}`), fill(`"max_tokens":${"1".repeat(34)}`), fill("max_tokens=1_000_000_000_000_000_000_000_000_0"));
    for (const kept of [...kept_shapes, `token:${"\n".repeat(mib)}x`, fill("token:\n\n\n\n"), fill("| token | a "), fill("token: # c\n")]) {
      expect(scrub({ kept }).kept === kept, kept.slice(0, 12)).toBe(true);
    }
    const deeper = Array.from({ length: 2000 }, (_, depth) => `${" ".repeat(depth)}token:`).join("\n");
    expect(scrub({ deeper }).deeper === deeper).toBe(true);
    expect(scrubCounting({ nested: fill("api_key: [[{ ") }).redactions).toBe(1);
    expect(scrubCounting({ glued: fill("password=`[redacted]`") }).redactions).toBe(1);
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

  it("scrubs args, headers and provider keys, and body_sha256 binds the body as stored, not the secrets", async () => {
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
    expect(result.entry.body_sha256).toBe(sha256Hex(canonicalJson(result.entry.body)));
    // Whoever holds the original proves it by scrubbing it the same way.
    expect(result.entry.body_sha256).toBe(sha256Hex(canonicalJson(scrub(body))));
    expect(result.entry.body_sha256).not.toBe(sha256Hex(canonicalJson(body)));
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

describe("an ingested record's URL passwords, query secrets, API keys and Unicode-spaced card numbers", () => {
  it("are scrubbed from the stored record, while args_hash and body_sha256 still bind the record as sent", async () => {
    const h = await harness();
    try {
      const source = await decisionsSource(h);
      const args = {
        db: "postgres://admin:Hunter2Canary@db/prod",
        callback: "https://shop.example/cb?access_token=TokCanary42&state=s1",
        stripe: "sk_live_StripeCanary0123456789ab",
        google: "AIzaSyGoogleCanary0123456789abcdefghijk",
        card: "4111\u00a01111\u00a01111\u00a01111",
        pass: "PassCanary",
        otp_code: "917364",
        memo: "ok",
      };
      const line = JSON.stringify(record("evt_new_secret_kinds", { args }));
      const answer = await deliver(h, source, `${line}\n`);
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      const [stored] = (await h.entries("ingest.decision")).map(({ entry }) => entry);
      expect((stored!.body.record as { args: unknown }).args).toEqual({
        db: "postgres://admin:[redacted]@db/prod",
        callback: "https://shop.example/cb?access_token=[redacted]&state=s1",
        stripe: "[redacted]",
        google: "[redacted]",
        card: "[redacted]",
        pass: "[redacted]",
        otp_code: "[redacted]",
        memo: "ok",
      });
      expect(stored!.body.args_hash).toBe(canonicalSha256Hex(args));
      expect(stored!.body_sha256).toBe(sha256Hex(line));
      const raw = JSON.stringify(await h.entries());
      for (const secret of ["Hunter2Canary", "TokCanary42", "StripeCanary", "GoogleCanary", "4111\u00a01111", "PassCanary", "917364"]) expect(raw).not.toContain(secret);
    } finally {
      await h.close();
    }
  });
});
