/**
 * The freshness of a committed batch (docs/operations.md, "Freshness"): how long after its Kafka
 * timestamp each record reached PostgreSQL. process-batch.ts computes it for every batch; the
 * host's histogram (host/metrics.ts) and the Lambda metric `RecordDelayMs` (aws/metrics.ts) report
 * it.
 */
import type { KafkaRecord } from './records.js';

/**
 * How late the records of one committed batch were (docs/operations.md, "Freshness"): the
 * commit time of the batch's transaction minus each record's Kafka timestamp, the figure a data
 * team reads as freshness (offset lag says how many records wait, not how long).
 */
export interface RecordDelays {
  /** Milliseconds, one per record with a timestamp, in event order; empty for a batch not stored. */
  readonly ms: Float64Array;
  /** The largest of {@link ms}; `undefined` when it is empty. */
  readonly maxMs: number | undefined;
}

/** The delays of a batch that stored nothing (it failed), or of records without timestamps. */
export const NO_RECORD_DELAYS: RecordDelays = Object.freeze({ ms: new Float64Array(0), maxMs: undefined });

/**
 * The delays of `records`, committed at `committedAtMs` (epoch ms), in one pass with one
 * allocation per batch. A record without a usable timestamp (`null`: absent, -1, not exact) is
 * left out: it has no age to tell. A timestamp after the commit (a producer clock ahead of this
 * one) counts as 0, never as a negative age.
 */
export function recordDelays(records: readonly KafkaRecord[], committedAtMs: number): RecordDelays {
  const ms = new Float64Array(records.length);
  let count = 0;
  let maxMs = -1;
  for (const record of records) {
    if (record.timestamp === null) continue;
    const delay = committedAtMs > record.timestamp ? committedAtMs - record.timestamp : 0;
    ms[count++] = delay;
    if (delay > maxMs) maxMs = delay;
  }
  return count === 0 ? NO_RECORD_DELAYS : { ms: count === ms.length ? ms : ms.subarray(0, count), maxMs };
}
