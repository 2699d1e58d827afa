import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { BatchReport } from '../shared/batch-report.js';
import type { PipelineName } from '../shared/pipelines.js';
import { loadSetting } from '../shared/setting.js';
import { POWERTOOLS_METRICS_NAMESPACE } from '../shared/setting-declarations.js';

/**
 * Names of the per-batch metrics (CloudWatch EMF). The alarms in `serverless.yml` refer to
 * `DeadLettered` and `BatchFailed` by these names.
 */
export const BATCH_METRIC_NAMES = {
  records: 'Records',
  inserted: 'Inserted',
  updated: 'Updated',
  skipped: 'Skipped',
  deadLettered: 'DeadLettered',
  alreadyDeadLettered: 'AlreadyDeadLettered',
  durationMs: 'BatchDurationMs',
  failed: 'BatchFailed',
  recordDelayMs: 'RecordDelayMs',
} as const;

/** The `service` dimension every metric carries, next to `pipeline`. */
export const METRICS_SERVICE_NAME = 'storage-consumer';

/**
 * One pipeline's Powertools Metrics: dimensions `service` and `pipeline`, namespace from
 * `POWERTOOLS_METRICS_NAMESPACE` (else `StorageConsumer`). Flushed once per invocation by the
 * `logMetrics` middleware of the handler.
 */
export function createPipelineMetrics(
  pipeline: PipelineName,
  namespace: string = loadSetting(process.env, POWERTOOLS_METRICS_NAMESPACE),
): Metrics {
  return new Metrics({ namespace, serviceName: METRICS_SERVICE_NAME, defaultDimensions: { pipeline } });
}

/**
 * Adds one batch's counters and its freshness. `RecordDelayMs` is the batch's oldest record
 * at COMMIT (COMMIT time minus its Kafka timestamp), one value per stored batch, absent when
 * no record had a timestamp: CloudWatch's `Maximum` of it is the worst record's delay, its
 * `p99` the 99th percentile of the batches' worst records, never below the records' own p99
 * (the `<pipeline>-freshness` alarm reads it; docs/operations.md, "Freshness").
 * `BatchFailed` is 0 or 1 on every batch: a failure answered in the `report` form is not a
 * Lambda error, so only this metric (and its alarm) shows it.
 * `DeadLettered` counts the letters the batch stored; a replayed poison record whose letter
 * already exists counts as `AlreadyDeadLettered`, so a replay does not fire the dead-letter alarm.
 */
export function recordBatchMetrics(metrics: Metrics, report: BatchReport): void {
  metrics.addMetric(BATCH_METRIC_NAMES.records, MetricUnit.Count, report.records);
  metrics.addMetric(BATCH_METRIC_NAMES.inserted, MetricUnit.Count, report.inserted);
  metrics.addMetric(BATCH_METRIC_NAMES.updated, MetricUnit.Count, report.updated);
  metrics.addMetric(BATCH_METRIC_NAMES.skipped, MetricUnit.Count, report.skipped);
  metrics.addMetric(BATCH_METRIC_NAMES.deadLettered, MetricUnit.Count, report.deadLettered);
  metrics.addMetric(BATCH_METRIC_NAMES.alreadyDeadLettered, MetricUnit.Count, report.alreadyDeadLettered);
  metrics.addMetric(BATCH_METRIC_NAMES.durationMs, MetricUnit.Milliseconds, report.durationMs);
  metrics.addMetric(BATCH_METRIC_NAMES.failed, MetricUnit.Count, report.failed ? 1 : 0);
  const { maxMs } = report.recordDelays;
  if (maxMs !== undefined) metrics.addMetric(BATCH_METRIC_NAMES.recordDelayMs, MetricUnit.Milliseconds, maxMs);
}
