/**
 * `npm start`: the whole service on embedded defaults, for a newcomer's first run.
 *
 * 1. A Kafka broker: `KAFKA_BROKERS` if set, else a single-node KRaft broker started from the
 *    project's Maven cache (data in `.data/kafka`, port `KAFKA_PORT`, default 9092, controller
 *    port `KAFKA_CONTROLLER_PORT`, default the port + 1).
 * 2. PostgreSQL: `DATABASE_URL` if set, else an embedded server (data in `.data/postgres`, or as
 *    root where the module says; port `EMBEDDED_PG_PORT`, default 54329).
 *    The two values the banner prints for the CLI (`KAFKA_BROKERS`, `DATABASE_URL` of this dev
 *    stack) count as unset when exported: they name what npm start itself starts.
 * 3. DEV ONLY: the App API stand-in table and three example apps; then the migrations. Into a
 *    `DATABASE_URL` of your own only with `npm start -- --allow-dev-sql`: without it, a set
 *    `DATABASE_URL` is refused before anything starts (it might be a real database).
 * 4. Every pipeline's topic (3 partitions each), then the host with every pipeline.
 *
 * Ctrl-C or a SIGTERM (the npm script `exec`s node, and npm runs scripts through bash, so npm's
 * relay reaches this process) stops the host gracefully, then the broker and the database it
 * started: exit 0. A stop during the start stops what has started so far once the step in
 * progress ends (exit 0). When a pipeline fails, the host stops (exit 1) but the broker and the
 * database stay up, and it says so, for the failed-pipeline runbooks, until a stop signal
 * (exit 1 then). One npm start per clone: `.data/npm-start.json` names the holder (dev/stack-lock.ts).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { ensureBroker } from '../dev/kafka/broker.js';
import { startEmbeddedPostgres } from '../dev/embedded-postgres.js';
import { forgetOwnAddresses, portVariable } from '../dev/start-env.js';
import type { EmbeddedDatabase } from '../dev/embedded-postgres.js';
import type { KafkaCluster } from '../dev/kafka/broker.js';
import { lockStack } from '../dev/stack-lock.js';
import type { StackLock } from '../dev/stack-lock.js';
import { runHost } from '../host/run.js';
import { loadHostSettings } from '../config/host-settings.js';
import { installProcessGuards } from '../host/process-guards.js';
import { createHostLogger } from '../host/supervisor.js';
import { ensureTopics } from '../kafka/topics.js';
import { migrationConnection, runMigrations } from '../shared/migrations/index.js';
import { PIPELINE_NAMES } from '../shared/pipelines.js';
import { loadSettings } from '../shared/settings.js';
import { loadSetting } from '../shared/setting.js';
import { DATABASE_URL } from '../shared/setting-declarations.js';
import { loadConsumerSettings } from '../config/pipeline-settings.js';

const root = path.resolve(import.meta.dirname, '..');
const say = (line: string) => console.log(`[start] ${line}`);

async function devSql(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(await readFile(path.join(root, 'dev/app-api-stand-in.sql'), 'utf8'));
    await client.query(await readFile(path.join(root, 'dev/sample-apps.sql'), 'utf8'));
  } finally {
    await client.end();
  }
}

/** The flag that lets `npm start` write its dev-only SQL into a database it did not start. */
const ALLOW_DEV_SQL = 'allow-dev-sql';

/** The Node major npm start runs on: the Lambda runtime's (nodejs24.x), as the bin requires. */
const REQUIRED_NODE_MAJOR = 24;

/** A Ctrl-C reaches npm and this process at once, and npm relays it: one key press, several SIGINTs. */
const RELAYED_SIGINT_MS = 500;

/** A stop asked for while the stack starts: what started is stopped, nothing failed (exit 0). */
class StopRequested extends Error {
  override readonly name = 'StopRequested';
}

/**
 * SIGTERM and SIGINT as npm start sees them. While the host runs, `runHost` acts on them (a
 * graceful stop, a second one gives up) and this only records that a stop was asked for; before
 * and after it, the first one stops the stack once the step in progress is done, and a second one
 * exits at once (the guardians then stop PostgreSQL and Kafka).
 */
function watchStopSignals() {
  let first: { signal: NodeJS.Signals; at: number } | undefined;
  let hostRunning = false;
  let asked!: (signal: NodeJS.Signals) => void;
  const stopAsked = new Promise<NodeJS.Signals>((resolve) => (asked = resolve));
  const onSignal = (signal: NodeJS.Signals) => {
    if (first === undefined) {
      first = { signal, at: performance.now() };
      if (!hostRunning) say(`${signal} received: stopping what npm start started`);
      asked(signal);
    } else if (!hostRunning && !(signal === 'SIGINT' && performance.now() - first.at < RELAYED_SIGINT_MS)) {
      say(`second ${signal}: exiting now; the guardian processes stop PostgreSQL and Kafka`);
      process.exit(1);
    }
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, onSignal);
  return {
    /** Resolves with the first stop signal. */
    stopAsked,
    requested: () => first !== undefined,
    /** After a start-up step: a stop asked for meanwhile ends the start (what started is stopped). */
    check(): void {
      if (first !== undefined) throw new StopRequested();
    },
    set hostRunning(running: boolean) {
      hostRunning = running;
    },
  };
}

/** The lines that say where the dev stack answers and how to reach it from another terminal. */
function addresses(brokers: readonly string[], url: string, topics: readonly string[]): string[] {
  return [
    `Kafka:      ${brokers.join(',')}  (topics: ${topics.join(', ')})`,
    `PostgreSQL: ${url}`,
    `Look:        psql "${url}" -c 'SELECT review_id, score FROM reviews'`,
    `CLI:         DATABASE_URL="${url}" KAFKA_BROKERS=${brokers.join(',')} npx storage-consumer verify`,
    '             (export both in another terminal for every command; npm start takes them as its own when exported here)',
  ];
}

async function main(signals: ReturnType<typeof watchStopSignals>): Promise<number> {
  const major = Number(process.versions.node.split('.')[0]);
  if (major !== REQUIRED_NODE_MAJOR) {
    throw new Error(
      `npm start runs on Node ${REQUIRED_NODE_MAJOR} (the Lambda runtime's major), not ${process.version}: run it as npm start, ` +
        `which puts the project's own Node ${REQUIRED_NODE_MAJOR} (the node dev dependency, npm ci) first on the PATH`,
    );
  }
  const { values } = parseArgs({ options: { [ALLOW_DEV_SQL]: { type: 'boolean' } } });
  const kafkaPort = portVariable(process.env, 'KAFKA_PORT', 9092);
  // As `npm run kafka:start` does: the broker's port + 1, so another KAFKA_PORT collides with neither.
  const controllerPort = portVariable(process.env, 'KAFKA_CONTROLLER_PORT', kafkaPort === 0 ? 0 : kafkaPort + 1);
  const postgresPort = portVariable(process.env, 'EMBEDDED_PG_PORT', 54329);
  const lock = await lockStack(path.join(root, '.data'));
  try {
    const { ownDatabase } = await forgetOwnAddresses(process.env, { kafkaPort, postgresPort, say });
    if (loadSetting(process.env, DATABASE_URL) !== undefined && !ownDatabase && values[ALLOW_DEV_SQL] !== true) {
      throw new Error(
        'DATABASE_URL is set, and npm start would create the App API stand-in table and example apps in it (dev only). ' +
          `Unset DATABASE_URL to use the embedded PostgreSQL, or run npm start -- --${ALLOW_DEV_SQL} if that database is a throw-away one.`,
      );
    }
    return await runStack({ kafkaPort, controllerPort, postgresPort }, signals, lock);
  } catch (error) {
    if (error instanceof StopRequested) return 0;
    throw error;
  } finally {
    await lock.release();
  }
}

async function runStack(
  ports: { kafkaPort: number; controllerPort: number; postgresPort: number },
  signals: ReturnType<typeof watchStopSignals>,
  lock: StackLock,
): Promise<number> {
  const logger = createHostLogger();
  installProcessGuards(logger);
  // Validate what we can before starting anything.
  const storage = loadConsumerSettings();
  let cluster: KafkaCluster | undefined;
  let database: EmbeddedDatabase | undefined;
  try {
    // resolveKafka says so itself when it fetches Kafka (the first run only).
    say('starting Kafka');
    cluster = await ensureBroker({
      port: ports.kafkaPort,
      controllerPort: ports.controllerPort,
      dataDir: path.join(root, '.data/kafka'),
      log: (line) => say(line),
    });
    signals.check();
    let url = loadSetting(process.env, DATABASE_URL);
    if (!url) {
      say('starting the embedded PostgreSQL');
      database = await startEmbeddedPostgres({
        dataDir: path.join(root, '.data/postgres'),
        port: ports.postgresPort,
        notice: say,
      });
      signals.check();
      // As root the data may live elsewhere than asked (see dev/embedded-postgres.ts): the real folder.
      say(`embedded PostgreSQL: data in ${database.dataDir} (remove that folder, with npm start stopped, to start afresh)`);
      url = database.url;
    }
    say('DEV ONLY: creating the App API stand-in table and example apps');
    await devSql(url);
    signals.check();
    const migrated = await runMigrations({
      ...migrationConnection(loadSettings({ ...process.env, DATABASE_URL: url }).database),
      logger: { info: () => undefined, warn: (m) => say(m) },
    });
    signals.check();
    say(`migrations: ${migrated.applied.length} applied, ${migrated.alreadyApplied} already there`);
    const topics = PIPELINE_NAMES.map((name) => ({ topic: storage.pipelines[name].topic, partitions: 3 }));
    // ensureTopics' own info line is an object for log collectors; here one line says it.
    const ensured = await ensureTopics(cluster.brokers, topics, { logger: { info: () => undefined, warn: (m) => say(m) } });
    signals.check();
    say(
      ensured.created.length > 0
        ? `topics: created ${ensured.created.join(', ')} (3 partitions each)`
        : `topics: ${topics.map((t) => t.topic).join(', ')} already there`,
    );

    const env = { ...process.env, KAFKA_BROKERS: cluster.brokers.join(','), DATABASE_URL: url };
    const settings = loadHostSettings(env);
    const names = topics.map((t) => t.topic);
    say('');
    for (const line of addresses(cluster.brokers, url, names)) say(line);
    say('Send messages: npm run produce:sample   (good and bad ones; watch rows and dead letters appear)');
    if (settings.http.port !== 0)
      say(`Health:      http://127.0.0.1:${settings.http.port}/readyz   metrics: http://127.0.0.1:${settings.http.port}/metrics`);
    say(`Stop:        Ctrl-C (or kill ${process.pid})`);
    say('');
    await lock.update({ state: 'running', kafka: cluster.brokers.join(','), postgres: url });
    signals.check();
    signals.hostRunning = true;
    const code = await runHost(settings, { logger });
    signals.hostRunning = false;
    if (code === 0 || signals.requested() || (!cluster.started && database === undefined)) return code;
    // A pipeline failed: the stack stays up, so that the runbooks' next commands (verify, migrate,
    // psql) reach it, until a stop signal.
    await lock.update({ state: `its host stopped at ${new Date().toISOString()} after a failed pipeline; the stack is kept up` });
    const kept = [cluster.started && 'Kafka', database !== undefined && 'PostgreSQL'].filter(Boolean).join(' and ');
    say('');
    say(`The host stopped with exit ${code}: a pipeline failed (its "pipeline failed" line above says why).`);
    say(`${kept} keep running, for the failed-pipeline runbooks (docs/operations.md, "Recovering the dev stack after a failed pipeline"):`);
    for (const line of addresses(cluster.brokers, url, names)) say(`  ${line}`);
    say(`Stop them:   Ctrl-C (or kill ${process.pid}); npm start then exits ${code}. Fix the cause, then npm start again:`);
    say('             the batch that failed was never committed, so it is stored then.');
    // Nothing else may keep this process alive while it waits (the broker's JVM is unref'd).
    const keepAlive = setInterval(() => undefined, 60_000);
    await signals.stopAsked;
    clearInterval(keepAlive);
    return code;
  } finally {
    signals.hostRunning = false;
    if (cluster?.started === true || database !== undefined) say('stopping');
    await database?.stop().catch((error: unknown) => say(`embedded PostgreSQL did not stop cleanly: ${String(error)}`));
    await cluster?.stop().catch((error: unknown) => say(`Kafka did not stop cleanly: ${String(error)}`));
  }
}

const signals = watchStopSignals();
main(signals).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`[start] failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);
