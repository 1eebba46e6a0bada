// A loopback TCP proxy in front of PostgreSQL that can cut a connection the way a network
// failure, a failover or a proxy restart does: the socket just ends, with no PostgreSQL error
// message first (pg_terminate_backend sends FATAL before closing, which pg handles differently).

import net from "node:net";

/**
 * When to cut the connection that sends a query whose text matches `sql`: a simple-protocol
 * query, or a named statement's Parse or Bind (the driver prepares its statements, so a later
 * execution sends only a Bind naming a statement parsed earlier on that connection).
 */
export interface CutPlan {
  sql: RegExp;
  /** "before": the query never reaches the server; "after_reply": the server ran it, its answer is dropped. */
  when: "before" | "after_reply";
}

export interface PgProxy {
  /** A copy of `url` that connects through the proxy. */
  url(url: string): string;
  /** Cuts the next connection that sends a query matching `plan` (once). */
  arm(plan: CutPlan): void;
  /** Cuts every open connection now. */
  cutAll(): void;
  /** While on, every new connection is closed at once, as while the database restarts. */
  refuse(on: boolean): void;
  /** Connections closed at once so far, while refusing. */
  readonly refused: number;
  /** While on, nothing is forwarded either way and nothing is closed: a server that vanished
   *  without a FIN or RST (a dead host, a failover that drops packets). */
  silence(on: boolean): void;
  /** Ends the next `count` new sessions as pg_terminate_backend does just after they connect: a
   *  FATAL 57P01 sent in the same write as the server's startup answer, then the close. */
  terminateAtStartup(count: number): void;
  /** Sessions ended so by now. */
  readonly terminated: number;
  /** Queries that were cut, in order. */
  readonly cut: string[];
  close(): Promise<void>;
}

const ssl_request_code = 80877103;
const query_message = 0x51; // 'Q'
const parse_message = 0x50; // 'P': name, query, …
const bind_message = 0x42; // 'B': portal, statement name, …
/** ReadyForQuery with its length (5): the end of the server's startup answer. */
const ready_for_query = Buffer.from([0x5a, 0, 0, 0, 5]);

/** A FATAL ErrorResponse as pg_terminate_backend makes the server send. */
function adminShutdown(): Buffer {
  const fields = Buffer.from("SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0", "latin1");
  const head = Buffer.alloc(5);
  head[0] = 0x45; // 'E'
  head.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
}

/** The NUL-terminated strings at the start of a message's body. */
function leadingStrings(message: Buffer, count: number): string[] {
  const strings: string[] = [];
  let at = 5;
  for (let index = 0; index < count; index++) {
    const end = message.indexOf(0, at);
    strings.push(message.subarray(at, end).toString());
    at = end + 1;
  }
  return strings;
}

export async function startPgProxy(server_url: string): Promise<PgProxy> {
  const target = new URL(server_url);
  const target_port = Number(target.port || 5432);
  let plan: CutPlan | undefined;
  const cut: string[] = [];
  const sockets = new Set<net.Socket>();
  let refusing = false;
  let refused = 0;
  let silent = false;
  let to_terminate = 0;
  let terminated = 0;

  const server = net.createServer((client) => {
    if (refusing) {
      refused++;
      return void client.destroy();
    }
    const upstream = net.connect(target_port, target.hostname);
    sockets.add(client).add(upstream);
    const destroy = () => {
      client.destroy();
      upstream.destroy();
    };
    let pending = Buffer.alloc(0);
    let started = false;
    let cut_on_reply = false;
    let terminate_at_ready = to_terminate > 0;
    if (terminate_at_ready) to_terminate--;
    /** The text of each statement this connection prepared, by name. */
    const prepared = new Map<string, string>();
    const queryText = (message: Buffer): string | undefined => {
      if (message[0] === query_message) return message.subarray(5, message.length - 1).toString();
      if (message[0] === parse_message) {
        const [name, sql] = leadingStrings(message, 2) as [string, string];
        if (name !== "") prepared.set(name, sql);
        return sql;
      }
      if (message[0] === bind_message) return prepared.get((leadingStrings(message, 2) as [string, string])[1]);
      return undefined;
    };
    client.on("data", (chunk: Buffer) => {
      if (silent) return;
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        // The startup packet (and an SSL request before it) has no type byte.
        const header = started ? 5 : 4;
        if (pending.length < header) break;
        const length = started ? pending.readInt32BE(1) + 1 : pending.readInt32BE(0);
        if (pending.length < length) break;
        const message = pending.subarray(0, length);
        pending = pending.subarray(length);
        if (!started) {
          if (message.readInt32BE(4) !== ssl_request_code) started = true;
        } else {
          const sql = queryText(message);
          if (sql !== undefined && plan?.sql.test(sql)) {
            const when = plan.when;
            plan = undefined;
            cut.push(sql);
            if (when === "before") return destroy();
            cut_on_reply = true;
          }
        }
        upstream.write(message);
      }
    });
    upstream.on("data", (chunk: Buffer) => {
      if (silent) return;
      if (cut_on_reply) return destroy();
      if (terminate_at_ready && chunk.includes(ready_for_query)) {
        terminate_at_ready = false;
        terminated++;
        upstream.destroy();
        return void client.end(Buffer.concat([chunk, adminShutdown()]));
      }
      client.write(chunk);
    });
    for (const socket of [client, upstream]) {
      socket.on("error", destroy);
      socket.on("close", () => {
        sockets.delete(socket);
        destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;

  return {
    url(url: string) {
      const through = new URL(url);
      through.hostname = "127.0.0.1";
      through.port = String(port);
      return through.toString();
    },
    arm(next: CutPlan) {
      plan = next;
    },
    cutAll() {
      for (const socket of sockets) socket.destroy();
    },
    refuse(on: boolean) {
      refusing = on;
    },
    get refused() {
      return refused;
    },
    silence(on: boolean) {
      silent = on;
    },
    terminateAtStartup(count: number) {
      to_terminate = count;
    },
    get terminated() {
      return terminated;
    },
    cut,
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
