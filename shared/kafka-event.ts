import { z } from 'zod';
import { InvalidEventError } from './errors.js';
import type { KafkaHeader, KafkaRecord } from './types.js';

/** Event sources the handlers accept: MSK and self-managed Kafka (also what the host sends). */
export const KAFKA_EVENT_SOURCES = ['aws:kafka', 'SelfManagedKafka'] as const;

// AWS sends header bytes as SIGNED values (-128..127); accept unsigned too.
const headerByte = z.number().int().min(-128).max(255);

const recordSchema = z.object({
  topic: z.string().min(1),
  partition: z.number().int().min(0).max(2_147_483_647),
  offset: z.number().refine(Number.isSafeInteger, 'must be a safe integer').refine((n) => n >= 0, 'must be >= 0'),
  timestamp: z.number().refine(Number.isSafeInteger, 'must be a safe integer'),
  timestampType: z.string(),
  key: z.string().nullish(),
  value: z.string().nullish(),
  headers: z.array(z.record(z.string(), z.array(headerByte))).nullish(),
});

const eventSchema = z.object({
  eventSource: z.enum(KAFKA_EVENT_SOURCES),
  records: z.record(z.string(), z.array(recordSchema)),
});

/** The Lambda Kafka event (MSK or self-managed), as far as the pipeline reads it. */
export type KafkaEvent = z.input<typeof eventSchema> & { readonly eventSourceArn?: string; readonly bootstrapServers?: string };

function toHeaders(headers: ReadonlyArray<Record<string, number[]>> | null | undefined): KafkaHeader[] {
  const result: KafkaHeader[] = [];
  for (const header of headers ?? []) {
    for (const [name, bytes] of Object.entries(header)) {
      result.push({ name, value: Buffer.from(bytes.map((byte) => byte & 0xff)) });
    }
  }
  return result;
}

/**
 * Parses a Lambda Kafka event into records, in event order. A malformed event (not one bad
 * record: the event itself) is an InvalidEventError, which is fatal. Offsets stay JSON
 * numbers that were checked to be safe integers, so nothing here can round them.
 */
export function parseKafkaEvent(event: unknown): KafkaRecord[] {
  const parsed = eventSchema.safeParse(event);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidEventError(
      `not a Lambda Kafka event: ${issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'unknown problem'}`,
    );
  }
  const records: KafkaRecord[] = [];
  for (const [partitionKey, batch] of Object.entries(parsed.data.records)) {
    for (const record of batch) {
      if (`${record.topic}-${record.partition}` !== partitionKey) {
        throw new InvalidEventError(
          `record ${record.topic}-${record.partition}@${record.offset} is listed under "${partitionKey}"`,
        );
      }
      records.push({
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        timestamp: record.timestamp,
        timestampType: record.timestampType,
        key: record.key === undefined || record.key === null ? null : Buffer.from(record.key, 'base64'),
        value: record.value === undefined || record.value === null ? null : Buffer.from(record.value, 'base64'),
        headers: toHeaders(record.headers),
      });
    }
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
