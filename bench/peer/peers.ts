/**
 * The two peers of `npm run bench:peer`, each draining the same pre-produced reviews into a fresh
 * database and measured the same way: the Debezium JDBC sink on Kafka Connect (standalone, one
 * JVM) and our built host (`dist/host/main.js` on the project's Node, reviews pipeline only).
 *
 * The clock starts when the process is spawned. The table's row count is polled every 0.5 s
 * (each figure is +-0.5 s): `steady` counts from the first poll that saw a row, `whole` from the
 * spawn. Client CPU is the process's own user + system time (`/proc/<pid>/stat`), read when the
 * last row is in, before it is stopped; machine CPU is every core's busy time over the same span;
 * beside them the database's CPU (every `postgres` process of the machine: the server's backends,
 * the peer's among them, and its background workers; a process that ended within the span is not
 * counted, the peers' connections all live to the end) and the broker's, over the same span: where
 * the machine's time went.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePorts } from '../../dev/free-ports.js';
import { HOST_NODE_FLAGS } from '../support.js';
import { PEER_APPS, firstReview } from './reviews.js';

/** One drain, as both peers report it. */
export interface DrainFigures {
  readonly peer: 'debezium' | 'ours';
  /** Ours only: the Kafka client the host ran on (`KAFKA_CLIENT`). */
  readonly client?: string;
  readonly rows: number;
  readonly elapsed_s: number;
  readonly startup_s: number;
  readonly whole_rows_per_s: number;
  readonly steady_rows_per_s: number;
  readonly client_cpu_s: number;
  readonly cpu_us_per_row: number;
  readonly machine_cpu_s: number;
  /** CPU seconds of the database's processes over the span (see above), and the database's busy share of one core. */
  readonly database_cpu_s: number;
  readonly database_busy: number;
  /** CPU seconds of the broker's JVM over the span. */
  readonly broker_cpu_s: number;
  readonly peak_rss_mb: number;
  /** The first row's `reviewed_at` read back equals the produced instant. */
  readonly ts_ok: boolean;
  /** Ours only: how many events the host invoked, and their mean size (the mapping's batch size is 500). */
  readonly invocations?: number;
  readonly mean_event_records?: number;
}

/** Where the peers find everything. */
export interface DrainSetup {
  readonly root: string;
  readonly brokers: readonly string[];
  /** PostgreSQL's own address: the bench's counting and set-up connect here. */
  readonly server: URL;
  /** Where the peer's database connections go: the server itself, or the delay proxy. */
  readonly databaseAddress: { readonly host: string; readonly port: number };
  /** The broker's JVM (its CPU is measured beside the peer's). */
  readonly brokerPid: number;
  readonly records: number;
  readonly seed: number;
  readonly timeoutS: number;
  readonly log: (line: string) => void;
}

const CLOCK_TICKS = 100;

/** User + system CPU seconds of a live process. */
export async function processCpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** User + system CPU seconds of every live process named `postgres`, by pid. */
async function postgresCpuSeconds(): Promise<Map<number, number>> {
  const seconds = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    try {
      if ((await readFile(`/proc/${pid}/comm`, 'utf8')).trim() !== 'postgres') continue;
      seconds.set(pid, await processCpuSeconds(pid));
    } catch {
      // ended meanwhile
    }
  }
  return seconds;
}

/** CPU the `postgres` processes used since `before` (a process new since then counts from 0). */
async function postgresCpuSince(before: ReadonlyMap<number, number>): Promise<number> {
  let total = 0;
  for (const [pid, seconds] of await postgresCpuSeconds()) total += seconds - (before.get(pid) ?? 0);
  return total;
}

/** Busy CPU seconds of the whole machine so far (user, nice, system, irq, softirq). */
async function machineCpuSeconds(): Promise<number> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0] as string;
  const [, user, nice, system, , , irq, softirq] = line.trim().split(/\s+/).map(Number);
  return ((user as number) + (nice as number) + (system as number) + (irq as number) + (softirq as number)) / CLOCK_TICKS;
}

async function peakRssMb(pid: number): Promise<number> {
  const match = /VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

function databaseUrl(server: URL, database: string, address?: { host: string; port: number }): string {
  const url = new URL(server.toString());
  url.pathname = `/${database}`;
  if (address) {
    url.hostname = address.host;
    url.port = String(address.port);
  }
  return url.toString();
}

/** Drops and re-creates `database` on the server. */
async function recreateDatabase(server: URL, database: string): Promise<void> {
  const admin = new pg.Client({ connectionString: server.toString() });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${database}`);
  } finally {
    await admin.end();
  }
}

/** Drops `database` (the bench leaves nothing behind). */
export async function dropDatabase(server: URL, database: string): Promise<void> {
  const admin = new pg.Client({ connectionString: server.toString() });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. */
async function stopProcess(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Spawns the peer, polls `table` until it holds `records` rows, reads the CPU figures, stops
 * the peer. `failed()` is checked on every poll (the peer's own error report).
 */
async function drain(
  setup: DrainSetup,
  peer: DrainFigures['peer'],
  database: string,
  table: string,
  start: () => ChildProcess,
  failed: () => Promise<string | undefined>,
  graceMs: number,
): Promise<DrainFigures> {
  const counter = new pg.Client({ connectionString: databaseUrl(setup.server, database) });
  await counter.connect();
  const machineBefore = await machineCpuSeconds();
  const databaseBefore = await postgresCpuSeconds();
  const brokerBefore = await processCpuSeconds(setup.brokerPid);
  const began = performance.now();
  const child = start();
  let exited: string | undefined;
  child.once('exit', (code, signal) => {
    exited = `exited early (code ${code}, signal ${signal})`;
  });
  try {
    let firstAt: number | undefined;
    let firstCount = 0;
    let lastLog = began;
    for (;;) {
      const { rows } = await counter.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`);
      const count = Number(rows[0]?.n);
      const now = performance.now();
      if (firstAt === undefined && count > 0) {
        firstAt = now;
        firstCount = count;
      }
      if (count >= setup.records) {
        const cpu = await processCpuSeconds(child.pid as number);
        const rss = await peakRssMb(child.pid as number);
        const machine = (await machineCpuSeconds()) - machineBefore;
        const database = await postgresCpuSince(databaseBefore);
        const broker = (await processCpuSeconds(setup.brokerPid)) - brokerBefore;
        const elapsed = (now - began) / 1000;
        const steadySeconds = (now - (firstAt as number)) / 1000;
        const { reviewId, reviewedAt } = firstReview(setup.seed);
        const stored = await counter.query<{ at: string }>(
          `SELECT to_char(reviewed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at FROM ${table} WHERE review_id = $1`,
          [reviewId],
        );
        return {
          peer,
          rows: setup.records,
          elapsed_s: round(elapsed, 3),
          startup_s: round(((firstAt as number) - began) / 1000, 3),
          whole_rows_per_s: Math.round(setup.records / elapsed),
          steady_rows_per_s: steadySeconds > 0 ? Math.round((setup.records - firstCount) / steadySeconds) : Number.NaN,
          client_cpu_s: round(cpu, 2),
          cpu_us_per_row: round((cpu * 1e6) / setup.records, 1),
          machine_cpu_s: round(machine, 2),
          database_cpu_s: round(database, 2),
          database_busy: round(database / elapsed, 2),
          broker_cpu_s: round(broker, 2),
          peak_rss_mb: round(rss, 1),
          ts_ok: stored.rows[0]?.at === reviewedAt,
        };
      }
      const problem = exited ?? (await failed());
      if (problem !== undefined) throw new Error(`${peer}: ${problem} at ${count} of ${setup.records} rows`);
      if (now - began > setup.timeoutS * 1000)
        throw new Error(`${peer}: timeout: ${count} of ${setup.records} rows after ${setup.timeoutS} s`);
      if (now - lastLog > 5000) {
        setup.log(`${peer}: ${count} / ${setup.records} rows`);
        lastLog = now;
      }
      await sleep(500);
    }
  } finally {
    await stopProcess(child, graceMs);
    await counter.end();
  }
}

const round = (value: number, digits: number): number => Number(value.toFixed(digits));

const KIT = join(import.meta.dirname);
/** Jars Kafka Connect's worker provides itself: a copy in the plugin folder would shadow them. */
const WORKER_PROVIDED = /^(connect-api|kafka-clients|jackson-[a-z-]+|slf4j-api|lz4-java|snappy-java|zstd-jni)-[\d.]/;

/** The versions the peer runs. */
export interface PeerVersions {
  readonly kafkaConnect: string;
  readonly debezium: string;
}

function run(command: string, args: readonly string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'] });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited with ${code}`))));
  });
}

/**
 * Resolves Kafka Connect (worker classpath, `lib/`) and the Debezium JDBC sink with its runtime
 * dependencies (`plugins/debezium-connector-jdbc/`, minus the jars the worker provides) from
 * Maven Central into `cacheDir`, unless already there. Debezium serves no plugin archive for
 * the JDBC sink, so the connector jar's dependencies are copied (the kit's pom-plugin.xml).
 */
export async function resolvePeerJars(
  cacheDir: string,
  versions: PeerVersions,
  log: (line: string) => void,
): Promise<{ lib: string; plugins: string }> {
  const lib = join(cacheDir, 'lib');
  const plugins = join(cacheDir, 'plugins');
  const pluginDir = join(plugins, 'debezium-connector-jdbc');
  const versionFlags = [`-Dkafka.version=${versions.kafkaConnect}`, `-Ddebezium.version=${versions.debezium}`];
  if (!existsSync(join(lib, `connect-runtime-${versions.kafkaConnect}.jar`))) {
    log(`resolving Kafka Connect ${versions.kafkaConnect} into ${lib}`);
    await rm(lib, { recursive: true, force: true });
    await run(
      'mvn',
      [
        '-q',
        '-B',
        '-f',
        join(KIT, 'pom.xml'),
        ...versionFlags,
        'dependency:copy-dependencies',
        `-DoutputDirectory=${lib}`,
        '-DincludeScope=runtime',
      ],
      cacheDir,
    );
  }
  const connectorJar = join(pluginDir, `debezium-connector-jdbc-${versions.debezium}.jar`);
  const complete = join(pluginDir, '.complete');
  if (!existsSync(connectorJar) || !existsSync(complete)) {
    log(`resolving the Debezium JDBC sink ${versions.debezium} and its dependencies into ${pluginDir}`);
    await rm(plugins, { recursive: true, force: true });
    await run(
      'mvn',
      [
        '-q',
        '-B',
        '-f',
        join(KIT, 'pom-plugin.xml'),
        ...versionFlags,
        'dependency:copy-dependencies',
        '-DincludeScope=runtime',
        `-DoutputDirectory=${pluginDir}`,
      ],
      cacheDir,
    );
    for (const jar of await readdir(pluginDir)) if (WORKER_PROVIDED.test(jar)) await rm(join(pluginDir, jar));
    if (!(await readdir(pluginDir)).some((jar) => jar.startsWith('postgresql-')))
      throw new Error('the Debezium JDBC sink resolved without a PostgreSQL driver');
    await writeFile(complete, `${versions.debezium}\n`);
  }
  return { lib, plugins };
}

/** How the Debezium peer runs. */
export interface DebeziumOptions {
  readonly jars: { readonly lib: string; readonly plugins: string };
  readonly topic: string;
  readonly database: string;
  /** `unnest` (Debezium's fastest PostgreSQL path), `batch` or `rewrite` (the kit's modes). */
  readonly mode: 'unnest' | 'batch' | 'rewrite';
  readonly javaOptions: readonly string[];
}

/**
 * The Debezium JDBC sink on Kafka Connect standalone, 3 tasks, batch 500, into a pre-created
 * `peer_reviews` (the kit's peer_reviews.sql: our column types, no schema evolution), with a
 * fresh connector name (so a fresh consumer group) per run.
 */
export async function drainDebezium(setup: DrainSetup, options: DebeziumOptions): Promise<DrainFigures> {
  await recreateDatabase(setup.server, options.database);
  const tableClient = new pg.Client({ connectionString: databaseUrl(setup.server, options.database) });
  await tableClient.connect();
  await tableClient.query(await readFile(join(KIT, 'peer_reviews.sql'), 'utf8'));
  await tableClient.end();

  const runDir = await mkdtemp(join(tmpdir(), 'peer-bench-connect-'));
  const runId = `${Date.now()}`;
  const [restPort] = await freePorts(1);
  // Placeholders are filled on property lines only (the comments name them too).
  const fill = (text: string, values: Record<string, string>) =>
    text
      .split('\n')
      .map((line) => (line.startsWith('#') ? line : line.replace(/@([A-Z_]+)@/g, (whole, name: string) => values[name] ?? whole)))
      .join('\n');
  const worker = fill(await readFile(join(KIT, 'worker.properties'), 'utf8'), {
    BROKERS: setup.brokers.join(','),
    PLUGINS: options.jars.plugins,
    OFFSETS: join(runDir, 'connect.offsets'),
    REST_PORT: String(restPort),
  });
  const connector = fill(await readFile(join(KIT, 'jdbc-sink.properties'), 'utf8'), {
    RUN_ID: runId,
    TOPIC: options.topic,
    DB_ADDRESS: `${setup.databaseAddress.host}:${setup.databaseAddress.port}`,
    DB: options.database,
    URL_PARAMS: options.mode === 'rewrite' ? '?reWriteBatchedInserts=true' : '',
    UNNEST: String(options.mode === 'unnest'),
  });
  if (/@[A-Z_]+@/.test(worker.replace(/^#.*$/gm, '') + connector.replace(/^#.*$/gm, '')))
    throw new Error('a placeholder of the Connect properties was left unfilled');
  await writeFile(join(runDir, 'worker.properties'), worker);
  await writeFile(join(runDir, 'jdbc-sink.properties'), connector);
  const logFile = join(runDir, 'connect.log');
  const { openSync, closeSync } = await import('node:fs');
  const out = openSync(logFile, 'w');
  try {
    return await drain(
      setup,
      'debezium',
      options.database,
      'peer_reviews',
      () =>
        spawn(
          'java',
          [
            ...options.javaOptions,
            '-Duser.timezone=UTC',
            '-Dorg.jboss.logging.provider=slf4j',
            '-Dorg.slf4j.simpleLogger.showDateTime=true',
            '-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS',
            '-cp',
            `${options.jars.lib}/*`,
            'org.apache.kafka.connect.cli.ConnectStandalone',
            join(runDir, 'worker.properties'),
            join(runDir, 'jdbc-sink.properties'),
          ],
          { stdio: ['ignore', out, out] },
        ),
      async () => ((await readFile(logFile, 'utf8')).includes('Task is being killed') ? `a sink task failed (log: ${logFile})` : undefined),
      30_000,
    );
  } catch (error) {
    const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-30).join('\n');
    throw new Error(`${(error as Error).message}\n--- ${logFile} (tail) ---\n${tail}`, { cause: error });
  } finally {
    closeSync(out);
    // The log stays only when the run failed (above, its tail is in the error).
    await rm(runDir, { recursive: true, force: true });
  }
}

/** How our host runs. */
export interface OursOptions {
  readonly topic: string;
  readonly database: string;
  /** Extra environment for the host, e.g. STORAGE_DB_POOL_MAX; its `KAFKA_CLIENT` names the client in the figures. */
  readonly env: Readonly<Record<string, string>>;
  /** Extra node options, e.g. --cpu-prof. */
  readonly nodeOptions: readonly string[];
  /** The host's entry point (the build's `dist/host/main.js`). */
  readonly entry: string;
  /** Where to keep a copy of the host's log (stdout and stderr) after the drain, e.g. to read `--trace-gc-nvp`. */
  readonly keepLog?: string;
}

/**
 * Our built host, reviews pipeline only, on the project's Node (`node_modules/.bin/node`, the
 * Dockerfile's entry point `dist/host/main.js`), into a fresh database with the App API stand-in,
 * the 50 peer-bench apps (ids 1..50) and our migrations, with a fresh consumer group per run.
 */
export async function drainOurs(setup: DrainSetup, options: OursOptions): Promise<DrainFigures> {
  await recreateDatabase(setup.server, options.database);
  const url = databaseUrl(setup.server, options.database);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(await readFile(join(setup.root, 'dev', 'app-api-stand-in.sql'), 'utf8'));
    await client.query(
      `INSERT INTO apps_registry_application (id, package_name, is_active)
       SELECT g, 'com.peerbench.app' || g, true FROM generate_series(1, ${PEER_APPS}) AS g`,
    );
  } finally {
    await client.end();
  }
  const { runMigrations } = await import('../../shared/migrations/run.js');
  await runMigrations({ connection: { connectionString: url }, logger: { info: () => undefined, warn: () => undefined } });

  const runDir = await mkdtemp(join(tmpdir(), 'peer-bench-host-'));
  const [httpPort] = await freePorts(1);
  const logFile = join(runDir, 'host.log');
  const { openSync, closeSync } = await import('node:fs');
  const out = openSync(logFile, 'w');
  try {
    const figures = await drain(
      setup,
      'ours',
      options.database,
      'reviews',
      () =>
        spawn(join(setup.root, 'node_modules', '.bin', 'node'), [...HOST_NODE_FLAGS, ...options.nodeOptions, options.entry], {
          cwd: setup.root,
          stdio: ['ignore', out, out],
          env: {
            ...process.env,
            DATABASE_URL: databaseUrl(setup.server, options.database, setup.databaseAddress),
            KAFKA_BROKERS: setup.brokers.join(','),
            STORAGE_PIPELINES: 'reviews',
            STORAGE_TOPIC_REVIEWS: options.topic,
            STORAGE_GROUP_REVIEWS: `peer-bench-ours-${Date.now()}`,
            STORAGE_HEARTBEAT_DIR: runDir,
            STORAGE_HTTP_PORT: String(httpPort),
            STORAGE_MIGRATE_ON_START: 'false',
            ...options.env,
          },
        }),
      async () => undefined,
      30_000,
    );
    // The host's own per-batch log lines: how big the events it invoked were.
    const sizes: number[] = [];
    for (const line of (await readFile(logFile, 'utf8')).split('\n')) {
      if (!line.includes('"batch stored"')) continue;
      const records = (JSON.parse(line) as { records?: unknown }).records;
      if (typeof records === 'number') sizes.push(records);
    }
    const invoked = sizes.reduce((sum, size) => sum + size, 0);
    return {
      ...figures,
      ...(options.env.KAFKA_CLIENT === undefined ? {} : { client: options.env.KAFKA_CLIENT }),
      invocations: sizes.length,
      mean_event_records: sizes.length > 0 ? round(invoked / sizes.length, 1) : Number.NaN,
    };
  } catch (error) {
    const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-20).join('\n');
    throw new Error(`${(error as Error).message}\n--- ${logFile} (tail) ---\n${tail}`, { cause: error });
  } finally {
    closeSync(out);
    if (options.keepLog !== undefined) await copyFile(logFile, options.keepLog);
    await rm(runDir, { recursive: true, force: true });
  }
}
