/**
 * The Kafka client of this process, chosen by the Kafka settings' `client`:
 * kafkajs by default, `@platformatic/kafka` with KAFKA_CLIENT=platformatic.
 * The host, the CLI and the topic helpers build their clients here only.
 */
import { kafkajsClient } from './kafkajs/client.js';
import { verifyKafkajsWorkarounds } from './kafkajs/index.js';
import { isKafkajsTimeoutWarning } from './kafkajs/warnings.js';
import { platformaticClient } from './platformatic/client.js';
import type { KafkaClient, KafkaClientFactory, KafkaClientName, KafkaClientOptions } from './port.js';
import type { KafkaSettings } from './settings.js';

/** The client the settings name (`kafkajs` when they name none). */
function clientOf(settings: KafkaSettings): KafkaClientName {
  return settings.client ?? 'kafkajs';
}

/** Each client: how it is built, and the host's check before it consumes. */
const CLIENTS: Readonly<
  Record<KafkaClientName, { readonly create: KafkaClientFactory; readonly verify: (settings: KafkaSettings) => Promise<void> }>
> = {
  kafkajs: { create: kafkajsClient, verify: verifyKafkajsWorkarounds },
  platformatic: { create: platformaticClient, verify: (settings) => platformaticClient(settings).verify() },
};

/** A client of the kind the settings name, for their cluster. */
export function createKafkaClient(settings: KafkaSettings, options?: KafkaClientOptions): KafkaClient {
  return CLIENTS[clientOf(settings)].create(settings, options);
}

/** The host's check before it consumes: the chosen client can do what the host needs; rejects naming what is wrong. */
export function verifyKafkaClient(settings: KafkaSettings): Promise<void> {
  return CLIENTS[clientOf(settings)].verify(settings);
}

/** A process warning a Kafka client causes and that says nothing (kafkajs' negative timeout on Node 24). */
export function isHarmlessClientWarning(warning: Error): boolean {
  return isKafkajsTimeoutWarning(warning);
}
