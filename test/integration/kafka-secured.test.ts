/**
 * TLS and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on a real broker, for every client
 * kafka/clients.ts can build: the settings come from the real loader (KAFKA_BROKERS,
 * KAFKA_SSL_CA_FILE, KAFKA_SASL_*, KAFKA_CLIENT), the admin creates a topic and reads its offsets,
 * records produced over the secured listener are read by a consumer of the port, a wrong password
 * fails with the client's authentication error (its class names it), a CA that did not sign the
 * broker's certificate fails the TLS handshake, and so does a broker address the certificate does
 * not name (the host name is checked).
 *
 * The broker is this file's own (the run's shared broker stays plaintext): a SASL_SSL listener on
 * `localhost` beside its PLAINTEXT one, a certificate for `localhost` signed by a throwaway CA (PEM
 * files made by `openssl` in a temporary folder, `ssl.keystore.type=PEM`: no JKS), SCRAM users
 * written when the storage is formatted, PLAIN users in the listener's JAAS configuration.
 *
 * MSK IAM (SASL/OAUTHBEARER with AWS-signed tokens) cannot be reached from here: it needs an MSK
 * cluster and AWS credentials, and Apache Kafka has no validator for those tokens. Its token
 * provider and both clients' mapping of it are unit-tested (test/unit/kafka/connection.test.ts).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Producer, stringSerializers } from '@platformatic/kafka';
import { logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker } from '../../dev/kafka/broker.js';
import type { StartedBroker } from '../../dev/kafka/broker.js';
import { freePorts } from '../../dev/free-ports.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { createKafkaClient } from '../../kafka/clients.js';
import { createKafka } from '../../kafka/kafkajs/connection.js';
import { platformaticConnection } from '../../kafka/platformatic/connection.js';
import type { ConsumerPort, KafkaClientName } from '../../kafka/port.js';
import type { KafkaSettings } from '../../kafka/settings.js';
import type { SourceRecord } from '../../shared/kafka-event-builder.js';

const CLIENTS: readonly KafkaClientName[] = ['kafkajs', 'platformatic'];

/** One user per mechanism, so a login can only succeed through the mechanism under test. */
const USERS = [
  { mechanism: 'plain', username: 'plain-user', password: 'plain-secret-1' },
  { mechanism: 'scram-sha-256', username: 'scram256-user', password: 'scram256-secret-1' },
  { mechanism: 'scram-sha-512', username: 'scram512-user', password: 'scram512-secret-1' },
] as const;

let folder: string;
let broker: StartedBroker | undefined;
/** The SASL_SSL listener, as its certificate names it. */
let securedBroker: string;
let caFile: string;
let strangerCaFile: string;
const consumers: ConsumerPort[] = [];

/** `openssl` in the temporary folder; its output is only wanted when it fails. */
function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: folder, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A self-signed CA: `<name>.key`, `<name>.pem`. */
function makeCa(name: string): string {
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
  return join(folder, `${name}.pem`);
}

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), 'sc-kafka-secured-'));
  caFile = makeCa('ca');
  strangerCaFile = makeCa('stranger-ca');
  // The broker's certificate names `localhost` only: 127.0.0.1 is an address it does not name.
  await writeFile(join(folder, 'broker.ext'), 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'broker.key', '-out', 'broker.csr');
  openssl(
    'x509',
    '-req',
    '-in',
    'broker.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    'broker.ext',
    '-out',
    'broker.pem',
  );
  const keystore = join(folder, 'broker-keystore.pem');
  const pems = await Promise.all(['broker.key', 'broker.pem', 'ca.pem'].map((file) => readFile(join(folder, file), 'utf8')));
  await writeFile(keystore, pems.join(''));

  const [port, controllerPort, securedPort] = (await freePorts(3)) as [number, number, number];
  securedBroker = `localhost:${securedPort}`;
  const plainUsers = USERS.filter((user) => user.mechanism === 'plain')
    .map((user) => `user_${user.username}="${user.password}"`)
    .join(' ');
  broker = await startBroker({
    ephemeral: true,
    heapMb: 256,
    port,
    controllerPort,
    log: (text) => console.log(`[kafka-secured kafka] ${text}`),
    properties: {
      listeners: `PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort},SASL_SSL://localhost:${securedPort}`,
      'advertised.listeners': `PLAINTEXT://127.0.0.1:${port},SASL_SSL://${securedBroker}`,
      'listener.security.protocol.map': 'PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL',
      'ssl.keystore.type': 'PEM',
      'ssl.keystore.location': keystore,
      'sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
      'listener.name.sasl_ssl.plain.sasl.jaas.config': `org.apache.kafka.common.security.plain.PlainLoginModule required ${plainUsers};`,
      'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config': 'org.apache.kafka.common.security.scram.ScramLoginModule required;',
      'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config': 'org.apache.kafka.common.security.scram.ScramLoginModule required;',
    },
    scramCredentials: USERS.filter((user) => user.mechanism !== 'plain').map(
      (user) => `${user.mechanism.toUpperCase()}=[name=${user.username},password=${user.password}]`,
    ),
  });
}, 180_000);

afterAll(async () => {
  await Promise.allSettled(consumers.map((consumer) => consumer.disconnect()));
  await broker?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

/** The settings the service would load from this environment. */
function securedSettings(client: KafkaClientName, overrides: Record<string, string> = {}): KafkaSettings {
  return loadHostSettings({
    KAFKA_CLIENT: client,
    KAFKA_CLIENT_ID: `kafka-secured-${client}`,
    KAFKA_BROKERS: securedBroker,
    KAFKA_SSL_CA_FILE: caFile,
    ...overrides,
  }).kafka;
}

/** Produces `values` to partition 0 of `topic` with the client under test's own producer, through its connection mapping. */
async function produce(settings: KafkaSettings, topic: string, values: readonly string[]): Promise<void> {
  if (settings.client === 'platformatic') {
    const producer = new Producer({ ...platformaticConnection(settings), serializers: stringSerializers });
    try {
      await producer.send({ messages: values.map((value) => ({ topic, partition: 0, key: value, value })) });
    } finally {
      await producer.close();
    }
    return;
  }
  const producer = createKafka(settings, { logLevel: logLevel.NOTHING }).producer();
  await producer.connect();
  try {
    await producer.send({ topic, messages: values.map((value) => ({ partition: 0, key: value, value })) });
  } finally {
    await producer.disconnect();
  }
}

/** A consumer of the port in its own group, reading `topic` from the beginning; resolves with what it has read. */
async function consume(settings: KafkaSettings, topic: string, count: number): Promise<SourceRecord[]> {
  const records: SourceRecord[] = [];
  const port = createKafkaClient(settings).consumer({
    groupId: `kafka-secured-${randomUUID()}`,
    sessionTimeoutMs: 30_000,
    rebalanceTimeoutMs: 30_000,
    heartbeatIntervalMs: 1_000,
    maxWaitMs: 500,
    maxBytesPerPartition: 1_048_576,
    maxBytes: 4_194_304,
    restartOnFailure: async () => false,
  });
  consumers.push(port);
  const crashes: Error[] = [];
  port.onCrash((crash) => crashes.push(crash.error));
  await port.connect();
  await port.subscribe({ topics: [topic], fromBeginning: true });
  await port.run({
    partitionsConsumedConcurrently: 1,
    eachBatch: async (handle) => {
      records.push(...handle.batch.records);
      const last = handle.batch.records.at(-1);
      if (last !== undefined) handle.resolveOffset(String(last.offset));
    },
    gate: (work) => work(),
  });
  const deadline = performance.now() + 30_000;
  while (records.length < count && crashes.length === 0 && performance.now() < deadline) await sleep(100);
  await port.disconnect();
  if (crashes.length > 0) throw crashes[0];
  return records;
}

/** The error `attempt` rejects with, or a failure when it resolves. */
async function rejection(attempt: () => Promise<unknown>): Promise<Error> {
  try {
    await attempt();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

/** An error's class and message, then its causes', as one line to match (platformatic's errors name their class only in the constructor). */
function described(error: unknown): string {
  const parts: string[] = [];
  for (let current = error; current instanceof Error; current = current.cause) {
    parts.push(`${current.constructor.name}: ${current.message}`);
    if (current instanceof AggregateError) parts.push(...current.errors.map(described));
  }
  return parts.join(' <- ');
}

/** An admin of `settings` that connects and lists the topics once, without retries. */
async function connectAdmin(settings: KafkaSettings): Promise<void> {
  const admin = createKafkaClient(settings, { retries: 0 }).admin();
  try {
    await admin.connect();
    await admin.listTopics();
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

describe.each(CLIENTS)('%s over SASL_SSL', (client) => {
  it.each(USERS)('$mechanism: the admin creates a topic and reads its offsets, a consumer reads what was produced', async (user) => {
    // Prepare
    const settings = securedSettings(client, {
      KAFKA_SASL_MECHANISM: user.mechanism,
      KAFKA_SASL_USERNAME: user.username,
      KAFKA_SASL_PASSWORD: user.password,
    });
    const topic = `kafka-secured-${client}-${user.mechanism}-${randomUUID()}`;
    const values = ['first', 'second', 'third'];

    // Act
    const admin = createKafkaClient(settings).admin();
    await admin.connect();
    let created: boolean;
    let offsets: Awaited<ReturnType<typeof admin.partitionOffsets>>;
    try {
      created = await admin.createTopics([{ topic, partitions: 2 }]);
      await produce(settings, topic, values);
      offsets = await admin.partitionOffsets(topic);
    } finally {
      await admin.disconnect();
    }
    const records = await consume(settings, topic, values.length);

    // Assess
    expect(settings.ssl).toEqual({ ca: expect.stringContaining('BEGIN CERTIFICATE'), rejectUnauthorized: true });
    expect(created).toBe(true);
    expect(offsets.map(({ partition, high }) => ({ partition, high })).sort((a, b) => a.partition - b.partition)).toEqual([
      { partition: 0, high: '3' },
      { partition: 1, high: '0' },
    ]);
    expect(records.map((record) => [String(record.offset), Buffer.from(record.value ?? []).toString('utf8')])).toEqual([
      ['0', 'first'],
      ['1', 'second'],
      ['2', 'third'],
    ]);
  });

  it.each(USERS)("$mechanism: a wrong password fails with the client's authentication error", async (user) => {
    // Prepare
    const settings = securedSettings(client, {
      KAFKA_SASL_MECHANISM: user.mechanism,
      KAFKA_SASL_USERNAME: user.username,
      KAFKA_SASL_PASSWORD: `${user.password}-wrong`,
    });

    // Act
    const error = await rejection(() => connectAdmin(settings));

    // Assess: kafkajs' KafkaJSSASLAuthenticationError, platformatic's AuthenticationError (under "Cannot connect to any broker")
    expect(described(error)).toMatch(/AuthenticationError: SASL .*authentication failed/i);
  });

  it('a CA that did not sign the broker certificate fails the TLS handshake', async () => {
    // Prepare
    const [user] = USERS;
    const settings = securedSettings(client, {
      KAFKA_SSL_CA_FILE: strangerCaFile,
      KAFKA_SASL_MECHANISM: user.mechanism,
      KAFKA_SASL_USERNAME: user.username,
      KAFKA_SASL_PASSWORD: user.password,
    });

    // Act
    const error = await rejection(() => connectAdmin(settings));

    // Assess
    expect(described(error)).toMatch(/unable to (get local issuer|verify the first) certificate|self[- ]signed certificate/i);
  });

  it('a broker address the certificate does not name fails the TLS handshake (the host name is checked)', async () => {
    // Prepare
    const [user] = USERS;
    const settings = securedSettings(client, {
      KAFKA_BROKERS: securedBroker.replace('localhost', '127.0.0.1'),
      KAFKA_SASL_MECHANISM: user.mechanism,
      KAFKA_SASL_USERNAME: user.username,
      KAFKA_SASL_PASSWORD: user.password,
    });

    // Act
    const error = await rejection(() => connectAdmin(settings));

    // Assess
    expect(described(error)).toMatch(/does not match certificate's altnames|ERR_TLS_CERT_ALTNAME_INVALID/i);
  });
});
