import type { KafkaEvent, KafkaEventRecord } from './kafka-event.js';

/** A record as a Kafka client hands it over, before it becomes part of a Lambda event. */
export interface SourceRecord {
  readonly topic: string;
  readonly partition: number;
  /** Kafka clients give offsets as strings; they must be safe integers to enter a Lambda event. */
  readonly offset: string | number;
  /** Milliseconds since the epoch. */
  readonly timestamp: string | number;
  readonly timestampType?: 'CREATE_TIME' | 'LOG_APPEND_TIME';
  readonly key: Buffer | null;
  readonly value: Buffer | null;
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

/** Signed bytes, as AWS sends header values (-128..127). */
function signedBytes(value: Buffer | string | null): number[] {
  const bytes = value === null ? Buffer.alloc(0) : Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8');
  return Array.from(bytes, (byte) => (byte > 127 ? byte - 256 : byte));
}

/**
 * Builds the exact Lambda Kafka event an event source mapping would send for `records`:
 * records grouped under `"<topic>-<partition>"` in order, base64 key and value, headers as
 * signed byte arrays, timestamps and timestampType. Offsets that are not safe integers are
 * refused here rather than rounded.
 */
export function buildKafkaEvent(records: readonly SourceRecord[], options: EventSourceOptions = {}): KafkaEvent {
  const grouped: Record<string, KafkaEventRecord[]> = {};
  for (const record of records) {
    const key = `${record.topic}-${record.partition}`;
    const list = (grouped[key] ??= []);
    list.push({
      topic: record.topic,
      partition: record.partition,
      offset: toSafeInteger(record.offset, 'offset'),
      timestamp: toSafeInteger(record.timestamp, 'timestamp'),
      timestampType: record.timestampType ?? 'CREATE_TIME',
      ...(record.key === null ? {} : { key: record.key.toString('base64') }),
      value: record.value === null ? null : record.value.toString('base64'),
      headers: (record.headers ?? []).map((header) => ({ [header.name]: signedBytes(header.value) })),
    });
  }
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
