/**
 * `npm run bench:reconcile`: `storage-consumer reconcile` at production size, beside the host's
 * drain of the same records in the same run.
 *
 * Produces N reviews (default 1,000,000, keyed by review id over 3 partitions) to a fresh topic
 * (untimed), then:
 *  - the drain: the host (the build's, with its Node flags, reviews only) starts and the clock runs
 *    from its spawn until its group has committed every partition to its end; its peak RSS;
 *  - the reconcile: `node <HOST_NODE_FLAGS> bin/storage-consumer.js reconcile --pipeline reviews
 *    --from earliest --json`, as an operator runs it (bin/storage-consumer.js takes the build),
 *    from its spawn to its exit; its peak RSS (VmHWM, read every 100 ms) and its report, which
 *    must account for every record (0 missing, 0 wrong).
 * Reports both rates and their ratio; the last line is one JSON object. Flags: --reviews N,
 * --skip-build. KAFKA_BROKERS: that cluster (a fresh topic on it, deleted at the end), else one of
 * its own; DATABASE_URL: the server its fresh database is made on.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Admin } from 'kafkajs';
import { ensureBroker } from '../dev/kafka/broker.js';
import { installKafkajsWorkarounds } from '../kafka/kafkajs/index.js';
import { ensureTopics } from '../kafka/topics.js';
import { BENCH_ROOT, BUILT_HOST_ENTRY, HOST_NODE_FLAGS, prepareDatabase, runNpm, syntheticReview, withDatabase } from './support.js';

installKafkajsWorkarounds();

const { values: flags } = parseArgs({
  options: {
    reviews: { type: 'string', default: '1000000' },
    'skip-build': { type: 'boolean', default: false },
  },
});
const REVIEWS = Number(flags.reviews);
if (!Number.isSafeInteger(REVIEWS) || REVIEWS < 1) throw new Error(`--reviews must be a whole number >= 1, not ${flags.reviews}`);

async function peakRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const match = /VmHWM:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

async function committedToEnd(admin: Admin, group: string, topic: string, ends: ReadonlyMap<number, string>): Promise<boolean> {
  const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  return (committed?.partitions ?? []).every(({ partition, offset }) => BigInt(offset) >= BigInt(ends.get(partition) ?? '0'));
}

/** Produces the reviews in 1,000-record sends, made as they go (the bench holds no million values). */
async function produceReviews(kafka: Kafka, topic: string): Promise<void> {
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    const started = performance.now();
    for (let start = 0; start < REVIEWS; start += 1_000) {
      const messages = Array.from({ length: Math.min(1_000, REVIEWS - start) }, (_, i) => {
        const review = syntheticReview(start + i);
        return { key: String(review.review_id), value: JSON.stringify(review) };
      });
      await producer.send({ topic, messages });
      if ((start / 1_000) % 100 === 99)
        console.log(`produced ${start + 1_000} reviews (${((performance.now() - started) / 1000).toFixed(0)} s)`);
    }
  } finally {
    await producer.disconnect();
  }
}

interface Figures {
  readonly drainSeconds: number;
  readonly hostRssMb: number;
  readonly reconcileSeconds: number;
  readonly reconcileRssMb: number;
  readonly report: { records: number; stored: number; superseded: number; dead_lettered: number; missing: number; wrong: number };
}

async function run(brokers: readonly string[]): Promise<Figures> {
  return withDatabase('sc_bench_reconcile', async (url) => {
    await prepareDatabase(url);
    const kafka = new Kafka({ clientId: 'bench-reconcile', brokers: [...brokers], logLevel: logLevel.ERROR });
    const admin = kafka.admin();
    await admin.connect();
    const run = randomUUID().slice(0, 8);
    const topic = `bench-${run}-reviews`;
    const group = `bench-${run}-reviews`;
    try {
      await ensureTopics([...brokers], [{ topic, partitions: 3 }], { logger: { info: () => undefined, warn: console.warn } });
      await produceReviews(kafka, topic);
      const ends = new Map((await admin.fetchTopicOffsets(topic)).map(({ partition, high }) => [partition, high]));
      const env = {
        ...process.env,
        KAFKA_BROKERS: brokers.join(','),
        DATABASE_URL: url,
        STORAGE_PIPELINES: 'reviews',
        STORAGE_TOPIC_REVIEWS: topic,
        STORAGE_GROUP_REVIEWS: group,
        STORAGE_HEARTBEAT_DIR: path.join(BENCH_ROOT, '.data', `bench-${run}`),
        STORAGE_HTTP_PORT: '0',
        POWERTOOLS_LOG_LEVEL: 'WARN',
      };

      // The drain: from the host's spawn until its group committed every partition to its end.
      const drainStarted = performance.now();
      const host = spawn(process.execPath, [...HOST_NODE_FLAGS, path.resolve(BENCH_ROOT, BUILT_HOST_ENTRY)], {
        cwd: BENCH_ROOT,
        env,
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      const hostExited = new Promise<void>((resolve) => host.once('exit', () => resolve()));
      let drainSeconds: number;
      let hostRssMb: number;
      try {
        while (!(await committedToEnd(admin, group, topic, ends))) {
          if (host.exitCode !== null) throw new Error(`the host exited with ${host.exitCode} during the drain`);
          await sleep(100);
        }
        drainSeconds = (performance.now() - drainStarted) / 1000;
        hostRssMb = await peakRssMb(host.pid as number);
        console.log(`drain: ${REVIEWS} reviews stored and committed ${drainSeconds.toFixed(1)} s after the host was started`);
      } finally {
        host.kill('SIGTERM');
        await Promise.race([hostExited, sleep(40_000)]);
        if (host.exitCode === null) host.kill('SIGKILL');
      }

      // The reconcile, as an operator runs it.
      const reconcileStarted = performance.now();
      const child = spawn(
        process.execPath,
        [...HOST_NODE_FLAGS, 'bin/storage-consumer.js', 'reconcile', '--pipeline', 'reviews', '--from', 'earliest', '--json'],
        { cwd: BENCH_ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let stdout = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
      let code: number | null | undefined;
      const exited = new Promise<void>((resolve) =>
        child.once('exit', (exitCode) => {
          code = exitCode;
          resolve();
        }),
      );
      let reconcileRssMb = 0;
      while (code === undefined) {
        const sample = await peakRssMb(child.pid as number);
        if (Number.isFinite(sample)) reconcileRssMb = Math.max(reconcileRssMb, sample);
        await Promise.race([exited, sleep(100)]);
      }
      const reconcileSeconds = (performance.now() - reconcileStarted) / 1000;
      if (code !== 0) throw new Error(`reconcile exited with ${code}: ${stdout.slice(0, 2000)}`);
      const report = JSON.parse(stdout) as Figures['report'];
      console.log(
        `reconcile: ${report.records} records in ${reconcileSeconds.toFixed(1)} s: ${report.stored} stored, ${report.superseded} superseded, ` +
          `${report.dead_lettered} dead-lettered, ${report.missing} missing, ${report.wrong} wrong`,
      );
      return { drainSeconds, hostRssMb, reconcileSeconds, reconcileRssMb, report };
    } finally {
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.deleteGroups([group]).catch(() => undefined);
      await admin.disconnect();
    }
  });
}

async function main(): Promise<void> {
  console.log(`bench:reconcile: ${REVIEWS} reviews: the host's drain, then reconcile of the same records`);
  if (!flags['skip-build']) {
    console.log('building (npm run build)');
    await runNpm(['run', '-s', 'build']);
  }
  const cluster = await ensureBroker({ ephemeral: true, log: (line) => console.log(`[kafka] ${line}`) });
  let figures: Figures;
  try {
    figures = await run(cluster.brokers);
  } finally {
    await cluster.stop();
  }
  const drainRate = REVIEWS / figures.drainSeconds;
  const reconcileRate = figures.report.records / figures.reconcileSeconds;
  const result = {
    reviews: REVIEWS,
    drain_s: Number(figures.drainSeconds.toFixed(1)),
    drain_rows_per_s: Math.round(drainRate),
    host_peak_rss_mb: Math.round(figures.hostRssMb),
    reconcile_s: Number(figures.reconcileSeconds.toFixed(1)),
    reconcile_records_per_s: Math.round(reconcileRate),
    reconcile_to_drain: Number((reconcileRate / drainRate).toFixed(2)),
    reconcile_peak_rss_mb: Math.round(figures.reconcileRssMb),
    reconcile_records: figures.report.records,
    reconcile_missing: figures.report.missing,
    reconcile_wrong: figures.report.wrong,
  };
  console.log(
    `reconcile ${result.reconcile_records_per_s} records/s = ${result.reconcile_to_drain} x the host's drain (${result.drain_rows_per_s} reviews/s); ` +
      `peak RSS: reconcile ${result.reconcile_peak_rss_mb} MB (target < 256), host ${result.host_peak_rss_mb} MB`,
  );
  console.log(JSON.stringify(result));
}

await main();
