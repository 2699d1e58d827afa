/** The per-batch EMF metrics of the deployed functions (aws/metrics.ts). No services. */
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BATCH_METRIC_NAMES, createPipelineMetrics, recordBatchMetrics } from '../../../aws/metrics.js';
import type { BatchReport } from '../../../shared/batch-report.js';
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
    recordBatchMetrics(metrics, report({ pipeline: 'app-stats', failed: true, inserted: 0, updated: 0, skipped: 0, deadLettered: 0 }));
    expect(flush(metrics)).toMatchObject({ pipeline: 'app-stats', BatchFailed: 1, Inserted: 0 });
  });
});
