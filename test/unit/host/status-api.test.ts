/**
 * The host's pipeline API over a real HTTP server (the endpoint the host binds), with the host
 * behind it played by a recording target: control needs the configured bearer token (403 when
 * none is configured, 401 when it is missing or wrong), reads need none, unknown pipelines are
 * 404 with a JSON body. Also the status document's redaction and the token setting's checks.
 */
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { startHttpEndpoint } from '../../../host/http-endpoint.js';
import type { HttpEndpoint } from '../../../host/http-endpoint.js';
import { buildPipelineStatus } from '../../../host/status-report.js';
import { redactConnectionDetails } from '../../../shared/redaction.js';
import type { ProgressFacts } from '../../../host/status-report.js';
import { bearerMatches } from '../../../host/status-api.js';
import type { PipelinesTarget } from '../../../host/status-api.js';
import { loadHostSettings } from '../../../config/host-settings.js';
import { ConfigurationError } from '../../../shared/errors.js';
import type { PipelineName } from '../../../shared/pipelines.js';

const TOKEN = 'unit-test-token-0123456789';

interface ControlCall {
  readonly pipeline: PipelineName;
  readonly paused: boolean;
  readonly by: string;
  readonly reason: string | undefined;
}

function recordingTarget(): PipelinesTarget & { readonly calls: ControlCall[] } {
  const calls: ControlCall[] = [];
  return {
    calls,
    pipelines: ['reviews', 'app-stats'],
    summaries: () => [
      { pipeline: 'reviews', state: 'RUNNING', paused: false },
      { pipeline: 'app-stats', state: 'PAUSED', paused: true },
    ],
    status: async (pipeline) => ({ pipeline, state: 'RUNNING' }),
    async control(pipeline, paused, by, reason) {
      calls.push({ pipeline, paused, by, reason });
      const pause = { pipeline, paused, by, at: new Date('2026-12-01T12:00:00Z'), reason: reason ?? null };
      return { pause, previous: undefined, audit: { id: '1' } };
    },
  };
}

let endpoint: HttpEndpoint | undefined;
afterEach(async () => {
  await endpoint?.close();
  endpoint = undefined;
});

async function serve(controlToken: string | undefined, target = recordingTarget()) {
  endpoint = await startHttpEndpoint({ port: 0, host: '127.0.0.1', controlToken }, new Registry(), () => ({
    state: () => 'Running',
    liveness: () => ({ alive: true, state: 'Running', maxAgeMs: 16_000, pipelines: {}, missing: [] }),
    readiness: async () => ({ ready: true, state: 'Running', pipelines: {}, missing: [] }),
    pipelinesApi: target,
  }));
  const base = `http://127.0.0.1:${endpoint.port}`;
  const call = async (method: string, path: string, headers: Record<string, string> = {}, body?: string) => {
    const response = await fetch(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
    return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
  };
  return { target, call };
}

describe('PUT /pipelines/{pipeline}/pause and /resume', () => {
  it('answers 403 when no token is configured, whatever the caller sends', async () => {
    const { target, call } = await serve(undefined);

    const answer = await call('PUT', '/pipelines/reviews/pause', { authorization: `Bearer ${TOKEN}` });

    expect(answer.status).toBe(403);
    expect(answer.body.error).toContain('STORAGE_HTTP_CONTROL_TOKEN is not set');
    expect(target.calls).toEqual([]);
  });

  it.each([
    ['no header', {}],
    ['a wrong token', { authorization: `Bearer ${TOKEN}x` }],
    ['a prefix of the token', { authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
    ['another scheme', { authorization: `Basic ${TOKEN}` }],
    ['an empty bearer', { authorization: 'Bearer ' }],
  ])('answers 401 to %s, and changes nothing', async (_case, headers) => {
    const { target, call } = await serve(TOKEN);

    const answer = await call('PUT', '/pipelines/reviews/pause', headers);

    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toContain('Bearer');
    expect(JSON.stringify(answer.body)).not.toContain(TOKEN);
    expect(target.calls).toEqual([]);
  });

  it('answers 202 to the right token and passes the reason and the caller on', async () => {
    const { target, call } = await serve(TOKEN);

    const paused = await call('PUT', '/pipelines/reviews/pause', { authorization: `Bearer ${TOKEN}` }, '{"reason":"reindex"}');
    const resumed = await call('PUT', '/pipelines/reviews/resume', { authorization: `bearer ${TOKEN}` });

    expect(paused).toMatchObject({
      status: 202,
      // The row records the caller's address; the answer, like every answer, shows none.
      body: { pipeline: 'reviews', paused: true, was_paused: false, reason: 'reindex', by: 'http:<address>' },
    });
    expect(resumed).toMatchObject({ status: 202, body: { pipeline: 'reviews', paused: false, reason: null } });
    expect(target.calls).toEqual([
      { pipeline: 'reviews', paused: true, by: 'http:127.0.0.1', reason: 'reindex' },
      { pipeline: 'reviews', paused: false, by: 'http:127.0.0.1', reason: undefined },
    ]);
  });

  it('answers 404 (JSON) for a pipeline this host does not run, 400 for a bad body, 405 for GET', async () => {
    const { target, call } = await serve(TOKEN);
    const auth = { authorization: `Bearer ${TOKEN}` };

    const unknown = await call('PUT', '/pipelines/nothing/pause', auth);
    const notHere = await call('PUT', '/pipelines/network-metrics/pause', auth);
    const badBody = await call('PUT', '/pipelines/reviews/pause', auth, '{"reason": 5}');
    const get = await call('GET', '/pipelines/reviews/pause');

    expect(unknown).toMatchObject({ status: 404, body: { error: expect.stringContaining('unknown pipeline "nothing"') } });
    expect(notHere.status).toBe(404);
    expect(badBody.status).toBe(400);
    expect(get.status).toBe(405);
    expect(target.calls).toEqual([]);
  });

  it('answers 503 without the database error when the change cannot be written', async () => {
    const target = recordingTarget();
    const failing: PipelinesTarget = {
      ...target,
      control: async () => {
        throw Object.assign(new Error('connect ECONNREFUSED 10.0.3.7:5432'), { code: 'ECONNREFUSED' });
      },
    };
    const { call } = await serve(TOKEN, failing as typeof target);

    const answer = await call('PUT', '/pipelines/reviews/pause', { authorization: `Bearer ${TOKEN}` });

    expect(answer.status).toBe(503);
    expect(answer.body.error).toContain('ECONNREFUSED');
    expect(JSON.stringify(answer.body)).not.toContain('10.0.3.7');
  });
});

describe('GET /pipelines and /pipelines/{pipeline}/status', () => {
  it('need no token, and a pipeline this host does not run is a 404 with a JSON body', async () => {
    const { call } = await serve(TOKEN);

    const list = await call('GET', '/pipelines');
    const status = await call('GET', '/pipelines/reviews/status');
    const unknown = await call('GET', '/pipelines/network-metrics/status');

    expect(list).toMatchObject({
      status: 200,
      body: {
        pipelines: [
          { pipeline: 'reviews', state: 'RUNNING' },
          { pipeline: 'app-stats', state: 'PAUSED' },
        ],
      },
    });
    expect(status).toMatchObject({ status: 200, body: { pipeline: 'reviews' } });
    expect(unknown).toMatchObject({ status: 404, body: { pipelines: ['reviews', 'app-stats'] } });
  });
});

describe('bearerMatches', () => {
  it('accepts exactly the token', () => {
    expect(bearerMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerMatches(`Bearer ${TOKEN} `, TOKEN)).toBe(true);
    expect(bearerMatches(`Bearer ${TOKEN}0`, TOKEN)).toBe(false);
    expect(bearerMatches(undefined, TOKEN)).toBe(false);
    expect(bearerMatches(TOKEN, TOKEN)).toBe(false);
  });
});

describe('STORAGE_HTTP_CONTROL_TOKEN', () => {
  const base = { KAFKA_BROKERS: '127.0.0.1:9092' };

  it('is off by default and read when set', () => {
    expect(loadHostSettings(base).http.controlToken).toBeUndefined();
    expect(loadHostSettings({ ...base, STORAGE_HTTP_CONTROL_TOKEN: TOKEN }).http.controlToken).toBe(TOKEN);
  });

  it.each([['short-secret'], ['a token with spaces in it']])('refuses %j at start without echoing it', (value) => {
    let error: unknown;
    try {
      loadHostSettings({ ...base, STORAGE_HTTP_CONTROL_TOKEN: value });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('STORAGE_HTTP_CONTROL_TOKEN');
    expect((error as Error).message).not.toContain(value);
  });
});

describe('the status document', () => {
  const progress: ProgressFacts = {
    pipeline: 'reviews',
    topic: 'reviews',
    group: 'storage-consumer.reviews',
    assignment: [0, 1],
    inFlight: [
      {
        partition: 1,
        firstOffset: '500',
        lastOffset: '999',
        startedWallAt: Date.parse('2026-12-01T12:00:00Z'),
        retries: 2,
        attempt: 2,
        lastError: {
          message: 'Error: connect ECONNREFUSED 10.0.3.7:5432',
          stack: 'Error: connect ECONNREFUSED 10.0.3.7:5432\n    at x',
          at: Date.parse('2026-12-01T12:00:05Z'),
        },
      },
    ],
    partitions: [{ partition: 1, committed: '500', lastStoredWallAt: Date.parse('2026-12-01T11:59:00Z') }],
    lastError: { message: 'getaddrinfo ENOTFOUND db.internal.example', stack: undefined, at: Date.parse('2026-12-01T12:00:05Z') },
  };

  it('gives per partition the owner, offsets, lag and the batch in flight, with connection details removed', () => {
    const document = buildPipelineStatus({
      progress,
      pipeline: 'reviews',
      topic: 'reviews',
      groupId: 'storage-consumer.reviews',
      state: 'RUNNING',
      hostId: 'host-1:42',
      memberId: 'm-1',
      pause: undefined,
      pauseRead: { readAt: new Date('2026-12-01T12:00:04Z'), error: undefined },
      group: {
        pipeline: 'reviews',
        group: 'storage-consumer.reviews',
        topic: 'reviews',
        state: 'Stable',
        members: [
          { memberId: 'm-1', clientId: 'storage-consumer', clientHost: '/10.0.0.5', partitions: [0, 1] },
          { memberId: 'm-2', clientId: 'storage-consumer', clientHost: '/10.0.0.6', partitions: [2] },
        ],
        partitions: [0, 1, 2].map((partition) => ({ partition, committed: 500n, start: 0n, end: 600n, lag: 100n })),
        lag: 300n,
      },
    });

    expect(
      document.partitions.map((partition) => [partition.partition, partition.owner?.member_id, partition.owner?.this_host, partition.lag]),
    ).toEqual([
      [0, 'm-1', true, 100],
      [1, 'm-1', true, 100],
      [2, 'm-2', false, 100],
    ]);
    expect(document.partitions[1]?.in_flight).toMatchObject({
      first_offset: '500',
      last_offset: '999',
      attempt: 2,
      retries: 2,
      started_at: '2026-12-01T12:00:00.000Z',
    });
    expect(document.partitions[1]?.last_stored_at).toBe('2026-12-01T11:59:00.000Z');
    expect(document.last_error?.message).toBe('getaddrinfo ENOTFOUND <host>');
    const text = JSON.stringify(document);
    expect(text).not.toContain('10.0.3.7');
    expect(text).not.toContain('db.internal.example');
    expect(text).toContain('ECONNREFUSED <address>');
  });

  it("still lists this host's partitions when the broker cannot be asked", () => {
    const document = buildPipelineStatus({
      progress,
      pipeline: 'reviews',
      topic: 'reviews',
      groupId: 'storage-consumer.reviews',
      state: 'RUNNING',
      hostId: 'host-1:42',
      memberId: 'm-1',
      pause: undefined,
      pauseRead: { readAt: undefined, error: undefined },
      group: { error: 'the broker did not answer within 5000 ms' },
    });
    expect(document.partitions.map((partition) => [partition.partition, partition.committed, partition.end])).toEqual([
      [0, null, null],
      [1, '500', null],
    ]);
    expect(document.kafka_error).toBe('the broker did not answer within 5000 ms');
  });

  it('leaves batch and error fields out, never null, when the host keeps no progress record', () => {
    const document = buildPipelineStatus({
      progress: undefined,
      pipeline: 'reviews',
      topic: 'reviews',
      groupId: 'storage-consumer.reviews',
      state: 'RUNNING',
      hostId: 'host-1:42',
      memberId: 'm-1',
      pause: undefined,
      pauseRead: { readAt: undefined, error: undefined },
      group: { error: 'the broker did not answer within 5000 ms' },
    });
    expect(document).not.toHaveProperty('last_error');
    expect(document.partitions).toEqual([]);
  });

  it('redacts addresses, URLs and database users', () => {
    expect(redactConnectionDetails('connect ECONNREFUSED [::1]:5432 via postgres://u:p@db:5432/x for user "svc"')).toBe(
      'connect ECONNREFUSED <address> via <url> for user <user>',
    );
  });
});
