/**
 * The seam between kafkajs' message and the project's own record: the one place that turns a
 * fetched kafkajs message into the `SourceRecord` the shared event builder takes (the host's
 * batches and the CLI's peek both go through it).
 */
import type { KafkaMessage } from 'kafkajs';
import type { SourceRecord } from '../../shared/kafka-event-builder.js';
import { TIMESTAMP_TYPE } from '../port.js';
import { wireRecordOf } from './wire-records.js';

/**
 * kafkajs groups repeated header names into arrays; the event lists one entry per header, in
 * wire order, which kafka/kafkajs/wire-records.ts recovers. Without it (a message not decoded
 * through it) the grouped order is the best there is.
 */
function headersOf(message: KafkaMessage): NonNullable<SourceRecord['headers']> {
  const wire = wireRecordOf(message);
  if (wire) return wire.headers;
  const headers: Array<{ name: string; value: Buffer | string | null }> = [];
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.push({ name, value: item });
  }
  return headers;
}

/** Converts a kafkajs message into the source record the shared event builder takes. */
export function toSourceRecord(topic: string, partition: number, message: KafkaMessage): SourceRecord {
  return {
    topic,
    partition,
    offset: message.offset,
    timestamp: message.timestamp,
    timestampType: wireRecordOf(message)?.timestampType ?? TIMESTAMP_TYPE,
    key: message.key,
    value: message.value,
    headers: headersOf(message),
  };
}
