import type { RowText } from '../fixtures/row-text.js';
import { doubleText } from '../fixtures/row-text.js';
import type { Queryable } from '../shared/queryable.js';
import type { AppStatsMessage } from '../shared/contracts/app-stats.js';
import type { NetworkMetricsMessage } from '../shared/contracts/network-metrics.js';
import type { ReviewMessage } from '../shared/contracts/reviews.js';

/**
 * Rows as exact text, so that "stored equals expected" is a string comparison that cannot be
 * fooled by a driver's conversions: timestamps as UTC microsecond text (`to_char`, never a JS
 * `Date`), doubles as the hex of their 8 IEEE bytes (`float8send`), integers, numerics, arrays
 * and UUIDs in PostgreSQL's own text form, JSONB as its canonical text.
 */

/** The data tables the checker reads (each pipeline's, shared/pipelines.ts). */
export const DATA_TABLES = ['app_stats', 'reviews', 'network_metrics'] as const;
export type DataTable = (typeof DATA_TABLES)[number];

/** Whether the checker can read `table`. */
export function isDataTable(table: string): table is DataTable {
  return (DATA_TABLES as readonly string[]).includes(table);
}

const utc = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')`;
const float = (column: string) => `encode(float8send(${column}), 'hex')`;
const plain = (column: string) => `${column}::text`;

/** The SQL expression that reads each message-carried column as exact text, per table. */
const COLUMN_TEXT: Readonly<Record<DataTable, Readonly<Record<string, string>>>> = {
  app_stats: {
    application_id: plain('application_id'),
    crawled_at: utc('crawled_at'),
    score: float('score'),
    ratings_count: plain('ratings_count'),
    reviews_count: plain('reviews_count'),
    min_installs: plain('min_installs'),
    real_installs: plain('real_installs'),
    histogram: plain('histogram'),
    price: plain('price'),
    currency: plain('currency'),
    app_version: plain('app_version'),
    app_updated_at: utc('app_updated_at'),
  },
  reviews: {
    review_id: plain('review_id'),
    application_id: plain('application_id'),
    user_name: plain('user_name'),
    content: plain('content'),
    score: plain('score'),
    thumbs_up_count: plain('thumbs_up_count'),
    review_created_version: plain('review_created_version'),
    app_version: plain('app_version'),
    reviewed_at: utc('reviewed_at'),
    reply_content: plain('reply_content'),
    replied_at: utc('replied_at'),
    last_synced_at: utc('last_synced_at'),
  },
  network_metrics: {
    analysis_id: plain('analysis_id'),
    application_id: plain('application_id'),
    captured_at: utc('captured_at'),
    duration_ms: plain('duration_ms'),
    packet_count: plain('packet_count'),
    bytes_sent: plain('bytes_sent'),
    bytes_received: plain('bytes_received'),
    tcp_connections: plain('tcp_connections'),
    dns_queries: plain('dns_queries'),
    unique_hosts: plain('unique_hosts'),
    avg_rtt_ms: float('avg_rtt_ms'),
    retransmission_rate: float('retransmission_rate'),
    protocols: plain('protocols'),
    analyzer_version: plain('analyzer_version'),
  },
};

/** A stored row's text plus its lineage (where it came from). */
export interface StoredRow {
  readonly text: RowText;
  readonly sourcePartition: number;
  readonly sourceOffset: string;
}

/**
 * Reads rows of `table` as text, optionally filtered by `where` (SQL over the table's columns,
 * with `values` as parameters).
 */
export async function readRows(client: Queryable, table: DataTable, where = 'TRUE', values: unknown[] = []): Promise<StoredRow[]> {
  const columns = Object.entries(COLUMN_TEXT[table]).map(([name, sql]) => `${sql} AS "${name}"`);
  const result = await client.query<Record<string, string | null>>(
    `SELECT ${columns.join(', ')}, source_partition::text AS "$partition", source_offset::text AS "$offset" FROM ${table} WHERE ${where}`,
    values,
  );
  return result.rows.map((row) => {
    const { $partition, $offset, ...text } = row;
    return { text, sourcePartition: Number($partition), sourceOffset: String($offset) };
  });
}

/** `YYYY-MM-DDTHH:MM:SS.ffffff` of a decoded (UTC-normalised) timestamp. */
function timestampText(value: string | null): string | null {
  if (value === null) return null;
  if (!value.endsWith('+00:00') || value.length !== 32) throw new Error(`not a normalised UTC timestamp: ${value}`);
  return value.slice(0, 26);
}

/** JSONB text the way PostgreSQL prints an object: keys shorter first, then by bytes; `"k": v`. */
export function jsonbObjectText(value: Readonly<Record<string, number>> | null): string | null {
  if (value === null) return null;
  const keys = Object.keys(value).sort((a, b) => {
    const left = Buffer.from(a, 'utf8');
    const right = Buffer.from(b, 'utf8');
    return left.length - right.length || Buffer.compare(left, right);
  });
  return `{${keys.map((key) => `${JSON.stringify(key)}: ${String(value[key])}`).join(', ')}}`;
}

const text = (value: number | string | null): string | null => (value === null ? null : String(value));

/** The text a decoded `app-stats` message must read back as. */
export function appStatsText(message: AppStatsMessage, applicationId: string): RowText {
  return {
    application_id: applicationId,
    crawled_at: timestampText(message.crawled_at),
    score: doubleText(message.score),
    ratings_count: text(message.ratings_count),
    reviews_count: text(message.reviews_count),
    min_installs: text(message.min_installs),
    real_installs: text(message.real_installs),
    histogram: message.histogram === null ? null : `{${message.histogram.join(',')}}`,
    price: message.price,
    currency: message.currency,
    app_version: message.version,
    app_updated_at: timestampText(message.app_updated_at),
  };
}

/** The text a decoded `reviews` message must read back as. */
export function reviewText(message: ReviewMessage, applicationId: string): RowText {
  return {
    review_id: message.review_id,
    application_id: applicationId,
    user_name: message.user_name,
    content: message.content,
    score: text(message.score),
    thumbs_up_count: text(message.thumbs_up_count),
    review_created_version: message.review_created_version,
    app_version: message.app_version,
    reviewed_at: timestampText(message.reviewed_at),
    reply_content: message.reply_content,
    replied_at: timestampText(message.replied_at),
    last_synced_at: timestampText(message.last_synced_at),
  };
}

/** The text a decoded `network-metrics` message must read back as. */
export function networkMetricsText(message: NetworkMetricsMessage, applicationId: string): RowText {
  return {
    analysis_id: message.analysis_id,
    application_id: applicationId,
    captured_at: timestampText(message.captured_at),
    duration_ms: text(message.duration_ms),
    packet_count: text(message.packet_count),
    bytes_sent: text(message.bytes_sent),
    bytes_received: text(message.bytes_received),
    tcp_connections: text(message.tcp_connections),
    dns_queries: text(message.dns_queries),
    unique_hosts: text(message.unique_hosts),
    avg_rtt_ms: doubleText(message.avg_rtt_ms),
    retransmission_rate: doubleText(message.retransmission_rate),
    protocols: jsonbObjectText(message.protocols),
    analyzer_version: message.analyzer_version,
  };
}

/** Names of the columns that differ between two rows of the same table (empty: equal). */
export function differingColumns(expected: RowText, actual: RowText): string[] {
  const names = new Set([...Object.keys(expected), ...Object.keys(actual)]);
  return [...names].filter((name) => (expected[name] ?? null) !== (actual[name] ?? null));
}
