import { createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { describe, expect, it } from 'vitest';
import { hostLines, unreachableCause } from '../../../cli/commands/status.js';

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
    expect(unreachableCause(error)).toBe('cannot reach the host: connect ECONNREFUSED <address>');
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

    expect(unreachableCause(error)).toMatch(/^cannot reach the host: getaddrinfo (ENOTFOUND|EAI_AGAIN) <host>$/);
  });
});

describe('status --host beside the cluster view', () => {
  const position = (group: string, memberIds: string[]) => ({
    pipeline: 'reviews',
    group,
    topic: 'reviews',
    state: memberIds.length === 0 ? 'Empty' : 'Stable',
    members: memberIds.map((memberId) => ({ memberId, clientId: 'storage-consumer-h-1', clientHost: '/127.0.0.1', partitions: [0, 1, 2] })),
    partitions: [],
    lag: 0n,
  });
  const host = (group: string) => ({
    pipeline: 'reviews' as const,
    state: 'RUNNING',
    host_id: 'h:1',
    member_id: 'm-1',
    topic: 'reviews',
    group,
    group_state: 'Stable',
    pause: null,
    pause_read_at: null,
    pause_read_error: null,
    partitions: [
      {
        partition: 0,
        owner: null,
        committed: '5',
        end: '9',
        lag: 4,
        in_flight: {
          first_offset: '5',
          last_offset: '8',
          started_at: '2026-12-01T12:00:00.000Z',
          attempt: 1,
          retries: 2,
          last_error: { message: 'error: canceling statement due to statement timeout', trace: null, at: '2026-12-01T12:01:00.000Z' },
        },
      },
    ],
    last_error: null,
    kafka_error: null,
  });

  it('warns when the host consumes another group than the command looked at', () => {
    const text = hostLines(host('storage-consumer.reviews'), position('storage-consumer-dev.reviews', []));

    expect(text).toContain('  host h:1: RUNNING, member m-1\n');
    expect(text).toContain(
      '    WARNING: the host consumes group storage-consumer.reviews, this command looked at group storage-consumer-dev.reviews: ' +
        'set STORAGE_GROUP_REVIEWS=storage-consumer.reviews here as the host has it\n',
    );
  });

  it('shows the in-process retries and their last error; no warning when the groups agree', () => {
    const text = hostLines(host('storage-consumer.reviews'), position('storage-consumer.reviews', ['m-1']));

    expect(text).not.toContain('WARNING');
    expect(text).toContain(
      '    in flight: partition 0 offsets 5..8, attempt 1 (2 database retries), since 2026-12-01T12:00:00.000Z, ' +
        'last error: error: canceling statement due to statement timeout\n',
    );
  });
});
