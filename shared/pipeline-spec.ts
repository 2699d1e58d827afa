/**
 * What a pipeline is made of (`PipelineSpec`: its Kafka side, contract, table, Lambda deployment
 * and alarm thresholds), the columns every table shares, and the forms a pipeline's name takes in
 * variable names and CloudFormation ids. The pipelines themselves are described in pipelines.ts.
 */
import type { Decoder } from './contracts/decoder.js';
import type { StageValues } from './stages.js';
import type { KafkaRecord } from './records.js';
import type { ColumnDescription, TableDescription } from './upsert.js';

/** A decoded message bound to its application id and its Kafka coordinates: one table row. */
export interface BoundRow<M> {
  readonly message: M;
  /** BIGINT as text: never rounded through `Number`. */
  readonly applicationId: string;
  readonly record: KafkaRecord;
}

/** What makes one pipeline's batches different from another's; the batch flow itself is shared. */
export interface PipelineDefinition<M extends { readonly package_name: string }, N extends string = string> {
  /** The pipeline's name: its default topic, its handler entry `handlers/<name>.ts`. */
  readonly name: N;
  readonly decode: Decoder<M>;
  readonly table: TableDescription<BoundRow<M>>;
  /** The natural key, for in-batch de-duplication (same columns as the UNIQUE key). */
  readonly naturalKey: (row: BoundRow<M>) => string;
  /** Whether a later row with the same key replaces the kept one; absent: the first wins. */
  readonly prefer?: (candidate: BoundRow<M>, kept: BoundRow<M>) => boolean;
}

/** What the AWS deployment chooses for one pipeline's function and event source mapping. */
export interface LambdaDeployment {
  /** The function's memory in MB (memory buys CPU). */
  readonly memorySize: number;
  /** The mapping's MaximumBatchingWindowInSeconds. */
  readonly batchingWindowSeconds: number;
  /** The mapping's provisioned pollers; a stage may lower them (`minimumPollers`/`maximumPollers`). */
  readonly pollers: { readonly minimum: number; readonly maximum: number };
}

/**
 * One pipeline, described once: its Kafka side (topic, group, batch size), its contract and
 * table, its Lambda deployment and its alarm thresholds. The Serverless generation, the alarms,
 * `verify`, the dashboard, the sample events, the chaos harness and the tests derive from it
 * (docs/design.md, "adding a pipeline").
 */
export interface PipelineSpec<M extends { readonly package_name: string }, N extends string = string> extends PipelineDefinition<M, N> {
  /** The default topic (`STORAGE_TOPIC_<PIPELINE>` on the host). */
  readonly topic: string;
  /** docs/design.md section 1's consumer group id; stages may prefix it (shared/stages.ts). */
  readonly group: string;
  /** Records per batch: the mapping's BatchSize, the host's `STORAGE_MAX_POLL_RECORDS_<PIPELINE>`. */
  readonly batchSize: number;
  readonly lambda: LambdaDeployment;
  /** Above this total lag for 15 minutes the `<pipeline>-offset-lag` alarm fires and `verify` fails. */
  readonly lagAlarmThreshold: StageValues<number>;
  /**
   * Freshness objective, seconds: at most 1 % of the records may reach PostgreSQL later than
   * this after their Kafka timestamp (the p99 of `storage_consumer_record_delay_seconds` on the
   * host, of `RecordDelayMs` on Lambda). The `<pipeline>-freshness` alarm and the host's
   * `StorageConsumerFreshnessOverObjective` rule fire above it; each value is one of the host
   * histogram's buckets (host/metrics.ts), so the host's p99 is exact there.
   */
  readonly freshnessObjectiveSeconds: StageValues<number>;
  /** The docs/design.md appendix message, as a fresh plain object (the sample events start from it). */
  readonly sample: () => Record<string, unknown>;
}

/** A column carried by the message under the same name. */
export function field<M, K extends keyof M & string>(name: K, type: string): ColumnDescription<BoundRow<M>> {
  return { name, type, value: (row) => row.message[name] };
}

/** The column every table starts its data with: the application the message was bound to. */
export function applicationColumn<M>(): ColumnDescription<BoundRow<M>> {
  return { name: 'application_id', type: 'bigint', value: (row) => row.applicationId };
}

/** The columns every table ends with: where in Kafka the stored version came from. */
export function lineageColumns<M>(): ColumnDescription<BoundRow<M>>[] {
  return [
    { name: 'source_partition', type: 'integer', value: (row) => row.record.partition },
    { name: 'source_offset', type: 'bigint', value: (row) => row.record.offset },
  ];
}

/** `network-metrics` -> `NETWORK_METRICS`, the form pipelines take in variable names. */
export function envSuffix(pipeline: string): string {
  return pipeline.toUpperCase().replaceAll('-', '_');
}

/** `network-metrics` -> `NetworkMetrics`, the form pipelines take in CloudFormation ids and parameters. */
export function logicalId(pipeline: string): string {
  return pipeline
    .split('-')
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join('');
}
