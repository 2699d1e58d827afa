/**
 * The one way this project builds a kafkajs client: brokers, TLS, SASL or MSK IAM from the Kafka
 * settings, the kafkajs workarounds installed first.
 */
import { Kafka } from 'kafkajs';
import type { KafkaConfig, SASLOptions } from 'kafkajs';
import { installKafkajsWorkarounds } from './index.js';
import { mskIamTokenProvider } from '../msk-iam.js';
import type { KafkaSettings } from '../settings.js';

/** The connection part of a kafkajs configuration: who we are, where, and how we authenticate. */
export type KafkaConnection = Pick<KafkaConfig, 'clientId' | 'brokers' | 'ssl' | 'sasl'>;

/** The rest of a kafkajs configuration, chosen by each caller (log level, retries ...). */
export type KafkaClientOptions = Omit<KafkaConfig, keyof KafkaConnection> & { readonly clientId?: string };

function saslOptions(sasl: NonNullable<KafkaSettings['sasl']>): SASLOptions {
  if (sasl.mechanism === 'aws-msk-iam') {
    return { mechanism: 'oauthbearer', oauthBearerProvider: mskIamTokenProvider(sasl.region) };
  }
  // kafkajs types each user/password mechanism as its own literal; ours is one of the three.
  return { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password } as SASLOptions;
}

/**
 * How kafkajs reaches the cluster the settings name: brokers, TLS and SASL (PLAIN, SCRAM or
 * MSK IAM). Every Kafka client of the service (the host's consumers, the operations CLI, topic
 * creation) connects through this one mapping, so all of them speak the same security.
 */
export function kafkaConnection(kafka: KafkaSettings): KafkaConnection {
  return {
    clientId: kafka.clientId,
    brokers: [...kafka.brokers],
    ssl: kafka.ssl ? { rejectUnauthorized: kafka.ssl.rejectUnauthorized, ...(kafka.ssl.ca ? { ca: [kafka.ssl.ca] } : {}) } : false,
    ...(kafka.sasl ? { sasl: saslOptions(kafka.sasl) } : {}),
  };
}

/**
 * A kafkajs client for the settings' cluster, with the caller's own log level, retries, client
 * id. The kafkajs workarounds are installed first (kafka/kafkajs/): every Kafka client reads (and
 * writes) gzip, snappy, lz4 and zstd batches, and kafkajs' harmless timeout warning is dropped in
 * the process from then on.
 */
export function createKafka(kafka: KafkaSettings, options: KafkaClientOptions = {}): Kafka {
  installKafkajsWorkarounds();
  return new Kafka({ ...kafkaConnection(kafka), ...options });
}
