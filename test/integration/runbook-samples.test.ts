import { hostname } from 'node:os';
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Admin } from 'kafkajs';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { freePorts } from '../../dev/free-ports.js';
import { ensureTopics } from '../../kafka/topics.js';
import { MIGRATION_LOCK_KEY } from '../../shared/migrations/constants.js';
import { runMigrations } from '../../shared/migrations/run.js';
import { PIPELINE_NAMES, PIPELINES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createAppsStandIn, createTestDatabase } from '../helpers/database.js';
import type { TestDatabase } from '../helpers/database.js';
import {
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  spawnHost,
  temporaryDirectory,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import type { HostProcess, PipelineNames } from '../helpers/host.js';
import { produce, testBrokers, testKafka } from '../helpers/kafka.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';
import { comparable, parseSamples, renderPsqlTable, renderSample, replaceSamples, splitCommand } from '../helpers/runbook-samples.js';
import type { SampleStep } from '../helpers/runbook-samples.js';

/**
 * The sample outputs of docs/operations.md come from this run: every marked sample's commands run
 * exactly as written, in document order, on a real broker and PostgreSQL, each after the setup
 * the scenario below gives its sample (a host started, messages produced, a table locked ...).
 * What they print, with the volatile parts normalised (times, member ids, host names, pids,
 * ports), must be what the document says; `npm run docs:samples` writes it there instead
 * (UPDATE_RUNBOOK_SAMPLES=1). A marked sample with no setup here fails, and so does a setup whose
 * sample is gone, so the document cannot quote a command nobody runs.
 *
 * `$ npx storage-consumer ...` steps run the CLI (in this process, as test/helpers/cli.ts does);
 * `$ psql "$DATABASE_URL" -c "..."` steps run the SQL on the stack's database and print it in psql's aligned
 * format (the values are PostgreSQL's own text). The stack has a database of its own, so
 * `pg_stat_activity` shows only its sessions. With the run's own broker (KAFKA_BROKERS unset, as
 * in CI) the topics and groups have their real names, so tables line up as an operator sees
 * them; with an outside cluster they get unique names, shown under the real ones.
 */

const DOC = fileURLToPath(new URL('../../docs/operations.md', import.meta.url));
const UPDATE = process.env.UPDATE_RUNBOOK_SAMPLES === '1';
const OWN_BROKER = process.env.KAFKA_BROKERS === undefined;
const ACTOR = 'oncall@example.com';

interface Stack {
  database: TestDatabase;
  names: PipelineNames;
  admin: Admin;
  heartbeats: { path: string; remove(): Promise<void> };
  httpPort: number;
  env: Record<string, string>;
  hosts: HostProcess[];
  /** Sessions a sample holds open (a lock), closed at the end. */
  sessions: pg.Client[];
  /** Values the scenario or earlier steps printed, by the placeholder a later command names them with. */
  captured: Map<string, string>;
}

let stack: Stack;

const WEATHER = { id: 1, package_name: 'com.example.weather' };
const NEWS = { id: 2, package_name: 'com.example.news' };

async function pipelineNames(): Promise<PipelineNames> {
  if (!OWN_BROKER) return createTestPipelines('runbook');
  const topics = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, PIPELINES[name].topic])) as Record<PipelineName, string>;
  const groups = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, PIPELINES[name].group])) as Record<PipelineName, string>;
  await ensureTopics(
    testBrokers(),
    PIPELINE_NAMES.map((name) => ({ topic: topics[name], partitions: 3 })),
    { logger: { info: () => undefined, warn: (message) => console.warn(message) } },
  );
  return { topics, groups };
}

function startHost(extra: Record<string, string> = {}): HostProcess {
  const host = spawnHost({ ...stack.env, ...extra });
  stack.hosts.push(host);
  return host;
}

async function startedHost(extra: Record<string, string> = {}): Promise<HostProcess> {
  const host = startHost(extra);
  await host.waitForLog((line) => line.message === 'Running');
  return host;
}

async function stopHosts(): Promise<void> {
  await Promise.all(
    stack.hosts.map(async (host) => {
      if (host.child.exitCode === null) host.child.kill('SIGTERM');
      await host.exited;
    }),
  );
  stack.hosts = [];
}

async function drained(pipeline: PipelineName): Promise<void> {
  await waitForCommittedToEnd(stack.admin, stack.names.groups[pipeline], stack.names.topics[pipeline]);
}

/** Reviews keyed by their id and app stats by their package, as the producers send them: partitions follow the key. */
const keyed = (values: ReadonlyArray<Record<string, unknown> | string>, key: (value: Record<string, unknown>) => string) =>
  values.map((value) => ({
    key: typeof value === 'string' ? 'raw' : key(value),
    value: typeof value === 'string' ? value : JSON.stringify(value),
  }));
const byReviewId = (value: Record<string, unknown>) => String(value.review_id);
const byPackage = (value: Record<string, unknown>) => String(value.package_name);

const sql = (text: string, values: unknown[] = []) => stack.database.pool.query(text, values);

const reviewOf = (index: number, app = WEATHER.package_name, extra: Record<string, unknown> = {}) => ({
  ...sampleReview(),
  review_id: `gp:runbook-${app}-${index}`,
  package_name: app,
  ...extra,
});

/**
 * A session that takes `lock` and stays idle (in its transaction, unless `transaction` is false:
 * a session-level advisory lock needs none), as a forgotten `psql` would.
 */
async function holdLock(lock: string, { transaction = true }: { transaction?: boolean } = {}): Promise<pg.Client> {
  const session = new pg.Client({ connectionString: stack.database.url, application_name: 'psql' });
  await session.connect();
  session.on('error', () => undefined);
  stack.sessions.push(session);
  const { rows } = await session.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  stack.captured.set('<pid>', String(rows[0]?.pid));
  if (transaction) await session.query('BEGIN');
  await session.query(lock);
  return session;
}

/**
 * What each sample needs before its commands run, in document order; what one returns is added
 * to the environment of that sample's commands only.
 */
const SCENARIO: Record<string, () => Promise<Record<string, string> | void>> = {
  async 'verify-ok'() {
    await produce(stack.names.topics['app-stats'], keyed([sampleAppStats()], byPackage));
    await produce(
      stack.names.topics.reviews,
      keyed(
        [0, 1, 2, 3, 4, 5].map((index) => reviewOf(index)),
        byReviewId,
      ),
    );
    await produce(
      stack.names.topics['network-metrics'],
      keyed([sampleNetworkMetrics()], (value) => String(value.analysis_id)),
    );
    await startedHost();
    for (const name of PIPELINE_NAMES) await drained(name);
  },
  async 'dlq-list'() {
    await produce(
      stack.names.topics.reviews,
      jsonMessages(
        [0, 1, 2].map((index) => reviewOf(index, NEWS.package_name)),
        { partition: 0 },
      ),
    );
    await drained('reviews');
    // After the reviews' letters, so the ids the sample shows are always the same.
    await produce(stack.names.topics['app-stats'], jsonMessages(['{"package_name": "com.example.weather"'], { partition: 1 }));
    await drained('app-stats');
  },
  async 'dlq-redrive'() {
    await sql('INSERT INTO apps_registry_application (id, package_name, is_active) VALUES ($1, $2, true)', [NEWS.id, NEWS.package_name]);
  },
  async 'dlq-purge'() {
    await sql("UPDATE dead_letter_events SET created_at = created_at - interval '40 days'");
  },
  async migrate() {
    // A database with only the App API's table: the migrations are what the sample shows.
    const url = await stack.database.schema('fresh');
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      await createAppsStandIn(pool, [WEATHER]);
    } finally {
      await pool.end();
    }
    return { DATABASE_URL: url };
  },
  async 'migration-lock'() {
    // A psql session that took the runners' lock and stayed open: a holder that is not ours.
    await holdLock(`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`, { transaction: false });
  },
  async 'replay-members'() {},
  async 'replay-skip'() {
    await stopHosts();
    await produce(
      stack.names.topics.reviews,
      keyed(
        [10, 11, 12, 13, 14, 15].map((index) => reviewOf(index)),
        byReviewId,
      ),
    );
  },
  async 'step-over'() {
    // The hosts stay stopped (replay-skip): the group is empty.
  },
  async 'replay-devstack'() {
    // npm start stopped with Ctrl-C and started again without reviews.
    await stopHosts();
    await startedHost({ STORAGE_PIPELINES: 'app-stats,network-metrics' });
  },
  async cutover() {
    await stopHosts();
    await startedHost();
    const legacy = [1, 2, 3].map((index) => ({ packageName: WEATHER.package_name, crawledAt: `2026-10-0${index}T00:00:00Z`, score: 4.2 }));
    await produce(
      stack.names.topics['app-stats'],
      keyed(legacy, (value) => String(value.packageName)),
    );
    await drained('app-stats');
    await sql("UPDATE dead_letter_events SET created_at = created_at - interval '2 days' WHERE reason = 'invalid_message'");
  },
  async 'cutover-latest'() {
    // Before the new consumer first joins: no host, and the group does not exist yet.
    await stopHosts();
    await stack.admin.deleteGroups([stack.names.groups['app-stats']]);
  },
  async 'pause-status'() {
    if (stack.hosts.length === 0) await startedHost();
    await drained('reviews');
  },
  async 'forgotten-pause'() {
    const quiet = { stdout: () => undefined, stderr: () => undefined, env: stack.env, interactive: false };
    await main(['pause', 'network-metrics', '--reason', 'analyzer upgrade'], quiet);
    // Three hours later, nobody resumed it.
    await sql("UPDATE pipeline_pauses SET at = at - interval '3 hours'");
  },
  async 'schema-drift'() {
    await sql('ALTER TABLE network_metrics RENAME COLUMN avg_rtt_ms TO avg_rtt_millis');
  },
  async 'rejected-by-database'() {
    await sql("ALTER TABLE reviews ADD CONSTRAINT reviews_no_casino CHECK (content NOT LIKE '%casino%')");
    await produce(
      stack.names.topics.reviews,
      keyed([reviewOf(20), reviewOf(21, WEATHER.package_name, { content: 'Best casino app ever!' }), reviewOf(22)], byReviewId),
    );
    await drained('reviews');
  },
  async 'lock-diagnose'() {
    await holdLock('LOCK TABLE app_stats IN SHARE MODE');
    await produce(stack.names.topics['app-stats'], keyed([{ ...sampleAppStats(), crawled_at: '2026-11-30T07:00:00Z' }], byPackage));
    const [host] = stack.hosts;
    await host?.waitForLog((line) => line.message === 'pipeline stalled' && line.pipeline === 'app-stats', 60_000);
  },
  async 'lock-recovered'() {
    const [host] = stack.hosts;
    await host?.waitForLog((line) => line.message === 'pipeline recovered' && line.pipeline === 'app-stats', 60_000);
    await drained('app-stats');
  },
  async 'dev-stack-failed'() {
    // The failed pipeline the section starts from: the column renamed by hand, a network-metrics
    // message sent, and a host (as npm start runs it) stopping with exit 1 on that batch.
    await stopHosts();
    await sql('ALTER TABLE network_metrics RENAME COLUMN avg_rtt_ms TO avg_rtt_millis');
    await produce(
      stack.names.topics['network-metrics'],
      keyed([{ ...sampleNetworkMetrics(), analysis_id: '9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5c' }], (value) => String(value.analysis_id)),
    );
    const host = startHost();
    await host.waitForLog((line) => line.message === 'pipeline failed' && line.pipeline === 'network-metrics', 60_000);
    const { code } = await host.exited;
    if (code !== 1) throw new Error(`the host exited ${String(code)} after its failed pipeline, not 1`);
    stack.hosts = stack.hosts.filter((running) => running !== host);
  },
  async 'dev-stack-recovered'() {
    // npm start again: the batch that failed is stored, the other pipelines catch up.
    await startedHost();
    for (const name of PIPELINE_NAMES) await drained(name);
  },
  async reconcile() {
    for (const name of PIPELINE_NAMES) await drained(name);
  },
  async 'reconcile-missing'() {},
  async 'reconcile-replay'() {
    await stopHosts();
  },
  async 'reconcile-json'() {
    await startedHost();
    await drained('reviews');
  },
};

beforeAll(async () => {
  const database = await createTestDatabase('runbook');
  await createAppsStandIn(database.pool, [WEATHER]);
  await runMigrations({ connection: { connectionString: database.url }, logger: { info: () => undefined, warn: () => undefined } });
  const names = await pipelineNames();
  const admin = testKafka('runbook-samples').admin();
  await admin.connect();
  const heartbeats = await temporaryDirectory('runbook-');
  const [httpPort] = await freePorts(1);
  const base = hostEnvironment({ databaseUrl: database.url, names, heartbeatDir: heartbeats.path });
  // With the real names the overrides are the defaults: leave them out, as an operator's environment would.
  if (OWN_BROKER) for (const name of Object.keys(base)) if (/^STORAGE_(TOPIC|GROUP)_/.test(name)) delete base[name];
  const env = {
    ...base,
    STORAGE_HTTP_PORT: String(httpPort),
    STORAGE_HTTP_HOST: '127.0.0.1',
    // Short enough for a test, long enough to read: a lock shows as a stall within seconds.
    STORAGE_STALL_AFTER_MS: '3000',
    STORAGE_DB_STATEMENT_TIMEOUT_MS: '5000',
    STORAGE_ACTOR: ACTOR,
  };
  stack = { database, names, admin, heartbeats, httpPort: httpPort ?? 0, env, hosts: [], sessions: [], captured: new Map() };
});

afterAll(async () => {
  if (stack === undefined) return;
  await stopHosts();
  for (const session of stack.sessions) await session.end().catch(() => undefined);
  await stack.admin.disconnect();
  await stack.database.drop();
  await stack.heartbeats.remove();
});

/** Placeholders (`<cut-off>`) a step fills in from what an earlier step printed, and the patterns that find them. */
const CAPTURES: ReadonlyArray<{ readonly name: string; readonly pattern: RegExp }> = [
  { name: '<cut-off>', pattern: /--before (\S+)/ },
  { name: '<N:digest>', pattern: /--expect (\S+)/ },
];

/** Output as the document shows it: the run's names, times, ids, host, pids and ports made stable. */
function normalise(text: string): string {
  let out = text;
  for (const name of PIPELINE_NAMES) {
    for (const [actual, shown] of [
      [stack.names.groups[name], PIPELINES[name].group],
      [stack.names.topics[name], PIPELINES[name].topic],
    ] as const) {
      if (actual !== shown) out = out.replaceAll(actual, shown);
    }
  }
  for (const [placeholder, value] of stack.captured)
    out = out.replace(new RegExp(`\\b${value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\b`, 'g'), placeholder);
  const host = hostname();
  return out
    .replaceAll(stack.database.name, 'storage')
    .replaceAll(`127.0.0.1:${stack.httpPort}`, '127.0.0.1:9464')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, '2026-12-01T12:00:00.000Z')
    .replace(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\+00/g, '2026-12-01 12:00:00.000000+00')
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '00000000-0000-0000-0000-000000000000')
    .replace(new RegExp(`storage-consumer-${host}-\\d+`, 'g'), 'storage-consumer-host-1-4711')
    .replaceAll(`${host}:`, 'host-1:')
    .replace(/host-1:\d+/g, 'host-1:4711')
    .replace(/127\.0\.0\.1:(?!9464)\d+/g, '127.0.0.1:9092')
    .replace(/"elapsedMs": \d+/g, '"elapsedMs": 120')
    .replace(/"topicId": "[A-Za-z0-9_-]{22}"/g, '"topicId": "Q3pY9bWkTgeHkq0Gmr4xLw"')
    .replace(/\b\d+ ms\b/g, '12 ms')
    .replace(/ in \d+\.\d s\b/g, ' in 0.1 s')
    .replace(/\b(for|since) \d+ s\b/g, '$1 4 s')
    .replace(/\b\d+ s (old|ago)\b/g, '4 s $1');
}

/**
 * Runs `psql "$DATABASE_URL" -c "<sql>"` on the sample's `DATABASE_URL` (the stack's database),
 * printed as psql prints it. A step without `"$DATABASE_URL"` is refused: pasted, it would connect
 * to whatever server the shell defaults to (test/unit/docs/runbook-psql.test.ts holds every document).
 */
async function runPsql(words: readonly string[], env: Record<string, string>): Promise<{ code: number; printed: string }> {
  const at = words.indexOf('-c');
  const text = words[at + 1];
  if (words[1] !== '$DATABASE_URL' || at !== 2 || text === undefined) {
    throw new Error(`a psql step is "psql \\"$DATABASE_URL\\" -c \\"<sql>\\"": ${words.join(' ')}`);
  }
  const client = new pg.Client({ connectionString: env.DATABASE_URL ?? stack.database.url, application_name: 'psql' });
  await client.connect();
  try {
    const result = await client.query({ text, rowMode: 'array', types: { getTypeParser: () => (value: string) => value } });
    if (result.fields.length === 0) {
      // A command without rows: psql prints its tag (`ALTER TABLE`, `UPDATE 3`, `INSERT 0 1`).
      // node-postgres keeps the tag's first word only; a DDL tag has the object's kind too.
      const ddl = ['ALTER', 'CREATE', 'DROP'].includes(result.command);
      const tag = ddl ? text.trim().split(/\s+/).slice(0, 2).join(' ').toUpperCase() : result.command;
      const count = result.command === 'INSERT' ? `0 ${result.rowCount}` : result.rowCount;
      return { code: 0, printed: `${tag}${['INSERT', 'UPDATE', 'DELETE'].includes(result.command) ? ` ${count}` : ''}\n` };
    }
    return { code: 0, printed: renderPsqlTable(result.fields, result.rows as Array<Array<string | null>>) };
  } catch (error) {
    return { code: 1, printed: `ERROR:  ${(error as Error).message}\n` };
  } finally {
    await client.end();
  }
}

async function runStep(command: string, sampleEnv: Record<string, string>): Promise<string> {
  let line = command;
  for (const [placeholder, value] of stack.captured) line = line.replaceAll(placeholder, value);
  const { env, words } = splitCommand(line);
  const stepEnv = { ...stack.env, ...sampleEnv, ...env };
  let printed = '';
  let code: number;
  if (words[0] === 'psql') {
    ({ code, printed } = await runPsql(words, stepEnv));
  } else if (words[0] === 'npx' && words[1] === 'storage-consumer') {
    code = await main(words.slice(2), {
      stdout: (text) => void (printed += text),
      stderr: (text) => void (printed += text),
      env: stepEnv,
      interactive: false,
      // As the sample runs it: a command it prints to paste starts the same way.
      invokedAs: 'npx storage-consumer',
    });
  } else {
    throw new Error(`a sample step runs "npx storage-consumer ..." or "psql \\"$DATABASE_URL\\" -c ...", not: ${command}`);
  }
  for (const { name, pattern } of CAPTURES) {
    const found = pattern.exec(printed)?.[1];
    if (found !== undefined && !found.startsWith('<')) stack.captured.set(name, found);
  }
  const output = normalise(printed).replace(/\n+$/, '');
  return code === 0 ? output : `${output}\n[exit ${code}]`;
}

it('every marked sample of docs/operations.md is what its commands print on a real stack', { timeout: 900_000 }, async () => {
  const text = await readFile(DOC, 'utf8');
  const samples = parseSamples(text);
  expect(samples.length).toBeGreaterThan(0);
  const unknown = samples.filter((sample) => SCENARIO[sample.name] === undefined).map((sample) => sample.name);
  expect(unknown, 'samples with no setup in the scenario of this test').toEqual([]);
  const unused = Object.keys(SCENARIO).filter((name) => !samples.some((sample) => sample.name === name));
  expect(unused, 'setups of this scenario whose sample is no longer in the document').toEqual([]);
  const bodies: string[] = [];
  const stale: string[] = [];
  for (const sample of samples) {
    const sampleEnv = (await SCENARIO[sample.name]?.()) ?? {};
    const steps: SampleStep[] = [];
    for (const step of sample.steps) {
      const output = await runStep(step.command, sampleEnv);
      steps.push({ command: step.command, output });
      if (comparable(output) !== comparable(step.output)) {
        stale.push(`sample ${sample.name}, $ ${step.command}\n--- the document says:\n${step.output}\n--- the command printed:\n${output}`);
      }
    }
    bodies.push(renderSample(steps));
  }
  if (UPDATE) {
    await writeFile(DOC, replaceSamples(text, samples, bodies));
    return;
  }
  expect(stale, 'docs/operations.md quotes output its commands no longer print; run `npm run docs:samples`').toEqual([]);
});
