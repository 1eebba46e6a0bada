// Signed notes and checkpoints against the golang.org/x/mod/sumdb/note test vectors.

import { readFileSync } from "node:fs";
import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createLogSigner } from "../../src/evidence/keys.js";
import {
  type CheckpointError,
  formatCheckpoint,
  keyId,
  keyIdHex,
  openCheckpoint,
  openNote,
  parseCheckpoint,
  parseSignerKey,
  parseVerifierKey,
  isValidKeyName,
  signNote,
} from "../../src/evidence/note.js";

interface NoteVectors {
  peter: { name: string; key_id: string; verifier_key: string; signer_key: string; signature_line: string; signature_base64: string };
  enoch: { name: string; key_id: string; verifier_key: string; signature_line: string; signature_base64: string };
  text: string;
  signed_note: string;
  bad_verifier_keys: string[];
  errors: Record<string, string>;
}

const v = JSON.parse(readFileSync(new URL("./fixtures/note-vectors.json", import.meta.url), "utf8")) as NoteVectors;
const peter = parseVerifierKey(v.peter.verifier_key);
const enoch = parseVerifierKey(v.enoch.verifier_key);

describe("verifier keys (Go note vectors)", () => {
  it("parses the published keys with their key ids", () => {
    expect(peter.name).toBe("PeterNeumann");
    expect(keyIdHex(peter.keyId)).toBe(v.peter.key_id);
    expect(keyIdHex(enoch.keyId)).toBe(v.enoch.key_id);
  });

  it("refuses every substring and every single-byte increment of a key", () => {
    const key = v.peter.verifier_key;
    const bad: string[] = [...v.bad_verifier_keys];
    for (let i = 0; i <= key.length; i++) {
      for (let j = i + 1; j <= key.length; j++) if (i !== 0 || j !== key.length) bad.push(key.slice(i, j));
    }
    for (let i = 0; i < key.length; i++) bad.push(key.slice(0, i) + String.fromCharCode(key.charCodeAt(i) + 1) + key.slice(i + 1));
    for (const candidate of bad) expect(() => parseVerifierKey(candidate), candidate).toThrow();
  });

  it("parses the Go signer key and derives the same key id", () => {
    const signer = parseSignerKey(v.peter.signer_key);
    expect(signer.name).toBe(v.peter.name);
    expect(keyIdHex(signer.keyId)).toBe(v.peter.key_id);
    const skey = v.peter.signer_key;
    for (let i = 0; i < skey.length; i++) {
      const mangled = skey.slice(0, i) + String.fromCharCode(skey.charCodeAt(i) + 1) + skey.slice(i + 1);
      expect(() => parseSignerKey(mangled), mangled).toThrow();
    }
  });
});

describe("signing and opening notes (Go note vectors)", () => {
  const signer = parseSignerKey(v.peter.signer_key);

  it("signs the published text to the published bytes (Ed25519 is deterministic)", () => {
    expect(signNote(v.text, signer)).toBe(v.signed_note);
    expect(() => signNote("abc", signer)).toThrow(v.errors.malformed);
  });

  it("opens with one key verified and the other left unverified", () => {
    const message = `${v.text}\n${v.peter.signature_line}${v.enoch.signature_line}`;
    const one = openNote(message, [peter]);
    expect(one.text).toBe(v.text);
    expect(one.verified.map((s) => s.base64)).toEqual([v.peter.signature_base64]);
    expect(one.unverified.map((s) => s.base64)).toEqual([v.enoch.signature_base64]);
    const both = openNote(message, [peter, enoch]);
    expect(both.verified.map((s) => s.name)).toEqual(["PeterNeumann", "EnochRoot"]);
    expect(() => openNote(message, [])).toThrow(v.errors.unverified);
  });

  it("refuses an ambiguous verifier list only when the ambiguous key is used", () => {
    const other = parseVerifierKey(formatVerifierKeyWithName(v.enoch.name));
    const ambiguous = { ...other, keyId: enoch.keyId };
    expect(() => openNote(`${v.text}\n${v.enoch.signature_line}`, [enoch, peter, ambiguous])).toThrow(v.errors.ambiguous_enoch);
    expect(openNote(`${v.text}\n${v.peter.signature_line}`, [enoch, peter, ambiguous]).verified).toHaveLength(1);
  });

  it("refuses too many signatures, corrupted signatures and malformed messages", () => {
    expect(() => openNote(`${v.text}\n${v.peter.signature_line.repeat(101)}`, [peter])).toThrow(v.errors.malformed);
    const sig = v.peter.signature_line;
    expect(() => openNote(`${v.text}\n${sig.slice(0, 60)}ABCD${sig.slice(60)}`, [peter])).toThrow(v.errors.invalid_signature_peter);
    const bad: (string | Buffer)[] = [
      v.text,
      `${v.text}\n`,
      `${v.text}\n${sig.slice(0, -1)}`,
      `\u0001${v.text}\n${sig}`,
      Buffer.concat([Buffer.from([0xff]), Buffer.from(`${v.text}\n${sig}`)]),
      `${v.text}\n\u2014 Bad Name ${v.peter.signature_base64}`,
      `${v.text}\n${sig}Unexpected line.\n`,
    ];
    for (const message of bad) expect(() => openNote(message, [peter]), String(message)).toThrow(v.errors.malformed);
  });

  it("deduplicates repeated signatures and keeps a corrupted unknown one unverified", () => {
    const esig = v.enoch.signature_line;
    const corrupted = `${esig.slice(0, 60)}ABCD${esig.slice(60)}`;
    const opened = openNote(`${v.text}\n${v.peter.signature_line}${v.peter.signature_line}${esig}${esig}${corrupted}`, [peter]);
    expect(opened.verified).toHaveLength(1);
    expect(opened.unverified).toHaveLength(2);
  });
});

function formatVerifierKeyWithName(name: string): string {
  const signer = createLogSigner(generateKeyPairSync("ed25519").privateKey, name);
  return signer.verifierKey;
}

describe("checkpoints", () => {
  const signer = createLogSigner(generateKeyPairSync("ed25519").privateKey, "example.com/log");
  const verifier = parseVerifierKey(signer.verifierKey);

  it("derives the key id from name || 0x0A || 0x01 || public key", () => {
    expect(signer.keyId).toBe(keyId("example.com/log", signer.publicKeyRaw));
    expect(signer.verifierKey.split("+")[1]).toBe(signer.keyIdHex);
  });

  it("round-trips origin, size and root, and refuses another key", () => {
    const rootHash = Buffer.alloc(32, 7);
    const note = signNote(formatCheckpoint({ origin: "example.com/log", size: 42, rootHash }), signer);
    expect(note.split("\n").slice(0, 3)).toEqual(["example.com/log", "42", rootHash.toString("base64")]);
    const opened = openCheckpoint(note, verifier);
    expect(opened.size).toBe(42);
    expect(opened.rootHash.equals(rootHash)).toBe(true);
    const stranger = parseVerifierKey(createLogSigner(generateKeyPairSync("ed25519").privateKey, "example.com/log").verifierKey);
    expect(() => openCheckpoint(note, stranger)).toThrow();
  });

  it("says which step refused a checkpoint: its text (damaged in transfer, named), its signature, or its signed body", () => {
    const rootHash = Buffer.alloc(32, 7);
    const note = signNote(formatCheckpoint({ origin: "example.com/log", size: 42, rootHash }), signer);
    const refusal = (text: string, by = verifier) => {
      try {
        openCheckpoint(text, by, { from_file: true });
      } catch (error) {
        return { stage: (error as CheckpointError).stage, message: (error as Error).message };
      }
      throw new Error("opened");
    };
    expect(refusal(note.slice(0, -1))).toEqual({ stage: "syntax", message: expect.stringMatching(/^malformed note: it does not end with a newline/) });
    expect(refusal(note.replaceAll("\n", "\r\n"))).toEqual({ stage: "syntax", message: expect.stringMatching(/^malformed note: it has CRLF line endings/) });
    expect(refusal(`\ufeff${note}`)).toEqual({ stage: "syntax", message: expect.stringMatching(/: it starts with a byte order mark/) });
    expect(refusal(`${note.split("\n\n")[0]}\n`)).toEqual({ stage: "syntax", message: "malformed note" });
    // Not read from a file (a checkpoint inside an export or a proof, a JSON string): no advice about copying files.
    expect(() => openCheckpoint(note.slice(0, -1), verifier)).toThrow(/^malformed note$/);
    const stranger = parseVerifierKey(createLogSigner(generateKeyPairSync("ed25519").privateKey, "example.com/log").verifierKey);
    // Signed, but not by the key given: the refusal names the keys it is signed by.
    expect(refusal(note, stranger)).toEqual({
      stage: "signature",
      message: `note has no verifiable signatures: it is signed only by "example.com/log+${signer.keyIdHex}" (another log's checkpoint, or another key)`,
    });
    const others = ["a", "b", "c", "d", "e"].map((name) => createLogSigner(generateKeyPairSync("ed25519").privateKey, `\u001b[31m${name}`));
    const manySigned = others.reduce((text, other) => `${text}${signNote(text.split("\n\n")[0] + "\n", other).split("\n\n")[1]}`, note);
    expect(refusal(manySigned, stranger).message).toBe(
      `note has no verifiable signatures: it is signed only by "example.com/log+${signer.keyIdHex}", "\\u001b[31ma+${others[0]?.keyIdHex}", ` +
        `"\\u001b[31mb+${others[1]?.keyIdHex}" and 3 more (another log's checkpoint, or another key)`,
    );
    const signedBadSize = signNote(`example.com/log\n042\n${rootHash.toString("base64")}\n`, signer);
    expect(refusal(signedBadSize)).toEqual({ stage: "body", message: "malformed checkpoint size" });
  });

  it("accepts extension lines and refuses malformed sizes and roots", () => {
    const root = Buffer.alloc(32, 1).toString("base64");
    expect(parseCheckpoint(`o\n5\n${root}\nextension\n`).size).toBe(5);
    for (const bad of [`o\n05\n${root}\n`, `o\n-1\n${root}\n`, `o\n5\nAAAA\n`, `o\n5\n`, `o\n5\n${root}`]) {
      expect(() => parseCheckpoint(bad), bad).toThrow();
    }
  });
});

describe("key names, as Go's note package takes them", () => {
  const cases: Array<[string, boolean]> = [
    ["example.com/log", true],
    ["", false],
    ["a+b", false],
    ["a b", false],
    ["a\u0085b", false],
    ["a\u00a0b", false],
    ["a\u3000b", false],
    // U+FEFF is not a space to unicode.IsSpace (JavaScript's \s counts it).
    ["a\ufeffb", true],
  ];
  for (const [name, valid] of cases) it(`${JSON.stringify(name)} → ${valid}`, () => expect(isValidKeyName(name)).toBe(valid));
});
