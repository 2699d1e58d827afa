/**
 * `npm run events`: writes the sample Lambda events in `events/` (one file per topic and case),
 * built by the same code that builds the host's events. They are what `sls invoke local -p`
 * feeds the functions, and what test/integration/invoke-local.test.ts asserts on. They expect
 * the apps of `SAMPLE_APPLICATIONS` to be registered (docs/deployment.md shows the SQL).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { EventSourceOptions, SourceRecord } from '../shared/kafka-event-builder.js';
import { buildKafkaEvent } from '../shared/kafka-event-builder.js';
import type { KafkaEvent } from '../shared/kafka-event.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../dev/sample-messages.js';
import type { PipelineName } from '../shared/pipelines.js';
import { PIPELINE_NAMES, PIPELINES } from '../shared/pipelines.js';

/** The App API rows the sample events refer to (`com.example.unregistered` is deliberately absent). */
export const SAMPLE_APPLICATIONS = [
  { id: 1, package_name: 'com.example.weather' },
  { id: 2, package_name: 'com.example.notes' },
  { id: 3, package_name: 'com.example.chess' },
] as const;

const MSK: EventSourceOptions = {
  eventSource: 'aws:kafka',
  eventSourceArn: 'arn:aws:kafka:eu-west-1:123456789012:cluster/storage-prod/9a4f2c6e-1b3d-4e5f-8a7b-6c5d4e3f2a1b-3',
  bootstrapServers: 'b-1.storage-prod.kafka.eu-west-1.amazonaws.com:9098,b-2.storage-prod.kafka.eu-west-1.amazonaws.com:9098',
};
const SELF_MANAGED: EventSourceOptions = {
  eventSource: 'SelfManagedKafka',
  bootstrapServers: 'b-1.kafka.dev.storage.internal:9096,b-2.kafka.dev.storage.internal:9096',
};

const BASE_TIMESTAMP = Date.parse('2026-11-30T06:05:00Z');
const PRODUCER_HEADER = { name: 'producer', value: 'crawler/2.3.0' } as const;

/** A record's value: an object becomes JSON, a string UTF-8, a Buffer stays raw, null is null. */
type Value = object | string | Buffer | null;

function record(topic: string, partition: number, offset: number, value: Value, key?: string): SourceRecord {
  const bytes =
    value === null ? null : Buffer.isBuffer(value) ? value : Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));
  return {
    topic,
    partition,
    offset,
    timestamp: BASE_TIMESTAMP + offset * 1000,
    key: key === undefined ? null : Buffer.from(key),
    value: bytes,
    headers: [PRODUCER_HEADER],
  };
}

// --- app-stats --------------------------------------------------------------------------------

const weatherStats = (crawledAt: string) => ({ ...sampleAppStats(), crawled_at: crawledAt });
const notesStats = (crawledAt: string) => ({ package_name: 'com.example.notes', crawled_at: crawledAt });
const chessStats = (crawledAt: string) => ({
  package_name: 'com.example.chess',
  crawled_at: crawledAt,
  score: 4.8,
  price: 4.99,
  currency: 'EUR',
  histogram: [12, 4, 9, 80, 1300],
});

function appStatsEvents(): Record<string, KafkaEvent> {
  const r = (partition: number, offset: number, value: Value, key?: string) => record('app-stats', partition, offset, value, key);
  return {
    'app-stats': buildKafkaEvent(
      [
        r(0, 100, weatherStats('2026-11-30T06:00:00.123456'), 'com.example.weather'),
        r(0, 101, weatherStats('2026-11-30T07:00:00.654321'), 'com.example.weather'),
        r(1, 200, notesStats('2026-11-30T06:00:01Z'), 'com.example.notes'),
        r(2, 300, chessStats('2026-11-30T06:00:02+03:30'), 'com.example.chess'),
      ],
      MSK,
    ),
    'app-stats-poison': buildKafkaEvent(
      [
        r(0, 110, weatherStats('2026-11-30T08:00:00Z')),
        r(0, 111, Buffer.from([0x7b, 0xff, 0xfe, 0x7d])), // not UTF-8
        r(0, 112, '{"package_name": "com.example.weather", '), // not JSON
        r(1, 210, { ...notesStats('2026-11-30T08:00:00Z'), score: 7.5 }), // score above 5
        r(1, 211, null), // empty message
        r(2, 310, chessStats('2026-02-30T08:00:00Z')), // no such date
        r(2, 311, chessStats('2026-11-30T08:00:00Z')),
      ],
      MSK,
    ),
    'app-stats-unknown-app': buildKafkaEvent(
      [
        r(0, 120, { package_name: 'com.example.unregistered', crawled_at: '2026-11-30T09:00:00Z' }),
        r(0, 121, weatherStats('2026-11-30T09:00:00Z')),
      ],
      MSK,
    ),
    'app-stats-legacy': buildKafkaEvent(
      [
        // The scraper's raw objects, from before the contract: dead-lettered by design.
        r(1, 220, {
          appId: 'com.example.weather',
          title: 'Weather',
          score: 4.31,
          ratings: 182734,
          installs: '10,000,000+',
          realInstalls: 14532118,
          updated: 1763733780,
        }),
        r(1, 221, { appId: 'com.example.notes', score: 4.1, ratings: 1200, reviews: 310, histogram: [1, 2, 3, 4, 5], free: true }),
      ],
      MSK,
    ),
    'app-stats-duplicates': buildKafkaEvent(
      [
        r(0, 130, weatherStats('2026-11-30T10:00:00Z')),
        r(0, 131, { ...weatherStats('2026-11-30T10:00:00Z'), score: 4.32 }), // same app, same crawl
        r(1, 230, notesStats('2026-11-30T10:00:00Z')),
      ],
      MSK,
    ),
  };
}

// --- reviews ----------------------------------------------------------------------------------

const review = (reviewId: string, packageName: string, overrides: Record<string, unknown> = {}) => ({
  ...sampleReview(),
  review_id: reviewId,
  package_name: packageName,
  ...overrides,
});

function reviewsEvents(): Record<string, KafkaEvent> {
  const r = (partition: number, offset: number, value: Value, key?: string) => record('reviews', partition, offset, value, key);
  return {
    reviews: buildKafkaEvent(
      [
        r(0, 1000, review('gp:AOqpTOEx3k1s9QeV', 'com.example.weather'), 'gp:AOqpTOEx3k1s9QeV'),
        r(
          1,
          2000,
          review('gp:notes-0001', 'com.example.notes', { user_name: 'Ali R.', content: 'Syncs fine. 👍', score: 5, thumbs_up_count: 2 }),
          'gp:notes-0001',
        ),
        r(
          2,
          3000,
          review('gp:chess-0001', 'com.example.chess', {
            user_name: null,
            content: null,
            score: 1,
            thumbs_up_count: 0,
            reply_content: 'Fixed in 2.1',
            replied_at: '2026-11-29T10:00:00+01:00',
          }),
          'gp:chess-0001',
        ),
      ],
      SELF_MANAGED,
    ),
    'reviews-poison': buildKafkaEvent(
      [
        r(0, 1010, review('gp:weather-0002', 'com.example.weather', { score: 4 })),
        r(0, 1011, review('gp:weather-0003', 'com.example.weather', { score: 0 })), // score below 1
        r(0, 1012, review('gp:weather-0004', 'com.example.weather', { thumbs_up_count: -1 })),
        r(1, 2010, Buffer.from('{"review_id": "gp:x", "content": "caf\xe9"}', 'latin1')), // Latin-1, not UTF-8
        r(
          1,
          2011,
          `{"review_id": "gp:notes-0002", "package_name": "com.example.notes", "content": "nul \\u0000 inside", "score": 2, ` +
            `"thumbs_up_count": 0, "reviewed_at": "2026-11-28T19:44:02Z", "last_synced_at": "2026-11-30T06:00:00Z"}`,
        ),
        r(
          2,
          3010,
          `{"review_id": "gp:chess-0002", "package_name": "com.example.chess", "content": "lone \\ud800 surrogate", "score": 2, ` +
            `"thumbs_up_count": 0, "reviewed_at": "2026-11-28T19:44:02Z", "last_synced_at": "2026-11-30T06:00:00Z"}`,
        ),
        r(2, 3011, review('gp:chess-0003', 'com.example.chess', { score: 5, reviewed_at: '2026-11-29T08:00:00Z' })),
      ],
      SELF_MANAGED,
    ),
    'reviews-unknown-app': buildKafkaEvent(
      [
        r(0, 1020, review('gp:unregistered-0001', 'com.example.unregistered')),
        r(0, 1021, review('gp:weather-0005', 'com.example.weather')),
      ],
      SELF_MANAGED,
    ),
    'reviews-legacy': buildKafkaEvent(
      [
        r(1, 2020, {
          reviewId: 'gp:AOqpTOEx3k1s9QeV',
          userName: 'Sara K.',
          userImage: 'https://play-lh.googleusercontent.com/a/sara',
          content: 'Accurate forecasts, but the widget stopped updating.',
          score: 3,
          thumbsUpCount: 17,
          reviewCreatedVersion: '7.4.0',
          at: '2026-11-28 19:44:02',
          replyContent: null,
          repliedAt: null,
          appVersion: '7.4.1',
        }),
      ],
      SELF_MANAGED,
    ),
    'reviews-duplicates': buildKafkaEvent(
      [
        r(0, 1030, review('gp:weather-dup', 'com.example.weather', { thumbs_up_count: 5, last_synced_at: '2026-11-30T07:00:00Z' })),
        r(0, 1031, review('gp:weather-dup', 'com.example.weather', { thumbs_up_count: 9, last_synced_at: '2026-11-30T08:00:00Z' })),
        r(0, 1032, review('gp:weather-dup', 'com.example.weather', { thumbs_up_count: 7, last_synced_at: '2026-11-30T07:30:00Z' })),
        r(1, 2030, review('gp:notes-0003', 'com.example.notes')),
      ],
      SELF_MANAGED,
    ),
    // Needs `reviews` first: an older copy of one of its reviews (refused by the guard) and a
    // newer copy of another (updated).
    'reviews-stale-update': buildKafkaEvent(
      [
        r(0, 1040, review('gp:AOqpTOEx3k1s9QeV', 'com.example.weather', { thumbs_up_count: 3, last_synced_at: '2026-11-29T06:02:11Z' })),
        r(
          1,
          2040,
          review('gp:notes-0001', 'com.example.notes', {
            user_name: 'Ali R.',
            content: 'Syncs fine. 👍',
            score: 5,
            thumbs_up_count: 42,
            last_synced_at: '2026-12-01T06:00:00Z',
          }),
        ),
      ],
      SELF_MANAGED,
    ),
  };
}

// --- network-metrics --------------------------------------------------------------------------

const capture = (analysisId: string, packageName: string, overrides: Record<string, unknown> = {}) => ({
  ...sampleNetworkMetrics(),
  analysis_id: analysisId,
  package_name: packageName,
  ...overrides,
});

function networkMetricsEvents(): Record<string, KafkaEvent> {
  const r = (partition: number, offset: number, value: Value, key?: string) => record('network-metrics', partition, offset, value, key);
  return {
    'network-metrics': buildKafkaEvent(
      [
        r(0, 10, capture('9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b', 'com.example.weather'), '9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b'),
        r(
          2,
          20,
          capture('1c6e2b7a-0d3f-4a8e-9b5c-7d2e1f0a3b4c', 'com.example.chess', { duration_ms: 30000, protocols: null, avg_rtt_ms: null }),
        ),
      ],
      MSK,
    ),
    'network-metrics-poison': buildKafkaEvent(
      [
        r(0, 11, capture('2d7f3c8b-1e4a-4b9f-8c6d-8e3f2a1b4c5d', 'com.example.weather')),
        r(0, 12, capture('not-a-uuid', 'com.example.weather')),
        r(1, 30, capture('3e8a4d9c-2f5b-4cae-9d7e-9f4a3b2c5d6e', 'com.example.notes', { retransmission_rate: 1.5 })),
        r(1, 31, capture('4f9b5ead-3a6c-4dbf-8e8f-0a5b4c3d6e7f', 'com.example.notes', { protocols: { '': 5 } })),
        r(2, 21, '[1, 2'),
      ],
      MSK,
    ),
    'network-metrics-unknown-app': buildKafkaEvent(
      [
        r(0, 13, capture('5a0c6f1e-4b7d-4ec0-9f90-1b6c5d4e7f80', 'com.example.unregistered')),
        r(0, 14, capture('6b1d7a2f-5c8e-4fd1-8a01-2c7d6e5f8091', 'com.example.weather')),
      ],
      MSK,
    ),
    'network-metrics-legacy': buildKafkaEvent(
      [
        r(1, 32, {
          analysisId: '7c2e8b3a-6d9f-4ae2-9b12-3d8e7f6a9102',
          packageName: 'com.example.weather',
          capturedAt: '2026-11-30T09:15:00Z',
          durationMs: 60000,
          packets: 8412,
        }),
      ],
      MSK,
    ),
    'network-metrics-duplicates': buildKafkaEvent(
      [
        r(0, 15, capture('8d3f9c4b-7e0a-4bf3-8c23-4e9f8a7b0213', 'com.example.weather')),
        r(1, 33, capture('8d3f9c4b-7e0a-4bf3-8c23-4e9f8a7b0213', 'com.example.weather', { packet_count: 9000 })), // a redelivered capture
        r(2, 22, capture('9e4a0d5c-8f1b-4c04-9d34-5f0a9b8c1324', 'com.example.notes')),
      ],
      MSK,
    ),
  };
}

/** The hand-written cases per pipeline; a pipeline without them gets {@link specEvents}. */
const CASES: { readonly [N in PipelineName]?: () => Record<string, KafkaEvent> } = {
  'app-stats': appStatsEvents,
  reviews: reviewsEvents,
  'network-metrics': networkMetricsEvents,
};

/** A pipeline's `<name>.json`: its spec's sample message, once per partition (shared/pipelines.ts). */
function specEvents(name: PipelineName): Record<string, KafkaEvent> {
  const { topic, sample } = PIPELINES[name];
  return {
    [name]: buildKafkaEvent(
      [0, 1, 2].map((partition) => record(topic, partition, 0, sample())),
      MSK,
    ),
  };
}

/** Every sample event, by file name (without `.json`): every pipeline's, in order. */
export function sampleEvents(): Record<string, KafkaEvent> {
  return Object.assign({}, ...PIPELINE_NAMES.map((name) => (CASES[name] ?? (() => specEvents(name)))()));
}

/** The file's text for an event: pretty JSON, newline-terminated (stable diffs). */
export function eventFileText(event: KafkaEvent): string {
  return `${JSON.stringify(event, null, 2)}\n`;
}

/** The repository's `events/` directory. */
export const EVENTS_DIRECTORY = fileURLToPath(new URL('../events/', import.meta.url));

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await mkdir(EVENTS_DIRECTORY, { recursive: true });
  for (const [name, event] of Object.entries(sampleEvents())) {
    await writeFile(new URL(`${name}.json`, `file://${EVENTS_DIRECTORY}`), eventFileText(event));
  }
  console.log(`wrote ${Object.keys(sampleEvents()).length} events to ${EVENTS_DIRECTORY}`);
}
