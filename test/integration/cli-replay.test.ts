import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost } from '../../host/run.js';
import type { HostHandle } from '../../host/run.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { runCli, tableRows } from '../helpers/cli.js';
import type { TestSchema } from '../helpers/database.js';
import type { HostTestStack, PipelineNames } from '../helpers/host.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  endOffsets,
  hostEnvironment,
  jsonMessages,
  openHostTestStack,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { captureLogger } from '../helpers/lambda-events.js';
import { sampleAppStats, sampleReview } from '../helpers/messages.js';

interface PositionJson {
  group: string;
  members: unknown[];
  lag: number;
  partitions: Array<{ partition: number; committed: string | null; start: string; end: string; lag: number }>;
}
interface ReplayJson {
  pipeline: string;
  to: Record<string, string>;
  replayed: boolean;
  refused: boolean;
  auditId: string | null;
  skipped: string;
  before: PositionJson;
  after: PositionJson | null;
}

let schema: TestSchema;
let admin: Admin;
let heartbeats: HostTestStack['heartbeats'];
const hosts: HostHandle[] = [];

beforeAll(async () => {
  ({ schema, admin, heartbeats } = await openHostTestStack('cli-replay'));
});

afterAll(() => closeHostTestStack({ schema, admin, heartbeats }, hosts));

function environment(names: PipelineNames): Record<string, string> {
  return hostEnvironment({ databaseUrl: schema.url, names, heartbeatDir: heartbeats.path });
}

async function runHostUntilCaughtUp(
  env: Record<string, string>,
  names: PipelineNames,
  pipelines: readonly PipelineName[],
): Promise<HostHandle> {
  const host = startHost(loadHostSettings({ ...env, STORAGE_PIPELINES: pipelines.join(',') }), { logger: captureLogger() });
  hosts.push(host);
  expect(await host.running).toBe(true);
  for (const pipeline of pipelines) await waitForCommittedToEnd(admin, names.groups[pipeline], names.topics[pipeline]);
  return host;
}

/** Every stored column a replay could have touched, in a stable order. */
async function reviewRows(prefix: string): Promise<unknown[]> {
  const { rows } = await schema.pool.query(
    `SELECT review_id, thumbs_up_count, last_synced_at::text, source_partition, source_offset::text, ingested_at::text, first_seen_at::text
       FROM reviews WHERE review_id LIKE $1 ORDER BY review_id`,
    [`${prefix}:%`],
  );
  return rows;
}

const asStrings = (offsets: Map<number, bigint>) => [...offsets].sort(([a], [b]) => a - b).map(([, offset]) => offset.toString());

describe('replay reviews', () => {
  let names: PipelineNames;
  let env: Record<string, string>;

  beforeAll(async () => {
    names = await createTestPipelines('cli-replay');
    env = environment(names);
    const reviews = Array.from({ length: 30 }, (_, index) => ({ ...sampleReview(), review_id: `replay:${index}` }));
    await produce(names.topics.reviews, jsonMessages(reviews, { key: (index) => `replay:${index}` }));
    await produce(
      names.topics['app-stats'],
      jsonMessages(Array.from({ length: 4 }, (_, index) => ({ ...sampleAppStats(), crawled_at: `2026-11-30T0${index}:00:00Z` }))),
    );
  });

  it('refuses while the group has an active member, and changes nothing', async () => {
    // Prepare
    const host = await runHostUntilCaughtUp(env, names, ['reviews']);
    const before = await committedOffsets(admin, names.groups.reviews, names.topics.reviews);

    // Act
    const refused = await runCli(['replay', 'reviews', '--to', 'earliest'], env);

    // Assess
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`group ${names.groups.reviews} has 1 active member(s)`);
    expect(refused.stderr).toContain('nothing was changed');
    expect(refused.stderr).toContain('disable its event source mapping');
    expect(refused.stdout).toContain('1 member(s)');
    expect(await committedOffsets(admin, names.groups.reviews, names.topics.reviews)).toEqual(before);
    expect(await host.stop()).toBe(0);
  });

  it('resets only the reviews group; the reviews are consumed again and the data stays the same', async () => {
    // Prepare: everything consumed and stored, then the host stops
    const host = await runHostUntilCaughtUp(env, names, PIPELINE_NAMES);
    expect(await host.stop()).toBe(0);
    const rowsBefore = await reviewRows('replay');
    expect(rowsBefore).toHaveLength(30);
    const ends = await endOffsets(admin, names.topics.reviews);
    const appStatsBefore = await committedOffsets(admin, names.groups['app-stats'], names.topics['app-stats']);
    const networkBefore = await committedOffsets(admin, names.groups['network-metrics'], names.topics['network-metrics']);

    // Act
    const replayed = await runCli(['replay', 'reviews', '--to', 'earliest', '--json'], env);

    // Assess: the offsets before and after, and no other group moved
    expect(replayed.code).toBe(0);
    const report = JSON.parse(replayed.stdout) as ReplayJson;
    expect(report).toMatchObject({
      pipeline: 'reviews',
      to: { kind: 'earliest' },
      replayed: true,
      refused: false,
      auditId: expect.any(String),
    });
    expect(report.before.partitions.map((partition) => partition.committed)).toEqual(asStrings(ends));
    expect(report.after?.partitions.map((partition) => partition.committed)).toEqual(['0', '0', '0']);
    expect(report.after?.lag).toBe(Number([...ends.values()].reduce((sum, end) => sum + end, 0n)));
    expect(asStrings(await committedOffsets(admin, names.groups.reviews, names.topics.reviews))).toEqual(['0', '0', '0']);
    // The audit entry, written before the offsets moved and completed after: per partition the
    // offset before, the one committed after the reset, and the planned one
    const entry = await schema.pool.query<{
      command: string;
      state: string;
      completed_at: Date | null;
      arguments: Record<string, unknown>;
      outcome: { partitions: unknown[] };
    }>('SELECT command, state, completed_at, arguments, outcome FROM operator_actions WHERE id = $1', [report.auditId]);
    expect(entry.rows[0]).toMatchObject({
      command: 'replay',
      state: 'completed',
      completed_at: expect.any(Date),
      arguments: { pipeline: 'reviews', group: names.groups.reviews, to: { kind: 'earliest' } },
    });
    expect(entry.rows[0]?.outcome.partitions).toEqual(
      [...ends]
        .sort(([a], [b]) => a - b)
        .map(([partition, end]) => ({
          topic: names.topics.reviews,
          partition,
          before: end.toString(),
          after: '0',
          planned: '0',
          applied: true,
        })),
    );
    expect(await committedOffsets(admin, names.groups['app-stats'], names.topics['app-stats'])).toEqual(appStatsBefore);
    expect(await committedOffsets(admin, names.groups['network-metrics'], names.topics['network-metrics'])).toEqual(networkBefore);

    // Act: the pipeline runs again and re-consumes every review
    const again = await runHostUntilCaughtUp(env, names, ['reviews']);
    expect(await again.stop()).toBe(0);

    // Assess: idempotency: the same rows, untouched
    expect(asStrings(await committedOffsets(admin, names.groups.reviews, names.topics.reviews))).toEqual(asStrings(ends));
    expect(await reviewRows('replay')).toEqual(rowsBefore);
  });

  it('--to latest over an unconsumed backlog is refused without --allow-skip, naming each partition and the count; --dry-run changes nothing', async () => {
    // Prepare: a backlog the pipeline should not consume (first deployment), two messages per partition
    await produce(
      names.topics.reviews,
      [0, 1, 2].flatMap((partition) => jsonMessages([{ legacyCamelCase: partition }, { legacyCamelCase: partition + 10 }], { partition })),
    );
    const before = await committedOffsets(admin, names.groups.reviews, names.topics.reviews);
    const ends = await endOffsets(admin, names.topics.reviews);

    // Act
    const refused = await runCli(['replay', 'reviews', '--to', 'latest'], env);
    const dryRun = await runCli(['replay', 'reviews', '--to', 'latest', '--allow-skip', '--dry-run'], env);
    const dryRunRefused = await runCli(['replay', 'reviews', '--to', 'latest', '--dry-run', '--json'], env);

    // Assess: refused, every partition named with its count, nothing moved
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `replay would move group ${names.groups.reviews} forward past 6 offset(s) the group has not committed`,
    );
    for (const partition of [0, 1, 2]) {
      const end = ends.get(partition) as bigint;
      expect(refused.stderr).toContain(`partition ${partition}: 2 offset(s) (${end - 2n} to ${end - 1n})`);
    }
    expect(refused.stderr).toContain('nothing was changed. Give --allow-skip');
    // stdout leads with the reason, then the plan that was not applied
    expect(refused.stdout).toMatch(new RegExp(`^refused: replay would move group ${names.groups.reviews} forward past 6 offset`));
    expect(refused.stdout).toContain('plan, not applied: reset to latest:');
    // The dry run prints before and after and changes nothing
    expect(dryRun.code).toBe(0);
    expect(dryRun.stdout).toContain('dry run, nothing changed: would reset to latest:');
    const rows = tableRows(dryRun.stdout.slice(dryRun.stdout.indexOf('would reset')));
    expect(rows[1]).toEqual(['PARTITION', 'BEFORE', 'AFTER', 'END', 'LAG', 'SKIPPED']);
    expect(rows.slice(2)).toEqual(
      [...ends]
        .sort(([a], [b]) => a - b)
        .map(([partition, end]) => [String(partition), String(before.get(partition)), String(end), String(end), '0', '2']),
    );
    // A dry run exits as the real run would: 1 when refused
    expect(dryRunRefused.code).toBe(1);
    expect(JSON.parse(dryRunRefused.stdout)).toMatchObject({
      dryRun: true,
      replayed: false,
      refused: true,
      skipped: '6',
      refusal: expect.stringContaining('--allow-skip'),
      after: null,
    });
    expect(await committedOffsets(admin, names.groups.reviews, names.topics.reviews)).toEqual(before);
  });

  it('--to latest --allow-skip skips the backlog; the table shows before and after', async () => {
    // Prepare
    const before = await committedOffsets(admin, names.groups.reviews, names.topics.reviews);
    const ends = await endOffsets(admin, names.topics.reviews);

    // Act
    const replayed = await runCli(['replay', 'reviews', '--to', 'latest', '--allow-skip'], env);
    const lag = await runCli(['lag', '--pipeline', 'reviews', '--json'], env);

    // Assess
    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toContain('reset to latest:');
    const rows = tableRows(replayed.stdout.slice(replayed.stdout.indexOf('reset to latest:')));
    expect(rows[1]).toEqual(['PARTITION', 'BEFORE', 'AFTER', 'END', 'LAG', 'SKIPPED']);
    expect(replayed.stdout).toMatch(/\naudit entry \d+ written\n$/);
    expect(rows.slice(2, 5)).toEqual(
      [...ends]
        .sort(([a], [b]) => a - b)
        .map(([partition, end]) => [String(partition), String(before.get(partition)), String(end), String(end), '0', '2']),
    );
    const [group] = (JSON.parse(lag.stdout) as { groups: PositionJson[] }).groups;
    expect(group?.lag).toBe(0);
    expect(group?.partitions.map((partition) => partition.committed)).toEqual(asStrings(ends));
  });

  it('--partition N --to-offset X moves one partition: back freely, forward past one record only with --allow-skip', async () => {
    // Prepare: partition 1's last message is a record to step over
    const before = await committedOffsets(admin, names.groups.reviews, names.topics.reviews);
    const end1 = (await endOffsets(admin, names.topics.reviews)).get(1) as bigint;
    const back = (end1 - 1n).toString();

    // Act: back one message on partition 1 (re-consumes it: safe)
    const backwards = await runCli(['replay', 'reviews', '--partition', '1', '--to-offset', back, '--json'], env);
    // forward again past that one record: refused, then with --allow-skip
    const refused = await runCli(['replay', 'reviews', '--partition', '1', '--to-offset', end1.toString()], env);
    const afterRefusal = await committedOffsets(admin, names.groups.reviews, names.topics.reviews);
    const skipped = await runCli(['replay', 'reviews', '--partition', '1', '--to-offset', end1.toString(), '--allow-skip', '--json'], env);

    // Assess
    expect(backwards.code).toBe(0);
    expect(JSON.parse(backwards.stdout)).toMatchObject({
      to: { kind: 'offset', offset: back },
      partition: 1,
      replayed: true,
      skipped: '0',
      plan: [{ partition: 1, before: end1.toString(), after: back, skipped: '0' }],
    });
    expect(afterRefusal).toEqual(new Map([...before, [1, end1 - 1n]]));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `forward past 1 offset(s) the group has not committed; whatever of them is not stored yet would never be: partition 1: 1 offset(s) (${back} to ${back})`,
    );
    expect(skipped.code).toBe(0);
    expect(JSON.parse(skipped.stdout)).toMatchObject({
      replayed: true,
      skipped: '1',
      plan: [{ partition: 1, before: back, after: end1.toString(), skipped: '1' }],
    });
    expect(await committedOffsets(admin, names.groups.reviews, names.topics.reviews)).toEqual(before);
  });

  it('refuses an offset outside the partition (exit 1) and --to-offset without --partition (exit 2)', async () => {
    const end0 = (await endOffsets(admin, names.topics.reviews)).get(0) as bigint;

    const outside = await runCli(['replay', 'reviews', '--partition', '0', '--to-offset', (end0 + 1n).toString(), '--allow-skip'], env);
    const noPartition = await runCli(['replay', 'reviews', '--partition', '7', '--to', 'earliest'], env);

    expect(outside.code).toBe(1);
    expect(outside.stderr).toContain(
      `offset ${end0 + 1n} is outside partition 0 of ${names.topics.reviews}: it holds offsets 0 to ${end0} (the end); nothing was changed`,
    );
    expect(noPartition.code).toBe(1);
    expect(noPartition.stderr).toContain(`topic ${names.topics.reviews} has no partition 7 (partitions 0, 1, 2)`);
    expect((await runCli(['replay', 'reviews', '--to-offset', '3'], env)).code).toBe(2);
    expect((await runCli(['replay', 'reviews', '--partition', '0', '--to-offset', '-1'], env)).code).toBe(2);
    expect((await runCli(['replay', 'reviews', '--partition', '0', '--to-offset', '3', '--to', 'latest'], env)).code).toBe(2);
  });
});

describe('replay to a timestamp', () => {
  it('moves each partition to the first message at or after the instant', async () => {
    // Prepare: ten reviews one second apart on partition 0; partitions 1 and 2 stay empty
    const names = await createTestPipelines('cli-replay-ts');
    const env = environment(names);
    const start = Date.parse('2026-11-30T06:00:00Z');
    await produce(
      names.topics.reviews,
      Array.from({ length: 10 }, (_, index) => ({
        partition: 0,
        timestamp: String(start + index * 1000),
        value: JSON.stringify({ ...sampleReview(), review_id: `ts:${index}` }),
      })),
    );

    // Act: the group does not exist yet: refused unless --create-group (a mistyped name would
    // create a group silently). It never committed, so it would read from offset 0: moving to 5
    // skips 0-4.
    const missing = await runCli(['replay', 'reviews', '--to', '2026-11-30T09:30:05+03:30', '--allow-skip', '--dry-run'], env);
    const refused = await runCli(['replay', 'reviews', '--to', '2026-11-30T09:30:05+03:30', '--create-group'], env);
    const replayed = await runCli(
      ['replay', 'reviews', '--to', '2026-11-30T09:30:05+03:30', '--allow-skip', '--create-group', '--json'],
      env,
    );

    // Assess
    expect(missing.code).toBe(1);
    expect(missing.stdout, missing.stderr).toMatch(new RegExp(`^dry run: would be refused: group ${names.groups.reviews} does not exist`));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'forward past 5 offset(s) the group has not committed; whatever of them is not stored yet would never be: partition 0: 5 offset(s) (0 to 4)',
    );
    expect(replayed.code).toBe(0);
    const report = JSON.parse(replayed.stdout) as ReplayJson;
    expect(report.to).toEqual({ kind: 'timestamp', at: '2026-11-30T06:00:05.000Z' });
    expect(report.before.partitions.map((partition) => partition.committed)).toEqual([null, null, null]);
    expect(report.after?.partitions.map((partition) => partition.committed)).toEqual(['5', '0', '0']);
    const [end] = await admin.fetchTopicOffsets(names.topics.reviews).then((offsets) => offsets.filter((offset) => offset.partition === 0));
    expect(report.after?.lag).toBe(Number(end?.high) - 5);
    expect(report.skipped).toBe('5');
  });

  it('finds the right offsets while producers write, and takes a duration (--to 24h)', async () => {
    // Prepare: an existing group with committed offsets, and a producer writing all along
    const names = await createTestPipelines('cli-replay-busy');
    const env = environment(names);
    await produce(
      names.topics.reviews,
      jsonMessages(Array.from({ length: 6 }, (_, index) => ({ ...sampleReview(), review_id: `busy:${index}` }))),
    );
    const seeded = await runCli(['replay', 'reviews', '--to', 'earliest', '--create-group'], env);
    expect(seeded.code).toBe(0);
    let writing = true;
    const writer = (async () => {
      for (let index = 0; writing; index += 1) {
        await produce(names.topics.reviews, jsonMessages([{ ...sampleReview(), review_id: `busy:more-${index}` }]));
      }
    })();

    // Act: six tries, each to an instant after every message (the end), and a duration
    const tries = [];
    try {
      for (let attempt = 0; attempt < 6; attempt += 1) {
        tries.push(
          await runCli(
            ['replay', 'reviews', '--to', new Date(Date.now() + 3_600_000).toISOString(), '--allow-skip', '--dry-run', '--json'],
            env,
          ),
        );
      }
      tries.push(await runCli(['replay', 'reviews', '--to', '24h', '--dry-run', '--json'], env));
    } finally {
      writing = false;
      await writer;
    }

    // Assess: never refused as "outside the partition"
    for (const run of tries) {
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
    }
    expect((JSON.parse(tries.at(-1)?.stdout ?? '{}') as ReplayJson).to).toEqual({ kind: 'timestamp', at: expect.stringMatching(/Z$/) });
  });

  it('refuses a bad pipeline or target before touching Kafka (exit 2)', async () => {
    const env = { KAFKA_BROKERS: '127.0.0.1:1' };
    expect((await runCli(['replay', 'reviews'], env)).code).toBe(2);
    expect((await runCli(['replay', 'comments', '--to', 'earliest'], env)).code).toBe(2);
    expect((await runCli(['replay', 'reviews', '--to', 'yesterday'], env)).code).toBe(2);
    expect((await runCli(['replay', 'reviews', '--to', 'earliest', '--stage', 'moon'], env)).code).toBe(2);
    expect((await runCli(['replay', 'reviews', '--to', '2026-02-30T00:00:00Z'], env)).code).toBe(2);
  });
});
