import type { Context } from 'aws-lambda';
import { buildKafkaEvent } from '../../shared/kafka-event-builder.js';
import type { KafkaEvent } from '../../shared/kafka-event.js';
import type { CoreLogger } from '../../shared/logger.js';
import { loadSettings } from '../../shared/settings.js';
import type { Settings } from '../../shared/settings.js';

/** One record of a test event: an object is sent as JSON, a string as UTF-8, a Buffer raw. */
export interface TestRecord {
  readonly partition?: number;
  readonly offset: number;
  readonly value: object | string | Buffer | null;
  readonly key?: string;
  readonly timestamp?: number;
  readonly headers?: ReadonlyArray<{ name: string; value: Buffer | string }>;
}

/** Serialises a test value the way a producer would. */
function valueBytes(value: TestRecord['value']): Buffer | null {
  if (value === null) return null;
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  return Buffer.from(JSON.stringify(value), 'utf8');
}

/** A Lambda Kafka event for `topic` built by the same code the host uses. */
export function lambdaEvent(
  topic: string,
  records: readonly TestRecord[],
  eventSource: 'SelfManagedKafka' | 'aws:kafka' = 'SelfManagedKafka',
): KafkaEvent {
  return buildKafkaEvent(
    records.map((record) => ({
      topic,
      partition: record.partition ?? 0,
      offset: record.offset,
      timestamp: record.timestamp ?? Date.parse('2026-11-30T06:00:00Z'),
      key: record.key === undefined ? null : Buffer.from(record.key),
      value: valueBytes(record.value),
      headers: record.headers,
    })),
    { eventSource },
  );
}

/** Settings for a test schema: short retry back-off so transient paths finish fast. */
export function testSettings(url: string, env: Record<string, string> = {}): Settings {
  return loadSettings({ DATABASE_URL: url, STORAGE_DB_RETRY_BASE_MS: '20', STORAGE_DB_CONNECT_TIMEOUT_MS: '2000', ...env });
}

/** One captured log line. */
export interface LogLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly message: string;
  readonly extra: Record<string, unknown>;
}

/** A logger that keeps every line, for assertions on what an operator would read. */
export function captureLogger(): CoreLogger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at =
    (level: LogLine['level']) =>
    (message: string, ...extra: Array<Record<string, unknown>>) =>
      lines.push({ level, message, extra: Object.assign({}, ...extra) });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** A Lambda context with a fixed remaining time. */
export function lambdaContext(remainingMs = 60_000): Context {
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'storage-consumer-test',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:000000000000:function:storage-consumer-test',
    memoryLimitInMB: '512',
    awsRequestId: 'test-request',
    logGroupName: '/aws/lambda/storage-consumer-test',
    logStreamName: 'test',
    getRemainingTimeInMillis: () => remainingMs,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}
