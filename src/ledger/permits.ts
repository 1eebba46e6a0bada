// A counting semaphore for async work in one process: with one permit it is the mutex the SQLite
// driver and the evidence store serialize on; with more, it bounds PostgreSQL write transactions.

export class Permits {
  private readonly queue: Array<() => void> = [];

  constructor(private free = 1) {}

  /** Callers waiting for a permit (holders excluded). */
  get waiting(): number {
    return this.queue.length;
  }

  /** Resolves with the release function once a permit is free; first come, first served. */
  async take(): Promise<() => void> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.queue.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue.shift();
      if (next) next();
      else this.free++;
    };
  }

  /** Runs `work` holding a permit. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    const release = await this.take();
    try {
      return await work();
    } finally {
      release();
    }
  }
}
