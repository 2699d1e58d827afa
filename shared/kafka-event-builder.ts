/**
 * Building a Lambda Kafka event from source records (the host's batches, the CLI's peek, the
 * sample events): the exact JSON AWS's event source mapping would send, and its size.
 */
import type { KafkaEvent, KafkaEventRecord } from './kafka-event.js';
import { carryRecordBytes } from './kafka-event.js';

/** A record as a Kafka client hands it over, before it becomes part of a Lambda event. */
export interface SourceRecord {
  readonly topic: string;
  readonly partition: number;
  /** Kafka clients give offsets as strings; they must be safe integers to enter a Lambda event. */
  readonly offset: string | number;
  /** Milliseconds since the epoch, any int64 Kafka carries (-1: none), as a decimal string or a number. */
  readonly timestamp: string | number;
  /** `CREATE_TIME` (the default) or `LOG_APPEND_TIME`, as Java's `TimestampType` names them. */
  readonly timestampType?: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** In wire order; a `null` value is a header whose value is null. */
  readonly headers?: ReadonlyArray<{ readonly name: string; readonly value: Buffer | string | null }>;
}

/** Where the event claims to come from. */
export interface EventSourceOptions {
  readonly eventSource?: 'SelfManagedKafka' | 'aws:kafka';
  readonly bootstrapServers?: string;
  readonly eventSourceArn?: string;
}

function toSafeInteger(value: string | number, what: string): number {
  const number = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(number) || String(number) !== String(value).trim()) {
    throw new RangeError(`${what} ${String(value)} is not a safe integer; it cannot be carried by a Lambda event`);
  }
  return number;
}

const INT64_LIMIT = 2 ** 63;

/**
 * The timestamp as the event carries it: the JSON number AWS writes for the record's int64.
 * Beyond 2^53 a JavaScript number cannot hold the digits exactly, but it is the very value
 * the handler's JSON.parse would make of AWS's digits (and which it stores as NULL); anything
 * that is not an integer at all becomes -1, Kafka's "none". Never throws.
 */
export function eventTimestamp(value: string | number): number {
  const number = typeof value === 'number' ? value : /^\s*-?\d+\s*$/.test(value) ? Number(value) : Number.NaN;
  return Number.isInteger(number) && Math.abs(number) <= INT64_LIMIT ? number : -1;
}

/** Signed bytes, as AWS sends header values (-128..127). */
function signedBytes(value: Buffer | string): number[] {
  const bytes = Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8');
  return Array.from(bytes, (byte) => (byte > 127 ? byte - 256 : byte));
}

/** One header as AWS writes it; a null value becomes `{}` (AWS drops the null entry, name and all). */
function eventHeader(header: { readonly name: string; readonly value: Buffer | string | null }): Record<string, number[]> {
  return header.value === null ? {} : { [header.name]: signedBytes(header.value) };
}

/** How the event's records are made. */
export interface BuildOptions {
  /**
   * The event is for a handler in this process (the host's in-process invoker): its record lists
   * carry the bytes they were built from, and the parse takes them instead of decoding the base64
   * text back (shared/kafka-event.ts `carryRecordBytes`). The event itself is the same.
   */
  readonly carryBytes?: boolean;
}

/**
 * Builds the exact Lambda Kafka event an event source mapping would send for `records`:
 * records grouped under `"<topic>-<partition>"` in order, base64 key and value, headers as
 * signed byte arrays (`{}` for a null value), timestamps and timestampType. Offsets that are
 * not safe integers are refused here rather than rounded; every other field is data and is
 * carried as AWS would carry it, whatever it holds.
 */
export function buildKafkaEvent(records: readonly SourceRecord[], options: EventSourceOptions = {}, build: BuildOptions = {}): KafkaEvent {
  const grouped: Record<string, KafkaEventRecord[]> = {};
  const carried = build.carryBytes
    ? new Map<KafkaEventRecord[], { sources: SourceRecord[]; keys: Array<string | undefined>; values: Array<string | null> }>()
    : undefined;
  for (const record of records) {
    const key = `${record.topic}-${record.partition}`;
    const list = (grouped[key] ??= []);
    const offset = toSafeInteger(record.offset, 'offset');
    const timestamp = eventTimestamp(record.timestamp);
    const timestampType = record.timestampType ?? 'CREATE_TIME';
    const value = record.value === null ? null : record.value.toString('base64');
    const keyText = record.key === null ? undefined : record.key.toString('base64');
    const headers = record.headers === undefined || record.headers.length === 0 ? [] : record.headers.map(eventHeader);
    // Two literals rather than a spread of the key: this runs for every record the host sends.
    list.push(
      record.key === null
        ? { topic: record.topic, partition: record.partition, offset, timestamp, timestampType, value, headers }
        : {
            topic: record.topic,
            partition: record.partition,
            offset,
            timestamp,
            timestampType,
            key: keyText,
            value,
            headers,
          },
    );
    if (carried !== undefined) {
      let bytes = carried.get(list);
      if (bytes === undefined) carried.set(list, (bytes = { sources: [], keys: [], values: [] }));
      bytes.sources.push(record);
      bytes.keys.push(keyText);
      bytes.values.push(value);
    }
  }
  if (carried !== undefined) for (const [list, bytes] of carried) carryRecordBytes(list, bytes);
  const eventSource = options.eventSource ?? 'SelfManagedKafka';
  return {
    eventSource,
    ...(options.eventSourceArn ? { eventSourceArn: options.eventSourceArn } : {}),
    ...(options.bootstrapServers ? { bootstrapServers: options.bootstrapServers } : {}),
    records: grouped,
  };
}

/** Size of the event as the Invoke API would carry it (JSON bytes); the host caps it at 6 MB. */
export function eventSizeBytes(event: KafkaEvent): number {
  return Buffer.byteLength(JSON.stringify(event), 'utf8');
}
