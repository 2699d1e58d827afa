import type pg from 'pg';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCliPool } from '../../cli/context.js';
import { lagAlarmThresholds } from '../../cli/lag-thresholds.js';
import { loadSettings } from '../../shared/settings.js';
import { startHost } from '../../host/run.js';
import type { HostHandle } from '../../host/run.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { describeTopics } from '../../kafka/topics.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { runCli, tableRows } from '../helpers/cli.js';
import { createMigratedSchema } from '../helpers/database.js';
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
  waitUntil,
} from '../helpers/host.js';
import { createTestTopic, produce, testBrokers } from '../helpers/kafka.js';
import { captureLogger } from '../helpers/lambda-events.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';

interface StepJson {
  step: string;
  status: 'ok' | 'failed' | 'not run';
  summary: string;
  data: unknown;
}
interface VerifyJson {
  ok: boolean;
  failedStep: string | null;
  maxLag: Record<string, number>;
  steps: StepJson[];
}
interface GroupJson {
  pipeline: string;
  group: string;
  state: string;
  members: unknown[];
  lag: number;
  partitions: Array<{ partition: number; committed: string | null; end: string; lag: number }>;
}

let schema: TestSchema;
let admin: Admin;
let heartbeats: HostTestStack['heartbeats'];
const hosts: HostHandle[] = [];

beforeAll(async () => {
  ({ schema, admin, heartbeats } = await openHostTestStack('cli-verify'));
});

afterAll(() => closeHostTestStack({ schema, admin, heartbeats }, hosts));

function environment(names: PipelineNames, databaseUrl = schema.url): Record<string, string> {
  return hostEnvironment({ databaseUrl, names, heartbeatDir: heartbeats.path });
}

async function verifyJson(env: Record<string, string>, ...args: string[]): Promise<{ code: number; report: VerifyJson }> {
  const run = await runCli(['verify', '--json', ...args], env);
  return { code: run.code, report: JSON.parse(run.stdout) as VerifyJson };
}

const reviews = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, index) => ({ ...sampleReview(), review_id: `${prefix}:${index}` }));

describe('verify on a healthy stack, then with a stopped pipeline', () => {
  let names: PipelineNames;
  let env: Record<string, string>;
  let host: HostHandle;

  beforeAll(async () => {
    names = await createTestPipelines('cli-verify');
    env = environment(names);
    await produce(names.topics.reviews, jsonMessages(reviews('verify', 12), { key: (index) => `verify:${index}` }));
    await produce(names.topics['app-stats'], jsonMessages([sampleAppStats()]));
    await produce(names.topics['network-metrics'], jsonMessages([sampleNetworkMetrics()]));
    host = startHost(loadHostSettings(env), { logger: captureLogger() });
    hosts.push(host);
    expect(await host.running).toBe(true);
    for (const pipeline of PIPELINE_NAMES) await waitForCommittedToEnd(admin, names.groups[pipeline], names.topics[pipeline]);
  });

  it('passes every step, and the table carries the same figures as --json', async () => {
    // Act
    const { code, report } = await verifyJson(env);
    const table = await runCli(['verify'], env);

    // Assess
    expect(code).toBe(0);
    expect(report.ok).toBe(true);
    expect(report.failedStep).toBeNull();
    // The lag thresholds are the prod offset-lag alarms' unless told otherwise.
    expect(report.maxLag).toEqual(lagAlarmThresholds('prod'));
    expect(report.steps.map((step) => [step.step, step.status])).toEqual([
      ['schema', 'ok'],
      ['topics', 'ok'],
      ['messages', 'ok'],
      ['dead-letters', 'ok'],
      ['lag', 'ok'],
    ]);
    // What is on each topic (a loaded broker can make the test producer's retry write a message
    // twice: the rows stay the same, which is the point).
    const onTopic = async (pipeline: PipelineName) =>
      (await admin.fetchTopicOffsets(names.topics[pipeline])).reduce((sum, { low, high }) => sum + Number(high) - Number(low), 0);
    const messages = report.steps[2]?.data as Array<{ pipeline: string; topic: string; messages: number; table: string; rows: number }>;
    expect(messages.map((row) => [row.pipeline, row.messages, row.table, row.rows])).toEqual([
      ['app-stats', await onTopic('app-stats'), 'app_stats', 1],
      ['reviews', await onTopic('reviews'), 'reviews', 12],
      ['network-metrics', await onTopic('network-metrics'), 'network_metrics', 1],
    ]);
    const lag = report.steps[4]?.data as GroupJson[];
    expect(lag.map((group) => [group.pipeline, group.lag, group.members.length])).toEqual([
      ['app-stats', 0, 1],
      ['reviews', 0, 1],
      ['network-metrics', 0, 1],
    ]);

    expect(table.code).toBe(0);
    expect(table.stdout).toContain('verify: everything holds');
    const rows = tableRows(table.stdout);
    for (const row of messages) expect(rows).toContainEqual([row.pipeline, row.topic, String(row.messages), row.table, String(row.rows)]);
    for (const group of lag) expect(rows).toContainEqual([group.pipeline, group.group, group.state, '1', '0', 'no']);
  });

  it('healthcheck passes while the host writes its heartbeats', async () => {
    const json = await runCli(['healthcheck', '--json'], env);
    const text = await runCli(['healthcheck'], env);

    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ healthy: true, pipelines: ['app-stats', 'reviews', 'network-metrics'], problems: [] });
    expect(text.stdout).toBe('healthy: app-stats, reviews, network-metrics\n');
  });

  it('lag shows committed and end offsets per partition; the table matches --json', async () => {
    // Act
    const json = await runCli(['lag', '--json', '--pipeline', 'reviews'], env);
    const table = await runCli(['lag', '--pipeline', 'reviews'], env);

    // Assess
    expect(json.code).toBe(0);
    const [group] = (JSON.parse(json.stdout) as { groups: GroupJson[] }).groups;
    expect(group?.group).toBe(names.groups.reviews);
    expect(group?.members).toHaveLength(1);
    const ends = await admin.fetchTopicOffsets(names.topics.reviews);
    expect(group?.partitions.map((partition) => partition.end)).toEqual(
      ends.sort((a, b) => a.partition - b.partition).map((end) => end.high),
    );
    expect(group?.partitions.every((partition) => partition.committed === partition.end && partition.lag === 0)).toBe(true);
    expect(table.stdout).toContain(`reviews: group ${names.groups.reviews} on ${names.topics.reviews}, Stable, 1 member(s)`);
    const rows = tableRows(table.stdout).slice(2);
    expect(rows).toEqual(
      group?.partitions.map((partition) => [
        String(partition.partition),
        partition.committed ?? 'none',
        partition.end,
        String(partition.lag),
      ]),
    );
  });

  it('names the groups it checks and, for a group without members, the group whose members do read the topic', async () => {
    // Prepare: the CLI's environment names another group for reviews than the host's
    const other = `${names.groups.reviews}-elsewhere`;
    const mismatched = { ...env, STORAGE_GROUP_REVIEWS: other };

    // Act
    const { code, report } = await verifyJson(mismatched);
    const table = await runCli(['verify'], mismatched);

    // Assess
    expect(code).toBe(1);
    expect((report as unknown as { groups: Record<string, { group: string; from: string }> }).groups.reviews).toEqual({
      group: other,
      from: 'STORAGE_GROUP_REVIEWS',
    });
    console.log(`[cli-verify] ${table.stdout.split('\n')[0]}`);
    console.log(`[cli-verify] ${report.steps[4]?.summary}`);
    expect(report.steps[4]?.summary).toMatch(
      new RegExp(
        `^group ${other} has \\d+ message\\(s\\) of lag and no members, but group ${names.groups.reviews} has 1 member\\(s\\) on ` +
          `${names.topics.reviews}: the pipeline may consume under that group; check it with STORAGE_GROUP_REVIEWS=<group>`,
      ),
    );
    expect(table.stdout.split('\n')[0]).toBe(
      `checking groups ${names.groups['app-stats']} (STORAGE_GROUP_APP_STATS); ${other} (STORAGE_GROUP_REVIEWS); ` +
        `${names.groups['network-metrics']} (STORAGE_GROUP_NETWORK_METRICS)`,
    );
  });

  it('verify and lag say when a pipeline is paused', async () => {
    // Prepare
    expect((await runCli(['pause', 'reviews', '--reason', 'verify test'], env)).code).toBe(0);
    try {
      // Act
      const { report } = await verifyJson(env);
      const lagText = await runCli(['lag', '--pipeline', 'reviews'], env);
      const lagJson = await runCli(['lag', '--pipeline', 'reviews', '--json'], env);

      // Assess
      expect(report.steps[4]?.summary).toMatch(
        new RegExp(
          `${names.groups.reviews}: 0 \\(pipeline reviews is PAUSED by .+ at .+: verify test; \`storage-consumer resume reviews\`\\)`,
        ),
      );
      expect(lagText.stdout).toMatch(/\n {2}PAUSED by .+: verify test: it consumes nothing until `storage-consumer resume reviews`\n/);
      expect((JSON.parse(lagJson.stdout) as { groups: Array<{ paused: boolean }> }).groups[0]?.paused).toBe(true);
      console.log(`[cli-verify] verify lag step: ${report.steps[4]?.summary}`);
      console.log(`[cli-verify] lag:\n${lagText.stdout}`);
    } finally {
      expect((await runCli(['resume', 'reviews'], env)).code).toBe(0);
    }
  });

  it('lag names a topic that does not exist and exits 1', async () => {
    const missing = `${names.topics.reviews}-missing`;
    const run = await runCli(['lag', '--pipeline', 'reviews'], { ...env, STORAGE_TOPIC_REVIEWS: missing });

    expect(run.code).toBe(1);
    expect(run.stdout).toBe(`reviews: topic ${missing} of pipeline reviews does not exist\n`);
    console.log(`[cli-verify] lag, missing topic: ${run.stdout.trim()}`);
  });

  it('fails at the lag step when a stopped pipeline builds lag, naming its group', async () => {
    // Prepare: the host stops; reviews keep coming.
    expect(await host.stop()).toBe(0);
    await produce(names.topics.reviews, jsonMessages(reviews('verify-late', 5)));
    const [ends, committed] = await Promise.all([
      endOffsets(admin, names.topics.reviews),
      committedOffsets(admin, names.groups.reviews, names.topics.reviews),
    ]);
    const behind = [...ends].reduce((sum, [partition, end]) => sum + end - (committed.get(partition) ?? 0n), 0n);
    expect(behind).toBeGreaterThanOrEqual(5n);

    // Act
    const { code, report } = await verifyJson(env);
    const overThreshold = await verifyJson(env, '--max-lag', '2');
    const dev = await verifyJson(env, '--stage', 'dev');
    const table = await runCli(['verify'], env);

    // Assess
    expect(code).toBe(1);
    expect(report.failedStep).toBe('lag');
    expect(report.steps.slice(0, 4).every((step) => step.status === 'ok')).toBe(true);
    expect(report.steps[4]?.summary).toBe(
      `group ${names.groups.reviews} has ${behind} message(s) of lag and no members: its pipeline is not consuming`,
    );
    expect(overThreshold.report.steps[4]?.summary).toBe(`group ${names.groups.reviews} lags ${behind} message(s), more than 2`);
    expect(overThreshold.report.maxLag).toEqual({ 'app-stats': 2, reviews: 2, 'network-metrics': 2 });
    expect(dev.report.maxLag).toEqual(lagAlarmThresholds('dev'));
    expect(dev.report.failedStep).toBe('lag');
    expect(table.code).toBe(1);
    expect(table.stdout).toContain(`verify FAILED at step lag: group ${names.groups.reviews} has ${behind} message(s) of lag`);
  });

  it('healthcheck fails once the stopped host heartbeats are stale', async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_200));

    const stale = await runCli(['healthcheck', '--max-age', '1s'], env);

    expect(stale.code).toBe(1);
    expect(stale.stdout).toMatch(/^unhealthy: app-stats: heartbeat \d+ ms old \(limit 1000 ms\)/);
  });
});

describe('verify while a table is locked', () => {
  /** The backends still running a count of app_stats in the test's schema (none but the ones a test expects). */
  const leftoverCounts = async () =>
    (
      await schema.pool.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle'
           AND query LIKE 'SELECT count(*)::text AS rows FROM app_stats%' AND pid <> pg_backend_pid()`,
      )
    ).rows;

  it('names the table it was counting, and leaves no backend behind', async () => {
    // Prepare: one session holds app_stats in ACCESS EXCLUSIVE mode, as a migration or a manual LOCK would
    const names = await createTestPipelines('cli-verify-lock');
    const holder = await schema.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE app_stats IN ACCESS EXCLUSIVE MODE');
      const env = { ...environment(names), STORAGE_DB_STATEMENT_TIMEOUT_MS: '1500' };

      // Act: twice, as an operator retrying it would
      const first = await runCli(['verify'], env);
      const second = await verifyJson(env);
      const leftAfterRuns = await leftoverCounts();

      // Assess
      expect(first.code).toBe(1);
      expect(first.stdout).toContain(
        'verify FAILED at step messages: counting the rows of app_stats: canceling statement due to statement timeout ' +
          '(no answer within STORAGE_DB_STATEMENT_TIMEOUT_MS=1500: is app_stats locked?',
      );
      expect(second.report.steps.find((step) => step.step === 'messages')?.summary).toMatch(/^counting the rows of app_stats: /);
      // The other steps still ran (the lock blocks only the count).
      expect(second.report.steps.filter((step) => step.status === 'ok').map((step) => step.step)).toEqual([
        'schema',
        'topics',
        'dead-letters',
        'lag',
      ]);
      expect(leftAfterRuns).toEqual([]);
      console.log(`[cli-verify] ${first.stdout.split('\n').find((line) => line.startsWith('verify FAILED at step messages'))}`);
      console.log(`[cli-verify] leftover count backends after two runs: ${leftAfterRuns.length}`);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  });

  it('a CLI connection whose client gives up first has its statement cancelled on the server', async () => {
    // Prepare: a long statement timeout, so only the client-side give-up can end the wait
    const holder = await schema.pool.connect();
    const settings = loadSettings({ DATABASE_URL: schema.url, STORAGE_DB_STATEMENT_TIMEOUT_MS: '120000' });
    const pool = createCliPool(settings.database, captureLogger(), 'cli-test');
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE app_stats IN ACCESS EXCLUSIVE MODE');
      const applied = await pool.query<{ statement_timeout: string }>('SHOW statement_timeout');

      // Act: the client waits 500 ms, then gives up
      const giveUpAfter500Ms = { text: 'SELECT count(*)::text AS rows FROM app_stats', query_timeout: 500 } as pg.QueryConfig;
      const failure = await pool.query(giveUpAfter500Ms).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      const startedWaiting = Date.now();
      await waitUntil('the given-up count to leave the server', async () => (await leftoverCounts()).length === 0);

      // Assess
      expect(applied.rows[0]?.statement_timeout).toBe('2min');
      expect(failure?.message).toBe('Query read timeout');
      // Cancelled at once, not after the two-minute statement timeout or the lock's end.
      expect(Date.now() - startedWaiting).toBeLessThan(5_000);
      console.log(`[cli-verify] given-up count gone from pg_stat_activity ${Date.now() - startedWaiting} ms after '${failure?.message}'`);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      await pool.end();
    }
  });
});

describe('verify fails at the step that broke', () => {
  it('schema: a migration that is not applied', async () => {
    // Prepare: a database whose last migration was never applied
    const behind = await createMigratedSchema([], 'cliverifyschema');
    try {
      await behind.pool.query(
        'ALTER TABLE operator_actions DROP COLUMN state, DROP COLUMN completed_at; DELETE FROM storage_consumer_migrations WHERE version = 7',
      );
      const names = await createTestPipelines('cli-verify-schema');

      // Act
      const { code, report } = await verifyJson(environment(names, behind.url));
      const table = await runCli(['verify'], environment(names, behind.url));

      // Assess
      expect(code).toBe(1);
      expect(report.failedStep).toBe('schema');
      expect(report.steps[0]?.summary).toBe('not applied: 0007_operator_action_state.sql');
      // Every independent check still ran and reported
      expect(report.steps.slice(1).map((step) => step.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
      expect(table.stdout).toContain('verify FAILED at step schema: not applied: 0007_operator_action_state.sql');
    } finally {
      await behind.drop();
    }
  });

  it('schema drift: a table or column an applied migration defines is missing; verify and migrate name it and exit 1', async () => {
    // Prepare: every migration recorded, then network_metrics dropped and a column removed
    const drifted = await createMigratedSchema([], 'cliverifydrift');
    try {
      await drifted.pool.query('DROP TABLE network_metrics; ALTER TABLE reviews DROP COLUMN sentiment');
      const names = await createTestPipelines('cli-verify-drift');

      // Act
      const { code, report } = await verifyJson(environment(names, drifted.url));
      const migrated = await runCli(['migrate'], { DATABASE_URL: drifted.url });

      // Assess
      expect(code).toBe(1);
      expect(report.failedStep).toBe('schema');
      expect(report.steps[0]?.summary).toContain('table network_metrics is missing though migration 0003 is recorded');
      expect(report.steps[0]?.summary).toContain('column reviews.sentiment is missing though migration 0002 is recorded');
      expect(migrated.code).toBe(1);
      expect(migrated.stderr).toContain('table network_metrics is missing though migration 0003 is recorded');
    } finally {
      await drifted.drop();
    }
  });

  it('with the database down, topics and lag still run and report', async () => {
    const names = await createTestPipelines('cli-verify-dbdown');
    const { code, report } = await verifyJson(environment(names, 'postgres://postgres@127.0.0.1:1/nowhere'));
    const table = await runCli(['verify'], environment(names, 'postgres://postgres@127.0.0.1:1/nowhere'));

    expect(code).toBe(1);
    expect(report.steps.map((step) => [step.step, step.status])).toEqual([
      ['schema', 'failed'],
      ['topics', 'ok'],
      ['messages', 'failed'],
      ['dead-letters', 'failed'],
      ['lag', 'ok'],
    ]);
    // The failed steps name the step and the address as every CLI error line does: redacted.
    expect(report.steps.find((step) => step.step === 'schema')?.summary).toBe(
      'connecting to PostgreSQL at <address> failed: connect ECONNREFUSED <address>',
    );
    expect(JSON.stringify(report)).not.toContain('127.0.0.1');
    expect(table.stdout + table.stderr).not.toContain('127.0.0.1');
    expect(table.stdout).toContain(
      'verify FAILED at step schema: connecting to PostgreSQL at <address> failed: connect ECONNREFUSED <address>',
    );
  });

  it('topics: a topic with 1 partition', async () => {
    // Prepare: the reviews topic was auto-created (1 partition)
    const names = await createTestPipelines('cli-verify-topics');
    const narrow = `${names.topics.reviews}-narrow`;
    await createTestTopic(narrow, 1);
    await waitUntil(`${narrow} in the metadata`, async () => (await describeTopics(testBrokers(), [narrow]))[0]?.partitions === 1);
    const env = { ...environment(names), STORAGE_TOPIC_REVIEWS: narrow };

    // Act
    const { code, report } = await verifyJson(env);

    // Assess
    expect(code).toBe(1);
    expect(report.failedStep).toBe('topics');
    expect(report.steps[0]?.status).toBe('ok');
    expect(report.steps[1]?.summary).toBe(`topic ${narrow} has 1 partition(s), 3 required`);
    expect(report.steps.slice(2).every((step) => step.status !== 'not run')).toBe(true);
  });

  it('topics: a topic that does not exist', async () => {
    const names = await createTestPipelines('cli-verify-missing');
    const env = { ...environment(names), STORAGE_TOPIC_APP_STATS: `${names.topics['app-stats']}-missing` };

    const { code, report } = await verifyJson(env);

    expect(code).toBe(1);
    expect(report.failedStep).toBe('topics');
    expect(report.steps[1]?.summary).toBe(`topic ${names.topics['app-stats']}-missing does not exist`);
  });
});
