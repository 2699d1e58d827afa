import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import type { LogEntry } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { kafkaLogging } from '../../../../kafka/kafkajs/log-adapter.js';
import type { CoreLogger } from '../../../../shared/logger.js';

const require = createRequire(import.meta.url);
const { KafkaJSConnectionClosedError, KafkaJSNumberOfRetriesExceeded } = require(
  join(dirname(require.resolve('kafkajs')), 'src', 'errors.js'),
) as {
  KafkaJSConnectionClosedError: new (message: string, options: { host: string; port: number }) => Error;
  KafkaJSNumberOfRetriesExceeded: new (cause: Error, options: { retryCount: number; retryTime: number }) => Error;
};

const ADDRESSES = /127\.0\.0\.1|10\.0\.0\.7|kafka-1\.internal:9092|localhost:1\b|::1|fd00::7/;

/** A logger that keeps each line as the JSON the host would print (its level, message and fields). */
function recordingLogger() {
  const lines: string[] = [];
  const record =
    (level: string) =>
    (message: string, ...extra: Array<Record<string, unknown>>) =>
      lines.push(JSON.stringify({ level, message, ...Object.assign({}, ...extra) }));
  const logger: CoreLogger = { debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') };
  return { logger, lines };
}

function entry(namespace: string, level: logLevel, log: Record<string, unknown> & { message: string }): LogEntry {
  return { namespace, level, label: logLevel[level], log: { timestamp: new Date().toISOString(), logger: 'kafkajs', ...log } };
}

describe("kafkajs' own log lines", () => {
  it('carry no broker address in any field, the message, stacks, errors and nested objects included', () => {
    // Prepare: entries as kafkajs writes them (network/connection.js, cluster/brokerPool.js, consumer/index.js)
    const { logger, lines } = recordingLogger();
    const log = kafkaLogging(logger).logCreator!(logLevel.WARN);
    const closed = new KafkaJSConnectionClosedError('Closed connection', { host: '10.0.0.7', port: 9092 });
    const entries = [
      entry('Connection', logLevel.ERROR, {
        message: 'Connection error: connect ECONNREFUSED 127.0.0.1:29100',
        broker: '127.0.0.1:29100',
        clientId: 'storage-consumer-host-1-4242',
        stack: 'Error: connect ECONNREFUSED 127.0.0.1:29100\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1637:16)',
      }),
      entry('Connection', logLevel.ERROR, {
        message: 'Response Heartbeat(key: 12, version: 3)',
        broker: 'kafka-1.internal:9092',
        clientId: 'storage-consumer-host-1-4242',
        error: 'The group is rebalancing, so a rejoin is needed',
        correlationId: 7,
        size: 10,
      }),
      entry('Consumer', logLevel.ERROR, {
        message: 'Crash: KafkaJSNumberOfRetriesExceeded: Closed connection',
        groupId: 'storage-consumer-reviews',
        retryCount: 5,
        error: new KafkaJSNumberOfRetriesExceeded(closed, { retryCount: 5, retryTime: 3000 }),
        context: { brokers: ['[fd00::7]:9092', 'kafka-1.internal:9092'], lastError: closed, port: 9092 },
      }),
    ];

    // Act
    for (const line of entries) log(line);

    // Assess
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line).not.toMatch(ADDRESSES);
    const [refused, heartbeat, crash] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(refused).toMatchObject({
      level: 'warn',
      message: 'kafkajs: Connection error: connect ECONNREFUSED <address>',
      namespace: 'Connection',
      broker: '<address>',
      clientId: 'storage-consumer-host-1-4242',
    });
    expect(refused?.stack).toMatch(/^Error: connect ECONNREFUSED <address>\n {4}at TCPConnectWrap/);
    expect(heartbeat).toMatchObject({ level: 'warn', broker: '<address>', error: 'The group is rebalancing, so a rejoin is needed' });
    expect(crash).toMatchObject({
      level: 'error',
      message: 'kafkajs: Crash: KafkaJSNumberOfRetriesExceeded: Closed connection',
      groupId: 'storage-consumer-reviews',
      error: { name: 'KafkaJSNumberOfRetriesExceeded', message: 'Closed connection', retryCount: 5 },
      context: {
        brokers: ['<address>', '<address>'],
        lastError: {
          name: 'KafkaJSConnectionClosedError',
          message: 'Closed connection',
          broker: '<address>',
          host: '<address>',
          port: 9092,
        },
        port: 9092,
      },
    });
    expect((crash?.error as { stack?: unknown }).stack).toContain('Caused by: KafkaJSConnectionClosedError: Closed connection\n    at ');
  });

  it("from kafkajs' own client failing to reach a broker carry no address", async () => {
    // Prepare: a client whose only broker refuses connections
    const { logger, lines } = recordingLogger();
    const kafka = new Kafka({
      clientId: 'log-adapter-test',
      brokers: ['localhost:1', '127.0.0.1:1'],
      connectionTimeout: 500,
      retry: { retries: 0 },
      ...kafkaLogging(logger),
    });
    const admin = kafka.admin();

    // Act
    await expect(admin.connect()).rejects.toThrow();

    // Assess
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).toContain('"broker":"<address>"');
    for (const line of lines) expect(line).not.toMatch(ADDRESSES);
  });

  it('keeps a log line whose fields refer to themselves', () => {
    // Prepare
    const { logger, lines } = recordingLogger();
    const topicPartitions: Record<string, unknown> = { topic: 'reviews', partitions: [0, 1] };
    topicPartitions.self = topicPartitions;

    // Act
    kafkaLogging(logger).logCreator!(logLevel.WARN)(entry('Consumer', logLevel.WARN, { message: 'Pausing', topicPartitions }));

    // Assess
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      message: 'kafkajs: Pausing',
      topicPartitions: { topic: 'reviews', partitions: [0, 1], self: '[circular]' },
    });
  });
});
