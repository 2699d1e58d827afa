/**
 * Parsing a Lambda Kafka event (what AWS's event source mapping sends, and what the host builds)
 * into the pipeline's records, checked once, by hand for speed; an envelope that rules a record
 * out gives that record a rejection instead of failing the batch.
 */
import { InvalidEventError } from './errors.js';
import type { KafkaHeader, KafkaRecord } from './records.js';

/** Event sources the handlers accept: MSK and self-managed Kafka (also what the host sends). */
export const KAFKA_EVENT_SOURCES = ['aws:kafka', 'SelfManagedKafka'] as const;

/** The Lambda Kafka event (MSK or self-managed), as far as the pipeline reads it. */
export interface KafkaEvent {
  readonly eventSource: (typeof KAFKA_EVENT_SOURCES)[number];
  readonly eventSourceArn?: string;
  readonly bootstrapServers?: string;
  readonly records: Readonly<Record<string, readonly KafkaEventRecord[]>>;
}

/**
 * One record of the event as AWS sends it: base64 key and value, headers as byte arrays (a
 * header whose value is null is `{}`: AWS drops the null entry and with it the name).
 */
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

/** A JSON object (not null, not an array): the one test of it, for the event here and the handler's response (host/offsets.ts). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const EMPTY = Buffer.alloc(0);

/** The key and value bytes a list of event records was built from, and the base64 texts built of them. */
export interface CarriedBytes {
  readonly sources: ReadonlyArray<{ readonly key: Buffer | null; readonly value: Buffer | null }>;
  readonly keys: ReadonlyArray<string | undefined>;
  readonly values: ReadonlyArray<string | null>;
}

/**
 * The bytes behind the record lists of events this process built (the host's events,
 * shared/kafka-event-builder.ts `carryBytes`), by list: a record whose key and value still hold
 * the very texts built from them is parsed to those bytes instead of decoding its base64 back
 * (the same bytes, one copy less per record). A record changed since, or a list built elsewhere
 * (JSON), is decoded from its text.
 */
const carriedBytes = new WeakMap<readonly unknown[], CarriedBytes>();

/** Registers the bytes an event's record list was built from (shared/kafka-event-builder.ts only). */
export function carryRecordBytes(list: readonly KafkaEventRecord[], carried: CarriedBytes): void {
  carriedBytes.set(list, carried);
}

/** A key or value: the bytes it was built from while it holds the text built of them, else its text decoded. */
function bytesOf(value: unknown, builtText: string | null | undefined, source: Buffer | null | undefined): Buffer | null {
  return source !== undefined && value === builtText ? source : envelopeBytes(value);
}

/** A field's JSON text, for a field that is not what AWS sends (never throws). */
function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * The record's timestamp read back from an event (the reverse of the builder's `eventTimestamp`):
 * milliseconds since the epoch when exact and non-negative, else null.
 */
function timestampFromEvent(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
}

/**
 * A base64 key or value: bytes, or null when absent. Anything else (AWS never sends it) keeps
 * its JSON text as bytes and is reported, so the record can end as a dead letter.
 */
function envelopeBytes(value: unknown): Buffer | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return Buffer.from(value, 'base64');
  return Buffer.from(jsonText(value), 'utf8');
}

/** Whether {@link envelopeBytes} kept `value` as the bytes of its JSON text (not what AWS sends). */
function isMalformedEnvelope(value: unknown): boolean {
  return value !== undefined && value !== null && typeof value !== 'string';
}

/**
 * A header value: bytes sent SIGNED (-128..127, as AWS does) or unsigned; `{}` or null (how a
 * null value arrives) is empty. Anything else is kept as the bytes of its JSON text: headers
 * are data, never a reason to refuse the record.
 */
function headerBytes(value: unknown): Buffer {
  if (value === undefined || value === null) return EMPTY;
  if (Array.isArray(value)) {
    const bytes = Buffer.allocUnsafe(value.length);
    let valid = true;
    for (let i = 0; i < value.length && valid; i += 1) {
      const byte: unknown = value[i];
      valid = typeof byte === 'number' && Number.isInteger(byte) && byte >= -128 && byte <= 255;
      bytes[i] = (byte as number) & 0xff;
    }
    if (valid) return bytes;
  } else if (isObject(value) && Object.keys(value).length === 0) return EMPTY;
  return Buffer.from(typeof value === 'string' ? value : jsonText(value), 'utf8');
}

/**
 * Headers in order, one per name of each header object (AWS sends one). A header object
 * without a name (`{}`, how AWS sends a header whose value is null) or a header that is not
 * an object at all is kept with an empty name, so no header silently disappears.
 */
function toHeaders(headers: unknown): KafkaHeader[] {
  if (headers === undefined || headers === null || (Array.isArray(headers) && headers.length === 0)) return [];
  const list: readonly unknown[] = Array.isArray(headers) ? headers : [headers];
  const result: KafkaHeader[] = [];
  for (const header of list) {
    if (!isObject(header)) {
      result.push({ name: '', value: headerBytes(header) });
      continue;
    }
    let named = false;
    for (const [name, value] of Object.entries(header)) {
      named = true;
      result.push({ name, value: headerBytes(value) });
    }
    if (!named) result.push({ name: '', value: EMPTY });
  }
  return result;
}

/**
 * One record. Only its coordinates (topic, partition, offset, and the partition key it is
 * listed under) can refuse the event; every other field is data and never throws.
 */
function toRecord(raw: unknown, partitionKey: string, index: number, built: CarriedBytes | undefined): KafkaRecord {
  const where = `records.${partitionKey}.${index}`;
  if (!isObject(raw)) invalid(where, 'must be an object');
  const { topic, partition, offset } = raw;
  if (typeof topic !== 'string' || topic.length === 0) invalid(`${where}.topic`, 'must be a non-empty string');
  if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0 || partition > 2_147_483_647) {
    invalid(`${where}.partition`, 'must be an integer >= 0');
  }
  if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
    invalid(`${where}.offset`, 'must be a safe integer >= 0');
  }
  if (`${topic}-${partition}` !== partitionKey) {
    throw new InvalidEventError(`record ${topic}-${partition}@${offset} is listed under "${partitionKey}"`);
  }
  const record: KafkaRecord = {
    topic,
    partition,
    offset,
    timestamp: timestampFromEvent(raw.timestamp),
    timestampType: typeof raw.timestampType === 'string' ? raw.timestampType : null,
    key: built === undefined ? envelopeBytes(raw.key) : bytesOf(raw.key, built.keys[index], built.sources[index]?.key),
    value: built === undefined ? envelopeBytes(raw.value) : bytesOf(raw.value, built.values[index], built.sources[index]?.value),
    headers: toHeaders(raw.headers),
  };
  if (!isMalformedEnvelope(raw.value)) return record;
  const carried = Array.isArray(raw.value) ? 'an array' : typeof raw.value;
  return { ...record, rejection: { reason: 'invalid_encoding', detail: `the event carries the value as ${carried}, not a base64 string` } };
}

/**
 * Parses a Lambda Kafka event into records, in event order. Only an event that is not a Kafka
 * event as a whole (no `records`, a record without topic, partition or offset) is an
 * InvalidEventError, which is fatal; whatever else a record's envelope holds, the record is
 * returned, to end as a row or a dead letter. Offsets stay JSON numbers that were checked to
 * be safe integers, so nothing here can round them.
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
    const carried = carriedBytes.get(batch);
    for (let index = 0; index < batch.length; index += 1) records.push(toRecord(batch[index], partitionKey, index, carried));
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
