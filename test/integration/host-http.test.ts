/**
 * The host's HTTP endpoint on the real broker, the host as operators run it (a child process):
 * `/readyz` answers 503 before the pipelines joined their groups, 200 once they did, and 503
 * when PostgreSQL is stopped; `/metrics` scraped during the run counts exactly what the
 * database holds. The host runs on an embedded PostgreSQL of this file's own (the shared test
 * server is never stopped).
 */
import { randomUUID } from 'node:crypto';
import type { Admin } from 'kafkajs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../dev/embedded-postgres.js';
import type { EmbeddedDatabase } from '../../dev/embedded-postgres.js';
import { freePorts } from '../../dev/free-ports.js';
import { BATCH_RESULTS, HOST_METRIC_NAMES, RECORD_OUTCOMES } from '../../host/metrics.js';
import { PIPELINE_STATES } from '../../host/progress.js';
import { runMigrations } from '../../shared/migrations/run.js';
import { PIPELINES, PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { runCli } from '../helpers/cli.js';
import { createAppsStandIn } from '../helpers/database.js';
import {
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  spawnHost,
  temporaryDirectory,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { HostProcess, PipelineNames } from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';

let database: EmbeddedDatabase | undefined;
let pool: pg.Pool;
let admin: Admin;
let names: PipelineNames;
let host: HostProcess;
let base: string;
let endpointEnv: Record<string, string>;
const cleanups: Array<() => Promise<void>> = [];

/** One sample (Prometheus text format): name, labels, value. */
interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key as string] = value as string;
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) });
  }
  return samples;
}

const get = async (path: string) => {
  const response = await fetch(`${base}${path}`);
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
};

async function scrape(): Promise<Sample[]> {
  const { status, text } = await get('/metrics');
  expect(status).toBe(200);
  return parseMetrics(text);
}

const sum = (samples: Sample[], name: string, labels: Record<string, string>) =>
  samples
    .filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
    .reduce((total, sample) => total + sample.value, 0);

beforeAll(async () => {
  database = await startEmbeddedPostgres({ ephemeral: true, database: 'http_test' });
  pool = new pg.Pool({ connectionString: database.url, max: 2 });
  pool.on('error', () => undefined);
  await createAppsStandIn(pool, [{ id: 1, package_name: 'com.example.weather' }]);
  await runMigrations({ connection: { connectionString: database.url }, logger: { info: () => undefined, warn: () => undefined } });
  admin = testKafka('host-http-test').admin();
  await admin.connect();
  names = await createTestPipelines('http');
});

afterAll(async () => {
  await killAllHosts();
  for (const cleanup of cleanups) await cleanup();
  await admin?.disconnect();
  await pool?.end().catch(() => undefined);
  await database?.stop();
});

describe('the host HTTP endpoint', () => {
  it('is not ready before the pipelines joined, ready after, and counts what the database holds', async () => {
    const [port] = await freePorts(1);
    base = `http://127.0.0.1:${port}`;
    endpointEnv = { STORAGE_HTTP_PORT: String(port) };
    const heartbeats = await temporaryDirectory('host-http-');
    cleanups.push(heartbeats.remove);
    host = spawnHost(
      hostEnvironment({
        databaseUrl: database?.url as string,
        names,
        heartbeatDir: heartbeats.path,
        extra: {
          STORAGE_HTTP_PORT: String(port),
          STORAGE_HTTP_HOST: '127.0.0.1',
          STORAGE_DB_CONNECT_TIMEOUT_MS: '2000',
          STORAGE_LAG_INTERVAL_MS: '500',
        },
      }),
    );

    // The endpoint is bound before the host connects anywhere: its first answer is "not ready".
    const first = await waitUntil('the endpoint answers', () => get('/readyz').catch(() => undefined), 60_000, 50);
    expect(first.status).toBe(503);
    const notReady = JSON.parse(first.text) as { ready: boolean; missing: string[] };
    expect(notReady.ready).toBe(false);
    expect(notReady.missing.length).toBeGreaterThan(0);
    expect((await get('/healthz')).status).toBe(200);
    // Before any batch (nothing is produced yet), every series of every pipeline is there: counters,
    // gauges and both histograms (a quiet pipeline's panels and alerts read 0, not "no data").
    const fresh = await scrape();
    const histograms = new Set<string>([HOST_METRIC_NAMES.batchDuration, HOST_METRIC_NAMES.recordDelay]);
    for (const name of PIPELINE_NAMES) {
      for (const metric of Object.values(HOST_METRIC_NAMES)) {
        // The lag's series need a partition (the first reading brings them); build_info has no pipeline.
        if (metric === HOST_METRIC_NAMES.consumerLag || metric === HOST_METRIC_NAMES.buildInfo) continue;
        const series = histograms.has(metric) ? [`${metric}_bucket`, `${metric}_sum`, `${metric}_count`] : [metric];
        for (const each of series) {
          expect(
            fresh.some((sample) => sample.name === each && sample.labels.pipeline === name),
            `${each} of ${name}`,
          ).toBe(true);
        }
      }
      expect(sum(fresh, `${HOST_METRIC_NAMES.batchDuration}_count`, { pipeline: name })).toBe(0);
      expect(sum(fresh, `${HOST_METRIC_NAMES.recordDelay}_count`, { pipeline: name })).toBe(0);
      expect(sum(fresh, HOST_METRIC_NAMES.pipelinePaused, { pipeline: name })).toBe(0);
    }

    const ready = await waitUntil(
      '/readyz answers 200',
      async () => {
        const answer = await get('/readyz');
        return answer.status === 200 ? answer : undefined;
      },
      90_000,
      250,
    );
    const body = JSON.parse(ready.text) as {
      ready: boolean;
      state: string;
      pipelines: Record<string, { joined: boolean; database: string }>;
    };
    expect(body).toMatchObject({ ready: true, state: 'Running' });
    for (const name of PIPELINE_NAMES) expect(body.pipelines[name]).toMatchObject({ joined: true, failed: false, database: 'ok' });
    // The container health check can ask the endpoint instead of reading heartbeat files.
    const check = await runCli(['healthcheck', '--http', '--ready'], endpointEnv);
    expect(check).toMatchObject({ code: 0, stdout: `healthy: ${base}/readyz answered 200\n` });

    // A run: good rows, duplicates within the topic, and bad messages that become dead letters.
    const reviews = Array.from({ length: 40 }, (_, index) => ({ ...sampleReview(), review_id: `http:${index}` }));
    await produce(
      names.topics.reviews,
      jsonMessages([...reviews, ...reviews.slice(0, 5), '{"not json', { ...sampleReview(), package_name: 'com.unknown.app' }]),
    );
    await produce(
      names.topics['app-stats'],
      jsonMessages([sampleAppStats(), { ...sampleAppStats(), crawled_at: '2026-11-30T07:00:00Z' }, { score: 'five' }]),
    );
    await produce(names.topics['network-metrics'], jsonMessages([{ ...sampleNetworkMetrics(), analysis_id: randomUUID() }, '']));
    for (const name of PIPELINE_NAMES) await waitForCommittedToEnd(admin, names.groups[name], names.topics[name]);

    const tables = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, PIPELINES[name].table.name])) as Record<PipelineName, string>;
    const held = async (name: PipelineName) => {
      const rows = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${tables[name]}`);
      const letters = await pool.query<{ n: string }>('SELECT count(*) AS n FROM dead_letter_events WHERE pipeline = $1', [name]);
      return { rows: Number(rows.rows[0]?.n), letters: Number(letters.rows[0]?.n) };
    };
    const expected = Object.fromEntries(await Promise.all(PIPELINE_NAMES.map(async (name) => [name, await held(name)] as const)));
    expect(expected).toEqual({
      reviews: { rows: 40, letters: 2 },
      'app-stats': { rows: 2, letters: 1 },
      'network-metrics': { rows: 1, letters: 1 },
    });

    // Counted after COMMIT, before the offsets move: by the time the offsets are at the end, the counters are final.
    const samples = await scrape();
    for (const name of PIPELINE_NAMES) {
      const pipeline = { pipeline: name };
      const stored =
        sum(samples, HOST_METRIC_NAMES.records, { ...pipeline, outcome: 'inserted' }) +
        sum(samples, HOST_METRIC_NAMES.records, { ...pipeline, outcome: 'updated' });
      const skipped =
        sum(samples, HOST_METRIC_NAMES.records, { ...pipeline, outcome: 'skipped' }) +
        sum(samples, HOST_METRIC_NAMES.records, { ...pipeline, outcome: 'deduplicated' });
      expect({
        name,
        rows: sum(samples, HOST_METRIC_NAMES.records, { ...pipeline, outcome: 'inserted' }),
        letters: sum(samples, HOST_METRIC_NAMES.records, { ...pipeline, outcome: 'dead_lettered' }),
      }).toEqual({
        name,
        ...expected[name],
      });
      const produced = name === 'reviews' ? 47 : name === 'app-stats' ? 3 : 2;
      expect(stored + skipped + (expected[name]?.letters ?? 0)).toBe(produced);
      expect(sum(samples, HOST_METRIC_NAMES.batches, { ...pipeline, result: 'stored' })).toBeGreaterThanOrEqual(1);
      expect(sum(samples, HOST_METRIC_NAMES.batches, { ...pipeline, result: 'failed' })).toBe(0);
      expect(sum(samples, `${HOST_METRIC_NAMES.batchDuration}_count`, pipeline)).toBe(sum(samples, HOST_METRIC_NAMES.batches, pipeline));
      expect(sum(samples, HOST_METRIC_NAMES.pipelineUp, pipeline)).toBe(1);
      // Freshness: every record produced (each carries the producer's timestamp), stored or dead-lettered,
      // seconds old at most (produced during this test).
      expect(sum(samples, `${HOST_METRIC_NAMES.recordDelay}_count`, pipeline)).toBe(produced);
      expect(sum(samples, `${HOST_METRIC_NAMES.recordDelay}_bucket`, { ...pipeline, le: '+Inf' })).toBe(produced);
      expect(sum(samples, `${HOST_METRIC_NAMES.recordDelay}_sum`, pipeline) / produced).toBeLessThan(120);
      expect(sum(samples, HOST_METRIC_NAMES.pipelinePaused, pipeline)).toBe(0);
      expect(sum(samples, HOST_METRIC_NAMES.pausedSince, pipeline)).toBe(0);
      expect(sum(samples, HOST_METRIC_NAMES.pipelineState, { ...pipeline, state: 'RUNNING' })).toBe(1);
      expect(sum(samples, HOST_METRIC_NAMES.retries, pipeline)).toBe(0);
      expect(sum(samples, HOST_METRIC_NAMES.commitFailures, pipeline)).toBe(0);
      expect(sum(samples, HOST_METRIC_NAMES.consumerCrashes, pipeline)).toBe(0);
      expect(sum(samples, HOST_METRIC_NAMES.inFlightAge, pipeline)).toBe(0);
      expect(sum(samples, HOST_METRIC_NAMES.lastStored, pipeline)).toBeGreaterThan(Date.now() / 1000 - 300);
    }
    // The lag is read in the background (every 500 ms here): the next readings show every partition at 0.
    await waitUntil(
      'a lag reading of 0 on every partition',
      async () => {
        const lagSamples = (await scrape()).filter((sample) => sample.name === HOST_METRIC_NAMES.consumerLag);
        return lagSamples.length === 9 && lagSamples.every((sample) => sample.value === 0);
      },
      30_000,
      250,
    );
    expect(
      Math.max(...(await scrape()).filter((sample) => sample.name === HOST_METRIC_NAMES.lagAge).map((sample) => sample.value)),
    ).toBeLessThan(5);
    // Default process and event-loop metrics are there too.
    expect(samples.some((sample) => sample.name === 'process_resident_memory_bytes')).toBe(true);
    expect(samples.some((sample) => sample.name === 'nodejs_eventloop_lag_seconds')).toBe(true);
    // Labels carry pipeline names, outcomes, results, states, partitions and buckets only: no content, no credentials.
    const allowed = new Set<string>([...PIPELINE_NAMES, ...RECORD_OUTCOMES, ...BATCH_RESULTS, ...PIPELINE_STATES]);
    for (const sample of samples.filter((s) => s.name.startsWith('storage_consumer_'))) {
      for (const [key, value] of Object.entries(sample.labels)) {
        if (key === 'partition') expect(value).toMatch(/^\d+$/);
        else if (key === 'le') expect(value).toMatch(/^(\+Inf|[\d.e+-]+)$/);
        else if (key === 'version') expect(value).toMatch(/^\d+\.\d+\.\d+/);
        else expect(allowed.has(value), `${sample.name} ${key}=${value}`).toBe(true);
      }
    }
    const metrics = await get('/metrics');
    expect(metrics.type).toContain('text/plain');
    expect(metrics.text).not.toContain('http:');
    expect(metrics.text).not.toContain('storage-consumer-dev');
    expect((await get('/nowhere')).status).toBe(404);
  });

  it('is not ready while PostgreSQL is stopped, and still alive', async () => {
    await pool.end();
    await database?.stop();
    database = undefined;

    const answer = await waitUntil(
      '/readyz answers 503',
      async () => {
        const response = await get('/readyz');
        return response.status === 503 ? response : undefined;
      },
      30_000,
      250,
    );
    const body = JSON.parse(answer.text) as {
      ready: boolean;
      missing: string[];
      pipelines: Record<string, { joined: boolean; database: string }>;
    };
    expect(body.ready).toBe(false);
    for (const name of PIPELINE_NAMES) {
      expect(body.pipelines[name]?.joined).toBe(true);
      expect(body.pipelines[name]?.database).not.toBe('ok');
      expect(body.missing.some((line) => line.startsWith(`${name}: database does not answer: `))).toBe(true);
      // The cause without connection details: an error code, never an address or a user.
      expect(body.pipelines[name]?.database).toMatch(/^([A-Z0-9_]+|no answer within \d+ ms)$/);
    }
    expect(answer.text).not.toContain('127.0.0.1');
    console.log(`[host-http] /readyz with PostgreSQL stopped: ${answer.text.trim()}`);
    expect((await get('/healthz')).status).toBe(200);
    const check = await runCli(['healthcheck', '--http', '--ready'], endpointEnv);
    expect(check.code).toBe(1);
    expect(check.stdout).toContain(`unhealthy: ${base}/readyz answered 503`);
    expect(check.stdout).toContain('reviews: database does not answer');
    expect((await runCli(['healthcheck', '--http'], endpointEnv)).code).toBe(0);

    host.child.kill('SIGTERM');
    expect((await host.exited).code).toBe(0);
    await expect(get('/healthz')).rejects.toThrow();
    const gone = await runCli(['healthcheck', '--http', '--json'], endpointEnv);
    expect(gone.code).toBe(1);
    expect(JSON.parse(gone.stdout)).toMatchObject({ healthy: false, url: `${base}/healthz` });
  });
});
