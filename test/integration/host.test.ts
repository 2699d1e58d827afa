import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost } from '../../host/run.js';
import type { HostHandle } from '../../host/run.js';
import { loadHostSettings } from '../../config/host-settings.js';
import type { HostSettings } from '../../config/host-settings.js';
import { PIPELINES, PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  committedOffsets,
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  temporaryDirectory,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { PipelineNames } from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { captureLogger } from '../helpers/lambda-events.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';

// One in-process host runs the three pipelines for the whole file, as `npm run host` would;
// the replay test stops it and starts another on the same groups.
const TABLES = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, PIPELINES[name].table.name])) as Record<PipelineName, string>;

let schema: TestSchema;
let admin: Admin;
let names: PipelineNames;
let settings: HostSettings;
let host: HostHandle;
let heartbeats: Awaited<ReturnType<typeof temporaryDirectory>>;

beforeAll(async () => {
  // The handlers' INFO line per batch would drown the test output.
  process.env.POWERTOOLS_LOG_LEVEL = 'WARN';
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'host');
  admin = testKafka('host-test').admin();
  await admin.connect();
  names = await createTestPipelines('host');
  heartbeats = await temporaryDirectory('host-flow-');
  settings = loadHostSettings(
    hostEnvironment({
      databaseUrl: schema.url,
      names,
      heartbeatDir: heartbeats.path,
      // Small reviews batches: many events, many commits to watch.
      extra: { STORAGE_MAX_POLL_RECORDS_REVIEWS: '50' },
    }),
  );
  host = startHost(settings, { logger: captureLogger() });
  expect(await host.running).toBe(true);
});

afterAll(async () => {
  await host?.stop();
  await admin?.disconnect();
  await schema?.drop();
  await heartbeats?.remove();
});

let sequence = 0;
const review = (overrides: Record<string, unknown> = {}) => ({ ...sampleReview(), review_id: `gp:${(sequence += 1)}`, ...overrides });
const appStats = () => ({ ...sampleAppStats(), crawled_at: `2026-11-30T06:00:00.${String((sequence += 1)).padStart(6, '0')}` });
const networkMetrics = () => ({ ...sampleNetworkMetrics(), analysis_id: crypto.randomUUID() });

/**
 * For every partition, the group's committed offset C must be covered by stored effects: the
 * rows plus dead letters with offsets below C number exactly C (each test message has its own
 * natural key). Returns the committed offsets.
 */
async function assertCommittedIsDurable(pipeline: PipelineName): Promise<Map<number, bigint>> {
  const committed = await committedOffsets(admin, names.groups[pipeline], names.topics[pipeline]);
  for (const [partition, offset] of committed) {
    if (offset < 0n) continue;
    const { rows } = await schema.pool.query<{ stored: string }>(
      `SELECT (SELECT count(*) FROM ${TABLES[pipeline]} WHERE source_partition = $1 AND source_offset < $2)
            + (SELECT count(*) FROM dead_letter_events WHERE topic = $3 AND partition = $1 AND kafka_offset < $2) AS stored`,
      [partition, offset.toString(), names.topics[pipeline]],
    );
    expect(BigInt(rows[0]?.stored ?? '0'), `${pipeline} partition ${partition} committed ${offset}`).toBe(offset);
  }
  return committed;
}

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await schema.pool.query<{ n: string }>(sql, params);
  return Number(rows[0]?.n ?? 0);
}

describe('host: poll, invoke, commit', () => {
  it('stores all three topics and never commits an offset before its rows are durable', async () => {
    // Prepare
    const before = { reviews: await count('SELECT count(*) AS n FROM reviews') };

    // Act
    await Promise.all([
      produce(
        names.topics.reviews,
        jsonMessages(
          Array.from({ length: 600 }, () => review()),
          { key: (index) => `k${index}` },
        ),
      ),
      produce(names.topics['app-stats'], jsonMessages(Array.from({ length: 60 }, appStats), { key: (index) => `a${index}` })),
      produce(names.topics['network-metrics'], jsonMessages(Array.from({ length: 6 }, networkMetrics), { key: (index) => `n${index}` })),
    ]);
    // Watch the commits while the host works: none may ever be ahead of the database.
    await waitUntil('every pipeline to commit to its end', async () => {
      let done = true;
      for (const pipeline of PIPELINE_NAMES) {
        const committed = await assertCommittedIsDurable(pipeline);
        const total = [...committed.values()].reduce((sum, offset) => sum + (offset > 0n ? offset : 0n), 0n);
        const produced: { readonly [N in PipelineName]?: number } = { reviews: 600, 'app-stats': 60, 'network-metrics': 6 };
        done &&= total === BigInt(produced[pipeline] ?? 0);
      }
      return done;
    });

    // Assess
    expect(await count('SELECT count(*) AS n FROM reviews')).toBe(before.reviews + 600);
    expect(await count('SELECT count(*) AS n FROM app_stats')).toBe(60);
    expect(await count('SELECT count(*) AS n FROM network_metrics')).toBe(6);
    expect(await count('SELECT count(DISTINCT source_partition) AS n FROM reviews')).toBe(3);
  });

  it('dead-letters a poison message between good ones and keeps the partition flowing', async () => {
    // Prepare: everything on partition 1 of network-metrics
    const { topics, groups } = names;
    const start = (await committedOffsets(admin, groups['network-metrics'], topics['network-metrics'])).get(1) ?? -1n;
    const first = start < 0n ? 0n : start;
    const values = [networkMetrics(), 'not json', networkMetrics(), { ...networkMetrics(), duration_ms: -5 }, networkMetrics()];

    // Act
    await produce(topics['network-metrics'], jsonMessages(values, { partition: 1 }));
    await waitForCommittedToEnd(admin, groups['network-metrics'], topics['network-metrics']);
    await produce(topics['network-metrics'], jsonMessages([networkMetrics()], { partition: 1 }));
    const committed = await waitForCommittedToEnd(admin, groups['network-metrics'], topics['network-metrics']);

    // Assess
    const { rows: letters } = await schema.pool.query<{ kafka_offset: string; reason: string }>(
      'SELECT kafka_offset::text, reason FROM dead_letter_events WHERE topic = $1 ORDER BY dead_letter_events.kafka_offset',
      [topics['network-metrics']],
    );
    expect(letters).toEqual([
      { kafka_offset: String(first + 1n), reason: 'invalid_json' },
      { kafka_offset: String(first + 3n), reason: 'invalid_message' },
    ]);
    const { rows: stored } = await schema.pool.query<{ source_offset: string }>(
      'SELECT source_offset::text FROM network_metrics WHERE source_partition = 1 AND source_offset >= $1 ORDER BY network_metrics.source_offset',
      [first.toString()],
    );
    expect(stored.map((row) => BigInt(row.source_offset) - first)).toEqual([0n, 2n, 4n, 5n]);
    expect(committed.get(1)).toBe(first + 6n);
    await assertCommittedIsDurable('network-metrics');
  });

  it('stores a network-metrics message while a reviews flood is still being ingested', async () => {
    // Prepare
    const flood = 20_000;
    const before = await count('SELECT count(*) AS n FROM reviews');
    const analysisId = crypto.randomUUID();

    // Act: the flood, then, once it is being ingested, one network-metrics message
    await produce(
      names.topics.reviews,
      jsonMessages(
        Array.from({ length: flood }, () => review()),
        { key: (index) => `f${index}` },
      ),
    );
    await waitUntil(
      'the flood to be ingested',
      async () => (await count('SELECT count(*) AS n FROM reviews')) >= before + 1_000,
      60_000,
      50,
    );
    const producedAt = Date.now();
    await produce(names.topics['network-metrics'], jsonMessages([{ ...sampleNetworkMetrics(), analysis_id: analysisId }]));
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, 120_000);

    // Assess: the metric's transaction ran before the flood's last one (no wall-clock threshold)
    const { rows } = await schema.pool.query<{ reviews_after: string; latency_ms: string }>(
      `SELECT (SELECT count(*) FROM reviews WHERE ingested_at > m.ingested_at) AS reviews_after,
              extract(epoch FROM m.ingested_at - to_timestamp($2::double precision / 1000)) * 1000 AS latency_ms
         FROM network_metrics m WHERE m.analysis_id = $1`,
      [analysisId, producedAt],
    );
    expect(rows).toHaveLength(1);
    expect(Number(rows[0]?.reviews_after)).toBeGreaterThan(0);
    console.info(
      `isolation: network-metrics stored ${Math.round(Number(rows[0]?.latency_ms))} ms after it was produced, ${rows[0]?.reviews_after} flood reviews later`,
    );
    expect(await count('SELECT count(*) AS n FROM reviews')).toBe(before + flood);
    await assertCommittedIsDurable('reviews');
  });

  it('replays one group from the earliest offset: no duplicates, no regression, other groups untouched', async () => {
    // Prepare: a review whose newer version was produced before an older one (a late message)
    const id = `gp:late-${Date.now()}`;
    await produce(
      names.topics.reviews,
      jsonMessages(
        [
          review({ review_id: id, thumbs_up_count: 20, last_synced_at: '2026-11-30T08:00:00Z' }),
          review({ review_id: id, thumbs_up_count: 5, last_synced_at: '2026-11-30T07:00:00Z' }),
        ],
        { key: () => id },
      ),
    );
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    const snapshot = async () =>
      (
        await schema.pool.query(
          `SELECT (SELECT md5(string_agg(r::text, ',' ORDER BY r.id)) FROM reviews r) AS reviews,
                  (SELECT md5(string_agg(a::text, ',' ORDER BY a.id)) FROM app_stats a) AS app_stats,
                  (SELECT md5(string_agg(n::text, ',' ORDER BY n.id)) FROM network_metrics n) AS network_metrics,
                  (SELECT count(*) FROM dead_letter_events) AS dead_letters`,
        )
      ).rows[0];
    const before = await snapshot();
    const others = async () =>
      Promise.all(
        (['app-stats', 'network-metrics'] as const).map(async (pipeline) => [
          ...(await committedOffsets(admin, names.groups[pipeline], names.topics[pipeline])),
        ]),
      );
    const othersBefore = await others();
    expect(await host.stop()).toBe(0);

    // Act: reset the reviews group alone (the host left the group, so it is empty) and run again
    await admin.resetOffsets({ groupId: names.groups.reviews, topic: names.topics.reviews, earliest: true });
    const logger = captureLogger();
    host = startHost(settings, { logger });
    expect(await host.running).toBe(true);
    const committed = await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, 120_000);

    // Assess
    expect([...committed.values()].reduce((sum, offset) => sum + offset, 0n)).toBeGreaterThan(20_000n);
    expect(await snapshot()).toEqual(before);
    expect(await others()).toEqual(othersBefore);
    const { rows } = await schema.pool.query('SELECT thumbs_up_count, last_synced_at FROM reviews WHERE review_id = $1', [id]);
    expect(rows).toEqual([{ thumbs_up_count: 20, last_synced_at: new Date('2026-11-30T08:00:00Z') }]);
  });
});
