// Counts the tools/call requests in a JSON-RPC body too large to parse, as its bytes stream
// past: a scan that follows strings and nesting, holding only a short string across chunks.

const quote = 0x22;
const backslash = 0x5c;
const open_object = 0x7b;
const open_array = 0x5b;
const close_object = 0x7d;
const close_array = 0x5d;
/** The longest string that matters, decoded: the value "tools/call" (the names "method" and "id" are shorter). */
const matched_chars_max = "tools/call".length;
/** The most bytes JSON can spend on one ASCII character: a `\u0074` escape. */
const escaped_char_bytes_max = 6;
/**
 * Strings are kept up to the bytes a string that matters can take written with every character
 * escaped ("\u0074\u006f…" is 60 bytes for "tools/call"), so a server that decodes escapes never
 * runs a call the scan missed; longer strings are not kept (none of them can decode to one that matters).
 */
export const string_bytes_max = matched_chars_max * escaped_char_bytes_max;

const isWhitespace = (byte: number) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
const isNumberStart = (byte: number) => byte === 0x2d || (byte >= 0x30 && byte <= 0x39);

/**
 * Counts the messages (the body itself, or each element of a batch) with a `method` of
 * "tools/call" and a string or number `id`: the requests the observer records when it can
 * parse the body. Strings are skipped whole, so "tools/call" inside an argument is not counted,
 * nor is a `method` member nested inside the params. It does not validate JSON, so it can count
 * more than a parser would find (an `id` of 1e400, a message whose later `method` member is not
 * tools/call, a body that is not JSON): the gap it feeds errs towards calls that went unrecorded.
 */
export class ToolCallCounter {
  calls = 0;
  private depth = 0;
  /** The depth of a message's members: 1 for one message, 2 for a batch; 0 until the first bracket. */
  private message_depth = 0;
  private in_string = false;
  /** The last string byte was a backslash: the next one is escaped. */
  private escaped = false;
  private readonly string = Buffer.alloc(string_bytes_max);
  private string_bytes = 0;
  private string_is_value = false;
  // Within the current message:
  private expect: "name" | "value" | "separator" = "name";
  private member: string | undefined;
  private value_of: string | undefined;
  private is_call = false;
  private has_id = false;

  push(chunk: Uint8Array): void {
    // Where this chunk's next quote and backslash are: -2 not searched yet, -1 none left.
    let next_quote = -2;
    let next_backslash = -2;
    let i = 0;
    while (i < chunk.length) {
      if (!this.in_string && this.depth > this.message_depth && this.message_depth > 0) {
        // Inside a member's value: only strings and brackets matter (the hot loop of a large body).
        const byte = chunk[i++]!;
        if (byte === quote) this.startString(false);
        else if (byte === open_object || byte === open_array) this.depth++;
        else if (byte === close_object || byte === close_array) this.depth--;
      } else if (!this.in_string) {
        this.token(chunk[i++]!);
      } else if (this.escaped || this.string_bytes < string_bytes_max || chunk[i] === quote || chunk[i] === backslash) {
        this.stringByte(chunk[i++]!);
      } else {
        // A long string: nothing more of it is kept, so skip to its next quote or backslash.
        // Each search starts past the last, so a chunk is searched once whatever it holds.
        if (next_quote !== -1 && next_quote < i) next_quote = chunk.indexOf(quote, i);
        if (next_backslash !== -1 && next_backslash < i) next_backslash = chunk.indexOf(backslash, i);
        const stop = Math.min(next_quote === -1 ? chunk.length : next_quote, next_backslash === -1 ? chunk.length : next_backslash);
        this.string_bytes += stop - i;
        i = stop;
        if (i < chunk.length) this.stringByte(chunk[i++]!);
      }
    }
  }

  private startString(is_value: boolean): void {
    this.in_string = true;
    this.string_bytes = 0;
    this.string_is_value = is_value;
  }

  private stringByte(byte: number): void {
    if (this.escaped) {
      this.escaped = false;
    } else if (byte === backslash) {
      this.escaped = true;
    } else if (byte === quote) {
      this.in_string = false;
      return this.stringEnded();
    }
    if (this.string_bytes < string_bytes_max) this.string[this.string_bytes] = byte;
    this.string_bytes++;
  }

  /** The string just read, when short enough to matter. */
  private text(): string | undefined {
    if (this.string_bytes > string_bytes_max) return undefined;
    const raw = this.string.toString("utf8", 0, this.string_bytes);
    if (!raw.includes("\\")) return raw;
    try {
      return JSON.parse(`"${raw}"`) as string;
    } catch {
      return undefined;
    }
  }

  private atMessage(): boolean {
    return this.message_depth > 0 && this.depth === this.message_depth;
  }

  private stringEnded(): void {
    if (!this.atMessage()) return;
    const text = this.text();
    if (!this.string_is_value) {
      this.member = text;
      return;
    }
    this.expect = "separator";
    if (this.value_of === "method" && text === "tools/call") this.is_call = true;
    if (this.value_of === "id") this.has_id = true;
  }

  /** One byte outside any string. */
  private token(byte: number): void {
    if (isWhitespace(byte)) return;
    const at_message = this.atMessage();
    if (byte === quote) {
      this.startString(at_message && this.expect === "value");
    } else if (byte === open_object || byte === open_array) {
      if (at_message) this.expect = "separator";
      if (this.message_depth === 0) this.message_depth = byte === open_array ? 2 : 1;
      this.depth++;
      if (this.atMessage()) this.startMessage();
    } else if (byte === close_object || byte === close_array) {
      if (at_message && this.is_call && this.has_id) this.calls++;
      this.depth = Math.max(0, this.depth - 1);
    } else if (at_message) {
      this.memberToken(byte);
    }
  }

  /** A colon, a comma, or the first byte of a number or literal, among a message's members. */
  private memberToken(byte: number): void {
    if (byte === 0x3a) {
      this.value_of = this.member;
      this.expect = "value";
    } else if (byte === 0x2c) {
      this.expect = "name";
    } else if (this.expect === "value") {
      if (this.value_of === "id" && isNumberStart(byte)) this.has_id = true;
      this.expect = "separator";
    }
  }

  private startMessage(): void {
    this.expect = "name";
    this.member = undefined;
    this.value_of = undefined;
    this.is_call = false;
    this.has_id = false;
  }
}
