import { InvalidEventError } from './errors.js';
import type { KafkaHeader, KafkaRecord } from './types.js';

/** Event sources the handlers accept: MSK and self-managed Kafka (also what the host sends). */
export const KAFKA_EVENT_SOURCES = ['aws:kafka', 'SelfManagedKafka'] as const;

/** The Lambda Kafka event (MSK or self-managed), as far as the pipeline reads it. */
export interface KafkaEvent {
  readonly eventSource: (typeof KAFKA_EVENT_SOURCES)[number];
  readonly eventSourceArn?: string;
  readonly bootstrapServers?: string;
  readonly records: Readonly<Record<string, readonly KafkaEventRecord[]>>;
}

/** One record of the event as AWS sends it: base64 key and value, headers as byte arrays. */
export interface KafkaEventRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly timestamp: number;
  readonly timestampType: string;
  readonly key?: string | null;
  readonly value?: string | null;
  readonly headers?: ReadonlyArray<Readonly<Record<string, readonly number[]>>> | null;
}

// Hand-written rather than a zod schema: this runs for every record of every batch, and the
// schema cost more than decoding the message itself.
function invalid(where: string, problem: string): never {
  throw new InvalidEventError(`not a Lambda Kafka event: ${where}: ${problem}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalString(value: unknown, where: string): string | null {
  if (value === undefined || value === null) return null;
  return typeof value === 'string' ? value : invalid(where, 'must be a base64 string');
}

function toHeaders(headers: unknown, where: string): KafkaHeader[] {
  if (headers === undefined || headers === null) return [];
  if (!Array.isArray(headers)) invalid(where, 'must be an array');
  const result: KafkaHeader[] = [];
  for (const header of headers) {
    if (!isObject(header)) invalid(where, 'each header must be an object');
    for (const [name, bytes] of Object.entries(header)) {
      if (!Array.isArray(bytes)) invalid(`${where}.${name}`, 'must be an array of bytes');
      const value = Buffer.allocUnsafe(bytes.length);
      for (let i = 0; i < bytes.length; i += 1) {
        const byte: unknown = bytes[i];
        // AWS sends header bytes as SIGNED values (-128..127); accept unsigned too.
        if (typeof byte !== 'number' || !Number.isInteger(byte) || byte < -128 || byte > 255) {
          invalid(`${where}.${name}`, 'must hold bytes (-128..255)');
        }
        value[i] = byte & 0xff;
      }
      result.push({ name, value });
    }
  }
  return result;
}

function toRecord(raw: unknown, partitionKey: string, index: number): KafkaRecord {
  const where = `records.${partitionKey}.${index}`;
  if (!isObject(raw)) invalid(where, 'must be an object');
  const { topic, partition, offset, timestamp, timestampType } = raw;
  if (typeof topic !== 'string' || topic.length === 0) invalid(`${where}.topic`, 'must be a non-empty string');
  if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0 || partition > 2_147_483_647) {
    invalid(`${where}.partition`, 'must be an integer >= 0');
  }
  if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
    invalid(`${where}.offset`, 'must be a safe integer >= 0');
  }
  if (typeof timestamp !== 'number' || !Number.isSafeInteger(timestamp)) invalid(`${where}.timestamp`, 'must be a safe integer');
  if (typeof timestampType !== 'string') invalid(`${where}.timestampType`, 'must be a string');
  if (`${topic}-${partition}` !== partitionKey) {
    throw new InvalidEventError(`record ${topic}-${partition}@${offset} is listed under "${partitionKey}"`);
  }
  const key = optionalString(raw.key, `${where}.key`);
  const value = optionalString(raw.value, `${where}.value`);
  return {
    topic,
    partition,
    offset,
    timestamp,
    timestampType,
    key: key === null ? null : Buffer.from(key, 'base64'),
    value: value === null ? null : Buffer.from(value, 'base64'),
    headers: toHeaders(raw.headers, `${where}.headers`),
  };
}

/**
 * Parses a Lambda Kafka event into records, in event order. A malformed event (not one bad
 * record: the event itself) is an InvalidEventError, which is fatal. Offsets stay JSON
 * numbers that were checked to be safe integers, so nothing here can round them.
 */
export function parseKafkaEvent(event: unknown): KafkaRecord[] {
  if (!isObject(event)) invalid('(root)', 'must be an object');
  if (!(KAFKA_EVENT_SOURCES as readonly unknown[]).includes(event.eventSource)) {
    invalid('eventSource', `must be one of ${KAFKA_EVENT_SOURCES.join(', ')}`);
  }
  if (!isObject(event.records)) invalid('records', 'must be an object keyed "<topic>-<partition>"');
  const records: KafkaRecord[] = [];
  for (const [partitionKey, batch] of Object.entries(event.records)) {
    if (!Array.isArray(batch)) invalid(`records.${partitionKey}`, 'must be an array');
    for (let index = 0; index < batch.length; index += 1) records.push(toRecord(batch[index], partitionKey, index));
  }
  return records;
}

/** `"<topic>-<partition>"`, the key of a partition in the event and in `batchItemFailures`. */
export function partitionKey(record: Pick<KafkaRecord, 'topic' | 'partition'>): string {
  return `${record.topic}-${record.partition}`;
}

/** Each partition's lowest and highest offset in the event, in first-seen order. */
export function offsetRanges(records: readonly KafkaRecord[]): Map<string, { first: number; last: number }> {
  const ranges = new Map<string, { first: number; last: number }>();
  for (const record of records) {
    const key = partitionKey(record);
    const range = ranges.get(key);
    if (!range) ranges.set(key, { first: record.offset, last: record.offset });
    else {
      range.first = Math.min(range.first, record.offset);
      range.last = Math.max(range.last, record.offset);
    }
  }
  return ranges;
}
