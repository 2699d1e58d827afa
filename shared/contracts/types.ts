import type { Rejection } from '../types.js';

/**
 * A timestamp as decoded from a message: always normalised to UTC with six fractional digits,
 * `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`, so that
 *  - PostgreSQL receives an explicit offset (no dependence on a session or machine time zone),
 *  - microseconds are kept exactly (never rounded through a JavaScript `Date`),
 *  - two values compare correctly as plain strings (used by the reviews de-duplication).
 */
export type UtcTimestamp = string & { readonly __brand: 'UtcTimestamp' };

/** The outcome of decoding one record's value: a message, or a rejection. Never throws. */
export type DecodeResult<T> =
  | { readonly ok: true; readonly message: T }
  | { readonly ok: false; readonly rejection: Rejection };

/** `app-stats` message, contract v1 (optional fields absent or null are `null`). */
export interface AppStatsMessage {
  readonly package_name: string;
  readonly crawled_at: UtcTimestamp;
  readonly score: number | null;
  readonly ratings_count: number | null;
  readonly reviews_count: number | null;
  readonly min_installs: number | null;
  readonly real_installs: number | null;
  readonly histogram: readonly number[] | null;
  /** Exact decimal text with at most two decimals, e.g. `"4.99"`. */
  readonly price: string | null;
  readonly currency: string | null;
  readonly version: string | null;
  readonly app_updated_at: UtcTimestamp | null;
}

/** `reviews` message, contract v1. */
export interface ReviewMessage {
  readonly review_id: string;
  readonly package_name: string;
  readonly user_name: string | null;
  readonly content: string | null;
  readonly score: number;
  readonly thumbs_up_count: number;
  readonly review_created_version: string | null;
  readonly app_version: string | null;
  readonly reviewed_at: UtcTimestamp;
  readonly reply_content: string | null;
  readonly replied_at: UtcTimestamp | null;
  readonly last_synced_at: UtcTimestamp;
}

/** `network-metrics` message, contract v1. */
export interface NetworkMetricsMessage {
  readonly analysis_id: string;
  readonly package_name: string;
  readonly captured_at: UtcTimestamp;
  readonly duration_ms: number;
  readonly packet_count: number;
  readonly bytes_sent: number;
  readonly bytes_received: number;
  readonly tcp_connections: number | null;
  readonly dns_queries: number | null;
  readonly unique_hosts: number | null;
  readonly avg_rtt_ms: number | null;
  readonly retransmission_rate: number | null;
  readonly protocols: Readonly<Record<string, number>> | null;
  readonly analyzer_version: string | null;
}

/** Decodes one record value (raw bytes or null) into a message of type `T`. */
export type Decoder<T> = (value: Buffer | null) => DecodeResult<T>;
