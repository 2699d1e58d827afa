import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHostSettings } from '../../config/host-settings.js';
import { startHost } from '../../host/run.js';
import type { HostHandle } from '../../host/run.js';
import { recordOperatorAction } from '../../shared/operator-actions.js';
import { runCli } from '../helpers/cli.js';
import type { TestSchema } from '../helpers/database.js';
import type { HostTestStack, PipelineNames } from '../helpers/host.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  openHostTestStack,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import { createTestTopic, produce } from '../helpers/kafka.js';
import { captureLogger } from '../helpers/lambda-events.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';

/**
 * `storage-consumer reconcile` against a real broker, real hosts and PostgreSQL: a clean run
 * accounts for every record (rows, superseded versions, dead letters), planted defects are each
 * found by class and coordinates, and it runs beside hosts storing and a producer writing, after
 * a topic was re-created, after retention removed a partition's start and without committed offsets.
 */

interface ProblemJson {
  class: string;
  partition: number;
  offset: string;
  key: string | null;
  expected: string;
  found: string;
  purges?: string[];
}
interface PartitionJson {
  partition: number;
  from: string;
  to: string;
  records: number;
  stored: number;
  superseded: number;
  dead_lettered: number;
  letter_gone: number;
  missing: number;
  wrong: number;
  notes: string[];
  problems: ProblemJson[];
}
interface PipelineJson {
  pipeline: string;
  topicId: string | null;
  records: number;
  stored: number;
  superseded: number;
  dead_lettered: number;
  letter_gone: number;
  missing: number;
  wrong: number;
  notes: string[];
  partitions: PartitionJson[];
}
interface ReconcileJson {
  ok: boolean;
  records: number;
  missing: number;
  wrong: number;
  pipelines: PipelineJson[];
  auditId: string | null;
}

let schema: TestSchema;
let admin: Admin;
let heartbeats: HostTestStack['heartbeats'];
const hosts: HostHandle[] = [];

beforeAll(async () => {
  ({ schema, admin, heartbeats } = await openHostTestStack('cli-reconcile'));
});

afterAll(() => closeHostTestStack({ schema, admin, heartbeats }, hosts));

function environment(names: PipelineNames): Record<string, string> {
  return hostEnvironment({ databaseUrl: schema.url, names, heartbeatDir: heartbeats.path });
}

async function reconcileJson(
  env: Record<string, string>,
  ...args: string[]
): Promise<{ code: number; report: ReconcileJson; stderr: string }> {
  const run = await runCli(['reconcile', '--json', ...args], env);
  expect(run.stdout, run.stderr).not.toBe('');
  return { code: run.code, report: JSON.parse(run.stdout) as ReconcileJson, stderr: run.stderr };
}

async function startedHost(env: Record<string, string>): Promise<HostHandle> {
  const host = startHost(loadHostSettings(env), { logger: captureLogger() });
  hosts.push(host);
  expect(await host.running).toBe(true);
  return host;
}

const review = (id: string, extra: Record<string, unknown> = {}) => ({ ...sampleReview(), review_id: id, ...extra });
const pipelineOf = (report: ReconcileJson, name: string) => report.pipelines.find((pipeline) => pipeline.pipeline === name) as PipelineJson;
const problems = (report: ReconcileJson) =>
  report.pipelines.flatMap((pipeline) =>
    pipeline.partitions.flatMap((partition) => partition.problems.map((problem) => ({ pipeline: pipeline.pipeline, ...problem }))),
  );

/** Partition 0 of reviews: 1,100 records; every 97th is not JSON and every 101st names an unknown app (dead letters), 999 too. */
const P0_RECORDS = 1_100;
const deadLetteredAt = (offset: number) => offset === 999 || (offset > 0 && (offset % 97 === 0 || offset % 101 === 0));
const p0Value = (offset: number): unknown => {
  if (offset === 999 || (offset > 0 && offset % 97 === 0)) return `{"review_id": "broken-${offset}"`;
  if (offset > 0 && offset % 101 === 0) return review(`p0:${offset}`, { package_name: 'com.example.unregistered' });
  return review(`p0:${offset}`, { thumbs_up_count: offset });
};
const P0_LETTERS = Array.from({ length: P0_RECORDS }, (_, offset) => offset).filter(deadLetteredAt).length;

describe('a stack that stored everything, then planted defects', () => {
  let names: PipelineNames;
  let env: Record<string, string>;
  let host: HostHandle;

  beforeAll(async () => {
    names = await createTestPipelines('reconcile');
    env = environment(names);
    await produce(
      names.topics.reviews,
      jsonMessages(
        Array.from({ length: P0_RECORDS }, (_, offset) => p0Value(offset)),
        { partition: 0 },
      ),
    );
    // Partition 1: one review in an older version (offset 1) and a newer one (offset 2); partition 2: two versions with the same time.
    await produce(
      names.topics.reviews,
      jsonMessages(
        [
          review('p1:a'),
          review('p1:x', { thumbs_up_count: 1, last_synced_at: '2026-11-30T06:00:00Z' }),
          review('p1:x', { thumbs_up_count: 2, last_synced_at: '2026-11-30T07:00:00Z' }),
        ],
        { partition: 1 },
      ),
    );
    await produce(
      names.topics.reviews,
      jsonMessages([review('p2:t', { thumbs_up_count: 5 }), review('p2:t', { thumbs_up_count: 6 })], { partition: 2 }),
    );
    // app-stats: the same crawl twice (the first stays); network-metrics: one analysis.
    await produce(names.topics['app-stats'], jsonMessages([sampleAppStats(), { ...sampleAppStats(), score: 1.5 }], { partition: 0 }));
    await produce(names.topics['network-metrics'], jsonMessages([sampleNetworkMetrics()], { partition: 0 }));
    host = await startedHost(env);
    for (const pipeline of ['reviews', 'app-stats', 'network-metrics'] as const)
      await waitForCommittedToEnd(admin, names.groups[pipeline], names.topics[pipeline]);
  }, 180_000);

  it('accounts for every record of a clean run: rows, superseded versions and dead letters, exit 0', async () => {
    // Act
    const { code, report } = await reconcileJson(env, '--from', 'earliest');

    // Assess
    expect(code).toBe(0);
    expect(report.ok).toBe(true);
    const reviews = pipelineOf(report, 'reviews');
    expect(reviews.records).toBe(P0_RECORDS + 3 + 2);
    expect(reviews.missing + reviews.wrong + reviews.letter_gone).toBe(0);
    expect(reviews.dead_lettered).toBe(P0_LETTERS);
    // p1@1 lost to the newer p1@2; p2@1 to p2@0 (same last_synced_at, stored first).
    expect(reviews.superseded).toBe(2);
    expect(reviews.stored).toBe(P0_RECORDS - P0_LETTERS + 3);
    expect(reviews.partitions.map((partition) => [partition.partition, partition.from, partition.to, partition.records])).toEqual([
      [0, '0', String(P0_RECORDS), P0_RECORDS],
      [1, '0', '3', 3],
      [2, '0', '2', 2],
    ]);
    const stats = pipelineOf(report, 'app-stats');
    expect([stats.records, stats.stored, stats.superseded]).toEqual([2, 1, 1]);
    expect(stats.partitions.find((partition) => partition.partition === 1)?.notes.join(' ')).toMatch(
      /has no committed offset on partition 1/,
    );
    expect(pipelineOf(report, 'network-metrics').stored).toBe(1);
    expect(report.auditId).not.toBeNull();
    const audit = await schema.pool.query<{ command: string; outcome: { counts: { records: number } } }>(
      'SELECT command, outcome FROM operator_actions WHERE id = $1',
      [report.auditId],
    );
    expect(audit.rows[0]?.command).toBe('reconcile');
    expect(audit.rows[0]?.outcome.counts.records).toBe(report.records);
  });

  it('finds each planted defect by class and coordinates, and not a record past the committed offset', async () => {
    // Prepare: the host stops; one more record is produced (past the committed offset: in flight, never promised).
    await host.stop();
    await produce(names.topics.reviews, jsonMessages([review('p0:late')], { partition: 0 }));
    await schema.pool.query("DELETE FROM reviews WHERE review_id = 'p0:10'");
    await schema.pool.query("UPDATE reviews SET thumbs_up_count = 4242 WHERE review_id = 'p0:100'");
    await schema.pool.query('DELETE FROM dead_letter_events WHERE partition = 0 AND kafka_offset = 999');
    await schema.pool.query("UPDATE reviews SET source_offset = 1005 WHERE review_id = 'p0:1000'");
    // An older version overwrote the newer one (as an upsert without its guard would).
    await schema.pool.query(
      "UPDATE reviews SET thumbs_up_count = 1, last_synced_at = '2026-11-30T06:00:00Z', source_offset = 1 WHERE review_id = 'p1:x'",
    );
    // Two audited purges whose ids sort differently as text: 9, then 10.
    await schema.pool.query("SELECT setval('operator_actions_id_seq', 8)");
    for (const reason of [undefined, 'invalid_json'])
      await recordOperatorAction(schema.pool, {
        actor: 'test',
        command: 'dlq purge',
        arguments: { before: new Date().toISOString(), pipeline: 'reviews', ...(reason ? { reason } : {}), includePending: true },
        outcome: { counts: { deleted: 1 } },
      });

    // Act
    const { code, report } = await reconcileJson(env, '--pipeline', 'reviews', '--from', 'earliest');
    const text = await runCli(['reconcile', '--pipeline', 'reviews'], env);
    console.log(`[reconcile] planted defects, exit ${text.code}:\n${text.stdout}`);

    // Assess
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    expect(report.pipelines.map((pipeline) => pipeline.pipeline)).toEqual(['reviews']);
    const found = problems(report).map(({ class: kind, partition, offset }) => `${kind} p${partition}@${offset}`);
    expect(found.sort()).toEqual(['letter_gone p0@999', 'missing p0@10', 'wrong p0@100', 'wrong p0@1000', 'wrong p1@2'].sort());
    const reviews = pipelineOf(report, 'reviews');
    expect([reviews.records, reviews.missing, reviews.wrong, reviews.letter_gone]).toEqual([P0_RECORDS + 5, 1, 3, 1]);
    const byPlace = new Map(problems(report).map((problem) => [`p${problem.partition}@${problem.offset}`, problem]));
    expect(byPlace.get('p0@100')?.expected).toBe('thumbs_up_count 100');
    expect(byPlace.get('p0@100')?.found).toMatch(/^thumbs_up_count 4242/);
    expect(byPlace.get('p0@1000')?.found).toMatch(/-0@1005$/);
    expect(byPlace.get('p1@2')?.found).toMatch(/2026-11-30 06:00:00\+00 from .*-1@1: an older version/);
    expect(byPlace.get('p0@999')?.purges).toEqual(['9', '10']);
    expect(reviews.partitions[0]?.to).toBe(String(P0_RECORDS));
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(
      /^missing \S+-reviews-0@10 p0:10: expected a reviews row for p0:10 \(or a dead letter\); found no row and no dead letter$/m,
    );
    expect(text.stdout).toMatch(/^letter_gone \S+-reviews-0@999: .*audited dlq purge\(s\) that could have deleted it: 9, 10$/m);
    expect(text.stdout).toMatch(/^reconcile FAILED: 1105 record\(s\) checked/m);
  });
});

describe('on a running stack', () => {
  it('checks while hosts store and a producer writes, after the topic is re-created and after retention removed its start', async () => {
    // Prepare
    const names = await createTestPipelines('reconcile-live');
    const env = environment(names);
    await produce(
      names.topics.reviews,
      jsonMessages(
        Array.from({ length: 600 }, (_, index) => review(`live:${index}`)),
        { key: (i) => `k${i}` },
      ),
    );
    const first = await startedHost(env);
    await startedHost(env);
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    let producing = true;
    let produced = 0;
    const producer = (async () => {
      while (producing) {
        await produce(
          names.topics.reviews,
          jsonMessages(
            Array.from({ length: 50 }, (_, index) => review(`live:more:${produced + index}`, { thumbs_up_count: index })),
            { key: (i) => `m${produced + i}` },
          ),
        );
        produced += 50;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

    // Act: while the hosts store what the producer writes
    await waitUntil('the producer to have written', async () => produced >= 200);
    const live = await reconcileJson(env, '--pipeline', 'reviews');
    producing = false;
    await producer;

    // Assess
    expect(live.code).toBe(0);
    expect(live.report.records).toBeGreaterThanOrEqual(600);
    expect([live.report.missing, live.report.wrong]).toEqual([0, 0]);
    const oldId = pipelineOf(live.report, 'reviews').topicId;
    expect(oldId).toMatch(/^[A-Za-z0-9_-]{22}$/);

    // Act: the topic is deleted and re-created under the running hosts, and filled again
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    await admin.deleteTopics({ topics: [names.topics.reviews] });
    await waitUntil('the topic to be gone', async () => !(await admin.listTopics()).includes(names.topics.reviews));
    await createTestTopic(names.topics.reviews, 3);
    await produce(
      names.topics.reviews,
      jsonMessages(
        Array.from({ length: 30 }, (_, index) => review(`new:${index}`)),
        { partition: 0 },
      ),
    );
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, 120_000);
    const recreated = await reconcileJson(env, '--pipeline', 'reviews');
    const text = await runCli(['reconcile', '--pipeline', 'reviews'], env);

    // Assess
    expect(recreated.code).toBe(0);
    expect(recreated.report.records).toBe(30);
    const reviews = pipelineOf(recreated.report, 'reviews');
    expect(reviews.topicId).not.toBe(oldId);
    expect(reviews.notes.join(' ')).toMatch(/was re-created since the last reconcile/);
    expect(
      reviews.partitions
        .filter((partition) => partition.partition !== 0)
        .flatMap((partition) => partition.notes)
        .join(' '),
    ).toMatch(/no committed offset/);
    // Said once: the JSON run's audit entry recorded the new id.
    expect(text.stdout).not.toMatch(/re-created/);

    // Act: retention (here DeleteRecords through the admin API, as kafka-delete-records does) removes partition 0's first 12 records
    await first.stop();
    await admin.deleteTopicRecords({ topic: names.topics.reviews, partitions: [{ partition: 0, offset: '12' }] });
    const trimmed = await reconcileJson(env, '--pipeline', 'reviews', '--from', 'earliest');

    // Assess
    expect(trimmed.code).toBe(0);
    const partition0 = pipelineOf(trimmed.report, 'reviews').partitions[0] as PartitionJson;
    expect([partition0.from, partition0.to, partition0.records, partition0.stored]).toEqual(['12', '30', 18, 18]);
    expect(partition0.notes.join(' ')).toMatch(
      /offsets 0 to 11 are no longer on the broker \(retention or deleted records\): checked from 12/,
    );
    expect((await committedOffsets(admin, names.groups.reviews, names.topics.reviews)).get(0)).toBe(30n);
  }, 300_000);
});

describe('size, progress and usage', () => {
  it('crosses offsets 9/10, 99/100 and 999/1000 of partitions over 1,000 records, shows progress only on a terminal', async () => {
    // Prepare: 1,200 reviews on each of two partitions, 2,400 checked in chunks of 2,000 records
    const names = await createTestPipelines('reconcile-size');
    const env = environment(names);
    for (const partition of [0, 1])
      await produce(
        names.topics.reviews,
        jsonMessages(
          Array.from({ length: 1_200 }, (_, index) => review(`size:${partition}:${index}`)),
          { partition },
        ),
      );
    const host = await startedHost(env);
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    await host.stop();

    // Act
    const terminal = await runCli(['reconcile', '--pipeline', 'reviews'], env, { interactive: true });
    const json = await runCli(['reconcile', '--pipeline', 'reviews', '--json'], env, { interactive: true });
    const piped = await runCli(['reconcile', '--pipeline', 'reviews'], env);

    // Assess
    expect([terminal.code, json.code, piped.code]).toEqual([0, 0, 0]);
    const report = JSON.parse(json.stdout) as ReconcileJson;
    const reviews = pipelineOf(report, 'reviews');
    expect(reviews.partitions.map((partition) => [partition.from, partition.to, partition.records, partition.stored])).toEqual([
      ['0', '1200', 1200, 1200],
      ['0', '1200', 1200, 1200],
      ['0', '0', 0, 0],
    ]);
    expect(terminal.stderr).toMatch(/reconcile: \d+ of 2400 record\(s\) checked, \d+\/s/);
    expect(json.stderr).toBe('');
    expect(piped.stderr).toBe('');
  }, 180_000);

  it('refuses bad usage with exit 2', async () => {
    const env = environment(await createTestPipelines('reconcile-usage'));
    expect((await runCli(['reconcile', '--pipeline', 'nope'], env)).code).toBe(2);
    expect((await runCli(['reconcile', '--since', '24h', '--from', 'earliest'], env)).code).toBe(2);
    expect((await runCli(['reconcile', '--from', 'latest'], env)).code).toBe(2);
  });
});
