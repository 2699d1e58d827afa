/**
 * `npm run bench:peer`: our host beside the system a user would pick instead, the Debezium JDBC
 * sink on Kafka Connect, on the same machine, broker and PostgreSQL (the kit of bench/peer/,
 * from ../shared/peer-bench; bench/peer/README.md says what is fair and why).
 *
 * Starts its own broker (dev/kafka, jars from KAFKA_CACHE_DIR), resolves Kafka Connect and the
 * Debezium JDBC sink from Maven Central into .cache/peer-bench (once), builds the host
 * (`npm run build`), produces N reviews (default 200,000, 3 partitions, the same rows in each
 * peer's format) once, then per scenario runs alternating pairs (Debezium then ours, ours then
 * Debezium, ...) of full drains from the backlog, each with a fresh consumer group and a fresh
 * database (`peerbench`, `oursbench`):
 *  - `local`: the peers talk to PostgreSQL directly;
 *  - `remote`: both talk to it through the same TCP proxy (bench/peer/delay-proxy.ts) that delays
 *    every chunk by --delay-ms (0.5) each way: a 1 ms round trip, as RDS in the same zone. The
 *    round trip the proxy really adds is measured (SELECT 1, median) and printed.
 * With `--clients kafkajs,platformatic` each pair drains once per client (`KAFKA_CLIENT`) beside
 * Debezium, the order turned by one place per pair (D K P, K P D, P D K, ...), and every client's
 * ratios are to the Debezium drain of the same pair; the clients' own per-pair ratios to the first
 * one are given too.
 * Per drain: steady rows/s (from the first stored row), whole-run rows/s (from the spawn),
 * client CPU seconds and CPU microseconds per row, machine CPU seconds (and of it PostgreSQL's and the
 * broker's), peak RSS. Per scenario:
 * the medians of each peer, and the medians of the per-pair ratios ours / Debezium. The last
 * line is one JSON object. Stops everything it started (JVMs, the broker, the proxy) and drops
 * both databases, also on failure.
 *
 * Flags: --records N (200000), --pairs N (2), --scenario local|remote|all (all), --delay-ms X
 * (0.5), --mode unnest|batch|rewrite (unnest), --clients LIST (kafkajs: the Kafka clients our host
 * runs on, a comma list of kafkajs and platformatic), --host-env NAME=VALUE (repeatable, for our
 * host; not KAFKA_CLIENT), --host-node-option OPTION (repeatable: a Node or V8 option for our host's node process, after
 * the product's own flags, HOST_NODE_FLAGS in bench/support.ts; not for the baseline's), --host-cpu-prof DIR (our host writes a V8 CPU profile per drain into DIR),
 * --host-log-dir DIR (keeps each drain's host log, stdout and stderr, as DIR/<scenario>-pair<N>-ours|baseline.log, e.g.
 * to read a --host-node-option=--trace-gc-nvp),
 * --skip-build, --host-entry FILE (our host's entry, default dist/host/main.js, e.g. an older build
 * to compare), --only ours|debezium (drains one peer only, e.g. to profile; no ratios), --baseline-entry FILE
 * (with --only ours and one client: each pair also drains this entry, in alternating order, and the per-pair ratios
 * are ours / the baseline: a change measured against the build before it). Environment: DATABASE_URL (the server, default postgres://postgres@127.0.0.1:5432/postgres),
 * KAFKA_CACHE_DIR, PEER_BENCH_CACHE_DIR (.cache/peer-bench).
 */
import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startBroker } from '../dev/kafka/broker.js';
import { installKafkajsWorkarounds } from '../kafka/kafkajs/index.js';
import { ensureTopics } from '../kafka/topics.js';
import type { DrainFigures, DrainSetup } from './peer/peers.js';
import { dropDatabase, drainDebezium, drainOurs, processCpuSeconds, resolvePeerJars } from './peer/peers.js';
import { produceReviews } from './peer/reviews.js';
import type { HostKafkaClient } from './support.js';
import { BENCH_ROOT, BUILT_HOST_ENTRY, median, parseHostEnv, parseClients, rotation, runNpm, serverUrl } from './support.js';

installKafkajsWorkarounds();

const { values: flags } = parseArgs({
  options: {
    records: { type: 'string', default: '200000' },
    pairs: { type: 'string', default: '2' },
    scenario: { type: 'string', default: 'all' },
    'delay-ms': { type: 'string', default: '0.5' },
    mode: { type: 'string', default: 'unnest' },
    clients: { type: 'string', default: 'kafkajs' },
    'host-env': { type: 'string', multiple: true, default: [] },
    'host-cpu-prof': { type: 'string' },
    'host-log-dir': { type: 'string' },
    'host-node-option': { type: 'string', multiple: true, default: [] },
    'skip-build': { type: 'boolean', default: false },
    only: { type: 'string' },
    'host-entry': { type: 'string', default: BUILT_HOST_ENTRY },
    'baseline-entry': { type: 'string' },
  },
});
const RECORDS = Number(flags.records);
const PAIRS = Number(flags.pairs);
const DELAY_MS = Number(flags['delay-ms']);
const MODE = flags.mode as 'unnest' | 'batch' | 'rewrite';
const SCENARIOS = flags.scenario === 'all' ? (['local', 'remote'] as const) : ([flags.scenario] as const);
if (!Number.isSafeInteger(RECORDS) || RECORDS < 1) throw new Error('--records must be a positive integer');
if (!Number.isSafeInteger(PAIRS) || PAIRS < 1) throw new Error('--pairs must be a positive integer');
if (!(DELAY_MS >= 0)) throw new Error('--delay-ms must be a number >= 0');
if (!['unnest', 'batch', 'rewrite'].includes(MODE)) throw new Error('--mode must be unnest, batch or rewrite');
if (flags.only !== undefined && flags.only !== 'ours' && flags.only !== 'debezium') throw new Error('--only must be ours or debezium');
if (flags['baseline-entry'] !== undefined && flags.only !== 'ours') throw new Error('--baseline-entry needs --only ours');
for (const scenario of SCENARIOS)
  if (scenario !== 'local' && scenario !== 'remote') throw new Error('--scenario must be local, remote or all');
const CLIENTS = parseClients(flags.clients);
if (flags['baseline-entry'] !== undefined && CLIENTS.length > 1)
  throw new Error('--baseline-entry measures one client: give one in --clients');
const HOST_ENV = parseHostEnv(flags['host-env']);
const VERSIONS = { kafkaConnect: '4.1.1', debezium: '3.5.0.Final' };
const SEED = 42;
const ROOT = BENCH_ROOT;
const PEER_DATABASE = 'peerbench';
const OURS_DATABASE = 'oursbench';
const TOPICS = { debezium: 'peer-reviews', ours: 'ours-reviews' };

const log = (line: string): void => console.error(`[bench:peer] ${line}`);

/** The delay proxy in its own process (its CPU is in neither peer's figure); resolves with its port. */
async function startProxy(server: URL): Promise<{ port: number; cpuSeconds: () => Promise<number>; stop(): Promise<void> }> {
  const child = spawn(
    path.join(ROOT, 'node_modules', '.bin', 'node'),
    [
      '--import',
      'tsx',
      'bench/peer/delay-proxy.ts',
      '--target',
      `${server.hostname}:${server.port || '5432'}`,
      '--delay-ms',
      String(DELAY_MS),
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the delay proxy exited with ${code}`)));
    child.stdout.once('data', (data: Buffer) => resolve((JSON.parse(data.toString('utf8')) as { port: number }).port));
  });
  return {
    port,
    cpuSeconds: () => processCpuSeconds(child.pid as number),
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Median `SELECT 1` round trip in ms on a new connection to host:port. */
async function roundTripMs(server: URL, port: number): Promise<number> {
  const url = new URL(server.toString());
  url.port = String(port);
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  const times: number[] = [];
  try {
    for (let i = 0; i < 200; i += 1) {
      const started = performance.now();
      await client.query('SELECT 1');
      times.push(performance.now() - started);
    }
  } finally {
    await client.end();
  }
  return median(times);
}

const round = (value: number, digits = 3): number => Number(value.toFixed(digits));

/** A drain's name in a pair: `debezium`, or the client our host ran on. */
const nameOf = (drain: DrainFigures): string => (drain.peer === 'debezium' ? 'debezium' : (drain.client as string));

/** The medians of one peer's drains. */
function medians(runs: readonly DrainFigures[]) {
  const m = (key: keyof DrainFigures) => median(runs.map((run) => run[key] as number));
  return {
    steady_rows_per_s: Math.round(m('steady_rows_per_s')),
    whole_rows_per_s: Math.round(m('whole_rows_per_s')),
    client_cpu_s: round(m('client_cpu_s'), 2),
    cpu_us_per_row: round(m('cpu_us_per_row'), 1),
    machine_cpu_s: round(m('machine_cpu_s'), 2),
    database_cpu_s: round(m('database_cpu_s'), 2),
    database_busy: round(m('database_busy'), 2),
    broker_cpu_s: round(m('broker_cpu_s'), 2),
    startup_s: round(m('startup_s'), 2),
    peak_rss_mb: round(m('peak_rss_mb'), 1),
    ...(runs[0]?.peer === 'ours' ? { mean_event_records: round(m('mean_event_records'), 1) } : {}),
  };
}

/** Per pair, `ours[i] / theirs[i]` of each figure: the median of the pairs' ratios and each pair's. */
function pairRatios(ours: readonly DrainFigures[], theirs: readonly DrainFigures[]) {
  const ratio = (key: keyof DrainFigures) => {
    const each = ours.map((run, i) => (run[key] as number) / ((theirs[i] as DrainFigures)[key] as number));
    return { median: round(median(each)), pairs: each.map((value) => round(value)) };
  };
  return {
    steady: ratio('steady_rows_per_s'),
    whole: ratio('whole_rows_per_s'),
    client_cpu: ratio('client_cpu_s'),
    machine_cpu: ratio('machine_cpu_s'),
    peak_rss: ratio('peak_rss_mb'),
  };
}

/**
 * Per-peer medians and per-pair ratios, and every drain: `clients` has each client's medians, its
 * ratios to Debezium and (after the first client) to the first client; with one client `ours` and
 * `ratios` are its medians and its ratios to Debezium, as before there were clients to compare.
 */
function summarise(drains: readonly DrainFigures[][]) {
  const of = (name: string) => drains.map((pair) => pair.find((drain) => nameOf(drain) === name) as DrainFigures);
  const debezium = of('debezium');
  const first = of(CLIENTS[0] as string);
  const clients = Object.fromEntries(
    CLIENTS.map((client, index) => [
      client,
      {
        ...medians(of(client)),
        ratios: pairRatios(of(client), debezium),
        vs_first: index === 0 ? undefined : { client: CLIENTS[0] as string, ...pairRatios(of(client), first) },
      },
    ]),
  );
  return {
    debezium: medians(debezium),
    ...(CLIENTS.length === 1 ? { ours: medians(first), ratios: pairRatios(first, debezium) } : {}),
    clients,
    ts_ok: drains.every((pair) => pair.every((drain) => drain.ts_ok)),
    drains,
  };
}

async function main(): Promise<void> {
  const server = new URL(serverUrl());
  const cacheDir = path.resolve(process.env.PEER_BENCH_CACHE_DIR ?? path.join(ROOT, '.cache', 'peer-bench'));
  await mkdir(cacheDir, { recursive: true });
  const jars = await resolvePeerJars(cacheDir, VERSIONS, log);
  if (!flags['skip-build']) {
    log('building the host (npm run build)');
    await runNpm(['run', '-s', 'build']);
  }
  const broker = await startBroker({ ephemeral: true, log });
  const cleanups: Array<() => Promise<void>> = [() => broker.stop()];
  const results: Record<string, unknown> = {};
  try {
    await ensureTopics(
      broker.brokers,
      Object.values(TOPICS).map((topic) => ({ topic, partitions: 3 })),
      { logger: { info: () => undefined, warn: (message: string) => log(message) } },
    );
    for (const [peer, format] of [
      ['debezium', 'connect'],
      ['ours', 'raw'],
    ] as const) {
      const produced = await produceReviews(broker.brokers, TOPICS[peer], format, RECORDS, SEED);
      log(
        `produced ${produced.records} ${format} reviews (${(produced.bytes / 1e6).toFixed(1)} MB) to ${produced.topic} in ${produced.seconds.toFixed(1)} s`,
      );
    }
    cleanups.push(
      () => dropDatabase(server, PEER_DATABASE),
      () => dropDatabase(server, OURS_DATABASE),
    );

    for (const scenario of SCENARIOS) {
      let address = { host: server.hostname, port: Number(server.port || 5432) };
      let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
      let rtt: { direct_ms: number; proxied_ms: number; added_ms: number } | undefined;
      if (scenario === 'remote') {
        proxy = await startProxy(server);
        cleanups.push(proxy.stop);
        address = { host: '127.0.0.1', port: proxy.port };
        const direct = await roundTripMs(server, Number(server.port || 5432));
        const proxied = await roundTripMs(server, proxy.port);
        rtt = { direct_ms: round(direct), proxied_ms: round(proxied), added_ms: round(proxied - direct) };
        log(
          `remote: the proxy adds ${rtt.added_ms} ms to a round trip (SELECT 1 median: ${rtt.direct_ms} ms direct, ${rtt.proxied_ms} ms through it)`,
        );
      }
      const setup: DrainSetup = {
        root: ROOT,
        brokers: broker.brokers,
        server,
        databaseAddress: address,
        brokerPid: broker.pid,
        records: RECORDS,
        seed: SEED,
        timeoutS: 900,
        log,
      };
      const drains: DrainFigures[][] = [];
      const baselines: DrainFigures[] = [];
      const logDir = flags['host-log-dir'] === undefined ? undefined : path.resolve(flags['host-log-dir']);
      if (logDir !== undefined) await mkdir(logDir, { recursive: true });
      const drainOursFrom = (client: HostKafkaClient, entry: string, nodeOptions: readonly string[], label: string) =>
        drainOurs(setup, {
          topic: TOPICS.ours,
          database: OURS_DATABASE,
          env: { ...HOST_ENV, KAFKA_CLIENT: client },
          entry: path.resolve(entry),
          nodeOptions: [
            ...nodeOptions,
            ...(flags['host-cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(flags['host-cpu-prof'])] : []),
          ],
          ...(logDir === undefined ? {} : { keepLog: path.join(logDir, `${label}.log`) }),
        });
      const proxyCpuBefore = proxy ? await proxy.cpuSeconds() : 0;
      // One pair: Debezium and each client, or (--baseline-entry) the baseline build and ours.
      const baselineEntry = flags['baseline-entry'];
      const members: readonly string[] =
        baselineEntry === undefined
          ? [...(flags.only === 'ours' ? [] : ['debezium']), ...(flags.only === 'debezium' ? [] : CLIENTS)]
          : ['baseline', CLIENTS[0] as string];
      const suffix = (client: string) => (CLIENTS.length === 1 ? '' : `-${client}`);
      for (let pair = 1; pair <= PAIRS; pair += 1) {
        const figures: DrainFigures[] = [];
        for (const member of rotation(members, pair)) {
          const client = CLIENTS[0] as HostKafkaClient;
          const drain =
            member === 'debezium'
              ? await drainDebezium(setup, { jars, topic: TOPICS.debezium, database: PEER_DATABASE, mode: MODE, javaOptions: ['-Xmx1g'] })
              : member === 'baseline'
                ? await drainOursFrom(client, baselineEntry as string, [], `${scenario}-pair${pair}-baseline`)
                : await drainOursFrom(
                    member as HostKafkaClient,
                    flags['host-entry'],
                    flags['host-node-option'],
                    `${scenario}-pair${pair}-ours${suffix(member)}`,
                  );
          const name = member === 'debezium' ? 'debezium' : member === 'baseline' ? `baseline (${client})` : `ours (${member})`;
          log(
            `${scenario} pair ${pair} ${name}: steady ${drain.steady_rows_per_s} rows/s, whole ${drain.whole_rows_per_s} rows/s, ` +
              `client CPU ${drain.client_cpu_s} s (${drain.cpu_us_per_row} us/row), machine CPU ${drain.machine_cpu_s} s ` +
              `(PostgreSQL ${drain.database_cpu_s} s, busy ${drain.database_busy} of a core; broker ${drain.broker_cpu_s} s), peak RSS ${drain.peak_rss_mb} MB, start-up ${drain.startup_s} s` +
              (drain.invocations === undefined
                ? ''
                : `, ${drain.invocations} invocations of ${drain.mean_event_records} records on average`),
          );
          if (member === 'baseline') baselines.push(drain);
          else figures.push(drain);
        }
        drains.push(figures);
      }
      if (baselines.length > 0) {
        const vs = (key: keyof DrainFigures) => {
          const each = drains.map(
            (pair, i) => ((pair[0] as DrainFigures)[key] as number) / ((baselines[i] as DrainFigures)[key] as number),
          );
          return { median: round(median(each)), pairs: each.map((value) => round(value)) };
        };
        const ratios = { steady: vs('steady_rows_per_s'), client_cpu: vs('client_cpu_s'), peak_rss: vs('peak_rss_mb') };
        console.log(
          `${scenario}: ours / baseline, medians of ${baselines.length} alternated pairs: steady ${ratios.steady.median} (${ratios.steady.pairs.join(', ')}), ` +
            `client CPU ${ratios.client_cpu.median} (${ratios.client_cpu.pairs.join(', ')}), peak RSS ${ratios.peak_rss.median} (${ratios.peak_rss.pairs.join(', ')})`,
        );
        results[scenario] = { drains, baselines, vs_baseline: ratios };
        if (proxy) await proxy.stop();
        continue;
      }
      if (flags.only !== undefined) {
        results[scenario] = { drains };
        if (proxy) await proxy.stop();
        continue;
      }
      const summary = summarise(drains);
      results[scenario] = {
        ...(rtt
          ? { proxy_round_trip: rtt, proxy_cpu_s: round((await (proxy as NonNullable<typeof proxy>).cpuSeconds()) - proxyCpuBefore, 2) }
          : {}),
        ...summary,
      };
      const theirs = summary.debezium;
      for (const [client, ours] of Object.entries(summary.clients)) {
        const { ratios } = ours;
        console.log(
          `${scenario}, ${client}: steady ours ${ours.steady_rows_per_s} vs Debezium ${theirs.steady_rows_per_s} rows/s, ratio ${ratios.steady.median} (pairs ${ratios.steady.pairs.join(', ')}; goal >= 2); ` +
            `whole ratio ${ratios.whole.median}; client CPU ${ours.client_cpu_s} vs ${theirs.client_cpu_s} s, ratio ${ratios.client_cpu.median} (pairs ${ratios.client_cpu.pairs.join(', ')}; goal <= 0.25); ` +
            `ours ${ours.cpu_us_per_row} vs ${theirs.cpu_us_per_row} us/row (start-up included), peak RSS ${ours.peak_rss_mb} vs ${theirs.peak_rss_mb} MB (ours: goal <= 256); ` +
            `PostgreSQL CPU ${ours.database_cpu_s} s beside ours, ${theirs.database_cpu_s} s beside Debezium; ` +
            `broker ${ours.broker_cpu_s} vs ${theirs.broker_cpu_s} s` +
            (ours.vs_first === undefined
              ? ''
              : `; against ${ours.vs_first.client} in the same pairs: steady ${ours.vs_first.steady.median}, client CPU ${ours.vs_first.client_cpu.median}, peak RSS ${ours.vs_first.peak_rss.median}`),
        );
      }
      if (proxy) await proxy.stop();
    }
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((error: unknown) => log(`cleanup failed: ${String(error)}`));
  }
  console.log(
    JSON.stringify({
      records: RECORDS,
      pairs: PAIRS,
      partitions: 3,
      batch_size: 500,
      peer: { name: 'debezium-jdbc-sink', version: VERSIONS.debezium, kafka_connect: VERSIONS.kafkaConnect, mode: MODE, tasks: 3 },
      clients: CLIENTS,
      host_env: HOST_ENV,
      ...results,
    }),
  );
}

await main();
