/**
 * A TCP proxy that delays every chunk by a fixed time in each direction: a database "in the
 * same zone" (0.5 ms each way, 1 ms round trip, as RDS) for the peer benchmark, the same for
 * both peers. Needs no root and no kernel feature (tc netem would need both).
 *
 *   node --import tsx bench/peer/delay-proxy.ts --target 127.0.0.1:5432 --delay-ms 0.5
 *
 * prints `{"port":N}` once it listens on 127.0.0.1 and runs until SIGTERM / SIGINT. It runs in
 * its own process, so its CPU is counted in neither peer's client CPU (the bench reports it).
 *
 * Node's timers have a 1 ms granularity, too coarse for 0.5 ms, and the main thread must never
 * block (it stamps each chunk's arrival). A worker thread is the clock: it sleeps in
 * `Atomics.wait` (a futex with a sub-millisecond timeout, no spinning) and then wakes the main
 * thread, which forwards every chunk that is due. Waking a thread costs about 0.1-0.3 ms on a
 * busy machine, so the clock is set that much early, learnt from how late the last deliveries
 * were (a running average steered to zero). The delay is the same for every chunk, so chunks
 * fall due in arrival order: one FIFO for all connections keeps each connection's byte order,
 * and only its head needs the clock. Nagle is off on both legs, as node-postgres and pgjdbc
 * switch it off on theirs.
 */
import net from 'node:net';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';

const CLOCK = `
const { parentPort } = require('node:worker_threads');
const cell = new Int32Array(new SharedArrayBuffer(4));
parentPort.on('message', (at) => {
  for (;;) {
    const left = at - Number(process.hrtime.bigint()) / 1e6;
    if (left <= 0) break;
    Atomics.wait(cell, 0, 0, left);
  }
  parentPort.postMessage(0);
});`;

interface Pending {
  readonly due: number;
  readonly from: net.Socket;
  readonly to: net.Socket;
  /** null: the sender ended its side; end the receiver's once everything before it went out. */
  readonly chunk: Buffer | null;
}

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** Starts the proxy; resolves with its port and a function that closes it. */
export async function startDelayProxy(
  target: { host: string; port: number },
  delayMs: number,
): Promise<{ port: number; close(): Promise<void> }> {
  const clock = new Worker(CLOCK, { eval: true });
  clock.unref();
  const queue: Pending[] = [];
  let head = 0;
  let armed = false;
  /** How early the clock is set, learnt: the wake-up's own latency. */
  let early = 0;
  const sockets = new Set<net.Socket>();

  const deliver = ({ from, to, chunk }: Pending) => {
    if (to.destroyed) return;
    if (chunk === null) {
      to.end();
      return;
    }
    if (!to.write(chunk) && !from.isPaused()) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  };
  const arm = () => {
    armed = true;
    clock.postMessage((queue[head] as Pending).due - early);
  };
  clock.on('message', () => {
    armed = false;
    const now = nowMs();
    const lateness = now - (queue[head] as Pending).due;
    early = Math.min(delayMs, Math.max(0, early + 0.2 * lateness));
    while (head < queue.length && (queue[head] as Pending).due <= now) deliver(queue[head++] as Pending);
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else arm();
  });
  const enqueue = (from: net.Socket, to: net.Socket, chunk: Buffer | null) => {
    if (delayMs === 0) {
      deliver({ due: 0, from, to, chunk });
      return;
    }
    queue.push({ due: nowMs() + delayMs, from, to, chunk });
    if (!armed) arm();
  };

  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('close', () => sockets.delete(socket));
    }
    const fail = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', fail);
    upstream.on('error', fail);
    client.on('data', (chunk: Buffer) => enqueue(client, upstream, chunk));
    upstream.on('data', (chunk: Buffer) => enqueue(upstream, client, chunk));
    client.on('end', () => enqueue(client, upstream, null));
    upstream.on('end', () => enqueue(upstream, client, null));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await clock.terminate();
    },
  };
}

if (process.argv[1] && import.meta.filename === (await import('node:fs')).realpathSync(process.argv[1])) {
  const { values } = parseArgs({
    options: { target: { type: 'string', default: '127.0.0.1:5432' }, 'delay-ms': { type: 'string', default: '0.5' } },
  });
  const at = values.target.lastIndexOf(':');
  const delayMs = Number(values['delay-ms']);
  if (at < 1 || !(delayMs >= 0)) throw new Error('usage: delay-proxy.ts --target HOST:PORT --delay-ms MS');
  const proxy = await startDelayProxy({ host: values.target.slice(0, at), port: Number(values.target.slice(at + 1)) }, delayMs);
  console.log(JSON.stringify({ port: proxy.port }));
  const stop = () => void proxy.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
