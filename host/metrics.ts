import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { BatchReport } from '../shared/batch-report.js';
import type { PipelineName } from '../shared/pipeline-names.js';

/**
 * The host's Prometheus metric names (an interface: dashboards and alerts use them). Labels
 * carry only pipeline names, outcomes and partition numbers: never message content, never
 * credentials.
 */
export const HOST_METRIC_NAMES = {
  records: 'storage_consumer_records_total',
  batches: 'storage_consumer_batches_total',
  batchDuration: 'storage_consumer_batch_duration_seconds',
  retries: 'storage_consumer_retries_total',
  commitFailures: 'storage_consumer_commit_failures_total',
  consumerLag: 'storage_consumer_consumer_lag',
  pipelineUp: 'storage_consumer_pipeline_up',
} as const;

/** Values of the `outcome` label of `storage_consumer_records_total`. */
export const RECORD_OUTCOMES = ['inserted', 'updated', 'skipped', 'deduplicated', 'dead_lettered'] as const;
export type RecordOutcome = (typeof RECORD_OUTCOMES)[number];

/** Values of the `result` label of `storage_consumer_batches_total`. */
export const BATCH_RESULTS = ['stored', 'failed'] as const;
export type BatchResult = (typeof BATCH_RESULTS)[number];

/** Batch duration buckets in seconds: a network-metrics batch in milliseconds up to a worst case with retries. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** One partition's lag as a scrape reads it. */
export interface PartitionLag {
  readonly pipeline: PipelineName;
  readonly partition: number;
  readonly lag: number;
}

/** What one pipeline reports into the host's metrics. */
export interface PipelineMetrics {
  /** A batch the handler stored, in-process: its records by outcome. */
  recordsStored(report: BatchReport): void;
  /** One transient database retry inside a batch (in-process). */
  retried(): void;
  /** One invocation as the host saw it: stored (offsets advance) or failed (redelivered), and how long it took. */
  batchDone(result: BatchResult, seconds: number): void;
  /** One offset commit that failed. */
  commitFailed(): void;
  /** Whether the pipeline consumes: in its group and not failed. */
  up(value: boolean): void;
}

/** The host's metrics registry, one set of series per pipeline. */
export interface HostMetrics {
  readonly registry: Registry;
  pipeline(name: PipelineName): PipelineMetrics;
}

/**
 * Creates the host's registry: the `storage_consumer_*` metrics of {@link HOST_METRIC_NAMES}
 * plus prom-client's default process and event-loop metrics. Every pipeline's series exist from
 * the start at 0, so `rate()` and absent-series alerts work from the first scrape. `lag` is
 * asked at each scrape (the consumer lag gauge is read from the broker, not from the consumer,
 * so a stuck consumer still shows its growing lag); a failing `lag` leaves the gauge empty.
 */
export function createHostMetrics(
  pipelines: readonly PipelineName[],
  lag: () => Promise<readonly PartitionLag[]> = async () => [],
): HostMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const records = new Counter({
    name: HOST_METRIC_NAMES.records,
    help: 'Records of stored batches by outcome (in-process invocations)',
    labelNames: ['pipeline', 'outcome'] as const,
    registers: [registry],
  });
  const batches = new Counter({
    name: HOST_METRIC_NAMES.batches,
    help: 'Invocations (Lambda events) by result: stored (offsets advance) or failed (redelivered)',
    labelNames: ['pipeline', 'result'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: HOST_METRIC_NAMES.batchDuration,
    help: 'Duration of one invocation (decode, database, commit decision), seconds',
    labelNames: ['pipeline'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const retries = new Counter({
    name: HOST_METRIC_NAMES.retries,
    help: 'Transient database errors retried inside a batch (in-process invocations)',
    labelNames: ['pipeline'] as const,
    registers: [registry],
  });
  const commitFailures = new Counter({
    name: HOST_METRIC_NAMES.commitFailures,
    help: 'Offset commits that failed (the rows were stored; a redelivery repeats them)',
    labelNames: ['pipeline'] as const,
    registers: [registry],
  });
  const up = new Gauge({
    name: HOST_METRIC_NAMES.pipelineUp,
    help: '1 while the pipeline consumes (in its consumer group, not failed), else 0',
    labelNames: ['pipeline'] as const,
    registers: [registry],
  });
  new Gauge({
    name: HOST_METRIC_NAMES.consumerLag,
    help: "Messages on the partition after the group's committed offset, read from the broker at scrape time",
    labelNames: ['pipeline', 'partition'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const positions = await lag().catch(() => [] as const);
      for (const { pipeline, partition, lag: value } of positions) this.set({ pipeline, partition: String(partition) }, value);
    },
  });
  for (const pipeline of pipelines) {
    for (const outcome of RECORD_OUTCOMES) records.inc({ pipeline, outcome }, 0);
    for (const result of BATCH_RESULTS) batches.inc({ pipeline, result }, 0);
    retries.inc({ pipeline }, 0);
    commitFailures.inc({ pipeline }, 0);
    up.set({ pipeline }, 0);
  }
  return {
    registry,
    pipeline(pipeline) {
      return {
        recordsStored(report) {
          const counts: Record<RecordOutcome, number> = {
            inserted: report.inserted,
            updated: report.updated,
            // A replayed poison record whose dead letter is already stored wrote nothing new: skipped.
            skipped: report.skipped + report.alreadyDeadLettered,
            deduplicated: report.deduplicated,
            dead_lettered: report.deadLettered,
          };
          for (const outcome of RECORD_OUTCOMES) if (counts[outcome] > 0) records.inc({ pipeline, outcome }, counts[outcome]);
        },
        retried: () => retries.inc({ pipeline }),
        batchDone(result, seconds) {
          batches.inc({ pipeline, result });
          duration.observe({ pipeline }, seconds);
        },
        commitFailed: () => commitFailures.inc({ pipeline }),
        up: (value) => up.set({ pipeline }, value ? 1 : 0),
      };
    },
  };
}
