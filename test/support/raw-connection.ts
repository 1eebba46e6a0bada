// One raw loopback HTTP/1.1 connection for tests that need what fetch hides: a request whose
// body is sent in part or never, and whether the server keeps or closes the connection.

import { connect, type Socket } from "node:net";

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One loopback connection on node:net: the test writes the bytes, and reads responses framed by Content-Length. */
export class RawConnection {
  readonly closed: Promise<void>;
  is_closed = false;
  sent_bytes = 0;
  private received = Buffer.alloc(0);
  private readonly responses: RawResponse[] = [];
  private readonly waiting: Array<() => void> = [];

  private constructor(readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      this.frame();
    });
    // EPIPE or ECONNRESET when a write meets the connection the server closed: the close is what is tested.
    socket.on("error", () => undefined);
    this.closed = new Promise((resolve) =>
      socket.once("close", () => {
        this.is_closed = true;
        resolve();
        for (const wake of this.waiting.splice(0)) wake();
      }),
    );
  }

  static async open(url: string): Promise<RawConnection> {
    const { hostname, port } = new URL(url);
    const socket = connect({ host: hostname, port: Number(port) });
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    return new RawConnection(socket);
  }

  /** Writes a request's head: `head` is the request line and headers without the blank line. */
  writeHead(head: string): void {
    this.write(`${head.replaceAll("\n", "\r\n")}\r\nhost: 127.0.0.1\r\n\r\n`);
  }

  write(data: string | Buffer): boolean {
    this.sent_bytes += Buffer.byteLength(data);
    return this.socket.write(data);
  }

  /** The next whole response; throws if the connection closes (or `timeout_ms` passes) first. */
  async response(timeout_ms = 5_000): Promise<RawResponse> {
    const deadline = Date.now() + timeout_ms;
    while (this.responses.length === 0) {
      if (this.is_closed) throw new Error("the connection closed before a response");
      if (Date.now() > deadline) throw new Error(`no response within ${timeout_ms} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 20);
        this.waiting.push(() => (clearTimeout(timer), resolve()));
      });
    }
    return this.responses.shift() as RawResponse;
  }

  /**
   * Keeps writing `chunk` (minding backpressure) until the server closes the connection or
   * `close_wait_ms` passes; answers whether the server closed it. Past that, a server still
   * reading what the client sends has not closed the connection.
   */
  async sendUntilClosed(chunk: Buffer, close_wait_ms = 3_000): Promise<boolean> {
    const deadline = Date.now() + close_wait_ms;
    while (!this.is_closed && !this.socket.destroyed && Date.now() < deadline) {
      if (this.write(chunk)) {
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      await Promise.race([
        new Promise((resolve) => this.socket.once("drain", resolve)),
        this.closed,
        new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now()))),
      ]);
    }
    if (!this.is_closed) await Promise.race([this.closed, new Promise((resolve) => setTimeout(resolve, 100))]);
    return this.is_closed;
  }

  destroy(): void {
    this.socket.destroy();
  }

  private frame(): void {
    for (;;) {
      const head_end = this.received.indexOf("\r\n\r\n");
      if (head_end < 0) return;
      const [status_line = "", ...lines] = this.received.subarray(0, head_end).toString("latin1").split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const body_start = head_end + 4;
      const length = Number(headers["content-length"] ?? 0);
      if (this.received.length < body_start + length) return;
      const body = this.received.subarray(body_start, body_start + length).toString("utf8");
      this.received = this.received.subarray(body_start + length);
      this.responses.push({ status: Number(status_line.split(" ")[1]), headers, body });
      for (const wake of this.waiting.splice(0)) wake();
    }
  }
}
