/**
 * The Kafka port (kafka/port.ts) on `@platformatic/kafka` (KAFKA_CLIENT=platformatic): its public
 * API only, no patch of its internals. Headers, codecs and heartbeats are the client's own.
 */
import { StorageConsumerError } from '../../shared/errors.js';
import type { KafkaClientFactory } from '../port.js';
import { platformaticAdmin } from './admin.js';
import { platformaticConnection } from './connection.js';
import { platformaticConsumer } from './consumer.js';
import { platformaticPartitionFetcher, platformaticPartitionReader } from './partition-reader.js';
import { platformaticTopicIds } from './topic-ids.js';

/** The Node versions `@platformatic/kafka` supports (its package.json's engines: >= 22.22.0 or >= 24.6.0). */
function nodeSupported(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 24 || (major === 24 && minor >= 6) || (major === 22 && minor >= 22) || major === 23;
}

/** The host's check before it consumes on platformatic: a Node the client supports, and brokers to reach. */
async function verifyPlatformatic(brokers: number): Promise<void> {
  if (!nodeSupported(process.versions.node))
    throw new StorageConsumerError(
      `KAFKA_CLIENT=platformatic needs Node >= 22.22 or >= 24.6 (@platformatic/kafka's engines); this is Node ${process.versions.node}`,
    );
  if (brokers === 0) throw new StorageConsumerError('KAFKA_CLIENT=platformatic: no brokers to reach (KAFKA_BROKERS)');
}

/** A platformatic client for the settings' cluster. */
export const platformaticClient: KafkaClientFactory = (settings, options = {}) => {
  const connection = platformaticConnection(settings, options.clientId ?? settings.clientId);
  const base = { ...connection, ...(options.retries === undefined ? {} : { retries: options.retries }) };
  return {
    name: 'platformatic',
    verify: () => verifyPlatformatic(connection.bootstrapBrokers.length),
    consumer: (consumerOptions) => platformaticConsumer(connection, consumerOptions),
    admin: () => platformaticAdmin(base),
    topicIds: () => platformaticTopicIds(base),
    partitionReader: () => platformaticPartitionReader(base),
    partitionFetcher: () => platformaticPartitionFetcher(base),
  };
};
