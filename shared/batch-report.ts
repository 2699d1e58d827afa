/**
 * What one batch did and how it is said: the partial batch response, the batch report, its log
 * line's fields and the batch-position fields every log line about a batch carries.
 */
import type { RecordDelays } from './record-delay.js';
import type { WriteOutcome } from './records.js';

/** The partial batch response of a Kafka event source mapping. */
export interface BatchResponse {
  batchItemFailures: Array<{ itemIdentifier: { partition: string; offset: number } }>;
}

/** Everything one batch did; logged as one INFO line and turned into metrics. */
export interface BatchReport extends WriteOutcome {
  readonly pipeline: string;
  readonly records: number;
  readonly deduplicated: number;
  /** Dead letters this batch stored: the `DeadLettered` metric and its alarm count only these. */
  readonly deadLettered: number;
  /**
   * Records whose dead letter was already stored (a replay or redelivery of a poison record:
   * same coordinates, same payload); counted apart so that a replay does not fire the alarm.
   */
  readonly alreadyDeadLettered: number;
  readonly durationMs: number;
  readonly attempts: number;
  /** The batch did not commit and was handed back for redelivery. */
  readonly failed: boolean;
  readonly partitions: ReadonlyArray<{ partition: string; first: number; last: number }>;
  /**
   * Freshness: COMMIT time minus the Kafka timestamp of every record of the batch (stored,
   * skipped, deduplicated or dead-lettered: each record's fate committed then). Empty when the
   * batch failed. Never logged per record: the metrics read it.
   */
  readonly recordDelays: RecordDelays;
}

/**
 * The per-batch log line's fields, named as docs/design.md section 6 names them (other tooling reads
 * them): records = inserted + updated + skipped + deduplicated + dead_lettered +
 * already_dead_lettered.
 */
export function batchLogFields(report: BatchReport): Record<string, unknown> {
  return {
    pipeline: report.pipeline,
    records: report.records,
    inserted: report.inserted,
    updated: report.updated,
    skipped: report.skipped,
    deduplicated: report.deduplicated,
    dead_lettered: report.deadLettered,
    already_dead_lettered: report.alreadyDeadLettered,
    duration_ms: report.durationMs,
    attempts: report.attempts,
    failed: report.failed,
    partitions: report.partitions,
  };
}

/**
 * Where a batch sits, as every log line about it names it (docs/operations.md): `topic`,
 * `partition`, `first_offset`, `last_offset` (offsets as decimal strings). The one builder of
 * these fields: the host's lines, the batch handler's line and the rejection log use it.
 */
export function batchFields(batch: {
  readonly topic: string;
  readonly partition: number;
  readonly firstOffset: string;
  readonly lastOffset: string;
}): {
  topic: string;
  partition: number;
  first_offset: string;
  last_offset: string;
} {
  return { topic: batch.topic, partition: batch.partition, first_offset: batch.firstOffset, last_offset: batch.lastOffset };
}

/**
 * {@link batchFields} of an event's records when the event holds one partition (always on the
 * host); an event of several partitions (an MSK mapping may send one) is named by the
 * `partitions` field of the line instead.
 */
export function batchPlaceFields(
  records: ReadonlyArray<{ readonly topic: string; readonly partition: number; readonly offset: number }>,
): Record<string, unknown> {
  const [first] = records;
  if (first === undefined || records.some((record) => record.topic !== first.topic || record.partition !== first.partition)) return {};
  const offsets = records.map((record) => record.offset);
  return batchFields({
    topic: first.topic,
    partition: first.partition,
    firstOffset: String(Math.min(...offsets)),
    lastOffset: String(Math.max(...offsets)),
  });
}
