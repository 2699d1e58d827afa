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
 * Ctrl-C stops the host gracefully, then the broker and the database it started.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { ensureBroker } from '../dev/kafka/broker.js';
import { startEmbeddedPostgres } from '../dev/embedded-postgres.js';
import { forgetOwnAddresses, portVariable } from '../dev/start-env.js';
import type { EmbeddedDatabase } from '../dev/embedded-postgres.js';
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

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { [ALLOW_DEV_SQL]: { type: 'boolean' } } });
  const kafkaPort = portVariable(process.env, 'KAFKA_PORT', 9092);
  // As `npm run kafka:start` does: the broker's port + 1, so another KAFKA_PORT collides with neither.
  const controllerPort = portVariable(process.env, 'KAFKA_CONTROLLER_PORT', kafkaPort === 0 ? 0 : kafkaPort + 1);
  const postgresPort = portVariable(process.env, 'EMBEDDED_PG_PORT', 54329);
  const { ownDatabase } = await forgetOwnAddresses(process.env, { kafkaPort, postgresPort, say });
  if (loadSetting(process.env, DATABASE_URL) !== undefined && !ownDatabase && values[ALLOW_DEV_SQL] !== true) {
    throw new Error(
      'DATABASE_URL is set, and npm start would create the App API stand-in table and example apps in it (dev only). ' +
        `Unset DATABASE_URL to use the embedded PostgreSQL, or run npm start -- --${ALLOW_DEV_SQL} if that database is a throw-away one.`,
    );
  }
  const logger = createHostLogger();
  installProcessGuards(logger);
  // Validate what we can before starting anything.
  const storage = loadConsumerSettings();
  // resolveKafka says so itself when it fetches Kafka (the first run only).
  say('starting Kafka');
  const cluster = await ensureBroker({
    port: kafkaPort,
    controllerPort,
    dataDir: path.join(root, '.data/kafka'),
    log: (line) => say(line),
  });
  let database: EmbeddedDatabase | undefined;
  try {
    let url = loadSetting(process.env, DATABASE_URL);
    if (!url) {
      say('starting the embedded PostgreSQL');
      database = await startEmbeddedPostgres({
        dataDir: path.join(root, '.data/postgres'),
        port: postgresPort,
        notice: say,
      });
      // As root the data may live elsewhere than asked (see dev/embedded-postgres.ts): the real folder.
      say(`embedded PostgreSQL: data in ${database.dataDir} (remove that folder, with npm start stopped, to start afresh)`);
      url = database.url;
    }
    say('DEV ONLY: creating the App API stand-in table and example apps');
    await devSql(url);
    const migrated = await runMigrations({
      ...migrationConnection(loadSettings({ ...process.env, DATABASE_URL: url }).database),
      logger: { info: () => undefined, warn: (m) => say(m) },
    });
    say(`migrations: ${migrated.applied.length} applied, ${migrated.alreadyApplied} already there`);
    const topics = PIPELINE_NAMES.map((name) => ({ topic: storage.pipelines[name].topic, partitions: 3 }));
    // ensureTopics' own info line is an object for log collectors; here one line says it.
    const ensured = await ensureTopics(cluster.brokers, topics, { logger: { info: () => undefined, warn: (m) => say(m) } });
    say(
      ensured.created.length > 0
        ? `topics: created ${ensured.created.join(', ')} (3 partitions each)`
        : `topics: ${topics.map((t) => t.topic).join(', ')} already there`,
    );

    const env = { ...process.env, KAFKA_BROKERS: cluster.brokers.join(','), DATABASE_URL: url };
    const settings = loadHostSettings(env);
    say('');
    say(`Kafka:      ${cluster.brokers.join(',')}  (topics: ${topics.map((t) => t.topic).join(', ')})`);
    say(`PostgreSQL: ${url}`);
    say('Send messages: npm run produce:sample   (good and bad ones; watch rows and dead letters appear)');
    say(`Look:        psql "${url}" -c 'SELECT review_id, score FROM reviews'`);
    say(`CLI:         DATABASE_URL="${url}" KAFKA_BROKERS=${cluster.brokers.join(',')} npx storage-consumer verify`);
    say('             (export both in another terminal for every command; npm start takes them as its own when exported here)');
    if (settings.http.port !== 0)
      say(`Health:      http://127.0.0.1:${settings.http.port}/readyz   metrics: http://127.0.0.1:${settings.http.port}/metrics`);
    say('Stop:        Ctrl-C');
    say('');
    return await runHost(settings, { logger });
  } finally {
    say('stopping');
    await database?.stop().catch((error: unknown) => say(`embedded PostgreSQL did not stop cleanly: ${String(error)}`));
    await cluster.stop().catch((error: unknown) => say(`Kafka did not stop cleanly: ${String(error)}`));
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`[start] failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);
