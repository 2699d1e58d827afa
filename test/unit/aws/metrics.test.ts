/** The per-batch EMF metrics of the deployed functions (aws/metrics.ts). No services. */
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BATCH_METRIC_NAMES, createPipelineMetrics, recordBatchMetrics } from '../../../aws/metrics.js';
import type { BatchReport } from '../../../shared/batch-report.js';
import { NO_RECORD_DELAYS, recordDelays } from '../../../shared/record-delay.js';
import type { KafkaRecord } from '../../../shared/records.js';

/** A record of `reviews` partition 0 with this Kafka timestamp. */
const at = (timestamp: number | null, offset = 0): KafkaRecord => ({
  topic: 'reviews',
  partition: 0,
  offset,
  timestamp,
  timestampType: 'CREATE_TIME',
  key: null,
  value: null,
  headers: [],
});
describe('batch metrics', () => {
  afterEach(() => vi.restoreAllMocks());

  const report = (overrides: Partial<BatchReport> = {}): BatchReport => ({
    pipeline: 'reviews',
    records: 10,
    inserted: 6,
    updated: 1,
    skipped: 1,
    deduplicated: 1,
    deadLettered: 1,
    alreadyDeadLettered: 2,
    durationMs: 42,
    attempts: 1,
    failed: false,
    partitions: [{ partition: 'reviews-0', first: 0, last: 9 }],
    // Committed at 10,000: the oldest record (timestamp 8,750) was 1,250 ms old then.
    recordDelays: recordDelays([at(9_000), at(8_750, 1), at(null, 2), at(9_990, 3)], 10_000),
    ...overrides,
  });

  /** The EMF document Powertools prints when the metrics are flushed. */
  function flush(metrics: Metrics): Record<string, unknown> {
    const printed: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((line: unknown) => void printed.push(String(line)));
    vi.spyOn(process.stdout, 'write').mockImplementation((line: string | Uint8Array) => (printed.push(String(line)), true));
    metrics.publishStoredMetrics();
    const document = printed.map((line) => line.trim()).find((line) => line.includes('"_aws"'));
    if (!document) throw new Error(`no EMF document printed: ${printed.join('\n')}`);
    return JSON.parse(document) as Record<string, unknown>;
  }

  it('emits every counter of a batch under the pipeline dimension', () => {
    const metrics = createPipelineMetrics('reviews', 'StorageConsumer/test');
    recordBatchMetrics(metrics, report());
    const emf = flush(metrics);
    expect(emf).toMatchObject({
      service: 'storage-consumer',
      pipeline: 'reviews',
      Records: 10,
      Inserted: 6,
      Updated: 1,
      Skipped: 1,
      DeadLettered: 1,
      AlreadyDeadLettered: 2,
      BatchDurationMs: 42,
      BatchFailed: 0,
      RecordDelayMs: 1250,
    });
    const directive = (
      emf._aws as { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string }> }> }
    ).CloudWatchMetrics[0]!;
    expect(directive.Namespace).toBe('StorageConsumer/test');
    expect(directive.Dimensions).toEqual([['service', 'pipeline']]);
    expect(directive.Metrics.map((metric) => metric.Name).sort()).toEqual(Object.values(BATCH_METRIC_NAMES).sort());
  });

  it('counts a batch handed back for redelivery as BatchFailed = 1', () => {
    const metrics = createPipelineMetrics('app-stats', 'StorageConsumer/test');
    recordBatchMetrics(
      metrics,
      report({
        pipeline: 'app-stats',
        failed: true,
        inserted: 0,
        updated: 0,
        skipped: 0,
        deadLettered: 0,
        recordDelays: NO_RECORD_DELAYS,
      }),
    );
    const emf = flush(metrics);
    expect(emf).toMatchObject({ pipeline: 'app-stats', BatchFailed: 1, Inserted: 0 });
    // Not stored: no freshness to tell (a 0 would claim the records were fresh).
    expect(emf).not.toHaveProperty(BATCH_METRIC_NAMES.recordDelayMs);
  });

  it('emits no RecordDelayMs for a stored batch whose records carry no timestamp', () => {
    const metrics = createPipelineMetrics('reviews', 'StorageConsumer/test');
    recordBatchMetrics(metrics, report({ recordDelays: recordDelays([at(null), at(null, 1)], 10_000) }));
    const emf = flush(metrics);
    expect(emf).toMatchObject({ Records: 10, BatchFailed: 0 });
    expect(emf).not.toHaveProperty(BATCH_METRIC_NAMES.recordDelayMs);
  });
});
