/**
 * A frozen broker (its JVM stopped with SIGSTOP) under a running host, on a broker of this file's
 * own (the run's shared broker is never frozen): `/metrics` answers within 1 s throughout (it
 * never waits for Kafka), `/readyz` says not ready once the bound passed, and ready again by
 * itself after SIGCONT. A real Prometheus (Debian's `prometheus` package, which brings
 * `promtool`) scrapes the host with a 2 s timeout: its `up` stays 1 during the freeze, and
 * `promtool check metrics` has nothing to say about the host's metrics.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker } from '../../dev/kafka/broker.js';
import type { StartedBroker } from '../../dev/kafka/broker.js';
import { freePorts } from '../../dev/free-ports.js';
import { HOST_METRIC_NAMES } from '../../host/metrics.js';
import { ensureTopics, TOPIC_PARTITIONS } from '../../kafka/topics.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  killChildProcesses,
  spawnHost,
  temporaryDirectory,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { PipelineNames } from '../helpers/host.js';
import { sampleNetworkMetrics } from '../helpers/messages.js';

const PROMETHEUS = '/usr/bin/prometheus';
const PROMTOOL = '/usr/bin/promtool';
const installed = spawnSync(PROMETHEUS, ['--version']).status === 0 && spawnSync(PROMTOOL, ['--version']).status === 0;
if (!installed) {
  // As with PgBouncer: a developer without the package is told; CI (.ci/run installs it) fails.
  if (process.env.CI)
    throw new Error(`Prometheus is not installed (Debian package "prometheus": ${PROMETHEUS}, ${PROMTOOL}); .ci/run installs it`);
  console.log('[frozen-broker] Prometheus is not installed (apt-get install prometheus): the Prometheus part is skipped');
}

let schema: TestSchema;
let broker: StartedBroker | undefined;
let frozen = false;
const children: ChildProcess[] = [];
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'frozenbroker');
  broker = await startBroker({ ephemeral: true, heapMb: 256, log: (text) => console.log(`[frozen-broker kafka] ${text}`) });
});

afterAll(async () => {
  if (frozen && broker) process.kill(broker.pid, 'SIGCONT');
  await killAllHosts();
  // Prometheus stops on SIGTERM (it flushes its head block); SIGKILL only for one that does not.
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const timer = setTimeout(resolve, 10_000);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
  await killChildProcesses(children);
  for (const cleanup of cleanups) await cleanup();
  await broker?.stop();
  await schema?.drop();
});

async function pipelines(kafkaBrokers: string[]): Promise<PipelineNames> {
  const run = `frozen-${randomBytes(4).toString('hex')}`;
  const topics = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, `${run}-${name}`])) as Record<PipelineName, string>;
  const groups = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, `${run}.${name}`])) as Record<PipelineName, string>;
  await ensureTopics(
    kafkaBrokers,
    PIPELINE_NAMES.map((name) => ({ topic: topics[name], partitions: TOPIC_PARTITIONS })),
    { logger: { info: () => undefined, warn: (text) => console.warn(text) } },
  );
  return { topics, groups };
}

/** Starts Prometheus from a temporary config, scraping `target` every 2 s with a 2 s timeout. */
async function startPrometheus(target: string): Promise<{ base: string; query(expr: string): Promise<number | undefined> }> {
  const folder = await temporaryDirectory('prometheus-');
  cleanups.push(folder.remove);
  const [port] = await freePorts(1);
  const config = join(folder.path, 'prometheus.yml');
  await writeFile(
    config,
    [
      'global:',
      '  scrape_interval: 2s',
      '  scrape_timeout: 2s',
      'scrape_configs:',
      '  - job_name: storage-consumer',
      '    static_configs:',
      `      - targets: ['${target}']`,
      '',
    ].join('\n'),
  );
  const child = spawn(
    PROMETHEUS,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(folder.path, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { cwd: folder.path, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(child);
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString('utf8')));
  const base = `http://127.0.0.1:${port}`;
  const query = async (expr: string) => {
    const response = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await response.json()) as { data?: { result?: Array<{ value: [number, string] }> } };
    const value = body.data?.result?.[0]?.value[1];
    return value === undefined ? undefined : Number(value);
  };
  await waitUntil(
    `Prometheus to scrape the host (log: ${log})`,
    async () => (await query('up{job="storage-consumer"}')) === 1,
    60_000,
    500,
  );
  return { base, query };
}

describe('the host while its broker is frozen', () => {
  it('answers every scrape within 1 s, is not ready after the bound, and ready again after SIGCONT; Prometheus keeps up at 1', async () => {
    // Prepare
    const started = broker as StartedBroker;
    const names = await pipelines(started.brokers);
    const unreadyMs = 5_000;
    const [port] = await freePorts(1);
    const heartbeats = await temporaryDirectory('frozen-broker-');
    cleanups.push(heartbeats.remove);
    const host = spawnHost({
      ...hostEnvironment({
        databaseUrl: schema.url,
        names,
        heartbeatDir: heartbeats.path,
        extra: {
          STORAGE_HTTP_PORT: String(port),
          STORAGE_HTTP_HOST: '127.0.0.1',
          STORAGE_FETCH_UNREADY_AFTER_MS: String(unreadyMs),
          STORAGE_FETCH_FAIL_AFTER_MS: '600000',
          STORAGE_LAG_INTERVAL_MS: '2000',
          STORAGE_LAG_TIMEOUT_MS: '1000',
        },
      }),
      KAFKA_BROKERS: started.brokers.join(','),
    });
    const base = `http://127.0.0.1:${port}`;
    const get = async (path: string) => {
      const began = performance.now();
      const response = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(30_000) });
      const text = await response.text();
      return { status: response.status, text, ms: performance.now() - began };
    };
    await waitUntil('/readyz answers 200', async () => (await get('/readyz')).status === 200, 120_000, 250);
    const kafka = new Kafka({ clientId: 'frozen-broker-test', brokers: started.brokers, logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    cleanups.push(() => admin.disconnect());
    const producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    await producer.send({
      topic: names.topics['network-metrics'],
      acks: -1,
      messages: jsonMessages([{ ...sampleNetworkMetrics(), analysis_id: randomUUID() }]),
    });
    await producer.disconnect();
    await waitForCommittedToEnd(admin, names.groups['network-metrics'], names.topics['network-metrics']);
    const prometheus = installed ? await startPrometheus(`127.0.0.1:${port}`) : undefined;
    if (installed) {
      // promtool reads the exposition from stdin and prints nothing for metrics it has no remark on.
      const exposition = (await get('/metrics')).text;
      const lint = spawnSync(PROMTOOL, ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
      expect({ status: lint.status, stdout: lint.stdout, stderr: lint.stderr }).toEqual({ status: 0, stdout: '', stderr: '' });
    }

    // Act: freeze the broker's JVM
    process.kill(started.pid, 'SIGSTOP');
    frozen = true;
    const frozenAt = Date.now();
    const scrapes: number[] = [];
    let notReadyAt: number | undefined;
    let notReadyBody = '';
    while (Date.now() - frozenAt < unreadyMs + 20_000) {
      const metrics = await get('/metrics');
      expect(metrics.status).toBe(200);
      scrapes.push(metrics.ms);
      const ready = await get('/readyz');
      const body = JSON.parse(ready.text) as { pipelines: Record<string, { state: string }> };
      if (
        notReadyAt === undefined &&
        ready.status === 503 &&
        PIPELINE_NAMES.every((name) => body.pipelines[name]?.state === 'NOT_FETCHING')
      ) {
        notReadyAt = Date.now();
        notReadyBody = ready.text.trim();
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const metricsWhileFrozen = (await get('/metrics')).text;
    const freezeSeconds = Math.floor((Date.now() - frozenAt) / 1000);
    const upDuringFreeze = await prometheus?.query(`min_over_time(up{job="storage-consumer"}[${freezeSeconds}s])`);
    const slowestPrometheusScrape = await prometheus?.query(
      `max_over_time(scrape_duration_seconds{job="storage-consumer"}[${freezeSeconds}s])`,
    );
    process.kill(started.pid, 'SIGCONT');
    frozen = false;
    const thawedAt = Date.now();

    // Assess: every scrape within 1 s; not ready after the bound; Prometheus never lost the target
    const slowest = Math.max(...scrapes);
    console.log(
      `[frozen-broker] ${scrapes.length} scrapes while frozen, slowest ${slowest.toFixed(1)} ms, median ${[...scrapes].sort((a, b) => a - b)[Math.floor(scrapes.length / 2)]?.toFixed(1)} ms; ` +
        `not ready ${notReadyAt === undefined ? 'never' : `${notReadyAt - frozenAt} ms`} after the freeze: ${notReadyBody}`,
    );
    console.log(
      `[frozen-broker] /metrics while frozen (storage_consumer_ lines):\n${metricsWhileFrozen
        .split('\n')
        .filter(
          (text) =>
            text.startsWith('storage_consumer_pipeline_up') ||
            text.startsWith('storage_consumer_lag_age') ||
            text.startsWith('storage_consumer_consumer_crashes'),
        )
        .join('\n')}`,
    );
    expect(slowest).toBeLessThan(1_000);
    expect(notReadyAt).toBeDefined();
    expect((notReadyAt as number) - frozenAt).toBeGreaterThanOrEqual(unreadyMs - 1_000);
    expect(metricsWhileFrozen).toContain(`${HOST_METRIC_NAMES.pipelineUp}{pipeline="reviews"} 0`);
    if (installed) {
      console.log(
        `[frozen-broker] Prometheus: min_over_time(up[${freezeSeconds}s]) = ${upDuringFreeze}, max scrape_duration_seconds = ${slowestPrometheusScrape}`,
      );
      expect(upDuringFreeze).toBe(1);
      expect(slowestPrometheusScrape).toBeLessThan(2);
    }

    // Assess: ready again by itself, and consuming
    await waitUntil('/readyz answers 200 after SIGCONT', async () => (await get('/readyz')).status === 200, 120_000, 500);
    console.log(`[frozen-broker] ready again ${Date.now() - thawedAt} ms after SIGCONT`);
    const after = kafka.producer({ allowAutoTopicCreation: false });
    await after.connect();
    await after.send({ topic: names.topics.reviews, acks: -1, messages: jsonMessages([{ review_id: 'x' }]) });
    await after.disconnect();
    // A client made after the thaw: the test's own admin connections went through the freeze too.
    const thawed = kafka.admin();
    await thawed.connect();
    cleanups.push(() => thawed.disconnect());
    await waitForCommittedToEnd(thawed, names.groups.reviews, names.topics.reviews).catch(async (error: unknown) => {
      // Name what the broker and the host did after the thaw (fencing, coordinator moves, commit failures).
      const log = await readFile(started.logFile, 'utf8').catch(() => '(no broker log)');
      const lines = log.split('\n').filter((line) => /fenc|coordinator|GroupCoordinator|leader|ERROR|WARN/i.test(line));
      const hostLines = host.lines.filter((line) => line.level !== 'INFO' || /commit|join|rebalanc/i.test(String(line.message)));
      throw new Error(
        `${String(error)}\n--- ${started.logFile}, the lines on fencing, coordinators, leaders, errors (last 40) ---\n` +
          `${lines.slice(-40).join('\n')}\n--- the host's WARN/ERROR and group lines (last 30) ---\n` +
          hostLines
            .slice(-30)
            .map((line) => JSON.stringify(line))
            .join('\n'),
      );
    });
    host.child.kill('SIGTERM');
    expect((await host.exited).code).toBe(0);
    // A 25 s freeze, Prometheus' start and the recovery: more than the default 120 s on a loaded machine.
  }, 300_000);
});
