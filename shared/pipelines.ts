/**
 * The pipelines, one per topic (docs/design.md section 1): the one place a pipeline is described.
 * Adding one: a spec below, its contract (shared/contracts/), its migration and its handler entry
 * (docs/design.md, "adding a pipeline"); test/unit/shared/pipelines.test.ts finds any that is missing.
 */
import type { AppStatsMessage } from './contracts/app-stats.js';
import { decodeAppStats } from './contracts/app-stats.js';
import type { NetworkMetricsMessage } from './contracts/network-metrics.js';
import { decodeNetworkMetrics } from './contracts/network-metrics.js';
import type { ReviewMessage } from './contracts/reviews.js';
import { decodeReview } from './contracts/reviews.js';
import type { PipelineSpec } from './pipeline-spec.js';
import { applicationColumn, field, lineageColumns } from './pipeline-spec.js';

const appStats: PipelineSpec<AppStatsMessage, 'app-stats'> = {
  name: 'app-stats',
  topic: 'app-stats',
  group: 'storage-consumer.app-stats',
  batchSize: 200,
  decode: decodeAppStats,
  table: {
    name: 'app_stats',
    columns: [
      applicationColumn(),
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
      ...lineageColumns(),
    ],
    conflictColumns: ['application_id', 'crawled_at'],
  },
  naturalKey: (row) => `${row.applicationId}|${row.message.crawled_at}`,
  lambda: {
    // Decode + validate up to 200 records; the heap needs < 100 MB.
    memorySize: 512,
    // Hourly crawl, nobody waiting: fuller batches, fewer transactions.
    batchingWindowSeconds: 10,
    // 1 is always up; 3 = the topic's partitions.
    pollers: { minimum: 1, maximum: 3 },
  },
  // dev shares a smaller cluster with other teams: floods drain more slowly there.
  lagAlarmThreshold: { default: 5_000, dev: 20_000 },
  // Hourly, nobody waiting: a crawl's stats stored within 5 minutes leave 55 for the next one,
  // and room for a 10 s batching window, a spent retry budget (31 s) and a restart. dev: slower cluster.
  freshnessObjectiveSeconds: { default: 300, dev: 900 },
  sample: () => ({
    package_name: 'com.example.weather',
    crawled_at: '2026-11-30T06:00:00.123456',
    score: 4.31,
    ratings_count: 182734,
    reviews_count: 40211,
    min_installs: 10000000,
    real_installs: 14532118,
    histogram: [9120, 3011, 7420, 30110, 133073],
    price: 0,
    currency: 'USD',
    version: '7.4.1',
    app_updated_at: '2026-11-21T14:03:00Z',
  }),
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

const reviews: PipelineSpec<ReviewMessage, 'reviews'> = {
  name: 'reviews',
  topic: 'reviews',
  group: 'storage-consumer.reviews',
  batchSize: 500,
  decode: decodeReview,
  table: {
    name: 'reviews',
    columns: [
      field('review_id', 'text'),
      applicationColumn(),
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
      ...lineageColumns(),
    ],
    conflictColumns: ['review_id'],
    // Never review_id / application_id (identity), first_seen_at or sentiment (not ours).
    update: {
      columns: REVIEW_UPDATED_COLUMNS,
      where: 'EXCLUDED.last_synced_at > reviews.last_synced_at',
      keepWhere:
        'input.last_synced_at > COALESCE((SELECT stored.last_synced_at FROM reviews AS stored WHERE stored.review_id = ' +
        "input.review_id), '-infinity')",
    },
  },
  naturalKey: (row) => row.message.review_id,
  // UtcTimestamp strings compare as instants; on a tie the first in the event stays, like the guard.
  prefer: (candidate, kept) => candidate.message.last_synced_at > kept.message.last_synced_at,
  lambda: {
    // 500 records per batch and floods of 200,000: a full vCPU share halves the batch time.
    memorySize: 1024,
    batchingWindowSeconds: 5,
    pollers: { minimum: 1, maximum: 3 },
  },
  // Floods (200,000 in 5-15 minutes) are normal: the threshold is a flood that is not draining.
  lagAlarmThreshold: { default: 150_000, dev: 400_000 },
  // A flood is produced in 5-15 minutes: a review older than 15 minutes when stored means the
  // pipeline drains more slowly than the crawler's slowest flood arrives (< 222 reviews/s),
  // and the backlog grows into the next hour's crawl. dev: the shared cluster's floods drain slower.
  freshnessObjectiveSeconds: { default: 900, dev: 1800 },
  sample: () => ({
    review_id: 'gp:AOqpTOEx3k1s9QeV',
    package_name: 'com.example.weather',
    user_name: 'Sara K.',
    content: 'Accurate forecasts, but the widget stopped updating.',
    score: 3,
    thumbs_up_count: 17,
    review_created_version: '7.4.0',
    app_version: '7.4.1',
    reviewed_at: '2026-11-28T19:44:02',
    reply_content: null,
    replied_at: null,
    last_synced_at: '2026-11-30T06:02:11.480113Z',
  }),
};

const networkMetrics: PipelineSpec<NetworkMetricsMessage, 'network-metrics'> = {
  name: 'network-metrics',
  topic: 'network-metrics',
  group: 'storage-consumer.network-metrics',
  batchSize: 50,
  decode: decodeNetworkMetrics,
  table: {
    name: 'network_metrics',
    columns: [
      field('analysis_id', 'uuid'),
      applicationColumn(),
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
      ...lineageColumns(),
    ],
    conflictColumns: ['analysis_id'],
  },
  naturalKey: (row) => row.message.analysis_id.toLowerCase(),
  lambda: {
    // A user is waiting: enough CPU for a quick cold start and a small batch.
    memorySize: 512,
    // A user is waiting (docs/design.md section 1: under 1 s): no batching window. Kafka's default is 500 ms.
    batchingWindowSeconds: 0,
    // 1 is always up: no cold scaling while a user waits.
    pollers: { minimum: 1, maximum: 3 },
  },
  lagAlarmThreshold: { default: 20, dev: 100 },
  // docs/design.md section 1: a user is waiting, visible within a second even during a reviews
  // flood. dev shares a smaller cluster with other teams: 5 s there.
  freshnessObjectiveSeconds: { default: 1, dev: 5 },
  sample: () => ({
    analysis_id: '9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b',
    package_name: 'com.example.weather',
    captured_at: '2026-11-30T09:15:00Z',
    duration_ms: 60000,
    packet_count: 8412,
    bytes_sent: 412330,
    bytes_received: 5120987,
    tcp_connections: 23,
    dns_queries: 41,
    unique_hosts: 12,
    avg_rtt_ms: 38.2,
    retransmission_rate: 0.004,
    protocols: { tls: 7010, dns: 82, quic: 1320 },
    analyzer_version: '1.8.0',
  }),
};

/** Every pipeline, in the order everything derived lists them (templates, status, dashboards). */
const SPECS = [appStats, reviews, networkMetrics] as const;

/** A pipeline's name: also its default topic. */
export type PipelineName = (typeof SPECS)[number]['name'];

/** The pipelines by name. */
export const PIPELINES = Object.freeze(Object.fromEntries(SPECS.map((spec) => [spec.name, spec]))) as {
  readonly [N in PipelineName]: Extract<(typeof SPECS)[number], { readonly name: N }>;
};

/** The pipelines' names, in order. */
export const PIPELINE_NAMES: readonly PipelineName[] = Object.freeze(SPECS.map((spec) => spec.name));

/** Any pipeline's spec, with its message type erased. */
export type AnyPipelineSpec = (typeof PIPELINES)[PipelineName];

/** Type guard for a pipeline name read from outside (a variable, a CLI argument). */
export function isPipelineName(value: string): value is PipelineName {
  return (PIPELINE_NAMES as readonly string[]).includes(value);
}
