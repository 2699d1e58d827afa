/**
 * Client-neutral connection helpers: the client id a host's members carry, and the settings of a
 * plaintext broker list (kafka/kafkajs/connection.ts and kafka/platformatic/connection.ts map the
 * settings onto their client).
 */
import { hostname } from 'node:os';
import type { KafkaSettings } from './settings.js';

/**
 * The client id of a host's consumers: `KAFKA_CLIENT_ID` plus this machine's name and process
 * id (`storage-consumer-host-1-4242`), so two members on one machine (two hosts, or the dev
 * stack and a host) are told apart in `lag` and `status`, which the broker's `clientHost` alone
 * cannot do.
 */
export function memberClientId(clientId: string, machine: string = hostname(), pid: number = process.pid): string {
  return `${clientId}-${machine}-${pid}`;
}

/** Settings for a plaintext broker list without authentication: the dev stack's and tests' brokers. */
export function plaintextKafka(brokers: readonly string[], clientId = 'storage-consumer'): KafkaSettings {
  return { brokers: [...brokers], clientId, ssl: undefined, sasl: undefined };
}
