// An incremental Server-Sent Events reader for the observer's tap: it sees the bytes the
// proxy forwards (already sent on, untouched) and yields each event's data once complete.
// Lines end in LF, CRLF or CR, split anywhere across chunks; an oversized event is skipped, and
// said to be (its client got it, so the calls it may have answered were answered unread).

/** An event (or an unterminated line) larger than this is not observed; the bytes still flow. */
export const sse_event_chars_max = 4_194_304;

export class SseReader {
  private readonly decoder = new TextDecoder("utf-8");
  private pending = "";
  private data: string[] = [];
  private data_chars = 0;
  private oversized = false;
  /** A CR ended the last chunk: a LF starting the next one belongs to it. */
  private after_cr = false;

  constructor(
    private readonly onEvent: (data: string) => void,
    /** An event was dispatched to the client but skipped here: over sse_event_chars_max. */
    private readonly onOversized: () => void = () => undefined,
  ) {}

  push(chunk: Uint8Array): void {
    let text = this.decoder.decode(chunk, { stream: true });
    if (this.after_cr && text.startsWith("\n")) text = text.slice(1);
    this.after_cr = false;
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code !== 0x0a && code !== 0x0d) continue;
      this.line(this.pending + text.slice(start, i));
      this.pending = "";
      if (code === 0x0d) {
        if (i + 1 === text.length) this.after_cr = true;
        else if (text.charCodeAt(i + 1) === 0x0a) i++;
      }
      start = i + 1;
    }
    this.pending += text.slice(start);
    if (this.pending.length > sse_event_chars_max) {
      this.pending = "";
      this.oversized = true;
    }
  }

  private line(line: string): void {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    if (field !== "data") return;
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    this.data_chars += value.length + 1;
    if (this.data_chars > sse_event_chars_max) this.oversized = true;
    else this.data.push(value);
  }

  private dispatch(): void {
    const data = this.data.join("\n");
    const deliver = !this.oversized && this.data.length > 0 && data !== "";
    const oversized = this.oversized;
    this.data = [];
    this.data_chars = 0;
    this.oversized = false;
    if (deliver) this.onEvent(data);
    else if (oversized) this.onOversized();
  }
}
