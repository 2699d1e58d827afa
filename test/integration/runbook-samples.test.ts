import { hostname } from 'node:os';
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { PIPELINE_NAMES, PIPELINES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createAppsStandIn, createTestSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  spawnHost,
  temporaryDirectory,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import type { HostProcess, PipelineNames } from '../helpers/host.js';
import { ensureTopics } from '../../host/topics.js';
import { runMigrations } from '../../shared/migrations/run.js';
import { produce, testBrokers, testKafka } from '../helpers/kafka.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';
import { comparable, parseSamples, renderSample, replaceSamples, splitCommand } from '../helpers/runbook-samples.js';
import type { SampleStep } from '../helpers/runbook-samples.js';

/**
 * The sample outputs of docs/operations.md come from this run: every marked sample's commands run
 * exactly as written, in document order, on a real broker and PostgreSQL, each after the setup
 * the scenario below gives its sample (a host started, messages produced, an app registered ...).
 * What they print, with the volatile parts normalised (times, member ids, host names, ports),
 * must be what the document says; `npm run docs:samples` writes it there instead
 * (UPDATE_RUNBOOK_SAMPLES=1). A marked sample with no setup here fails, so the document cannot
 * quote a command nobody runs.
 *
 * With the run's own broker (KAFKA_BROKERS unset, as in CI) the topics and groups have their real
 * names, so tables line up as an operator sees them; with an outside cluster they get unique names,
 * shown under the real ones.
 */

const DOC = fileURLToPath(new URL('../../docs/operations.md', import.meta.url));
const UPDATE = process.env.UPDATE_RUNBOOK_SAMPLES === '1';
const OWN_BROKER = process.env.KAFKA_BROKERS === undefined;
const ACTOR = 'oncall@example.com';

interface Stack {
  schema: TestSchema;
  names: PipelineNames;
  admin: Admin;
  heartbeats: { path: string; remove(): Promise<void> };
  env: Record<string, string>;
  hosts: HostProcess[];
  /** Schemas a sample made for itself (dropped at the end, shown as `public`). */
  extraSchemas: TestSchema[];
  /** Values earlier steps printed, by the placeholder a later command names them with. */
  captured: Map<string, string>;
}

let stack: Stack;

const WEATHER = { id: 1, package_name: 'com.example.weather' };
const NEWS = { id: 2, package_name: 'com.example.news' };

async function canonicalNames(): Promise<PipelineNames> {
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
  const host = spawnHost(
    hostEnvironment({ databaseUrl: stack.schema.url, names: stack.names, heartbeatDir: stack.heartbeats.path, extra }),
  );
  stack.hosts.push(host);
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

const reviewOf = (index: number, app = WEATHER.package_name) => ({
  ...sampleReview(),
  review_id: `gp:runbook-${app}-${index}`,
  package_name: app,
});

/**
 * What each sample needs before its commands run, in document order; what one returns is added
 * to the environment of that sample's commands only.
 */
const SCENARIO: Record<string, () => Promise<Record<string, string> | void>> = {
  async migrate() {
    // A database with only the App API's table: the migrations are what the sample shows.
    const fresh = await createTestSchema('runbookmig');
    stack.extraSchemas.push(fresh);
    await createAppsStandIn(fresh.pool, [WEATHER]);
    return { DATABASE_URL: fresh.url };
  },
  async 'verify-ok'() {
    await produce(stack.names.topics['app-stats'], jsonMessages([sampleAppStats()]));
    await produce(stack.names.topics.reviews, jsonMessages([0, 1, 2, 3, 4, 5].map((index) => reviewOf(index))));
    await produce(stack.names.topics['network-metrics'], jsonMessages([sampleNetworkMetrics()]));
    const host = startHost();
    await host.waitForLog((line) => line.message === 'Running');
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
    await produce(stack.names.topics['app-stats'], jsonMessages(['{"package_name": "com.example.weather"'], { partition: 1 }));
    await drained('reviews');
    await drained('app-stats');
  },
  async 'dlq-redrive'() {
    await stack.schema.pool.query('INSERT INTO apps_registry_application (id, package_name, is_active) VALUES ($1, $2, true)', [
      NEWS.id,
      NEWS.package_name,
    ]);
  },
  async 'dlq-purge'() {
    await stack.schema.pool.query("UPDATE dead_letter_events SET created_at = created_at - interval '40 days'");
  },
  async 'replay-members'() {},
  async 'replay-skip'() {
    await stopHosts();
    await produce(stack.names.topics.reviews, jsonMessages([10, 11, 12, 13, 14, 15].map((index) => reviewOf(index))));
  },
  async 'pause-status'() {
    const host = startHost();
    await host.waitForLog((line) => line.message === 'Running');
    await drained('reviews');
  },
};

beforeAll(async () => {
  const schema = await createTestSchema('runbook');
  await createAppsStandIn(schema.pool, [WEATHER]);
  await runMigrations({ connection: { connectionString: schema.url }, logger: { info: () => undefined, warn: () => undefined } });
  const names = await canonicalNames();
  const admin = testKafka('runbook-samples').admin();
  await admin.connect();
  const heartbeats = await temporaryDirectory('runbook-');
  const env = {
    ...hostEnvironment({ databaseUrl: schema.url, names, heartbeatDir: heartbeats.path }),
    STORAGE_ACTOR: ACTOR,
    PATH: process.env.PATH ?? '',
  };
  stack = { schema, names, admin, heartbeats, env, hosts: [], extraSchemas: [], captured: new Map() };
});

afterAll(async () => {
  if (stack === undefined) return;
  await stopHosts();
  await stack.admin.disconnect();
  await stack.schema.drop();
  for (const schema of stack.extraSchemas) await schema.drop();
  await stack.heartbeats.remove();
});

/** Placeholders (`<cut-off>`) a step fills in from what an earlier step printed, and the patterns that find them. */
const CAPTURES: ReadonlyArray<{ readonly name: string; readonly pattern: RegExp }> = [
  { name: '<cut-off>', pattern: /--before (\S+)/ },
  { name: '<N:digest>', pattern: /--expect (\S+)/ },
];

/** Output as the document shows it: the run's names, times, ids, host and ports made stable. */
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
  for (const [placeholder, value] of stack.captured) out = out.replaceAll(value, placeholder);
  const host = hostname();
  for (const schema of [stack.schema, ...stack.extraSchemas]) out = out.replaceAll(schema.schema, 'public');
  return out
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, '2026-12-01T12:00:00.000Z')
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '00000000-0000-0000-0000-000000000000')
    .replaceAll(`${host}:`, 'host-1:')
    .replace(/host-1:\d+/g, 'host-1:4711')
    .replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:9092')
    .replace(/\b\d+ ms\b/g, '12 ms')
    .replace(/ in \d+\.\d s\b/g, ' in 0.1 s');
}

async function runStep(command: string, sampleEnv: Record<string, string>): Promise<string> {
  let line = command;
  for (const [placeholder, value] of stack.captured) line = line.replaceAll(placeholder, value);
  const { env, words } = splitCommand(line);
  if (words[0] !== 'npx' || words[1] !== 'storage-consumer')
    throw new Error(`a sample step runs "npx storage-consumer ...", not: ${command}`);
  let printed = '';
  const code = await main(words.slice(2), {
    stdout: (text) => void (printed += text),
    stderr: (text) => void (printed += text),
    env: { ...stack.env, ...sampleEnv, ...env },
    interactive: false,
  });
  for (const { name, pattern } of CAPTURES) {
    const found = pattern.exec(printed)?.[1];
    if (found !== undefined && !found.startsWith('<')) stack.captured.set(name, found);
  }
  const output = normalise(printed).replace(/\n+$/, '');
  return code === 0 ? output : `${output}\n[exit ${code}]`;
}

it('every marked sample of docs/operations.md is what its commands print on a real stack', { timeout: 600_000 }, async () => {
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
