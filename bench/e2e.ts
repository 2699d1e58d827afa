/**
 * `npm run bench`: the host end to end, on a real broker and a real PostgreSQL.
 *
 * Produces 200,000 reviews as fast as it can while a network-metrics message is produced every
 * 200 ms; the host (a child process, as in production) ingests both. Reports:
 *  - end-to-end reviews/s: from the first produce to the last review committed in PostgreSQL;
 *  - network-metrics latency during the flood: producer send -> row committed and visible
 *    (a bench-only trigger NOTIFYs on insert; PostgreSQL delivers a notification at COMMIT);
 *  - beside it, the host's own freshness metric of the same records (storage_consumer_record_delay_seconds,
 *    scraped from its /metrics before and at the end of the flood) and whether the two agree;
 *  - the host's peak RSS (VmHWM of the process);
 *  - in the same run, the handler alone on the same records (in-process, 500-record events);
 *  - the drain: the same reviews produced first (untimed) to a fresh topic; the host starts and
 *    the clock runs from its spawn until the last review is committed (the group's committed
 *    offsets reach the end of every partition: the host commits an offset only after the rows'
 *    transaction committed, and the table is counted afterwards); in the same round, COPY of the
 *    same rows into an identical table in 500-row transactions (the pipeline's batch size), and
 *    the host's peak RSS during the drain.
 * Each figure is the median over the rounds. The last line is one JSON object for tooling.
 *
 * `--clients kafkajs,platformatic` runs the host on each Kafka client (`KAFKA_CLIENT`) in every
 * round, the order turned by one place per round, and reports the figures per client (under
 * `clients` in the JSON) beside the one handler-only rate of the run; with one client (the
 * default, kafkajs) the JSON is flat as before.
 *
 * The host is the build's (`npm run build` first), run as the Dockerfile and `npm run host` run
 * it: `node <HOST_NODE_FLAGS> dist/host/main.js`, so that its RSS and CPU are the product's,
 * without the TypeScript loader of a source run.
 *
 * Flags: --reviews N (default 200000), --interval-ms N (default 200), --rounds N (default 3),
 * --scenario flood|drain|all (default all), --clients LIST (default kafkajs: a comma list of
 * kafkajs and platformatic), --host-cpu-prof DIR (the host writes a V8 CPU
 * profile per run into DIR when it stops), --host-env NAME=VALUE (repeatable: an extra variable
 * for the host, e.g. to compare a setting; not KAFKA_CLIENT), --skip-build, --host-entry FILE (the host's entry,
 * default dist/host/main.js, e.g. another build inside the package, to compare two builds),
 * --host-node-option OPTION (repeatable: a Node or V8 option for the host's node process, after
 * the product's own flags, HOST_NODE_FLAGS in bench/support.ts).
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Admin, Message } from 'kafkajs';
import pg from 'pg';
import { freePorts } from '../dev/free-ports.js';
import { ensureBroker } from '../dev/kafka/broker.js';
import { heartbeatFile } from '../host-api/heartbeat-files.js';
import { installKafkajsWorkarounds } from '../kafka/kafkajs/index.js';
import { ensureTopics } from '../kafka/topics.js';
import { buildKafkaEvent } from '../shared/kafka-event-builder.js';
import { createPipelineHandler } from '../invoke/batch-handler.js';
import { loadSettings } from '../shared/settings.js';
import type { FreshnessComparison } from './freshness.js';
import { compareFreshness, delaysBetween, scrapeDelays } from './freshness.js';
import { decodeReview } from '../shared/contracts/reviews.js';
import type { HostKafkaClient } from './support.js';
import {
  APPS,
  BENCH_CONTEXT,
  BENCH_ROOT,
  BUILT_HOST_ENTRY,
  HOST_NODE_FLAGS,
  copyBaseline,
  copyLine,
  createCopyBaseline,
  median,
  parseClients,
  parseHostEnv,
  percentile,
  prepareDatabase,
  rotation,
  runNpm,
  syntheticReview,
  withDatabase,
} from './support.js';

// The bench's kafkajs clients read every codec and print no harmless TimeoutNegativeWarning.
installKafkajsWorkarounds();

const { values: flags } = parseArgs({
  options: {
    reviews: { type: 'string', default: '200000' },
    'interval-ms': { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
    scenario: { type: 'string', default: 'all' },
    clients: { type: 'string', default: 'kafkajs' },
    'host-cpu-prof': { type: 'string' },
    'host-env': { type: 'string', multiple: true, default: [] },
    'skip-build': { type: 'boolean', default: false },
    'host-entry': { type: 'string', default: BUILT_HOST_ENTRY },
    'host-node-option': { type: 'string', multiple: true, default: [] },
  },
});
const REVIEWS = Number(flags.reviews);
const INTERVAL_MS = Number(flags['interval-ms']);
const ROUNDS = Number(flags.rounds);
const SCENARIO = flags.scenario;
if (!['flood', 'drain', 'all'].includes(SCENARIO)) throw new Error(`--scenario must be flood, drain or all, not ${SCENARIO}`);
const HOST_NODE_ARGS = [
  ...HOST_NODE_FLAGS,
  ...flags['host-node-option'],
  ...(flags['host-cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(flags['host-cpu-prof'])] : []),
  path.resolve(flags['host-entry']),
];
const HOST_ENV = parseHostEnv(flags['host-env']);
const CLIENTS = parseClients(flags.clients);
const root = BENCH_ROOT;

async function peakRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /VmHWM:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

/** CPU seconds (user + system) the process has used so far. */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the line (11 and 12 after the command), in clock ticks (100/s on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function networkMetrics(id: string): Record<string, unknown> {
  return {
    analysis_id: id,
    package_name: 'com.example.app1',
    captured_at: new Date().toISOString(),
    duration_ms: 60000,
    packet_count: 8412,
    bytes_sent: 412330,
    bytes_received: 5120987,
    protocols: { tls: 7010, dns: 82 },
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
            topic: 'reviews',
            partition: (start / 500) % 3,
            offset: start + i,
            timestamp: Date.now(),
            key: null,
            value,
          })),
        ),
      );
    }
    const context = BENCH_CONTEXT;
    const started = performance.now();
    for (const event of events) await handler(event, context);
    const seconds = (performance.now() - started) / 1000;
    await handler.close();
    return values.length / seconds;
  });
}

interface BenchTopics {
  readonly reviews: string;
  readonly nm: string;
  readonly stats: string;
}

/** Fresh topics (3 partitions each) and groups for one scenario round. */
async function freshTopics(brokers: readonly string[]): Promise<{ run: string; topics: BenchTopics }> {
  const run = randomUUID().slice(0, 8);
  const topics = { reviews: `bench-${run}-reviews`, nm: `bench-${run}-network-metrics`, stats: `bench-${run}-app-stats` };
  await ensureTopics(
    [...brokers],
    Object.values(topics).map((topic) => ({ topic, partitions: 3 })),
    {
      logger: { info: () => undefined, warn: console.warn },
    },
  );
  return { run, topics };
}

/** The host as a child process, as in production, on `client`, with all three pipelines on `topics`. */
async function spawnHost(brokers: readonly string[], url: string, run: string, topics: BenchTopics, client: HostKafkaClient) {
  // The HTTP endpoint is on, as in production (its cost is in the RSS figure), on a free port.
  const [httpPort] = await freePorts(1);
  const host = spawn(process.execPath, HOST_NODE_ARGS, {
    cwd: root,
    env: {
      ...process.env,
      KAFKA_BROKERS: brokers.join(','),
      DATABASE_URL: url,
      STORAGE_TOPIC_REVIEWS: topics.reviews,
      STORAGE_TOPIC_NETWORK_METRICS: topics.nm,
      STORAGE_TOPIC_APP_STATS: topics.stats,
      STORAGE_GROUP_REVIEWS: `bench-${run}-reviews`,
      STORAGE_GROUP_NETWORK_METRICS: `bench-${run}-nm`,
      STORAGE_GROUP_APP_STATS: `bench-${run}-stats`,
      STORAGE_HEARTBEAT_DIR: path.join(root, '.data', `bench-${run}`),
      POWERTOOLS_LOG_LEVEL: 'WARN',
      STORAGE_HTTP_PORT: String(httpPort),
      ...HOST_ENV,
      KAFKA_CLIENT: client,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => host.on('exit', resolve));
  return {
    host,
    metricsUrl: `http://127.0.0.1:${httpPort}/metrics`,
    /** Waits until every pipeline has joined: the heartbeat files appear. */
    async joined() {
      for (let i = 0; i < 600; i += 1) {
        const beats = await Promise.all(
          ['reviews', 'network-metrics', 'app-stats'].map((p) =>
            readFile(heartbeatFile(path.join(root, '.data', `bench-${run}`), p, host.pid as number)).then(
              () => true,
              () => false,
            ),
          ),
        );
        if (beats.every(Boolean)) return;
        if (host.exitCode !== null) throw new Error(`the host exited with ${host.exitCode} while starting`);
        await sleep(100);
      }
      throw new Error('the host did not join its groups within 60 s');
    },
    /** SIGTERM, then SIGKILL after 40 s. */
    async stop() {
      host.kill('SIGTERM');
      const code = await Promise.race([exited, sleep(40_000).then(() => 'timeout' as const)]);
      if (code === 'timeout') host.kill('SIGKILL');
    },
  };
}

async function countReviews(url: string, table = 'reviews'): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n);
  } finally {
    await client.end();
  }
}

interface FloodFigures {
  readonly e2eRate: number;
  readonly latencies: readonly number[];
  readonly sent: number;
  readonly rss: number;
  readonly freshness: FreshnessComparison;
}

/** The flood: reviews produced as fast as possible while the host runs, network-metrics trickling beside them. */
async function floodRound(brokers: readonly string[], values: readonly Buffer[], client: HostKafkaClient): Promise<FloodFigures> {
  return withDatabase('sc_bench_e2e', async (url) => {
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

    const { run, topics } = await freshTopics(brokers);
    const host = await spawnHost(brokers, url, run, topics, client);
    try {
      await host.joined();
      await sleep(2000);
      const delaysBefore = await scrapeDelays(host.metricsUrl, 'network-metrics');
      const kafka = new Kafka({ clientId: 'bench', brokers: [...brokers], logLevel: logLevel.ERROR });
      const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
      await producer.connect();
      const counter = new pg.Client({ connectionString: url });
      await counter.connect();

      let flooding = true;
      const trickle = (async () => {
        while (flooding) {
          const id = randomUUID();
          sentAt.set(id, performance.now());
          // The record's CreateTime is this moment, as a producer of its own would stamp it (kafkajs
          // would stamp it when it encodes the request, after the reviews queued on this producer).
          const timestamp = String(Date.now());
          await producer.send({ topic: topics.nm, messages: [{ key: id, value: JSON.stringify(networkMetrics(id)), timestamp }] });
          await sleep(INTERVAL_MS);
        }
      })();

      // The bench's own error: its notifications wait for its event loop, busy producing the flood.
      const loopDelay = monitorEventLoopDelay({ resolution: 10 });
      loopDelay.enable();
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
        if (host.host.exitCode !== null) throw new Error(`the host exited with ${host.host.exitCode} during the flood`);
      }
      const finished = performance.now();
      flooding = false;
      await trickle;
      await sleep(1000);
      loopDelay.disable();
      const rss = await peakRssMb(host.host.pid as number);
      // The host's own freshness metric of the same records, scraped before the host stops.
      const delays = delaysBetween(delaysBefore, await scrapeDelays(host.metricsUrl, 'network-metrics'));
      const freshness = compareFreshness(latencies, delays, {
        meanMs: loopDelay.mean / 1e6,
        p99Ms: loopDelay.percentile(99) / 1e6,
      });
      console.log(`host /metrics at the end of the flood:\n${delays.lines.join('\n')}`);
      for (const line of freshness.lines) console.log(line);
      await producer.disconnect();
      await counter.end();
      console.log(
        `flood (${client}): produced ${REVIEWS} reviews in ${((produced - started) / 1000).toFixed(1)} s; all stored after ${((finished - started) / 1000).toFixed(1)} s`,
      );
      return { e2eRate: REVIEWS / ((finished - started) / 1000), latencies: [...latencies], sent: sentAt.size, rss, freshness };
    } finally {
      await host.stop();
      await listener.end();
    }
  });
}

interface DrainFigures {
  readonly rate: number;
  readonly copyRate: number;
  readonly rss: number;
  /** The host's CPU seconds from its spawn to the end of the drain. */
  readonly cpu: number;
}

/** Whether the group has committed every partition of `topic` up to its end. */
async function drained(admin: Admin, group: string, topic: string, ends: ReadonlyMap<number, string>): Promise<boolean> {
  const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  return (committed?.partitions ?? []).every(({ partition, offset }) => BigInt(offset) >= BigInt(ends.get(partition) ?? '0'));
}

/**
 * The drain: the reviews sit on a fresh topic (produced untimed), then the host starts; the clock
 * runs from its spawn until the group's committed offsets reach every partition's end. COPY of
 * the same rows into an identical table runs in the same round (alternately before and after).
 */
async function drainRound(
  brokers: readonly string[],
  reviews: readonly { key: string; value: Buffer }[],
  copyChunks: readonly string[],
  copyFirst: boolean,
  kafkaClient: HostKafkaClient,
): Promise<DrainFigures> {
  return withDatabase('sc_bench_drain', async (url) => {
    await prepareDatabase(url);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const kafka = new Kafka({ clientId: 'bench', brokers: [...brokers], logLevel: logLevel.ERROR });
    const admin = kafka.admin();
    await admin.connect();
    try {
      await createCopyBaseline(client);
      const copy = async () => {
        await client.query('CHECKPOINT');
        const started = performance.now();
        await copyBaseline(client, copyChunks);
        return REVIEWS / ((performance.now() - started) / 1000);
      };
      let copyRate = copyFirst ? await copy() : Number.NaN;

      const { run, topics } = await freshTopics(brokers);
      const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
      await producer.connect();
      for (let start = 0; start < reviews.length; start += 1000) {
        await producer.send({ topic: topics.reviews, messages: reviews.slice(start, start + 1000) });
      }
      await producer.disconnect();
      const ends = new Map((await admin.fetchTopicOffsets(topics.reviews)).map(({ partition, high }) => [partition, high]));
      await client.query('CHECKPOINT');

      const started = performance.now();
      const host = await spawnHost(brokers, url, run, topics, kafkaClient);
      let joinedAfter = Number.NaN;
      void host.joined().then(
        () => (joinedAfter = (performance.now() - started) / 1000),
        () => undefined,
      );
      let rate: number;
      let rss: number;
      let cpu: number;
      try {
        while (!(await drained(admin, `bench-${run}-reviews`, topics.reviews, ends))) {
          if (host.host.exitCode !== null) throw new Error(`the host exited with ${host.host.exitCode} during the drain`);
          await sleep(50);
        }
        const seconds = (performance.now() - started) / 1000;
        rate = REVIEWS / seconds;
        rss = await peakRssMb(host.host.pid as number);
        cpu = await cpuSeconds(host.host.pid as number);
        console.log(
          `drain (${kafkaClient}): ${REVIEWS} reviews stored and committed ${seconds.toFixed(1)} s after the host was started (all pipelines joined after ${joinedAfter.toFixed(1)} s; host CPU ${cpu.toFixed(1)} s)`,
        );
      } finally {
        await host.stop();
      }
      const stored = await countReviews(url);
      if (stored !== REVIEWS) throw new Error(`the drain committed every offset but stored ${stored} of ${REVIEWS} reviews`);
      if (!copyFirst) copyRate = await copy();
      return { rate, copyRate, rss, cpu };
    } finally {
      await admin.disconnect();
      await client.end();
    }
  });
}

/** The drain's COPY baseline: the same rows, decoded as the handler decodes them, in 500-row chunks. */
function copyChunksOf(values: readonly Buffer[]): string[] {
  const chunks: string[] = [];
  for (let start = 0; start < values.length; start += 500) {
    const lines = values.slice(start, start + 500).map((value, i) => {
      const decoded = decodeReview(value);
      if (!decoded.ok) throw new Error(`synthetic review ${start + i} does not decode: ${decoded.rejection.detail}`);
      return copyLine(decoded.message, 1 + ((start + i) % APPS), (start + i) % 3, Math.floor((start + i) / 3));
    });
    chunks.push(`${lines.join('\n')}\n`);
  }
  return chunks;
}

const round3 = (value: number) => Number(value.toFixed(3));

/** One client's figures over the rounds (medians), printed with `label` and returned for the JSON line. */
function report(
  label: string,
  floods: readonly FloodFigures[],
  drains: readonly DrainFigures[],
  handlerRate: number,
): Record<string, number> {
  let result: Record<string, number> = {};
  if (floods.length > 0) {
    const e2eRate = median(floods.map((flood) => flood.e2eRate));
    const p99s = floods.map((flood) => percentile(flood.latencies, 99));
    result = {
      ...result,
      e2e_rows_per_s: Math.round(e2eRate),
      handler_rows_per_s: Math.round(handlerRate),
      e2e_ratio: round3(e2eRate / handlerRate),
      nm_messages: median(floods.map((flood) => flood.sent)),
      nm_stored_during_run: median(floods.map((flood) => flood.latencies.length)),
      nm_p50_ms: Math.round(median(floods.map((flood) => percentile(flood.latencies, 50)))),
      nm_p95_ms: Math.round(median(floods.map((flood) => percentile(flood.latencies, 95)))),
      nm_p99_ms: Math.round(median(p99s)),
      nm_max_ms: Math.round(median(floods.map((flood) => Math.max(...flood.latencies)))),
      host_peak_rss_mb: Math.round(median(floods.map((flood) => flood.rss))),
      host_peak_rss_max_mb: Math.round(Math.max(...floods.map((flood) => flood.rss))),
      nm_freshness_metric_mean_ms: round3(median(floods.map((flood) => flood.freshness.metricMeanMs))),
      nm_freshness_metric_p99_ms: Math.round(median(floods.map((flood) => flood.freshness.metricP99Ms))),
      nm_freshness_agrees_rounds: floods.filter((flood) => flood.freshness.agrees).length,
    };
    console.log(
      `${label}end to end:   ${result.e2e_rows_per_s} reviews/s (${result.e2e_ratio} x handler-only ${result.handler_rows_per_s}/s; target >= 0.6)`,
    );
    console.log(
      `${label}nm latency:   p50 ${result.nm_p50_ms} ms, p95 ${result.nm_p95_ms} ms, p99 ${result.nm_p99_ms} ms (per round: ${p99s.map(Math.round).join(', ')}), max ${result.nm_max_ms} ms over ${result.nm_stored_during_run} messages (target p99 <= 500)`,
    );
    console.log(
      `${label}host RSS:     ${result.host_peak_rss_mb} MB peak during the flood, median of the rounds; highest round ${result.host_peak_rss_max_mb} MB (target <= 256)`,
    );
    for (const [index, flood] of floods.entries()) {
      console.log(`${label}nm latencies in send order, round ${index + 1} (ms): ${flood.latencies.map((ms) => Math.round(ms)).join(' ')}`);
    }
  }
  if (drains.length > 0) {
    const rate = median(drains.map((drain) => drain.rate));
    const copyRate = median(drains.map((drain) => drain.copyRate));
    result = {
      ...result,
      drain_rows_per_s: Math.round(rate),
      drain_copy_rows_per_s: Math.round(copyRate),
      drain_ratio: round3(median(drains.map((drain) => drain.rate / drain.copyRate))),
      handler_rows_per_s: Math.round(handlerRate),
      drain_handler_ratio: round3(rate / handlerRate),
      drain_host_peak_rss_mb: Math.round(median(drains.map((drain) => drain.rss))),
      drain_host_peak_rss_max_mb: Math.round(Math.max(...drains.map((drain) => drain.rss))),
      drain_host_cpu_s: round3(median(drains.map((drain) => drain.cpu))),
    };
    console.log(
      `${label}drain:        ${result.drain_rows_per_s} reviews/s, ${result.drain_ratio} x COPY ${result.drain_copy_rows_per_s} rows/s (target >= 0.6), ` +
        `${result.drain_handler_ratio} x the handler's fresh ${result.handler_rows_per_s}/s (target >= 0.6); host peak RSS ${result.drain_host_peak_rss_mb} MB, median of the rounds; highest round ${result.drain_host_peak_rss_max_mb} MB (target <= 256); host CPU ${result.drain_host_cpu_s} s`,
    );
  }
  return result;
}

async function main(): Promise<void> {
  console.log(
    `bench: ${REVIEWS} reviews through broker -> host (${CLIENTS.join(', ')}) -> PostgreSQL, ${ROUNDS} rounds, scenario ${SCENARIO}` +
      (SCENARIO === 'drain' ? '' : `, a network-metrics message every ${INTERVAL_MS} ms during the flood`),
  );
  const messages = Array.from({ length: REVIEWS }, (_, i) => syntheticReview(i));
  const values = messages.map((message) => Buffer.from(JSON.stringify(message)));
  const keyed = messages.map((message, i) => ({ key: String(message.review_id), value: values[i] as Buffer }));
  const copyChunks = copyChunksOf(values);
  if (!flags['skip-build']) {
    console.log('building the host (npm run build)');
    await runNpm(['run', '-s', 'build']);
  }
  const cluster = await ensureBroker({ ephemeral: true, log: (line) => console.log(`[kafka] ${line}`) });
  const floods = new Map<HostKafkaClient, FloodFigures[]>(CLIENTS.map((client) => [client, []]));
  const drains = new Map<HostKafkaClient, DrainFigures[]>(CLIENTS.map((client) => [client, []]));
  try {
    for (let round = 1; round <= ROUNDS; round += 1) {
      for (const client of rotation(CLIENTS, round)) {
        if (SCENARIO !== 'drain') floods.get(client)?.push(await floodRound(cluster.brokers, values, client));
        if (SCENARIO !== 'flood') {
          const drain = await drainRound(cluster.brokers, keyed, copyChunks, round % 2 === 0, client);
          drains.get(client)?.push(drain);
          console.log(
            `round ${round}, ${client}: drain ${drain.rate.toFixed(0)} rows/s, COPY ${drain.copyRate.toFixed(0)} rows/s ` +
              `(${(drain.rate / drain.copyRate).toFixed(3)} x COPY), host peak RSS ${drain.rss.toFixed(0)} MB, host CPU ${drain.cpu.toFixed(1)} s`,
          );
        }
      }
    }
  } finally {
    await cluster.stop();
  }
  // The handler alone on the same records, in the same run: the yardstick of the flood and the drain.
  const handlerRate = await handlerOnly(values);
  const figures = Object.fromEntries(
    CLIENTS.map((client) => [
      client,
      report(CLIENTS.length === 1 ? '' : `${client}: `, floods.get(client) ?? [], drains.get(client) ?? [], handlerRate),
    ]),
  );
  const only = CLIENTS.length === 1 ? figures[CLIENTS[0] as string] : undefined;
  console.log(
    JSON.stringify({
      reviews: REVIEWS,
      rounds: ROUNDS,
      ...(only === undefined ? { handler_rows_per_s: Math.round(handlerRate), clients: figures } : { client: CLIENTS[0], ...only }),
    }),
  );
}

await main();
