// Printing what the gate decided as a short, readable story: colour and symbols only on a
// terminal, plain text otherwise (CI, pipes).

export interface StoryOptions {
  out: NodeJS.WritableStream;
  interactive: boolean;
}

const colours = { green: "\u001b[32m", yellow: "\u001b[33m", red: "\u001b[31m", cyan: "\u001b[36m", dim: "\u001b[2m", bold: "\u001b[1m", reset: "\u001b[0m" };
type Colour = keyof typeof colours;

/** Minor units as a readable amount: 129900 INR → "1,299.00 INR". */
export function money(amount: unknown, currency: unknown = "INR"): string {
  if (typeof amount !== "number" || !Number.isFinite(amount)) return `${String(amount)} ${String(currency)}`;
  const major = (amount / 100).toLocaleString("en-IN", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  return `${major} ${String(currency).toUpperCase()}`;
}

/** Control characters (line breaks, escape sequences) and Unicode line separators. */
const unprintable = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/**
 * Text from outside (a model's reply and arguments, a reason quoting what an agent sent) on one
 * line, its control characters written as \n, \u001b…: printed raw, a newline could start a line
 * that looks like a decision ("  ALLOW   create_order"), and an escape sequence repaint one.
 */
export function printable(text: string): string {
  return text.replace(unprintable, (char) => (char === "\n" ? "\\n" : `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`));
}

export class Story {
  constructor(private readonly options: StoryOptions) {}

  private paint(colour: Colour, text: string): string {
    return this.options.interactive ? `${colours[colour]}${text}${colours.reset}` : text;
  }

  line(text = ""): void {
    this.options.out.write(`${text}\n`);
  }

  heading(text: string): void {
    this.line();
    this.line(this.paint("bold", text));
  }

  step(label: string, colour: Colour, text: string): void {
    this.line(`  ${this.paint(colour, label.padEnd(7))} ${text}`);
  }

  note(text: string): void {
    this.line(`          ${this.paint("dim", text)}`);
  }

  /** One line for a money tool result, whatever its effect (`what` may quote a model's arguments). */
  result(called: string, structured: Record<string, unknown>): void {
    const what = printable(called);
    const block = structured.block as { available?: number; currency?: string } | undefined;
    const balance = block ? ` — available ${money(block.available, block.currency)}` : "";
    const reason = printable(String(structured.reason));
    if (structured.provider === "unknown") return this.step("UNKNOWN", "yellow", `${what}: ${reason} (money stays held)`);
    if (structured.provider === "refused") return this.step("REFUSED", "red", `${what}: provider refused: ${reason}`);
    if (structured.effect === "ALLOW") return this.step("ALLOW", "green", `${what}${balance}${structured.replayed ? " (replayed)" : ""}`);
    if (structured.effect === "HOLD") {
      return this.step("HOLD", "yellow", `${what}: ${reason}; approval ${String(structured.approval_id)}${balance}`);
    }
    this.step("BLOCK", "red", `${what}: ${String(structured.rule)} — ${reason}`);
  }
}
