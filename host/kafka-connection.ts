import type { KafkaConfig, SASLOptions } from 'kafkajs';
import type { KafkaSettings } from './settings.js';

/**
 * How kafkajs reaches the cluster the settings name: brokers, TLS and SASL. The host's
 * consumers and the operations CLI both connect through this, so both speak the same security.
 */
export function kafkaConnection(kafka: KafkaSettings): Pick<KafkaConfig, 'clientId' | 'brokers' | 'ssl' | 'sasl'> {
  const sasl: SASLOptions | undefined = kafka.sasl
    ? ({ mechanism: kafka.sasl.mechanism, username: kafka.sasl.username, password: kafka.sasl.password } as SASLOptions)
    : undefined;
  return {
    clientId: kafka.clientId,
    brokers: [...kafka.brokers],
    ssl: kafka.ssl ? { rejectUnauthorized: kafka.ssl.rejectUnauthorized, ...(kafka.ssl.ca ? { ca: [kafka.ssl.ca] } : {}) } : false,
    ...(sasl ? { sasl } : {}),
  };
}
