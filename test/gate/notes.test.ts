// What the agent's notes become at the provider: every key kept as data (even "__proto__", which
// plain assignment would turn into a prototype and drop), the receipt moved into notes, secrets out
// (a note whose key is secret-shaped is left out whole).

import { describe, expect, it } from "vitest";
import { providerNotes } from "../../src/gate/money.js";

describe("providerNotes", () => {
  it("keeps every key as a note, moves the receipt in and redacts secret-looking values", () => {
    const args = JSON.parse('{"notes": {"__proto__": "x", "sku": 7, "token": "sk_live_abcdefghijklmnopqrstuvwx"}, "receipt": "r-1"}');
    const notes = providerNotes(args);
    expect(Object.getPrototypeOf(notes)).toBe(Object.prototype);
    expect(Object.keys(notes).sort()).toEqual(["__proto__", "buyer_receipt", "sku", "token"]);
    expect(notes).toMatchObject({ sku: "7", buyer_receipt: "r-1", token: "[redacted]" });
    expect(Object.getOwnPropertyDescriptor(notes, "__proto__")?.value).toBe("x");
  });

  it("leaves out a note whose key is secret-shaped (a card number, a bearer token) and keeps the rest", () => {
    const notes = providerNotes({ notes: { "4111 1111 1111 1111": "visa", "Bearer abcdefghijklmnop": "x", sku: "7" }, receipt: "r-2" });
    expect(notes).toEqual({ sku: "7", buyer_receipt: "r-2" });
  });

  it("redacts a note number that may be a card number as the evidence does, before it becomes the string the provider gets", () => {
    // A Luhn-valid 19-digit card number, which JSON.parse rounds to 6212345678901235000: as a
    // string it failed Luhn and reached the provider nearly whole, while the entry said [redacted].
    const notes = providerNotes(JSON.parse('{"notes": {"card": 6212345678901234569, "minus": -6212345678901234569, "visa": 4111111111111111, "qty": 7}}'));
    expect(notes).toEqual({ card: "[redacted]", minus: "[redacted]", visa: "[redacted]", qty: "7" });
  });

  it("replaces whole a value at R0's limit that scrubbing made longer, so the provider does not refuse it", () => {
    const url = `https://u:p@h.example/${"z".repeat(255 - "https://u:p@h.example/".length)}`;
    expect(url).toHaveLength(255);
    const notes = providerNotes({ notes: { link: url, short: "https://u:p@h.example/a" }, receipt: url });
    expect(notes).toEqual({ link: "[redacted]", buyer_receipt: "[redacted]", short: "https://u:[redacted]@h.example/a" });
  });
});
