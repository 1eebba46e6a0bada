// A pino log stream for tests that read what a server logged.

import { Writable } from "node:stream";

/** A log stream and what was written to it. */
export function logLines(): { stream: Writable; text: () => string } {
  let logs = "";
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logs += chunk.toString();
      done();
    },
  });
  return { stream, text: () => logs };
}
