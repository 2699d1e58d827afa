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
  close(): Promise<void>;
}

/** Starts a proxy on a free port of 127.0.0.1 forwarding to `target`. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket; silenced: boolean }>();
  let silenceNew = false;
  let accepted = 0;
  const silence = (pair: { client: net.Socket; upstream: net.Socket; silenced: boolean }) => {
    pair.silenced = true;
    pair.client.unpipe(pair.upstream);
    pair.upstream.unpipe(pair.client);
    // Keep reading so nothing backs up, and drop what arrives.
    pair.client.on('data', () => undefined);
    pair.upstream.on('data', () => undefined);
  };
  const server = net.createServer((client) => {
    accepted += 1;
    const upstream = net.connect(target.port, target.host);
    const pair = { client, upstream, silenced: false };
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
    if (silenceNew) silence(pair);
    else {
      client.pipe(upstream);
      upstream.pipe(client);
    }
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
