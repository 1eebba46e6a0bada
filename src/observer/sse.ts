// An incremental Server-Sent Events reader for the observer's tap: it sees the bytes the
// proxy forwards (already sent on, untouched) and yields each event's data once complete.
// Lines end in LF, CRLF or CR, split anywhere across chunks; an oversized event is skipped, and
// said to be (its client got it, so the calls it may have answered were answered unread).

/** An event (or an unterminated line) larger than this is not observed; the bytes still flow. */
export const sse_event_chars_max = 4_194_304;

/** The budget a reader charges what it holds to (the observer's one bound on bytes held to read). */
export interface HeldBudget {
  take(bytes: number): boolean;
  give(bytes: number): void;
}

const unbounded: HeldBudget = { take: () => true, give: () => undefined };

/**
 * A copy of `text` that shares no memory with the string it was cut from. A piece cut from a
 * chunk's text (slice) can keep that whole text alive: kept data lines of 20 characters, each from
 * a 64 KiB chunk, held 1,900 times what they were charged for.
 */
export function detached(text: string): string {
  return Buffer.from(text, "utf8").toString("utf8");
}

/**
 * What each piece of an unfinished line and each kept data string costs the heap besides its
 * characters (string and list headers): an upstream writing one byte at a time held 32 bytes a
 * byte while charged 2.
 */
export const piece_overhead_bytes = 64;

/** Whether a line that begins `start` may be a `name` field line (the field's name, then ":" or the line's end). */
function mayBeField(start: string, name: "data" | "event"): boolean {
  if (start === "") return false;
  return start.length <= name.length ? name.startsWith(start) : start.startsWith(`${name}:`);
}

export class SseReader {
  private readonly decoder = new TextDecoder("utf-8");
  private pending = "";
  /** The pieces `pending` is made of, each from one chunk. */
  private pending_pieces = 0;
  /** The rest of a line cut short by skip() is dropped up to its end, never read as a line of its own. */
  private discarding = false;
  private data: string[] = [];
  /** The event's `event` field names another type than "message": the MCP SDK's client takes
   *  only an unnamed or "message" event as a JSON-RPC message, whatever its data holds. */
  private other_type = false;
  /** How many of `data` are detached copies; the rest were cut from the chunk being read. */
  private data_detached = 0;
  private data_chars = 0;
  private oversized = false;
  /** A CR ended the last chunk: a LF starting the next one belongs to it. */
  private after_cr = false;
  /** What the budget has been charged for: two bytes a UTF-16 unit of the unfinished line and
   *  event, and piece_overhead_bytes for each piece they are held in. */
  private charged = 0;

  constructor(
    private readonly onEvent: (data: string) => void,
    /** An event was dispatched to the client but skipped here: over sse_event_chars_max, or over the budget. */
    private readonly onOversized: () => void = () => undefined,
    private readonly budget: HeldBudget = unbounded,
    /** Each `id` field the stream carries (one with a NUL sets none), whatever its event. */
    private readonly onId: (id: string) => void = () => undefined,
  ) {}

  push(chunk: Uint8Array): void {
    this.read(chunk);
    this.detachData();
    this.charge();
  }

  /** Drops what the reader holds and gives back everything charged: the stream has ended or
   *  been cut, or the budget cannot take what it holds. */
  release(): void {
    this.skip(false);
    this.budget.give(this.charged);
    this.charged = 0;
  }

  /** Drops the unfinished line (the rest of it too, as it arrives) and event. The event is said
   *  to be oversized when it ends if it held data or the line dropped may have been data (a
   *  comment or another field dropped loses nothing of what the event carries), or its type:
   *  a type too long to read (`too_long`) is not "message", but one the budget could not hold
   *  the rest of may be, and the event then may have been an answer. */
  private skip(too_long: boolean): void {
    const start = this.pending.slice(0, 6);
    if (this.data_chars > 0 || mayBeField(start, "data")) this.oversized = true;
    if (mayBeField(start, "event")) {
      if (too_long) this.other_type = true;
      else this.oversized = true;
    }
    if (this.pending !== "") this.discarding = true;
    this.pending = "";
    this.pending_pieces = 0;
    this.data = [];
    this.data_detached = 0;
    this.data_chars = 0;
  }

  /** The data lines this chunk added to an event still arriving, copied off the chunk's text
   *  as one piece (dispatch joins the pieces with LF, as it would the lines). */
  private detachData(): void {
    if (this.data.length - this.data_detached < 1) return;
    const fresh = this.data.splice(this.data_detached);
    this.data.push(detached(fresh.join("\n")));
    this.data_detached = this.data.length;
  }

  /**
   * After each chunk: charges the budget for what the reader holds now (a line or an event still
   * arriving), or gives back what it no longer holds. When the budget cannot take it, the event
   * is skipped as one too large to read: the bytes still flow, and the reader holds nothing more
   * of it. (Within one chunk it may hold up to that chunk's size past what was charged.)
   */
  private charge(): void {
    const holding = 2 * (this.pending.length + this.data_chars) + piece_overhead_bytes * (this.pending_pieces + this.data.length);
    if (holding <= this.charged) {
      this.budget.give(this.charged - holding);
      this.charged = holding;
    } else if (this.budget.take(holding - this.charged)) {
      this.charged = holding;
    } else {
      this.release();
    }
  }

  private read(chunk: Uint8Array): void {
    let text = this.decoder.decode(chunk, { stream: true });
    if (this.after_cr && text.startsWith("\n")) text = text.slice(1);
    this.after_cr = false;
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code !== 0x0a && code !== 0x0d) continue;
      const line = this.pending + text.slice(start, i);
      this.pending = "";
      this.pending_pieces = 0;
      if (this.discarding) this.discarding = false;
      else this.line(line);
      if (code === 0x0d) {
        if (i + 1 === text.length) this.after_cr = true;
        else if (text.charCodeAt(i + 1) === 0x0a) i++;
      }
      start = i + 1;
    }
    if (this.discarding || start === text.length) return;
    // The line goes on in the next chunk: its start is kept as a copy when cut from this text.
    this.pending += start === 0 ? text : detached(text.slice(start));
    this.pending_pieces++;
    if (this.pending.length > sse_event_chars_max) this.skip(true);
  }

  private line(line: string): void {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const after = colon === -1 ? "" : line.slice(colon + 1);
    const value = after.startsWith(" ") ? after.slice(1) : after;
    if (field === "id") {
      if (!value.includes("\0")) this.onId(value);
      return;
    }
    if (field === "event") {
      this.other_type = value !== "" && value !== "message";
      return;
    }
    if (field !== "data" || this.oversized) return;
    this.data_chars += value.length + 1;
    if (this.data_chars > sse_event_chars_max) this.skip(true);
    else this.data.push(value);
  }

  private dispatch(): void {
    const data = this.data.join("\n");
    // An event of another type is no message to the client: it answers nothing, read or not.
    const message = !this.other_type;
    const deliver = message && !this.oversized && this.data.length > 0 && data !== "";
    const oversized = message && this.oversized;
    this.other_type = false;
    this.data = [];
    this.data_detached = 0;
    this.data_chars = 0;
    this.oversized = false;
    if (deliver) this.onEvent(data);
    else if (oversized) this.onOversized();
  }
}
