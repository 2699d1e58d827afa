/**
 * Cuts what the Kafka consumer hands over for one partition into the Lambda events the host invokes (each at
 * most the pipeline's batch size and STORAGE_MAX_EVENT_BYTES), and measures them: the event
 * source mapping's batching, done by the host (docs/design.md section 3, "The host on kafkajs").
 * Its events go to the partition's lane (./partition-lanes.ts) and to the offset rules (./offsets.ts).
 */
import { buildKafkaEvent, eventSizeBytes, eventTimestamp } from '../shared/kafka-event-builder.js';
import type { EventSourceOptions, SourceRecord } from '../shared/kafka-event-builder.js';
import type { KafkaEvent } from '../shared/kafka-event.js';
import { TIMESTAMP_TYPE } from '../kafka/port.js';

/** What the consumer hands over for one partition, as plain data. */
export interface PolledBatch {
  readonly topic: string;
  readonly partition: number;
  readonly records: readonly SourceRecord[];
  /**
   * The batch's `lastOffset()`: the last offset of the fetch, which can lie past the last
   * record when trailing control records (transaction markers) were filtered out.
   */
  readonly lastOffset: string;
}

/** One partition of an event, with what the offset decisions need to know about it. */
export interface EventPartition {
  readonly topic: string;
  readonly partition: number;
  /** `"<topic>-<partition>"`: the key in the event and in `batchItemFailures`. */
  readonly key: string;
  /** Offsets of the event's records in this partition, ascending, as decimal strings. */
  readonly offsets: readonly string[];
  /** Where consumption continues when every record succeeded: the last offset + 1 (or past trailing control records). */
  readonly next: string;
}

/** One Lambda event cut from a polled batch. */
export interface HostEvent {
  readonly event: KafkaEvent;
  readonly partitions: readonly EventPartition[];
  readonly records: number;
  /** Exact size of the event as JSON (what the Invoke API would carry). */
  readonly bytes: number;
  /** A single record that alone exceeds the byte cap; sent alone rather than stalling the partition. */
  readonly oversized: boolean;
  /**
   * Lets go of the built event and its records once it was invoked (a step never invokes an event
   * twice: a redelivery fetches its records again). The lane keeps its fetched batch until the
   * batch's last event is written; without this, every event written before would keep its built
   * copy (base64 text of every record) alive until then, through collections that copy it.
   * Reading `event` afterwards throws.
   */
  release(): void;
}

/** How to cut batches into events. */
export interface CutOptions {
  readonly batchSize: number;
  readonly maxEventBytes: number;
  readonly source?: EventSourceOptions;
}

const CARRY_BYTES = { carryBytes: true } as const;

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value), 'utf8');

// The JSON sizes of the strings every record of a batch repeats (its topic, its timestamp type),
// measured once each: recordJsonBytes runs for every record fetched. A few distinct values only.
const repeatedSizes = new Map<string, number>();
function repeatedJsonBytes(value: string): number {
  let size = repeatedSizes.get(value);
  if (size === undefined) {
    size = jsonBytes(value);
    if (repeatedSizes.size >= 256) repeatedSizes.clear();
    repeatedSizes.set(value, size);
  }
  return size;
}
const base64Length = (bytes: number): number => 4 * Math.ceil(bytes / 3);

// The JSON skeleton of one record as buildKafkaEvent lays it out, without its variable parts.
const RECORD_SKELETON = Buffer.byteLength('{"topic":,"partition":,"offset":,"timestamp":,"timestampType":,"value":,"headers":[]}');
const KEY_FIELD = Buffer.byteLength(',"key":');

function signedByteDigits(bytes: Buffer): number {
  let digits = Math.max(0, bytes.length - 1); // the commas
  for (const byte of bytes) digits += byte < 10 ? 1 : byte < 100 ? 2 : byte < 128 ? 3 : byte > 246 ? 2 : byte > 156 ? 3 : 4;
  return digits;
}

/**
 * The exact JSON size of one record inside an event, computed without serialising it (the
 * host does this for every record; in-process nothing else serialises the event). A unit test
 * holds it equal to `eventSizeBytes` of the built event.
 */
export function recordJsonBytes(record: SourceRecord): number {
  let size =
    RECORD_SKELETON +
    repeatedJsonBytes(record.topic) +
    String(record.partition).length +
    String(record.offset).trim().length +
    String(eventTimestamp(record.timestamp)).length +
    repeatedJsonBytes(record.timestampType ?? TIMESTAMP_TYPE) +
    (record.value === null ? 4 : 2 + base64Length(record.value.length));
  if (record.key !== null) size += KEY_FIELD + 2 + base64Length(record.key.length);
  const headers = record.headers ?? [];
  size += Math.max(0, headers.length - 1);
  for (const header of headers) {
    if (header.value === null) {
      size += 2; // {}
      continue;
    }
    const value = Buffer.isBuffer(header.value) ? header.value : Buffer.from(header.value, 'utf8');
    size += 1 + jsonBytes(header.name) + 2 + signedByteDigits(value) + 2; // {"name":[...]}
  }
  return size;
}

/**
 * Cuts one polled partition batch into events of at most `batchSize` records and at most
 * `maxEventBytes` JSON bytes, in offset order (the consumer hands over one partition at a time,
 * so each event holds one partition). A record that alone exceeds the byte cap is sent alone in
 * an event of its own: holding it back would stall the partition for good, and the handler
 * stores or dead-letters it like any other.
 */
export function cutBatch(batch: PolledBatch, options: CutOptions): HostEvent[] {
  const { topic, partition, records } = batch;
  if (records.length === 0) return [];
  const key = `${topic}-${partition}`;
  // Envelope with an empty records object, plus `"<key>":[]`.
  const base = eventSizeBytes(buildKafkaEvent([], options.source)) + jsonBytes(key) + 3;
  const events: HostEvent[] = [];
  let taken: SourceRecord[] = [];
  let bytes = base;
  const flush = (isLast: boolean) => {
    const offsets = taken.map((record) => String(record.offset));
    const lastOffset = BigInt(offsets[offsets.length - 1] as string);
    const fetchedEnd = BigInt(batch.lastOffset);
    const next = (isLast && fetchedEnd > lastOffset ? fetchedEnd : lastOffset) + 1n;
    // Built when it is first invoked, not when the batch is cut: a lane holds fetched batches
    // ahead of their writing (./partition-lanes.ts), and an event's base64 copies of its records
    // would more than double what they hold.
    let eventRecords: readonly SourceRecord[] | undefined = taken;
    let built: KafkaEvent | undefined;
    events.push({
      get event() {
        if (built !== undefined) return built;
        if (eventRecords === undefined) throw new Error(`the event of ${key} at offset ${offsets[0]} was released after its invocation`);
        // For the handler in this process: the parse takes the records' bytes, not their base64 back.
        built = buildKafkaEvent(eventRecords, options.source, CARRY_BYTES);
        return built;
      },
      release() {
        built = undefined;
        eventRecords = undefined;
      },
      partitions: [{ topic, partition, key, offsets, next: next.toString() }],
      records: taken.length,
      bytes,
      oversized: bytes > options.maxEventBytes,
    });
    taken = [];
    bytes = base;
  };
  for (const record of records) {
    const size = recordJsonBytes(record);
    const added = taken.length === 0 ? size : size + 1;
    if (taken.length > 0 && (taken.length >= options.batchSize || bytes + added > options.maxEventBytes)) {
      flush(false);
      bytes += size;
    } else bytes += added;
    taken.push(record);
  }
  flush(true);
  return events;
}
