/**
 * The docs/design.md appendix messages, one per topic, as fresh plain objects (mutate freely). One source
 * for the sample events (`scripts/generate-events.ts`), `npm run produce:sample` and the tests.
 */

/** The `app-stats` message of the docs/design.md appendix. */
export function sampleAppStats(): Record<string, unknown> {
  return {
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
  };
}

/** The `reviews` message of the docs/design.md appendix. */
export function sampleReview(): Record<string, unknown> {
  return {
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
  };
}

/** The `network-metrics` message of the docs/design.md appendix. */
export function sampleNetworkMetrics(): Record<string, unknown> {
  return {
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
  };
}
