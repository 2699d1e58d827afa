/**
 * Half-alive is dead on every signal (issue 18), on the real broker and PostgreSQL, the host as
 * operators run it (a child process with its HTTP endpoint): a deleted topic makes its pipeline
 * not ready and down within the first bound and stops the host with exit 1 within the second,
 * while the other pipelines keep storing; a batch blocked on a table lock is reported stalled
 * (WARN, 503) and recovers by itself; a fatal error's line says where the batch is. The bounds
 * are shortened through their settings.
 */
import { randomUUID } from 'node:crypto';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
import { HOST_METRIC_NAMES } from '../../host/metrics.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  committedOffsets,
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  spawnHost,
  stateIs,
  temporaryDirectory,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { HostProcess, PipelineNames } from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';

let schema: TestSchema;
let admin: Admin;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'hostprogress');
  admin = testKafka('host-progress-test').admin();
  await admin.connect();
});

afterAll(async () => {
  await killAllHosts();
  for (const cleanup of cleanups) await cleanup();
  await admin?.disconnect();
  await schema?.drop();
});

interface Endpoint {
  readonly host: HostProcess;
  readonly base: string;
  get(path: string): Promise<{ status: number; text: string; ms: number }>;
  /** One sample's value from /metrics, or undefined. */
  metric(name: string, labels: Record<string, string>): Promise<number | undefined>;
}

async function startHost(names: PipelineNames, extra: Record<string, string>): Promise<Endpoint> {
  const [port] = await freePorts(1);
  const heartbeats = await temporaryDirectory('host-progress-');
  cleanups.push(heartbeats.remove);
  const host = spawnHost(
    hostEnvironment({
      databaseUrl: schema.url,
      names,
      heartbeatDir: heartbeats.path,
      extra: { STORAGE_HTTP_PORT: String(port), STORAGE_HTTP_HOST: '127.0.0.1', STORAGE_LAG_INTERVAL_MS: '1000', ...extra },
    }),
  );
  const base = `http://127.0.0.1:${port}`;
  const get = async (path: string) => {
    const began = performance.now();
    const response = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(10_000) });
    const text = await response.text();
    return { status: response.status, text, ms: performance.now() - began };
  };
  const metric = async (name: string, labels: Record<string, string>) => {
    const { text } = await get('/metrics');
    const wanted = `${name}{${Object.entries(labels)
      .map(([key, value]) => `${key}="${value}"`)
      .join(',')}} `;
    const line = text.split('\n').find((candidate) => candidate.startsWith(wanted));
    return line === undefined ? undefined : Number(line.slice(wanted.length));
  };
  await waitUntil('/readyz answers 200', async () => (await get('/readyz')).status === 200, 120_000, 250);
  return { host, base, get, metric };
}

describe('the host, on the progress of each pipeline', () => {
  it('a deleted topic: not ready and down within the first bound, exit 1 within the second, the other pipelines storing until the stop', async () => {
    // Prepare
    const unreadyMs = 4_000;
    const failMs = 25_000;
    const names = await createTestPipelines('progress-deleted');
    const endpoint = await startHost(names, {
      STORAGE_FETCH_UNREADY_AFTER_MS: String(unreadyMs),
      STORAGE_FETCH_FAIL_AFTER_MS: String(failMs),
    });
    await produce(names.topics['app-stats'], jsonMessages([sampleAppStats()]));
    await produce(names.topics.reviews, jsonMessages([{ ...sampleReview(), review_id: `deleted:${randomUUID()}` }]));
    for (const name of ['app-stats', 'reviews'] as const) await waitForCommittedToEnd(admin, names.groups[name], names.topics[name]);

    // Act: the topic goes away under the running host; the other pipelines get more work
    const deletedAt = Date.now();
    await admin.deleteTopics({ topics: [names.topics['app-stats']] });
    const later = Array.from({ length: 20 }, () => ({ ...sampleReview(), review_id: `deleted:${randomUUID()}` }));
    await produce(names.topics.reviews, jsonMessages(later));
    const metrics = Array.from({ length: 3 }, () => ({ ...sampleNetworkMetrics(), analysis_id: randomUUID() }));
    await produce(names.topics['network-metrics'], jsonMessages(metrics));

    // Assess: within the first bound (plus the watch's second and a scrape), not ready and down
    const notReady = await waitUntil(
      'app-stats not ready',
      async () => {
        const answer = await endpoint.get('/readyz');
        const body = JSON.parse(answer.text) as { missing: string[]; pipelines: Record<string, { state: string }> };
        return answer.status === 503 && body.pipelines['app-stats']?.state === 'NOT_FETCHING' ? body : undefined;
      },
      unreadyMs + 15_000,
      250,
    );
    const notReadyAfterMs = Date.now() - deletedAt;
    expect(await endpoint.metric(HOST_METRIC_NAMES.pipelineUp, { pipeline: 'app-stats' })).toBe(0);
    expect(notReady.missing.find((cause) => cause.startsWith('app-stats: no fetch completed for'))).toBeDefined();
    expect(notReady.pipelines.reviews?.state).toBe('RUNNING');
    console.log(`[host-progress] /readyz ${notReadyAfterMs} ms after the deletion: ${JSON.stringify(notReady)}`);
    expect(notReadyAfterMs).toBeLessThan(unreadyMs + 15_000);
    // the other pipelines' rows are committed before the stop
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, failMs);
    await waitForCommittedToEnd(admin, names.groups['network-metrics'], names.topics['network-metrics'], failMs);
    expect(endpoint.host.child.exitCode).toBeNull();
    const { rows } = await schema.pool.query<{ n: string }>('SELECT count(*) AS n FROM reviews WHERE review_id = ANY($1)', [
      later.map((review) => review.review_id),
    ]);
    expect(Number(rows[0]?.n)).toBe(later.length);

    // Assess: past the second bound, the host stops with exit 1 and a line naming the cause
    const exit = await endpoint.host.exited;
    const exitedAfterMs = Date.now() - deletedAt;
    expect(exit.code).toBe(1);
    expect(exitedAfterMs).toBeLessThan(failMs + 30_000);
    expect(exitedAfterMs).toBeGreaterThan(failMs - 1_000);
    const failed = endpoint.host.lines.find((candidate) => candidate.message === 'pipeline failed');
    expect(failed).toMatchObject({ level: 'ERROR', pipeline: 'app-stats' });
    expect(String(failed?.error)).toMatch(
      /^pipeline app-stats failed: no fetch completed for \d+ s, \d+ consumer crashes since \(last: .*\) \(STORAGE_FETCH_FAIL_AFTER_MS=25000\)$/,
    );
    expect(endpoint.host.lines.find(stateIs('Stopped'))).toMatchObject({ exitCode: 1 });
    const warned = endpoint.host.lines.find((candidate) => candidate.message === 'pipeline not fetching');
    expect(warned).toMatchObject({ level: 'WARN', pipeline: 'app-stats', state: 'NOT_FETCHING' });
    console.log(
      `[host-progress] exit ${exit.code} ${exitedAfterMs} ms after the deletion; ${JSON.stringify(warned)}; ${JSON.stringify(failed)}`,
    );
  });

  it('a batch blocked on a table lock: a stalled WARN naming the batch and 503, then recovery once the lock is released', async () => {
    // Prepare
    const names = await createTestPipelines('progress-lock');
    const endpoint = await startHost(names, { STORAGE_STALL_AFTER_MS: '3000' });
    const locker = await schema.pool.connect();
    let locked = false;
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE reviews IN ACCESS EXCLUSIVE MODE');
      locked = true;

      // Act
      const records = await produce(
        names.topics.reviews,
        jsonMessages(
          Array.from({ length: 5 }, () => ({ ...sampleReview(), review_id: `lock:${randomUUID()}` })),
          { partition: 1 },
        ),
      );
      const firstOffset = records[0]?.baseOffset;

      // Assess: the WARN names the in-flight batch, its age and attempt; not ready; down
      const stalled = await endpoint.host.waitForLog(
        (candidate) => candidate.message === 'pipeline stalled' && candidate.pipeline === 'reviews',
        60_000,
      );
      expect(stalled).toMatchObject({
        level: 'WARN',
        state: 'STALLED',
        topic: names.topics.reviews,
        partition: 1,
        first_offset: firstOffset,
        last_offset: String(Number(firstOffset) + 4),
        attempt: 1,
      });
      expect(stalled.batchAgeMs).toBeGreaterThan(3_000);
      const answer = await endpoint.get('/readyz');
      expect(answer.status).toBe(503);
      const body = JSON.parse(answer.text) as { missing: string[]; pipelines: Record<string, { state: string }> };
      expect(body.pipelines.reviews?.state).toBe('STALLED');
      expect(body.missing.find((cause) => cause.startsWith('reviews: stalled: partition 1'))).toContain(
        `in flight: ${names.topics.reviews} partition 1 offsets ${firstOffset}..`,
      );
      expect(await endpoint.metric(HOST_METRIC_NAMES.pipelineUp, { pipeline: 'reviews' })).toBe(0);
      expect(await endpoint.metric(HOST_METRIC_NAMES.inFlightAge, { pipeline: 'reviews' })).toBeGreaterThan(3);
      expect(await endpoint.metric(HOST_METRIC_NAMES.pipelineUp, { pipeline: 'app-stats' })).toBe(1);
      console.log(`[host-progress] stalled: ${JSON.stringify(stalled)}; /readyz ${answer.status} ${answer.text.trim()}`);

      // Act: the lock goes away
      await locker.query('ROLLBACK');
      locked = false;
    } finally {
      if (locked) await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    }

    // Assess: stored, ready again by itself, and said so
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    await waitUntil('/readyz answers 200 again', async () => (await endpoint.get('/readyz')).status === 200, 30_000, 250);
    const up = await endpoint.metric(HOST_METRIC_NAMES.pipelineUp, { pipeline: 'reviews' });
    if (up !== 1) {
      // Say what the host thought: its readiness now, its reviews metrics, its last lines.
      const ready = await endpoint.get('/readyz');
      const metrics = (await endpoint.get('/metrics')).text.split('\n').filter((line) => line.includes('pipeline="reviews"'));
      const lines = endpoint.host.lines.slice(-15).map((line) => JSON.stringify(line));
      console.log(
        `[host-progress] pipeline_up ${up} after /readyz 200; now /readyz ${ready.status} ${ready.text}\n${metrics.join('\n')}\n${lines.join('\n')}`,
      );
    }
    expect(up).toBe(1);
    const recovered = await endpoint.host.waitForLog(
      (candidate) => candidate.message === 'pipeline recovered' && candidate.pipeline === 'reviews',
      10_000,
    );
    console.log(`[host-progress] ${JSON.stringify(recovered)}`);
    endpoint.host.child.kill('SIGTERM');
    expect((await endpoint.host.exited).code).toBe(0);
  });

  it('a fatal error: the pipeline failed line names topic, partition, first_offset and last_offset', async () => {
    // Prepare: the table is gone under the running host (a schema behind the code)
    const names = await createTestPipelines('progress-fatal');
    const endpoint = await startHost(names, {});
    await schema.pool.query('ALTER TABLE network_metrics RENAME TO network_metrics_away');
    try {
      // Act
      const records = await produce(
        names.topics['network-metrics'],
        jsonMessages(
          [
            { ...sampleNetworkMetrics(), analysis_id: randomUUID() },
            { ...sampleNetworkMetrics(), analysis_id: randomUUID() },
          ],
          { partition: 0 },
        ),
      );
      const exit = await endpoint.host.exited;

      // Assess
      expect(exit.code).toBe(1);
      const first = records[0]?.baseOffset as string;
      const failed = endpoint.host.lines.find((candidate) => candidate.message === 'pipeline failed');
      expect(failed).toMatchObject({
        level: 'ERROR',
        pipeline: 'network-metrics',
        topic: names.topics['network-metrics'],
        partition: 0,
        first_offset: first,
        last_offset: String(Number(first) + 1),
      });
      expect(String(failed?.error)).toContain('relation "network_metrics" does not exist');
      expect(endpoint.host.lines.find(stateIs('Failing'))).toMatchObject({
        topic: names.topics['network-metrics'],
        partition: 0,
        first_offset: first,
      });
      expect([...(await committedOffsets(admin, names.groups['network-metrics'], names.topics['network-metrics'])).values()]).toEqual([
        -1n,
        -1n,
        -1n,
      ]);
      console.log(`[host-progress] ${JSON.stringify({ ...failed, stack: undefined })}`);
    } finally {
      await schema.pool.query('ALTER TABLE network_metrics_away RENAME TO network_metrics');
    }
  });
});
