/**
 * The Kafka port (kafka/port.ts) on kafkajs, the default client: one kafkajs client per
 * {@link kafkajsClient}, its workarounds installed first (./index.ts).
 */
import { logLevel } from 'kafkajs';
import type { KafkaClientFactory } from '../port.js';
import { kafkajsAdmin } from './admin.js';
import { createKafka } from './connection.js';
import { kafkajsConsumer } from './consumer.js';
import { verifyKafkajsWorkarounds } from './index.js';
import { kafkaLogging } from './log-adapter.js';
import { kafkajsPartitionFetcher } from './partition-fetcher.js';
import { kafkajsPartitionReader } from './partition-reader.js';
import { kafkajsTopicIds } from './topic-ids.js';

/** A kafkajs client for the settings' cluster: its log lines (WARN and up) to `options.logger`, or none. */
export const kafkajsClient: KafkaClientFactory = (settings, options = {}) => {
  const clientId = options.clientId ?? settings.clientId;
  const kafka = createKafka(settings, {
    clientId,
    ...(options.logger === undefined ? { logLevel: logLevel.NOTHING } : kafkaLogging(options.logger)),
    ...(options.retries === undefined ? {} : { retry: { retries: options.retries } }),
  });
  return {
    name: 'kafkajs',
    verify: () => verifyKafkajsWorkarounds(),
    consumer: (consumerOptions) => kafkajsConsumer(kafka, consumerOptions),
    admin: () => kafkajsAdmin(kafka.admin()),
    topicIds: () => kafkajsTopicIds(kafka),
    partitionReader: () => kafkajsPartitionReader(kafka, `${clientId}-peek`),
    partitionFetcher: () => kafkajsPartitionFetcher(kafka),
  };
};
