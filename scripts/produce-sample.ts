/**
 * `npm run produce:sample`: publishes good and bad sample messages to the pipelines' topics, so a
 * newcomer sees rows and dead letters appear. Brokers: `KAFKA_BROKERS`, default
 * 127.0.0.1:`KAFKA_PORT` (9092 when unset: what `npm start` uses). Topic names follow the same `STORAGE_TOPIC_<PIPELINE>` settings.
 */
import { randomUUID } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../dev/sample-messages.js';
import { installKafkajsWorkarounds } from '../kafka/kafkajs/index.js';
import { loadConsumerSettings } from '../config/pipeline-settings.js';

const brokers = (process.env.KAFKA_BROKERS || `127.0.0.1:${process.env.KAFKA_PORT || 9092}`).split(',').map((b) => b.trim());
const { pipelines } = loadConsumerSettings();
const now = new Date();
const iso = (offsetMinutes = 0) => new Date(now.getTime() + offsetMinutes * 60_000).toISOString().replace('Z', '');
const reviewId = `gp:sample-${now.getTime()}`;

const review = (syncedMinutes: number, thumbs: number) => ({
  ...sampleReview(),
  review_id: reviewId,
  thumbs_up_count: thumbs,
  last_synced_at: iso(syncedMinutes),
});

const samples: Array<{ pipeline: keyof typeof pipelines; key: string; value: string | Buffer; expect: string }> = [
  {
    pipeline: 'app-stats',
    key: 'com.example.weather',
    value: JSON.stringify({ ...sampleAppStats(), crawled_at: iso() }),
    expect: 'row in app_stats',
  },
  { pipeline: 'reviews', key: reviewId, value: JSON.stringify(review(0, 17)), expect: 'row in reviews' },
  { pipeline: 'reviews', key: reviewId, value: JSON.stringify(review(5, 21)), expect: 'same review updated (thumbs 21)' },
  {
    pipeline: 'reviews',
    key: reviewId,
    value: JSON.stringify(review(-5, 1)),
    expect:
      'older version: not stored (in one batch with the update it counts as deduplicated, ' +
      'in a later batch as skipped by the last_synced_at guard)',
  },
  {
    pipeline: 'network-metrics',
    key: 'analysis',
    value: JSON.stringify({ ...sampleNetworkMetrics(), analysis_id: randomUUID(), package_name: 'com.example.chat', captured_at: iso() }),
    expect: 'row in network_metrics',
  },
  { pipeline: 'reviews', key: 'bad-json', value: '{"review_id": "gp:broken", ', expect: 'dead letter: invalid_json' },
  { pipeline: 'reviews', key: 'bad-bytes', value: Buffer.from([0xc3, 0x28, 0x7b]), expect: 'dead letter: invalid_encoding' },
  {
    pipeline: 'reviews',
    key: 'bad-score',
    value: JSON.stringify({ ...review(0, 1), review_id: `${reviewId}-bad`, score: 9 }),
    expect: 'dead letter: invalid_message (score)',
  },
  {
    pipeline: 'app-stats',
    key: 'com.example.unknown',
    value: JSON.stringify({ package_name: 'com.example.unknown', crawled_at: iso() }),
    expect: 'dead letter: unknown_application',
  },
  {
    pipeline: 'app-stats',
    key: 'legacy',
    value: JSON.stringify({ appId: 'com.example.weather', scoreText: '4.3', installs: '10,000,000+' }),
    expect: 'dead letter: invalid_message (legacy camelCase)',
  },
];

installKafkajsWorkarounds();
const kafka = new Kafka({ clientId: 'storage-consumer-sample', brokers, logLevel: logLevel.NOTHING });
const producer = kafka.producer();
await producer.connect();
try {
  for (const sample of samples) {
    const topic = pipelines[sample.pipeline].topic;
    const [meta] = await producer.send({ topic, messages: [{ key: sample.key, value: sample.value }] });
    console.log(`${topic}-${meta?.partition}@${meta?.baseOffset}  -> ${sample.expect}`);
  }
} finally {
  await producer.disconnect();
}
console.log(`sent ${samples.length} messages to ${brokers.join(',')}`);
