import { decodeAppStats } from './contracts/app-stats.js';
import { decodeNetworkMetrics } from './contracts/network-metrics.js';
import { decodeReview } from './contracts/reviews.js';
import type { AppStatsMessage, Decoder, NetworkMetricsMessage, ReviewMessage } from './contracts/types.js';
import type { PipelineName } from './pipeline-names.js';
import type { KafkaRecord } from './types.js';
import type { ColumnDescription, TableDescription } from './upsert.js';

/** A decoded message bound to its application id and its Kafka coordinates: one table row. */
export interface BoundRow<M> {
  readonly message: M;
  /** BIGINT as text: never rounded through `Number`. */
  readonly applicationId: string;
  readonly record: KafkaRecord;
}

/** What makes one pipeline different from another; the batch flow itself is shared. */
export interface PipelineDefinition<M extends { readonly package_name: string }> {
  readonly name: PipelineName;
  readonly decode: Decoder<M>;
  readonly table: TableDescription<BoundRow<M>>;
  /** The natural key, for in-batch de-duplication (same columns as the UNIQUE key). */
  readonly naturalKey: (row: BoundRow<M>) => string;
  /** Whether a later row with the same key replaces the kept one; absent: the first wins. */
  readonly prefer?: (candidate: BoundRow<M>, kept: BoundRow<M>) => boolean;
}

/** A column carried by the message under the same name. */
function field<M, K extends keyof M & string>(name: K, type: string): ColumnDescription<BoundRow<M>> {
  return { name, type, value: (row) => row.message[name] };
}

function commonColumns<M>(): ColumnDescription<BoundRow<M>>[] {
  return [{ name: 'application_id', type: 'bigint', value: (row) => row.applicationId }];
}

function lineageColumns<M>(): ColumnDescription<BoundRow<M>>[] {
  return [
    { name: 'source_partition', type: 'integer', value: (row) => row.record.partition },
    { name: 'source_offset', type: 'bigint', value: (row) => row.record.offset },
  ];
}

const appStats: PipelineDefinition<AppStatsMessage> = {
  name: 'app-stats',
  decode: decodeAppStats,
  table: {
    name: 'app_stats',
    columns: [
      ...commonColumns<AppStatsMessage>(),
      field('crawled_at', 'timestamptz'),
      field('score', 'double precision'),
      field('ratings_count', 'bigint'),
      field('reviews_count', 'bigint'),
      field('min_installs', 'bigint'),
      field('real_installs', 'bigint'),
      {
        // A 2-D array parameter cannot carry NULL rows, so each histogram travels as an array literal.
        name: 'histogram',
        type: 'text',
        select: 'input.histogram::bigint[]',
        value: (row) => (row.message.histogram ? `{${row.message.histogram.join(',')}}` : null),
      },
      field('price', 'numeric'),
      field('currency', 'text'),
      { name: 'app_version', type: 'text', value: (row) => row.message.version },
      field('app_updated_at', 'timestamptz'),
      ...lineageColumns<AppStatsMessage>(),
    ],
    conflictColumns: ['application_id', 'crawled_at'],
  },
  naturalKey: (row) => `${row.applicationId}|${row.message.crawled_at}`,
};

const REVIEW_UPDATED_COLUMNS = [
  'user_name',
  'content',
  'score',
  'thumbs_up_count',
  'review_created_version',
  'app_version',
  'reviewed_at',
  'reply_content',
  'replied_at',
  'last_synced_at',
  'source_partition',
  'source_offset',
] as const;

const reviews: PipelineDefinition<ReviewMessage> = {
  name: 'reviews',
  decode: decodeReview,
  table: {
    name: 'reviews',
    columns: [
      field('review_id', 'text'),
      ...commonColumns<ReviewMessage>(),
      field('user_name', 'text'),
      field('content', 'text'),
      field('score', 'smallint'),
      field('thumbs_up_count', 'integer'),
      field('review_created_version', 'text'),
      field('app_version', 'text'),
      field('reviewed_at', 'timestamptz'),
      field('reply_content', 'text'),
      field('replied_at', 'timestamptz'),
      field('last_synced_at', 'timestamptz'),
      ...lineageColumns<ReviewMessage>(),
    ],
    conflictColumns: ['review_id'],
    // Never review_id / application_id (identity), first_seen_at or sentiment (not ours).
    update: {
      columns: REVIEW_UPDATED_COLUMNS,
      where: 'EXCLUDED.last_synced_at > reviews.last_synced_at',
      keepWhere:
        "input.last_synced_at > COALESCE((SELECT stored.last_synced_at FROM reviews AS stored WHERE stored.review_id = input.review_id), '-infinity')",
    },
  },
  naturalKey: (row) => row.message.review_id,
  // UtcTimestamp strings compare as instants; on a tie the first in the event stays, like the guard.
  prefer: (candidate, kept) => candidate.message.last_synced_at > kept.message.last_synced_at,
};

const networkMetrics: PipelineDefinition<NetworkMetricsMessage> = {
  name: 'network-metrics',
  decode: decodeNetworkMetrics,
  table: {
    name: 'network_metrics',
    columns: [
      field('analysis_id', 'uuid'),
      ...commonColumns<NetworkMetricsMessage>(),
      field('captured_at', 'timestamptz'),
      field('duration_ms', 'integer'),
      field('packet_count', 'bigint'),
      field('bytes_sent', 'bigint'),
      field('bytes_received', 'bigint'),
      field('tcp_connections', 'integer'),
      field('dns_queries', 'integer'),
      field('unique_hosts', 'integer'),
      field('avg_rtt_ms', 'double precision'),
      field('retransmission_rate', 'double precision'),
      {
        name: 'protocols',
        type: 'jsonb',
        value: (row) => (row.message.protocols ? JSON.stringify(row.message.protocols) : null),
      },
      field('analyzer_version', 'text'),
      ...lineageColumns<NetworkMetricsMessage>(),
    ],
    conflictColumns: ['analysis_id'],
  },
  naturalKey: (row) => row.message.analysis_id.toLowerCase(),
};

/** The three pipelines by name. */
export const PIPELINE_DEFINITIONS = {
  'app-stats': appStats,
  reviews,
  'network-metrics': networkMetrics,
} as const satisfies Record<PipelineName, { readonly name: PipelineName }>;

/** Any pipeline's definition, with its message type erased. */
export type AnyPipelineDefinition = (typeof PIPELINE_DEFINITIONS)[PipelineName];
