import net from 'node:net';

/** A TCP proxy in front of a server that can silently drop traffic, like a failover or a NAT. */
export interface TcpProxy {
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: () => number;
  /**
   * From now on every connection open at this moment forwards nothing, in either direction,
   * and is never closed: its packets are lost, no FIN, no RST (what a failover or a NAT that
   * forgot the flow looks like to both ends). Connections opened later work.
   */
  blackholeExisting(): void;
  /** While on, new connections are accepted and then blackholed too (the server unreachable). */
  blackholeNew(on: boolean): void;
  /**
   * Once: the next `COMMIT` a client sends is forwarded, the server applies it, and its answer
   * is dropped: the connection is cut the moment the answer arrives (a lost acknowledgement).
   * Resolves when that happened.
   */
  cutAfterNextCommit(): Promise<void>;
  /** What clients sent on blackholed connections (never delivered), in order. */
  droppedFromClients(): Buffer;
  close(): Promise<void>;
}

/** Starts a proxy on a free port of 127.0.0.1 forwarding to `target`. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  type Pair = { client: net.Socket; upstream: net.Socket; silenced: boolean; commitSent: boolean };
  const pairs = new Set<Pair>();
  let silenceNew = false;
  let accepted = 0;
  // A simple-protocol Query message whose text is exactly COMMIT: 'Q', int32 length 11, "COMMIT\0".
  const COMMIT_QUERY = Buffer.concat([Buffer.from('Q'), Buffer.from([0, 0, 0, 11]), Buffer.from('COMMIT\0')]);
  let commitCut: { resolve: () => void } | undefined;
  const dropped: Buffer[] = [];
  const silence = (pair: Pair) => {
    // From now on whatever arrives is dropped (the data handlers read `silenced`).
    pair.silenced = true;
  };
  const forward = (pair: Pair) => {
    pair.client.on('data', (chunk: Buffer) => {
      if (pair.silenced) {
        dropped.push(chunk);
        return;
      }
      if (commitCut && chunk.includes(COMMIT_QUERY)) pair.commitSent = true;
      pair.upstream.write(chunk);
    });
    pair.upstream.on('data', (chunk: Buffer) => {
      if (pair.silenced) return;
      if (pair.commitSent && commitCut) {
        // The server answered the COMMIT: it is applied. Drop the answer, cut the connection.
        const cut = commitCut;
        commitCut = undefined;
        pair.silenced = true;
        pair.client.destroy();
        pair.upstream.destroy();
        cut.resolve();
        return;
      }
      pair.client.write(chunk);
    });
  };
  const server = net.createServer((client) => {
    accepted += 1;
    const upstream = net.connect(target.port, target.host);
    const pair: Pair = { client, upstream, silenced: false, commitSent: false };
    pairs.add(pair);
    const forget = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', forget);
    upstream.on('error', forget);
    client.on('close', () => {
      if (!pair.silenced) forget();
    });
    upstream.on('close', () => {
      if (!pair.silenced) forget();
    });
    forward(pair);
    if (silenceNew) silence(pair);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    accepted: () => accepted,
    blackholeExisting() {
      for (const pair of pairs) if (!pair.silenced) silence(pair);
    },
    blackholeNew(on) {
      silenceNew = on;
    },
    droppedFromClients() {
      return Buffer.concat(dropped);
    },
    cutAfterNextCommit() {
      return new Promise<void>((resolve) => {
        commitCut = { resolve };
      });
    },
    async close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `url` with its host and port replaced by the proxy's. */
export function throughProxy(url: string, proxy: TcpProxy): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(proxy.port);
  return parsed.toString();
}
