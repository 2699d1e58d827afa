import { createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { describe, expect, it } from 'vitest';
import { unreachableCause } from '../../../cli/commands/status.js';

/** A port on 127.0.0.1 that nothing listens on (it was just freed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('status --host when the host cannot be asked', () => {
  it('names the cause fetch hides behind "fetch failed": a refused connection', async () => {
    const port = await closedPort();
    const error: unknown = await fetch(`http://127.0.0.1:${port}/pipelines/reviews/status`).catch((failure: unknown) => failure);

    expect((error as Error).message).toBe('fetch failed');
    expect(unreachableCause(error)).toBe(`cannot reach the host: connect ECONNREFUSED 127.0.0.1:${port}`);
  });

  it('says how long it waited when the host accepts but does not answer', async () => {
    const silent: Server = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = silent.address() as AddressInfo;
      const error: unknown = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(200) }).catch(
        (failure: unknown) => failure,
      );

      expect((error as Error).name).toBe('TimeoutError');
      expect(unreachableCause(error)).toBe('no answer within 5 s');
    } finally {
      silent.close();
    }
  });

  it('names an unknown host name', async () => {
    const error: unknown = await fetch('http://no-such-host.invalid:9464/').catch((failure: unknown) => failure);

    expect(unreachableCause(error)).toMatch(/^cannot reach the host: getaddrinfo (ENOTFOUND|EAI_AGAIN) no-such-host\.invalid$/);
  });
});
