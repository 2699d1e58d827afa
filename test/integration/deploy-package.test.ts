/**
 * `sls package` for every stage, offline, and what CloudFormation would be given. Each stage is
 * packaged once (beforeAll); the tests read the generated template and the function zips.
 * In the integration project only because packaging takes tens of seconds, not for a service.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { inflateRawSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lagAlarmThresholds, stageGroups } from '../../cli/lag-thresholds.js';
import { logicalId } from '../../shared/pipeline-spec.js';
import { PIPELINE_NAMES, PIPELINES } from '../../shared/pipelines.js';
import { valueForStage } from '../../shared/stages.js';
import { BATCH_METRIC_NAMES, METRICS_SERVICE_NAME } from '../../aws/metrics.js';
import { loadMigrations, migrationsHash } from '../../shared/migrations/files.js';
import { DEFAULT_MIGRATIONS_DIRECTORY } from '../../shared/migrations/constants.js';
import type { CloudFormationTemplate } from '../helpers/cloudformation-spec.js';
import { loadSpecification, validateTemplate } from '../helpers/cloudformation-spec.js';
import { CFN_LINT_MISSING, cfnLint, cfnLintVersion, describeFinding } from '../helpers/cfn-lint.js';
import { assertSucceeded, runSls, slsEnvironment } from '../helpers/serverless.js';

const STAGES = ['dev', 'staging', 'prod', 'local'] as const;
type Stage = (typeof STAGES)[number];
const AWS_STAGES = ['dev', 'staging', 'prod'] as const;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
interface Resource {
  readonly Type: string;
  readonly Condition?: string;
  readonly DependsOn?: string | string[];
  readonly DeletionPolicy?: string;
  readonly UpdateReplacePolicy?: string;
  readonly Properties: JsonObject;
}
interface Output {
  readonly Condition?: string;
  readonly Description?: string;
  readonly Value: Json;
}
interface Template {
  readonly Conditions?: Record<string, Json>;
  readonly Resources: Record<string, Resource>;
  readonly Outputs?: Record<string, Output>;
}

/** A packaged stage: the template with its conditions applied, as CloudFormation would see it. */
interface Packaged {
  /** Resources whose Condition holds, with Fn::If resolved and AWS::NoValue removed. */
  readonly resources: Record<string, Resource>;
  /** Every resource, conditions not applied to existence (Fn::If still resolved). */
  readonly declared: Record<string, Resource>;
  readonly conditions: Record<string, boolean>;
  /** The template as packaged, untouched (for the check against the CloudFormation specification). */
  readonly template: Template;
  /** Stack outputs whose Condition holds. */
  readonly outputs: Record<string, Output>;
  readonly zips: Record<string, { bytes: number; files: string[]; path: string }>;
}

// --- the few CloudFormation semantics the template uses (Fn::Equals/Not/If, AWS::NoValue) ----

const isObject = (value: Json | undefined): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);
const NO_VALUE = Symbol('AWS::NoValue');

function evaluateCondition(node: Json, conditions: Record<string, Json>): boolean {
  if (!isObject(node)) throw new Error(`unsupported condition ${JSON.stringify(node)}`);
  if ('Fn::Equals' in node) {
    const [left, right] = node['Fn::Equals'] as Json[];
    if (typeof left !== 'string' || typeof right !== 'string') throw new Error(`Fn::Equals on non-literals: ${JSON.stringify(node)}`);
    return left === right;
  }
  if ('Fn::Not' in node) return !evaluateCondition((node['Fn::Not'] as Json[])[0] ?? null, conditions);
  if ('Condition' in node) return evaluateCondition(conditions[node.Condition as string] ?? null, conditions);
  throw new Error(`unsupported condition ${JSON.stringify(node)}`);
}

function resolveValue(value: Json, holds: (name: string) => boolean): Json | typeof NO_VALUE {
  if (Array.isArray(value)) {
    return value.map((item) => resolveValue(item, holds)).filter((item): item is Json => item !== NO_VALUE);
  }
  if (!isObject(value)) return value;
  if (value.Ref === 'AWS::NoValue') return NO_VALUE;
  if ('Fn::If' in value) {
    const [name, whenTrue, whenFalse] = value['Fn::If'] as [string, Json, Json];
    return resolveValue(holds(name) ? whenTrue : whenFalse, holds);
  }
  const result: JsonObject = {};
  for (const [key, inner] of Object.entries(value)) {
    const resolved = resolveValue(inner, holds);
    if (resolved !== NO_VALUE) result[key] = resolved;
  }
  return result;
}

/** A zip's entries, from its central directory (stored or deflated; all osls writes). */
async function zipEntries(path: string): Promise<Array<{ name: string; content: () => Buffer }>> {
  const bytes = await readFile(path);
  const entries: Array<{ name: string; content: () => Buffer }> = [];
  for (let at = bytes.indexOf('PK\x01\x02'); at >= 0; at = bytes.indexOf('PK\x01\x02', at + 4)) {
    const method = bytes.readUInt16LE(at + 10);
    const compressedSize = bytes.readUInt32LE(at + 20);
    const nameLength = bytes.readUInt16LE(at + 28);
    const localHeader = bytes.readUInt32LE(at + 42);
    const name = bytes.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    const start = localHeader + 30 + bytes.readUInt16LE(localHeader + 26) + bytes.readUInt16LE(localHeader + 28);
    const data = () => bytes.subarray(start, start + compressedSize);
    entries.push({ name, content: () => (method === 8 ? inflateRawSync(data()) : Buffer.from(data())) });
  }
  return entries;
}

/** Unpacks a function zip into `target`, as Lambda does into /var/task. */
async function unpack(zipPath: string, target: string): Promise<void> {
  for (const entry of await zipEntries(zipPath)) {
    if (entry.name.endsWith('/')) continue;
    await mkdir(dirname(join(target, entry.name)), { recursive: true });
    await writeFile(join(target, entry.name), entry.content());
  }
}

const run = promisify(execFile);

/** Imports a bundled handler in a fresh Node process; returns the import's duration. */
async function importHandler(path: string): Promise<{ ms: number; handler: string }> {
  const script =
    'const started = performance.now(); const module = await import(process.argv[1]); ' +
    'console.log(JSON.stringify({ ms: performance.now() - started, handler: typeof module.handler }));';
  const env = { ...process.env, DATABASE_URL: undefined, STORAGE_DB_SECRET_ID: undefined };
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script, path], { env });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { ms: number; handler: string };
}

async function packageStage(stage: Stage, directory: string): Promise<Packaged> {
  const out = join(directory, stage);
  assertSucceeded(await runSls(['package', '--stage', stage, '--package', out], slsEnvironment()), `sls package --stage ${stage}`);
  const template = JSON.parse(await readFile(join(out, 'cloudformation-template-update-stack.json'), 'utf8')) as Template;
  const declaredConditions = template.Conditions ?? {};
  const conditions = Object.fromEntries(
    Object.keys(declaredConditions).map((name) => [name, evaluateCondition(declaredConditions[name] ?? null, declaredConditions)]),
  );
  const holds = (name: string) => {
    if (!(name in conditions)) throw new Error(`unknown condition ${name}`);
    return conditions[name] === true;
  };
  const declared = Object.fromEntries(
    Object.entries(template.Resources).map(([id, resource]) => [
      id,
      resolveValue(resource as unknown as Json, holds) as unknown as Resource,
    ]),
  );
  const resources = Object.fromEntries(
    Object.entries(declared).filter(([, resource]) => resource.Condition === undefined || holds(resource.Condition)),
  );
  const outputs = Object.fromEntries(
    Object.entries(template.Outputs ?? {}).filter(([, output]) => output.Condition === undefined || holds(output.Condition)),
  );
  const zips: Packaged['zips'] = {};
  for (const name of ['migrate', 'appStats', 'reviews', 'networkMetrics']) {
    const path = join(out, `${name}.zip`);
    zips[name] = { bytes: (await stat(path)).size, files: (await zipEntries(path)).map((entry) => entry.name), path };
  }
  return { resources, declared, conditions, template, outputs, zips };
}

// --- the deployment's own vocabulary ----------------------------------------------------------

const CONSUMERS = [
  { fn: 'AppStats', pipeline: 'app-stats' as const, batchSize: 200, window: 10 },
  { fn: 'Reviews', pipeline: 'reviews' as const, batchSize: 500, window: 5 },
  { fn: 'NetworkMetrics', pipeline: 'network-metrics' as const, batchSize: 50, window: 0 },
] as const;
const EXPECTED_GROUPS: Record<Stage, (pipeline: string) => string> = {
  dev: (pipeline) => `storage-consumer-dev.${pipeline}`,
  staging: (pipeline) => `storage-consumer-staging.${pipeline}`,
  prod: (pipeline) => `storage-consumer.${pipeline}`,
  local: (pipeline) => `storage-consumer.${pipeline}`,
};
const ALARM_TOPICS: Record<Stage, string> = {
  dev: 'arn:aws:sns:eu-west-1:123456789012:storage-consumer-dev-alarms',
  staging: 'arn:aws:sns:eu-west-1:123456789012:storage-consumer-staging-alarms',
  prod: 'arn:aws:sns:eu-west-1:123456789012:storage-consumer-prod-alarms',
  local: 'arn:aws:sns:us-east-1:000000000000:storage-consumer-local-alarms',
};
/** The database retry budget of one batch at the default settings (docs/design.md section 4). */
const RETRY_BACKOFF_S = 1 + 2 + 4 + 8 + 16;
const CONNECT_TIMEOUT_S = 5;
const ATTEMPTS = 6;
const KAFKA_MAX_TIMEOUT_S = 14 * 60;
const BUNDLE_LIMIT_BYTES = 1.5 * 1024 * 1024;

const ofType = (packaged: Packaged, type: string, which: 'resources' | 'declared' = 'resources') =>
  Object.entries(packaged[which]).filter(([, resource]) => resource.Type === type);
const dependsOn = (resource: Resource) => [resource.DependsOn ?? []].flat();
const functionRef = (fn: string) => ({ Ref: `${fn}LambdaFunction` });

function statementsOf(role: Resource): JsonObject[] {
  const policies = (role.Properties.Policies ?? []) as JsonObject[];
  return policies.flatMap((policy) => ((policy.PolicyDocument as JsonObject).Statement ?? []) as JsonObject[]);
}
const actionsOf = (statement: JsonObject) => [statement.Action as string | string[]].flat();
const resourcesOf = (statement: JsonObject) => [statement.Resource as Json].flat();

// --------------------------------------------------------------------------------------------

const packaged = {} as Record<Stage, Packaged>;
let directory: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'storage-consumer-package-'));
  // One after another: each run bundles four functions, and the machine has few cores.
  for (const stage of STAGES) packaged[stage] = await packageStage(stage, directory);
}, 900_000);

afterAll(async () => {
  if (directory) await rm(directory, { recursive: true, force: true });
});

describe.each(STAGES)('sls package --stage %s', (stage) => {
  it('runs every function on nodejs24.x, arm64, and bundles each under 1.5 MB', () => {
    const functions = ofType(packaged[stage], 'AWS::Lambda::Function');
    expect(functions.map(([id]) => id).sort()).toEqual([
      'AppStatsLambdaFunction',
      'MigrateLambdaFunction',
      'NetworkMetricsLambdaFunction',
      'ReviewsLambdaFunction',
    ]);
    for (const [, fn] of functions) {
      expect(fn.Properties.Runtime).toBe('nodejs24.x');
      expect(fn.Properties.Architectures).toEqual(['arm64']);
    }
    for (const [name, zip] of Object.entries(packaged[stage].zips)) {
      expect(zip.bytes, `${name}.zip`).toBeLessThan(BUNDLE_LIMIT_BYTES);
      expect(zip.files).toContain('handlers/package.json'); // "type": "module" for the .js bundle
    }
    expect(packaged[stage].zips.migrate?.files.filter((file) => file.startsWith('migrations/')).sort()).toEqual([
      'migrations/0001_app_stats.sql',
      'migrations/0002_reviews.sql',
      'migrations/0003_network_metrics.sql',
      'migrations/0004_dead_letter_events.sql',
      'migrations/0005_operator_actions.sql',
      'migrations/0006_pipeline_pauses.sql',
      'migrations/0007_operator_action_state.sql',
    ]);
    if (stage === 'prod') {
      console.log(
        'bundle sizes (zip, bytes):',
        JSON.stringify(Object.fromEntries(Object.entries(packaged[stage].zips).map(([name, zip]) => [name, zip.bytes]))),
      );
    }
  });

  it('ships each function as a self-contained ES module that Node loads from the unpacked zip alone', async () => {
    if (stage !== 'prod') return; // the bundles are the same on every stage; prod's are measured
    const handlers = { migrate: 'migrate', appStats: 'app-stats', reviews: 'reviews', networkMetrics: 'network-metrics' };
    const timings: Record<string, number> = {};
    for (const [name, file] of Object.entries(handlers)) {
      const task = join(directory, 'task', name); // outside the repository: no package.json above it
      await unpack(packaged[stage].zips[name]!.path, task);
      const samples: number[] = [];
      for (let round = 0; round < 3; round += 1) {
        const loaded = await importHandler(join(task, 'handlers', `${file}.js`));
        expect(loaded.handler, name).toBe('function');
        samples.push(loaded.ms);
      }
      timings[name] = Math.round(samples.sort((a, b) => a - b)[1]!);
    }
    console.log('handler module import time (median of 3, ms):', JSON.stringify(timings));
  });

  it("gives consumers a timeout that covers the retry budget of a batch, within a Kafka mapping's limit", () => {
    for (const { fn } of CONSUMERS) {
      const timeout = packaged[stage].resources[`${fn}LambdaFunction`]?.Properties.Timeout as number;
      expect(timeout).toBeGreaterThan(RETRY_BACKOFF_S + ATTEMPTS * CONNECT_TIMEOUT_S);
      expect(timeout).toBeLessThanOrEqual(KAFKA_MAX_TIMEOUT_S);
    }
  });

  it('runs the migration as a custom resource with the hash of migrations/, before every consumer', async () => {
    const { resources } = packaged[stage];
    const migration = resources.SchemaMigration;
    expect(migration?.Type).toBe('Custom::SchemaMigration');
    expect(migration?.Properties.ServiceToken).toEqual({ 'Fn::GetAtt': ['MigrateLambdaFunction', 'Arn'] });
    expect(migration?.Properties.MigrationsHash).toBe(await migrationsHash(DEFAULT_MIGRATIONS_DIRECTORY));
    const migrateTimeout = resources.MigrateLambdaFunction?.Properties.Timeout as number;
    expect(migration?.Properties.ServiceTimeout).toBeGreaterThan(migrateTimeout);
    expect(migration?.Properties.ServiceTimeout).toBeLessThanOrEqual(3600);
    // The highest version in migrations/: what a rollback is told from (aws/migration-handler.ts).
    const versions = (await loadMigrations(DEFAULT_MIGRATIONS_DIRECTORY)).map((file) => file.version);
    expect(migration?.Properties.LatestMigration).toBe(Math.max(...versions));
    for (const { fn } of CONSUMERS) {
      expect(dependsOn(resources[`${fn}LambdaFunction`]!)).toContain('SchemaMigration');
    }
  });

  it("never lets Lambda run the migration again behind CloudFormation's back: no async retry, no event older than ServiceTimeout - timeout", () => {
    const { resources } = packaged[stage];
    const configs = ofType(packaged[stage], 'AWS::Lambda::EventInvokeConfig');
    expect(configs.map(([, config]) => config.Properties.FunctionName)).toEqual([{ Ref: 'MigrateLambdaFunction' }]);
    const config = configs[0]![1].Properties;
    expect(config.Qualifier).toBe('$LATEST'); // versionFunctions: false, so every invoke is $LATEST
    expect(config.MaximumRetryAttempts).toBe(0);
    // An event run at age A may migrate until A + timeout; CloudFormation gives up at ServiceTimeout.
    const timeout = resources.MigrateLambdaFunction!.Properties.Timeout as number;
    const serviceTimeout = resources.SchemaMigration!.Properties.ServiceTimeout as number;
    expect(config.MaximumEventAgeInSeconds).toBeGreaterThanOrEqual(60); // Lambda's least
    expect((config.MaximumEventAgeInSeconds as number) + timeout).toBeLessThanOrEqual(serviceTimeout);
  });

  it('creates the invoke config before the first migration runs: SchemaMigration depends on it', () => {
    // Created side by side on a first deploy, the migration could run under Lambda's defaults (2 retries, 6 hours).
    expect(dependsOn(packaged[stage].resources.SchemaMigration!)).toContain('MigrateLambdaEvConf');
  });

  it("keeps the migration's logs when a failed first deploy deletes the stack, in a group named per stack", () => {
    const { resources } = packaged[stage];
    const group = resources.MigrateLogGroup!;
    expect(group.Type).toBe('AWS::Logs::LogGroup');
    expect(group.DeletionPolicy).toBe('Retain');
    expect(group.UpdateReplacePolicy).toBe('Retain');
    // The stack id's uuid in the name: the retained group of a deleted stack never blocks the next create.
    expect(group.Properties.LogGroupName).toEqual({
      'Fn::Join': [
        '',
        [`/aws/lambda/storage-consumer-${stage}-migrate-`, { 'Fn::Select': [2, { 'Fn::Split': ['/', { Ref: 'AWS::StackId' }] }] }],
      ],
    });
    expect(group.Properties.RetentionInDays).toBe(30);
    expect(resources.MigrateLambdaFunction!.Properties.LoggingConfig).toEqual({ LogGroup: { Ref: 'MigrateLogGroup' } });
    // The function writes only there: its role's log statement is on this group.
    const logStatements = statementsOf(resources.MigrationRole!).filter((statement) => actionsOf(statement).includes('logs:PutLogEvents'));
    expect(logStatements.flatMap(resourcesOf)).toEqual([{ 'Fn::GetAtt': ['MigrateLogGroup', 'Arn'] }]);
    // No group under the function's default name is created beside it.
    expect(ofType(packaged[stage], 'AWS::Logs::LogGroup').map(([id]) => id)).toEqual(
      expect.arrayContaining(['MigrateLogGroup', ...CONSUMERS.map(({ fn }) => `${fn}LogGroup`)]),
    );
    expect(ofType(packaged[stage], 'AWS::Logs::LogGroup')).toHaveLength(1 + CONSUMERS.length);
  });

  it('switches on report-form failures exactly where the mapping has ReportBatchItemFailures', () => {
    // Judged on every declared mapping. Local has none (the host feeds its functions there, and
    // the host honours reports by default); test/unit/deploy checks the mappings a local stage
    // with kafkaMappings 'true' would get.
    const mappings = ofType(packaged[stage], 'AWS::Lambda::EventSourceMapping', 'declared');
    const deploysMappings = stage !== 'local';
    const functions = ofType(packaged[stage], 'AWS::Lambda::Function', 'declared');
    for (const [id, fn] of functions) {
      const variables = ((fn.Properties.Environment as JsonObject | undefined)?.Variables ?? {}) as JsonObject;
      const reports = variables.STORAGE_FAILURE_RESPONSE === 'report';
      const own = mappings.filter(([, mapping]) => JSON.stringify(mapping.Properties.FunctionName) === JSON.stringify({ Ref: id }));
      const reported = own.filter(([, mapping]) =>
        (mapping.Properties.FunctionResponseTypes as Json[] | undefined)?.includes('ReportBatchItemFailures'),
      );
      if (reports) expect(reported.length, `${id} answers in the report form`).toBe(own.length);
      if (reports && deploysMappings) expect(own.length, `${id} answers in the report form`).toBeGreaterThan(0);
      if (!reports) expect(reported, `${id} throws, so no mapping of it may read reports`).toEqual([]);
    }
  });

  it('keeps retries and record age unlimited and sends no batch to a destination', () => {
    for (const [id, mapping] of ofType(packaged[stage], 'AWS::Lambda::EventSourceMapping', 'declared')) {
      expect(mapping.Properties.MaximumRetryAttempts, id).toBe(-1);
      expect(mapping.Properties.MaximumRecordAgeInSeconds, id).toBe(-1);
      expect(mapping.Properties.DestinationConfig, id).toBeUndefined();
      expect(mapping.Properties.BisectBatchOnFunctionError, id).toBe(false);
    }
  });

  it("raises eight alarms per consumer (six without mappings: none on OffsetLag), all to the stage's topic, as many as docs/deployment.md says", async () => {
    const alarms = ofType(packaged[stage], 'AWS::CloudWatch::Alarm');
    const withMappings = stage !== 'local';
    expect(alarms).toHaveLength(CONSUMERS.length * (withMappings ? 8 : 6));
    // The one place the docs state the count: the alarms' row of "What a deploy creates".
    const row = (await readFile(new URL('../../docs/deployment.md', import.meta.url), 'utf8'))
      .split('\n')
      .find((line) => line.startsWith('| CloudWatch alarms'));
    const stated = withMappings ? /(\d+) on dev, staging and prod/.exec(row ?? '')?.[1] : /\*\*(\d+) on local\*\*/.exec(row ?? '')?.[1];
    expect(Number(stated), `docs/deployment.md, "What a deploy creates": ${row ?? 'no alarms row'}`).toBe(alarms.length);
    for (const [id, alarm] of alarms) {
      expect(alarm.Properties.AlarmActions, id).toEqual([ALARM_TOPICS[stage]]);
      expect(alarm.Properties.OKActions, id).toEqual([ALARM_TOPICS[stage]]);
    }
    for (const { fn, pipeline } of CONSUMERS) {
      const alarm = (kind: string) => packaged[stage].resources[`${fn}${kind}Alarm`]!.Properties;
      const byFunction = [{ Name: 'FunctionName', Value: functionRef(fn) }];
      const byPipeline = [
        { Name: 'service', Value: 'storage-consumer' },
        { Name: 'pipeline', Value: pipeline },
      ];
      expect(alarm('Errors')).toMatchObject({ Namespace: 'AWS/Lambda', MetricName: 'Errors', Dimensions: byFunction, Threshold: 0 });
      expect(alarm('Throttles')).toMatchObject({ Namespace: 'AWS/Lambda', MetricName: 'Throttles', Dimensions: byFunction, Threshold: 0 });
      const timeoutMs = (packaged[stage].resources[`${fn}LambdaFunction`]!.Properties.Timeout as number) * 1000;
      expect(alarm('Duration')).toMatchObject({
        MetricName: 'Duration',
        Statistic: 'Maximum',
        Dimensions: byFunction,
        Threshold: 0.8 * timeoutMs,
      });
      for (const kind of ['DeadLettered', 'BatchFailed']) {
        expect(alarm(kind)).toMatchObject({
          Namespace: `StorageConsumer/${stage}`,
          MetricName: kind,
          Dimensions: byPipeline,
          Statistic: 'Sum',
          ComparisonOperator: 'GreaterThanThreshold',
          Threshold: 0,
        });
      }
      // Freshness: the p99 of each batch's oldest record (aws/metrics.ts) over the spec's objective for the stage.
      expect(alarm('Freshness')).toMatchObject({
        Namespace: `StorageConsumer/${stage}`,
        MetricName: BATCH_METRIC_NAMES.recordDelayMs,
        Dimensions: byPipeline,
        ExtendedStatistic: 'p99',
        ComparisonOperator: 'GreaterThanThreshold',
        Threshold: valueForStage(PIPELINES[pipeline].freshnessObjectiveSeconds, stage) * 1000,
        TreatMissingData: 'notBreaching',
      });
      expect(alarm('Freshness').Statistic).toBeUndefined();
      if (!withMappings) {
        // Without a mapping nothing reports OffsetLag: a stalled alarm would sit in ALARM for good.
        expect(packaged[stage].resources[`${fn}OffsetLagAlarm`]).toBeUndefined();
        expect(packaged[stage].resources[`${fn}StalledAlarm`]).toBeUndefined();
        continue;
      }
      expect(alarm('OffsetLag')).toMatchObject({ MetricName: 'OffsetLag', Statistic: 'Maximum', Dimensions: byFunction });
      // The table `verify` checks lag against (cli/lag-thresholds.ts) is the alarms' own.
      expect(alarm('OffsetLag').Threshold).toBe(lagAlarmThresholds(stage)[pipeline]);
      const stalled = alarm('Stalled');
      expect(stalled.TreatMissingData).toBe('breaching');
      const metrics = stalled.Metrics as JsonObject[];
      const watched = metrics.flatMap((metric) =>
        metric.MetricStat ? [((metric.MetricStat as JsonObject).Metric as JsonObject).MetricName] : [],
      );
      expect(watched.sort()).toEqual(['Invocations', 'OffsetLag']);
      expect(metrics.find((metric) => metric.ReturnData === true)?.Expression).toBe('IF(lag > 0 AND FILL(invocations, 0) == 0, 1, 0)');
    }
  });

  it("shows every consumer on the stage's dashboard, each widget naming a metric the code or AWS/Lambda emits", () => {
    const dashboards = ofType(packaged[stage], 'AWS::CloudWatch::Dashboard');
    expect(dashboards.map(([id]) => id)).toEqual(['Dashboard']);
    const properties = dashboards[0]![1].Properties;
    expect(properties.DashboardName).toBe(`storage-consumer-${stage}`);
    // The body is one JSON text joined around the function names and the region.
    const [separator, parts] = (properties.DashboardBody as { 'Fn::Join': [string, Json[]] })['Fn::Join'];
    const text = parts.map((part) => (typeof part === 'string' ? part : `<${(part as { Ref: string }).Ref}>`)).join(separator);
    const body = JSON.parse(text) as { widgets: Array<{ properties: { title: string; region: string; metrics: Json[][] } }> };
    const emitted = new Set<string>(Object.values(BATCH_METRIC_NAMES));
    // What Lambda emits per function for a Kafka event source mapping (OffsetLag included).
    const lambdaEmits = new Set(['Invocations', 'Errors', 'Throttles', 'Duration', 'ConcurrentExecutions', 'OffsetLag']);
    const functionsDeployed = new Set(ofType(packaged[stage], 'AWS::Lambda::Function').map(([id]) => `<${id}>`));
    const shown: Record<string, Set<string>> = {};
    for (const { properties: widget } of body.widgets) {
      expect(widget.region, widget.title).toBe('<AWS::Region>');
      expect(widget.metrics.length, widget.title).toBeGreaterThan(0);
      for (const metric of widget.metrics) {
        const [namespace, name, ...rest] = metric as [string, string, ...Json[]];
        const options = (typeof rest.at(-1) === 'object' ? rest.pop() : {}) as { stat?: string };
        const dimensions = Object.fromEntries(
          Array.from({ length: rest.length / 2 }, (_, index) => [rest[2 * index], rest[2 * index + 1]]),
        );
        let consumer: string;
        if (namespace === 'AWS/Lambda') {
          expect(lambdaEmits.has(name), `${widget.title}: AWS/Lambda has no ${name}`).toBe(true);
          expect(Object.keys(dimensions), widget.title).toEqual(['FunctionName']);
          expect(functionsDeployed.has(dimensions.FunctionName as string), widget.title).toBe(true);
          consumer = CONSUMERS.find(({ fn }) => dimensions.FunctionName === `<${fn}LambdaFunction>`)?.pipeline ?? 'none';
        } else {
          // The functions' POWERTOOLS_METRICS_NAMESPACE and the dimensions aws/metrics.ts sets.
          expect(namespace, widget.title).toBe(`StorageConsumer/${stage}`);
          expect(emitted.has(name), `${widget.title}: the handlers emit no ${name}`).toBe(true);
          expect(dimensions.service, widget.title).toBe(METRICS_SERVICE_NAME);
          consumer = dimensions.pipeline as string;
        }
        expect(widget.title.startsWith(`${consumer}: `), widget.title).toBe(true);
        (shown[consumer] ??= new Set()).add(
          `${name}${options.stat === 'p50' || options.stat === 'p99' || options.stat === 'SampleCount' || name === 'Duration' ? ` ${options.stat}` : ''}`,
        );
      }
    }
    const everyConsumerShows = [
      'Inserted',
      'Updated',
      'Skipped',
      'DeadLettered',
      'BatchFailed',
      'BatchDurationMs p50',
      'BatchDurationMs p99',
      'OffsetLag',
      'Errors',
      'Throttles',
      'ConcurrentExecutions',
      'BatchDurationMs SampleCount',
      'Duration Maximum',
      'RecordDelayMs p99',
    ];
    for (const { pipeline } of CONSUMERS)
      expect([...(shown[pipeline] ?? [])], pipeline).toEqual(expect.arrayContaining(everyConsumerShows));
    expect(Object.keys(shown).sort()).toEqual(CONSUMERS.map(({ pipeline }) => pipeline).sort());
  });

  it('scopes every IAM statement (only EC2 Describe actions, which take no resource, use *)', () => {
    const { resources } = packaged[stage];
    expect(resources.IamRoleLambdaExecution).toBeUndefined(); // no shared catch-all role
    for (const role of ['ConsumerRole', 'MigrationRole']) {
      for (const statement of statementsOf(resources[role]!)) {
        if (resourcesOf(statement).includes('*')) {
          expect(
            actionsOf(statement).every((action) => action.startsWith('ec2:Describe')),
            JSON.stringify(statement),
          ).toBe(true);
        }
        expect(
          actionsOf(statement).some((action) => action.endsWith('*')),
          JSON.stringify(statement),
        ).toBe(false);
      }
    }
    const migrationActions = statementsOf(resources.MigrationRole!).flatMap(actionsOf);
    expect(migrationActions.filter((action) => action.startsWith('kafka'))).toEqual([]);
    expect(migrationActions).not.toContain('cloudwatch:PutMetricData'); // EMF goes through the logs
    const logs = statementsOf(resources.ConsumerRole!).find((statement) => actionsOf(statement).includes('logs:PutLogEvents'));
    expect(resourcesOf(logs!)).toEqual(CONSUMERS.map(({ fn }) => ({ 'Fn::GetAtt': [`${fn}LogGroup`, 'Arn'] })));
  });
});

describe('the packaged templates against the CloudFormation resource specification (offline, @aws-cdk/aws-service-spec)', () => {
  it.each(STAGES)('%s: every type, property name, required property, literal and intrinsic conforms', async (stage) => {
    const { template } = packaged[stage];
    // The Kafka mappings carry the newer properties the check must know (provisioned mode, error controls).
    for (const [id, mapping] of Object.entries(template.Resources).filter(
      ([, resource]) => resource.Type === 'AWS::Lambda::EventSourceMapping',
    )) {
      expect(Object.keys(mapping.Properties), id).toEqual(
        expect.arrayContaining([
          'ProvisionedPollerConfig',
          'MaximumRetryAttempts',
          'MaximumRecordAgeInSeconds',
          'BisectBatchOnFunctionError',
          'FunctionResponseTypes',
          'MetricsConfig',
        ]),
      );
    }
    expect(validateTemplate(template as unknown as CloudFormationTemplate, await loadSpecification(), stage)).toEqual([]);
  });

  it('fails, naming stage, resource and property, on a misspelled property (top level and nested) planted in the prod template', async () => {
    const template = structuredClone(packaged.prod.template) as unknown as CloudFormationTemplate & { Resources: Record<string, Resource> };
    const mapping = template.Resources.ReviewsEventSourceMapping!.Properties;
    mapping.BisectBatchOnFunctionErrors = mapping.BisectBatchOnFunctionError ?? false;
    delete mapping.BisectBatchOnFunctionError;
    const pollers = mapping.ProvisionedPollerConfig as JsonObject;
    pollers.MinimumPoller = pollers.MinimumPollers ?? 1;
    delete pollers.MinimumPollers;
    const problems = validateTemplate(template, await loadSpecification(), 'prod');
    expect(problems).toHaveLength(2);
    expect(problems).toContainEqual(
      expect.stringMatching(
        /^stage prod, resource ReviewsEventSourceMapping \(AWS::Lambda::EventSourceMapping\), property BisectBatchOnFunctionErrors: unknown property/,
      ),
    );
    expect(problems).toContainEqual(
      expect.stringMatching(
        /^stage prod, resource ReviewsEventSourceMapping \(AWS::Lambda::EventSourceMapping\), property ProvisionedPollerConfig\.MinimumPoller: unknown property of ProvisionedPollerConfig/,
      ),
    );
  });
});

/**
 * cfn-lint is optional outside CI: without it (and with `CI` unset) these tests are reported as
 * skipped, with one line naming it. With `CI` set, its absence fails them.
 */
const CI = (process.env.CI ?? '') !== '' && process.env.CI !== 'false';
const cfnLintAvailable = cfnLintVersion();
const cfnLintSkipped = cfnLintAvailable === undefined && !CI;
if (cfnLintSkipped) console.log(`[cfn-lint] ${CFN_LINT_MISSING}`);
const CFN_LINT_REQUIRED =
  'cfn-lint not found (PATH) and CI is set: in CI the packaged templates must pass cfn-lint; install it ("pip install cfn-lint")';

/**
 * cfn-lint checks one region unless told (us-east-1): the stacks deploy to serverless.yml's
 * `provider.region` (eu-west-1), where a resource type, property or value may be missing.
 */
const LINT_REGIONS = ['us-east-1', 'eu-west-1'] as const;

describe.skipIf(cfnLintSkipped)(`the packaged templates through cfn-lint (${LINT_REGIONS.join(', ')})`, () => {
  const templateOf = (stage: Stage) => join(directory, stage, 'cloudformation-template-update-stack.json');
  let linted: ReturnType<typeof cfnLint> | undefined;
  const lintAll = () => {
    if (cfnLintAvailable === undefined) throw new Error(CFN_LINT_REQUIRED);
    linted ??= cfnLint(STAGES.map(templateOf), LINT_REGIONS);
    return linted;
  };

  it.each(STAGES)('%s: no error, no warning', (stage) => {
    const { findings } = lintAll();
    const own = findings.filter((finding) => finding.Filename === templateOf(stage)).map(describeFinding);
    expect(own, `${String(cfnLintAvailable)} on ${stage}`).toEqual([]);
    console.log(`${String(cfnLintAvailable)}, ${stage}, regions ${LINT_REGIONS.join(' ')}: no findings`);
  });

  it('fails on what it is there to catch: an empty SourceAccessConfigurations planted in the prod template (E3032)', async () => {
    if (cfnLintAvailable === undefined) throw new Error(CFN_LINT_REQUIRED);
    const template = structuredClone(packaged.prod.template) as unknown as { Resources: Record<string, Resource> };
    template.Resources.ReviewsEventSourceMapping!.Properties.SourceAccessConfigurations = [];
    const planted = join(directory, 'planted-cloudformation-template.json');
    await writeFile(planted, JSON.stringify(template, null, 2));
    const { status, findings } = cfnLint([planted], LINT_REGIONS);
    expect(status).not.toBe(0);
    expect(findings.map(describeFinding)).toEqual([
      expect.stringMatching(
        /^E3032 Resources\/ReviewsEventSourceMapping\/Properties\/SourceAccessConfigurations \(line \d+\): expected minimum item count: 1, found: 0$/,
      ),
    ]);
  });
});

describe('the packaged templates say what each stage deploys, nothing it does not', () => {
  it.each(STAGES)('%s: no Conditions and no Fn::If (every branch was decided while packaging)', (stage) => {
    const text = JSON.stringify(packaged[stage].template);
    expect(packaged[stage].template.Conditions).toBeUndefined();
    expect(text).not.toContain('"Fn::If"');
    expect(text).not.toContain('"Resource":""');
  });
});

describe.each(AWS_STAGES)('the %s stage on AWS', (stage) => {
  it("gives each event source mapping's UUID as a stack output, for the pause runbook's --no-enabled call", () => {
    const { outputs, resources } = packaged[stage];
    for (const { fn, pipeline } of CONSUMERS) {
      const output = outputs[`${fn}EventSourceMappingUuid`];
      // Ref of an AWS::Lambda::EventSourceMapping is its UUID.
      expect(output).toMatchObject({ Value: { Ref: `${fn}EventSourceMapping` } });
      expect(resources[`${fn}EventSourceMapping`]).toBeDefined();
      expect(output?.Description).toContain(pipeline);
      expect(output?.Description).toContain('--no-enabled');
    }
  });

  it('maps each topic with its group id, batch size, window, start, pollers and metrics, after the migration', () => {
    const { resources } = packaged[stage];
    const mappings = ofType(packaged[stage], 'AWS::Lambda::EventSourceMapping');
    expect(mappings).toHaveLength(3);
    for (const { fn, pipeline, batchSize, window } of CONSUMERS) {
      const mapping = resources[`${fn}EventSourceMapping`]!;
      expect(dependsOn(mapping)).toContain('SchemaMigration');
      const groupConfig = stage === 'dev' ? 'SelfManagedKafkaEventSourceConfig' : 'AmazonManagedKafkaEventSourceConfig';
      expect(mapping.Properties).toMatchObject({
        FunctionName: functionRef(fn),
        Topics: [pipeline],
        BatchSize: batchSize,
        MaximumBatchingWindowInSeconds: window,
        StartingPosition: 'TRIM_HORIZON',
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ProvisionedPollerConfig: { MinimumPollers: 1 },
        MetricsConfig: { Metrics: ['EventCount', 'ErrorCount', 'KafkaMetrics'] },
        [groupConfig]: { ConsumerGroupId: EXPECTED_GROUPS[stage](pipeline) },
      });
    }
    // Every pipeline of the specs has its mapping, and `--stage` on the CLI names the groups the mappings join.
    const groupConfig = stage === 'dev' ? 'SelfManagedKafkaEventSourceConfig' : 'AmazonManagedKafkaEventSourceConfig';
    for (const name of PIPELINE_NAMES) {
      const { topic, batchSize, lambda } = PIPELINES[name];
      expect(resources[`${logicalId(name)}EventSourceMapping`]?.Properties).toMatchObject({
        Topics: [topic],
        BatchSize: batchSize,
        MaximumBatchingWindowInSeconds: lambda.batchingWindowSeconds,
        [groupConfig]: { ConsumerGroupId: stageGroups(stage)[name] },
      });
    }
  });

  it("reads database credentials from the stage's secret over verified TLS, inside the VPC", () => {
    const { resources } = packaged[stage];
    for (const id of ['MigrateLambdaFunction', ...CONSUMERS.map(({ fn }) => `${fn}LambdaFunction`)]) {
      const fn = resources[id]!.Properties;
      const variables = (fn.Environment as JsonObject).Variables as JsonObject;
      expect(variables.STORAGE_DB_SECRET_ID).toMatch(new RegExp(`^arn:aws:secretsmanager:.*:secret:storage-consumer/${stage}/database-`));
      expect(variables.STORAGE_DB_SSL).toBe('verify-full');
      expect(variables.NODE_EXTRA_CA_CERTS).toBe('/var/runtime/ca-cert.pem');
      expect(variables.DATABASE_URL).not.toMatch(/@/); // no credentials in the configuration
      expect((fn.VpcConfig as JsonObject).SubnetIds).not.toEqual([]);
      for (const role of ['ConsumerRole', 'MigrationRole']) {
        const secretStatements = statementsOf(resources[role]!).filter((statement) =>
          actionsOf(statement).includes('secretsmanager:GetSecretValue'),
        );
        expect(secretStatements.flatMap(resourcesOf)).toContain(variables.STORAGE_DB_SECRET_ID);
      }
    }
  });
});

describe('Kafka sources per stage', () => {
  it('dev reads a self-managed cluster over SASL/SCRAM inside the VPC, with the secret readable', () => {
    const { resources } = packaged.dev;
    const mapping = resources.ReviewsEventSourceMapping!.Properties;
    expect(mapping.EventSourceArn).toBeUndefined();
    expect(((mapping.SelfManagedEventSource as JsonObject).Endpoints as JsonObject).KafkaBootstrapServers).toHaveLength(3);
    const access = mapping.SourceAccessConfigurations as JsonObject[];
    expect(access.map((item) => item.Type).sort()).toEqual(['SASL_SCRAM_512_AUTH', 'VPC_SECURITY_GROUP', 'VPC_SUBNET', 'VPC_SUBNET']);
    const saslSecret = access.find((item) => item.Type === 'SASL_SCRAM_512_AUTH')!.URI;
    const secretResources = statementsOf(resources.ConsumerRole!)
      .filter((statement) => actionsOf(statement).includes('secretsmanager:GetSecretValue'))
      .flatMap(resourcesOf);
    expect(secretResources).toContain(saslSecret);
    expect(
      statementsOf(resources.ConsumerRole!)
        .flatMap(actionsOf)
        .filter((action) => action.startsWith('kafka')),
    ).toEqual([]);
  });

  it.each(['staging', 'prod'] as const)('%s reads its MSK cluster with IAM access control scoped to its topics and groups', (stage) => {
    const { resources } = packaged[stage];
    const cluster = stage === 'prod' ? 'storage-prod' : 'storage-staging';
    const mapping = resources.ReviewsEventSourceMapping!.Properties;
    expect(JSON.stringify(mapping.EventSourceArn)).toContain(`:cluster/${cluster}/`);
    expect(mapping.SelfManagedEventSource).toBeUndefined();
    expect(mapping.SourceAccessConfigurations).toBeUndefined();
    const statements = statementsOf(resources.ConsumerRole!);
    const scope = (action: string) =>
      JSON.stringify(statements.filter((statement) => actionsOf(statement).includes(action)).flatMap(resourcesOf));
    expect(scope('kafka:GetBootstrapBrokers')).toContain(`:cluster/${cluster}/`);
    for (const { pipeline } of CONSUMERS) {
      expect(scope('kafka-cluster:ReadData')).toContain(`:topic/${cluster}/`);
      expect(scope('kafka-cluster:ReadData')).toContain(`/${pipeline}"`);
      expect(scope('kafka-cluster:AlterGroup')).toContain(`/${EXPECTED_GROUPS[stage](pipeline)}"`);
    }
  });

  it('local leaves the mappings out (LocalStack Community has none) and needs no secret or VPC', () => {
    const { resources } = packaged.local;
    expect(ofType(packaged.local, 'AWS::Lambda::EventSourceMapping', 'declared')).toEqual([]);
    expect(Object.keys(packaged.local.outputs).filter((name) => name.endsWith('EventSourceMappingUuid'))).toEqual([]);
    const fn = resources.ReviewsLambdaFunction!.Properties;
    const variables = (fn.Environment as JsonObject).Variables as JsonObject;
    expect(variables.STORAGE_DB_SECRET_ID).toBe('');
    expect(variables.STORAGE_DB_SSL).toBe('disable');
    expect(fn.VpcConfig).toBeUndefined();
  });
});
