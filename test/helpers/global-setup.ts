import { Kafka, logLevel } from 'kafkajs';
// Every Kafka client reads (and writes) gzip, snappy, lz4 and zstd batches.
import '../../host/kafka-codecs.js';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { ensureBroker } from '../../dev/kafka/broker.js';
import type { KafkaCluster } from '../../dev/kafka/broker.js';
import { SERVER_URL } from './database.js';

/**
 * Integration tests need a real PostgreSQL and a real Kafka broker. When either is unavailable
 * they FAIL here, loudly (in CI and locally alike): a skipped integration test would report a
 * green run that proved nothing.
 *
 * Kafka: one broker for the whole run, started on a free port in a throw-away data folder (or
 * the cluster `KAFKA_BROKERS` names), handed to test files through `provide` / `inject` (see
 * `testBrokers()` in ./kafka.ts, which also declares the `kafkaBrokers` key) and stopped by the
 * returned teardown. Should this process be killed before teardown, the broker's guardian
 * process stops it.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await checkPostgres();
  let cluster: KafkaCluster;
  try {
    cluster = await ensureBroker({ ephemeral: true, log: (line) => console.log(`[kafka] ${line}`) });
    if (!cluster.started) await checkKafka(cluster.brokers);
  } catch (error) {
    throw new Error(`Integration tests need Kafka, which could not be started or reached: ${String(error)}`, {
      cause: error,
    });
  }
  project.provide('kafkaBrokers', cluster.brokers);
  return () => cluster.stop();
}

async function checkPostgres(): Promise<void> {
  const client = new pg.Client({ connectionString: SERVER_URL, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    throw new Error(
      `Integration tests need PostgreSQL at ${SERVER_URL} (set DATABASE_URL). It is unreachable: ${String(error)}`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A cluster named by `KAFKA_BROKERS` must answer now, not in the middle of a test. */
async function checkKafka(brokers: string[]): Promise<void> {
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
