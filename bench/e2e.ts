/**
 * `npm run bench`: the host end to end, on a real broker and a real PostgreSQL.
 *
 * Produces 200,000 reviews as fast as it can while a network-metrics message is produced every
 * 200 ms; the host (a child process, as in production) ingests both. Reports:
 *  - end-to-end reviews/s: from the first produce to the last review committed in PostgreSQL;
 *  - network-metrics latency during the flood: producer send -> row committed and visible
 *    (a bench-only trigger NOTIFYs on insert; PostgreSQL delivers a notification at COMMIT);
 *  - the host's peak RSS (VmHWM of the process);
 *  - in the same run, the handler alone on the same records (in-process, 500-record events).
 * The last line is one JSON object for tooling.
 *
 * Flags: --reviews N (default 200000), --interval-ms N (default 200).
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Message } from 'kafkajs';
import pg from 'pg';
import { ensureBroker } from '../dev/kafka/broker.js';
import { ensureTopics } from '../host/topics.js';
import { buildKafkaEvent } from '../shared/kafka-event-builder.js';
import { createPipelineHandler } from '../shared/lambda-handler.js';
import { loadSettings } from '../shared/settings.js';
import { percentile, prepareDatabase, withDatabase } from './support.js';
import { syntheticReview } from './support.js';

const { values: flags } = parseArgs({
  options: { reviews: { type: 'string', default: '200000' }, 'interval-ms': { type: 'string', default: '200' } },
});
const REVIEWS = Number(flags.reviews);
const INTERVAL_MS = Number(flags['interval-ms']);
const root = path.resolve(import.meta.dirname, '..');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function peakRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /VmHWM:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

function networkMetrics(id: string): Record<string, unknown> {
  return {
    analysis_id: id, package_name: 'com.example.app1', captured_at: new Date().toISOString(), duration_ms: 60000,
    packet_count: 8412, bytes_sent: 412330, bytes_received: 5120987, protocols: { tls: 7010, dns: 82 },
  };
}

async function handlerOnly(values: readonly Buffer[]): Promise<number> {
  return withDatabase('sc_bench_handler_only', async (url) => {
    await prepareDatabase(url);
    const handler = createPipelineHandler('reviews', {
      settings: loadSettings({ DATABASE_URL: url }),
      logger: new Logger({ serviceName: 'bench', logLevel: 'WARN' }),
    });
    const events = [];
    for (let start = 0; start < values.length; start += 500) {
      events.push(
        buildKafkaEvent(
          values.slice(start, start + 500).map((value, i) => ({
            topic: 'reviews', partition: (start / 500) % 3, offset: start + i, timestamp: Date.now(), key: null, value,
          })),
        ),
      );
    }
    const context = {
      callbackWaitsForEmptyEventLoop: false, functionName: 'bench', functionVersion: '1', invokedFunctionArn: 'arn:bench',
      memoryLimitInMB: '1024', awsRequestId: 'bench', logGroupName: 'bench', logStreamName: 'bench',
      getRemainingTimeInMillis: () => 900_000, done: () => undefined, fail: () => undefined, succeed: () => undefined,
    };
    const started = performance.now();
    for (const event of events) await handler(event, context);
    const seconds = (performance.now() - started) / 1000;
    await handler.close();
    return values.length / seconds;
  });
}

async function main(): Promise<void> {
  console.log(`bench: ${REVIEWS} reviews through broker -> host -> PostgreSQL, a network-metrics message every ${INTERVAL_MS} ms`);
  const values = Array.from({ length: REVIEWS }, (_, i) => Buffer.from(JSON.stringify(syntheticReview(i))));
  const cluster = await ensureBroker({ ephemeral: true, log: (line) => console.log(`[kafka] ${line}`) });
  try {
    const figures = await withDatabase('sc_bench_e2e', async (url) => {
      await prepareDatabase(url);
      const listener = new pg.Client({ connectionString: url });
      await listener.connect();
      // Bench only: a NOTIFY per network-metrics row, delivered when its transaction commits.
      await listener.query(`
        CREATE FUNCTION bench_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('nm_stored', NEW.analysis_id::text); RETURN NEW; END $$;
        CREATE TRIGGER bench_notify AFTER INSERT ON network_metrics FOR EACH ROW EXECUTE FUNCTION bench_notify();
        LISTEN nm_stored;`);
      const sentAt = new Map<string, number>();
      const latencies: number[] = [];
      listener.on('notification', (message) => {
        const sent = message.payload ? sentAt.get(message.payload) : undefined;
        if (sent !== undefined) latencies.push(performance.now() - sent);
      });

      const run = randomUUID().slice(0, 8);
      const topics = { reviews: `bench-${run}-reviews`, nm: `bench-${run}-network-metrics`, stats: `bench-${run}-app-stats` };
      await ensureTopics(cluster.brokers, Object.values(topics).map((topic) => ({ topic, partitions: 3 })), {
        logger: { info: () => undefined, warn: console.warn },
      });
      const host = spawn(process.execPath, ['--max-semi-space-size=4', '--import', 'tsx', 'host/main.ts'], {
        cwd: root,
        env: {
          ...process.env,
          KAFKA_BROKERS: cluster.brokers.join(','),
          DATABASE_URL: url,
          STORAGE_TOPIC_REVIEWS: topics.reviews,
          STORAGE_TOPIC_NETWORK_METRICS: topics.nm,
          STORAGE_TOPIC_APP_STATS: topics.stats,
          STORAGE_GROUP_REVIEWS: `bench-${run}-reviews`,
          STORAGE_GROUP_NETWORK_METRICS: `bench-${run}-nm`,
          STORAGE_GROUP_APP_STATS: `bench-${run}-stats`,
          STORAGE_HEARTBEAT_DIR: path.join(root, '.data', `bench-${run}`),
          POWERTOOLS_LOG_LEVEL: 'WARN',
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      const exited = new Promise<number | null>((resolve) => host.on('exit', resolve));
      try {
        // Wait until every pipeline has joined: the heartbeat files appear.
        for (let i = 0; i < 600; i += 1) {
          const beats = await Promise.all(['reviews', 'network-metrics', 'app-stats'].map((p) =>
            readFile(path.join(root, '.data', `bench-${run}`, `${p}.heartbeat`)).then(() => true, () => false)));
          if (beats.every(Boolean)) break;
          await sleep(100);
        }
        await sleep(2000);
        const kafka = new Kafka({ clientId: 'bench', brokers: cluster.brokers, logLevel: logLevel.ERROR });
        const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
        await producer.connect();
        const counter = new pg.Client({ connectionString: url });
        await counter.connect();

        let flooding = true;
        const trickle = (async () => {
          while (flooding) {
            const id = randomUUID();
            sentAt.set(id, performance.now());
            await producer.send({ topic: topics.nm, messages: [{ key: id, value: JSON.stringify(networkMetrics(id)) }] });
            await sleep(INTERVAL_MS);
          }
        })();

        const started = performance.now();
        const chunk = 1000;
        for (let start = 0; start < values.length; start += chunk) {
          const messages: Message[] = values.slice(start, start + chunk).map((value) => ({ value }));
          await producer.send({ topic: topics.reviews, messages });
        }
        const produced = performance.now();
        let stored = 0;
        while (stored < REVIEWS) {
          await sleep(50);
          stored = Number((await counter.query<{ n: string }>('SELECT count(*) AS n FROM reviews')).rows[0]?.n);
          if (host.exitCode !== null) throw new Error(`the host exited with ${host.exitCode} during the flood`);
        }
        const finished = performance.now();
        flooding = false;
        await trickle;
        await sleep(1000);
        const rss = await peakRssMb(host.pid as number);
        await producer.disconnect();
        await counter.end();
        console.log(`produced ${REVIEWS} reviews in ${((produced - started) / 1000).toFixed(1)} s; all stored after ${((finished - started) / 1000).toFixed(1)} s`);
        return {
          e2eRate: REVIEWS / ((finished - started) / 1000),
          latencies: [...latencies],
          sent: sentAt.size,
          rss,
        };
      } finally {
        host.kill('SIGTERM');
        const code = await Promise.race([exited, sleep(40_000).then(() => 'timeout' as const)]);
        if (code === 'timeout') host.kill('SIGKILL');
        await listener.end();
      }
    });
    const handlerRate = await handlerOnly(values);
    const result = {
      reviews: REVIEWS,
      e2e_rows_per_s: Math.round(figures.e2eRate),
      handler_rows_per_s: Math.round(handlerRate),
      e2e_ratio: Number((figures.e2eRate / handlerRate).toFixed(3)),
      nm_messages: figures.sent,
      nm_stored_during_run: figures.latencies.length,
      nm_p50_ms: Math.round(percentile(figures.latencies, 50)),
      nm_p95_ms: Math.round(percentile(figures.latencies, 95)),
      nm_p99_ms: Math.round(percentile(figures.latencies, 99)),
      nm_max_ms: Math.round(Math.max(...figures.latencies)),
      host_peak_rss_mb: Math.round(figures.rss),
    };
    console.log(`end to end:   ${result.e2e_rows_per_s} reviews/s (${result.e2e_ratio} x handler-only ${result.handler_rows_per_s}/s; target >= 0.6)`);
    console.log(`nm latency:   p50 ${result.nm_p50_ms} ms, p95 ${result.nm_p95_ms} ms, p99 ${result.nm_p99_ms} ms, max ${result.nm_max_ms} ms over ${result.nm_stored_during_run} messages (target p99 <= 500)`);
    console.log(`host RSS:     ${result.host_peak_rss_mb} MB peak (target <= 256)`);
    console.log(`nm latencies in send order (ms): ${figures.latencies.map((ms) => Math.round(ms)).join(" ")}`);
    console.log(JSON.stringify(result));
  } finally {
    await cluster.stop();
  }
}

await main();
