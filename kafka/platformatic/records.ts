/**
 * The seam between `@platformatic/kafka`'s decoded record batches and the project's own record:
 * the one place that turns the batches of one partition's fetch answer into the `SourceRecord`s
 * the shared event builder takes (the host's batches and the CLI's peek and reconcile all go
 * through it), as kafka/kafkajs/source-record.ts does for kafkajs.
 *
 * The client hands over a fetch's batches as they lie in the log: the whole batch that holds
 * the fetch offset, control batches (transaction markers), and the batches of aborted
 * transactions. What a consumer reading committed data gets out of them is decided here, by
 * the rule Java's consumer applies (`CompletedFetch.nextFetchedRecord`), which kafkajs follows too.
 */
import type { KafkaRecord, RecordsBatch } from '@platformatic/kafka';
import type { SourceRecord } from '../../shared/kafka-event-builder.js';

/** An aborted transaction as a fetch answer lists it: its producer and the offset it started at. */
export interface AbortedTransaction {
  readonly producerId: bigint;
  readonly firstOffset: bigint;
}

/** What one fetch answer of a partition comes to. */
export interface FetchedRecords {
  /** The records at or after the fetch offset, in offset order; control records and aborted transactions left out. */
  readonly records: SourceRecord[];
  /**
   * The offset of the last record the answer's batches span (their base offset plus their last
   * offset delta): past trailing control records and records compacted away. `null` for an
   * answer without batches.
   */
  readonly lastOffset: bigint | null;
}

// The record batch's attributes (Kafka's `DefaultRecordBatch`).
const LOG_APPEND_TIME = 0x08;
const TRANSACTIONAL = 0x10;
const CONTROL = 0x20;
/** A control record's key is its version (int16) and its type (int16): 0 aborts, 1 commits. */
const ABORT_MARKER = 0;

function isAbortMarker(batch: RecordsBatch): boolean {
  const key = batch.records[0]?.key;
  return key !== null && key !== undefined && key.length >= 4 && key.readInt16BE(2) === ABORT_MARKER;
}

function toSourceRecord(topic: string, partition: number, batch: RecordsBatch, record: KafkaRecord): SourceRecord {
  const logAppendTime = (batch.attributes & LOG_APPEND_TIME) !== 0;
  return {
    topic,
    partition,
    offset: (batch.firstOffset + BigInt(record.offsetDelta)).toString(),
    // int64 arithmetic as bigint: a timestamp beyond 2^53 keeps every digit.
    timestamp: (logAppendTime ? batch.maxTimestamp : batch.firstTimestamp + record.timestampDelta).toString(),
    timestampType: logAppendTime ? 'LOG_APPEND_TIME' : 'CREATE_TIME',
    key: record.key,
    value: record.value,
    // Kafka forbids a null header name; should one come anyway, it is the empty name.
    headers: record.headers.map(([name, value]) => ({ name: name?.toString('utf8') ?? '', value })),
  };
}

/**
 * The records of one partition's fetch answer (`batches`, as the client decoded them) from
 * `fromOffset` on. Records before it are dropped (the answer starts with the whole batch that
 * holds it), control batches are skipped, and with `abortedTransactions` (the answer's list,
 * present when the fetch read committed data) a transactional batch of a producer is dropped
 * from the first offset of its aborted transaction up to that producer's abort marker.
 */
export function sourceRecords(
  topic: string,
  partition: number,
  batches: readonly RecordsBatch[],
  fromOffset: bigint,
  abortedTransactions?: readonly AbortedTransaction[] | null,
): FetchedRecords {
  const aborted = [...(abortedTransactions ?? [])].sort((a, b) =>
    a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0,
  );
  const abortingProducers = new Set<bigint>();
  let nextAborted = 0;
  const records: SourceRecord[] = [];
  let lastOffset: bigint | null = null;
  for (const batch of batches) {
    const batchLastOffset = batch.firstOffset + BigInt(batch.lastOffsetDelta);
    if (lastOffset === null || batchLastOffset > lastOffset) lastOffset = batchLastOffset;
    const control = (batch.attributes & CONTROL) !== 0;
    if (abortedTransactions && batch.producerId >= 0n) {
      for (; nextAborted < aborted.length && aborted[nextAborted]!.firstOffset <= batchLastOffset; nextAborted += 1)
        abortingProducers.add(aborted[nextAborted]!.producerId);
      if (control && isAbortMarker(batch)) abortingProducers.delete(batch.producerId);
      else if ((batch.attributes & TRANSACTIONAL) !== 0 && abortingProducers.has(batch.producerId)) continue;
    }
    if (control) continue;
    for (const record of batch.records) {
      if (batch.firstOffset + BigInt(record.offsetDelta) < fromOffset) continue;
      records.push(toSourceRecord(topic, partition, batch, record));
    }
  }
  return { records, lastOffset };
}
