// Progress for long commands: a bar redrawn in place on a terminal, a few plain lines otherwise.

export class Progress {
  private last_line = -1;
  constructor(
    private readonly out: NodeJS.WritableStream,
    private readonly interactive: boolean,
    private readonly label: string,
    private readonly total: number,
  ) {}

  update(done: number): void {
    if (this.interactive) {
      const width = 30;
      const filled = Math.round((done / Math.max(1, this.total)) * width);
      this.out.write(`\r${this.label} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${done}/${this.total}`);
      if (done === this.total) this.out.write("\n");
      return;
    }
    // Quiet on CI: one line at the start and one at the end.
    const step = done === 0 ? 0 : done === this.total ? 2 : 1;
    if (step !== 1 && step !== this.last_line) {
      this.out.write(`${this.label}: ${done}/${this.total}\n`);
      this.last_line = step;
    }
  }
}
