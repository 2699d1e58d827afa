import type { Admin } from 'kafkajs';
import type pg from 'pg';
import { groupPosition } from '../../host/lag.js';
import type { GroupPosition } from '../../host/lag.js';
import { describeTopics, TOPIC_PARTITIONS } from '../../host/topics.js';
import { loadHostSettings } from '../../host/settings.js';
import { createPool } from '../../shared/db.js';
import { DEFAULT_MIGRATIONS_DIRECTORY, loadMigrations, schemaStatus } from '../../shared/migrations/index.js';
import { describeMismatches } from '../../shared/migrations/status.js';
import { findSchemaDrift } from '../../shared/migrations/drift.js';
import { PIPELINES } from '../../shared/pipelines.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import type { ConsumerSettings } from '../../host/pipeline-settings.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs, UsageError } from '../command.js';
import { cliLogger } from '../context.js';
import type { DeadLetterCount } from '../dead-letter-store.js';
import { countDeadLetters } from '../dead-letter-store.js';
import type { LagThresholds } from '../lag-thresholds.js';
import { DEFAULT_VERIFY_STAGE, lagAlarmThresholds } from '../lag-thresholds.js';
import { isStage, STAGES } from '../../shared/stages.js';
import { createKafkaAdmin, positionJson } from '../kafka.js';
import { renderJson, renderTable } from '../output.js';
import { applyStage } from './stage-option.js';

/** The checks, in the order they run and report; each runs whatever the others found. */
export const VERIFY_STEPS = ['schema', 'topics', 'messages', 'dead-letters', 'lag'] as const;
export type VerifyStep = (typeof VERIFY_STEPS)[number];

/** What one step found: `data` for --json, `details` (a table) for people. */
interface StepOutcome {
  readonly ok: boolean;
  readonly summary: string;
  readonly data: unknown;
  readonly details?: string;
}

/** One step in the report. */
export interface StepReport {
  readonly step: VerifyStep;
  readonly status: 'ok' | 'failed' | 'not run';
  readonly summary: string;
  readonly data: unknown;
}

/** A step's report with its table for the text output. */
type RenderedStep = StepReport & { readonly details?: string };

interface VerifyContext {
  readonly settings: ConsumerSettings;
  readonly pipelines: readonly PipelineName[];
  readonly pool: pg.Pool;
  /** Connected by the first step that needs it, so an unreachable broker fails that step. */
  readonly admin: () => Promise<Admin>;
  /** Per pipeline: above it, a group's total lag fails the check. */
  readonly maxLag: LagThresholds;
}

async function checkSchema({ pool }: VerifyContext): Promise<StepOutcome> {
  const status = await schemaStatus(pool);
  const files = await loadMigrations(DEFAULT_MIGRATIONS_DIRECTORY);
  const pending = files.filter((file) => status.pending.includes(file.version)).map((file) => file.fileName);
  // The live schema against what the applied (and unchanged) files define.
  const appliedVersions = new Set(status.applied.map((row) => row.version));
  const mismatched = new Set(status.mismatches.map((mismatch) => mismatch.version));
  const client = await pool.connect();
  let drift: string[];
  let driftError: string | undefined;
  try {
    drift = await findSchemaDrift(
      client,
      files.filter((file) => appliedVersions.has(file.version) && !mismatched.has(file.version)),
    );
  } catch (error) {
    drift = [];
    driftError = error instanceof Error ? error.message : String(error);
  } finally {
    client.release();
  }
  const problems = [
    ...(pending.length > 0 ? [`not applied: ${pending.join(', ')}`] : []),
    ...(status.mismatches.length > 0 ? [describeMismatches(status.mismatches)] : []),
    ...drift,
  ];
  const ok = status.upToDate && drift.length === 0;
  const newer = status.unknownApplied.length > 0 ? `; applied versions newer than this code: ${status.unknownApplied.join(', ')}` : '';
  const compared = driftError === undefined ? ', tables, columns and unique keys match' : `; live schema NOT compared (${driftError})`;
  return {
    ok,
    summary: ok ? `${status.applied.length} migrations applied, checksums match${compared}${newer}` : problems.join('; '),
    data: {
      applied: status.applied.map((row) => row.version),
      pending,
      mismatches: status.mismatches,
      unknownApplied: status.unknownApplied,
      drift,
      driftError: driftError ?? null,
    },
  };
}

async function checkTopics({ settings, pipelines, admin }: VerifyContext): Promise<StepOutcome> {
  const topics = pipelines.map((name) => settings.pipelines[name].topic);
  const described = await describeTopics(await admin(), topics);
  const problems = described.flatMap(({ topic, partitions }) =>
    partitions === null
      ? [`topic ${topic} does not exist`]
      : partitions < TOPIC_PARTITIONS
        ? [`topic ${topic} has ${partitions} partition(s), ${TOPIC_PARTITIONS} required`]
        : [],
  );
  return {
    ok: problems.length === 0,
    summary: problems.length > 0 ? problems.join('; ') : described.map(({ topic, partitions }) => `${topic}: ${partitions}`).join(', '),
    data: described,
  };
}

async function checkMessages({ settings, pipelines, pool, admin }: VerifyContext): Promise<StepOutcome> {
  const connected = await admin();
  const rows = await Promise.all(
    pipelines.map(async (name) => {
      const { topic } = settings.pipelines[name];
      const table = PIPELINES[name].table.name;
      const offsets = await connected.fetchTopicOffsets(topic);
      const messages = offsets.reduce((sum, { low, high }) => sum + BigInt(high) - BigInt(low), 0n);
      const counted = await pool.query<{ rows: string }>(`SELECT count(*)::text AS rows FROM ${table}`);
      return { pipeline: name, topic, messages: Number(messages), table, rows: Number(counted.rows[0]?.rows ?? 0) };
    }),
  );
  return {
    ok: true,
    summary: rows.map((row) => `${row.topic}: ${row.messages} message(s), ${row.table}: ${row.rows} row(s)`).join('; '),
    data: rows,
    details: renderTable<(typeof rows)[number]>(
      [
        { header: 'PIPELINE', value: (row) => row.pipeline },
        { header: 'TOPIC', value: (row) => row.topic },
        { header: 'MESSAGES', value: (row) => row.messages, align: 'right' },
        { header: 'TABLE', value: (row) => row.table },
        { header: 'ROWS', value: (row) => row.rows, align: 'right' },
      ],
      rows,
    ),
  };
}

async function checkDeadLetters({ pool }: VerifyContext): Promise<StepOutcome> {
  const counts: DeadLetterCount[] = await countDeadLetters(pool);
  const pending = counts.reduce((sum, count) => sum + count.pending, 0);
  const redriven = counts.reduce((sum, count) => sum + count.redriven, 0);
  return {
    ok: true,
    summary: `${pending} pending, ${redriven} re-driven`,
    data: counts,
    details: renderTable<DeadLetterCount>(
      [
        { header: 'PIPELINE', value: (row) => row.pipeline },
        { header: 'REASON', value: (row) => row.reason },
        { header: 'PENDING', value: (row) => row.pending, align: 'right' },
        { header: 'REDRIVEN', value: (row) => row.redriven, align: 'right' },
      ],
      counts,
    ),
  };
}

async function checkLag({ settings, pipelines, admin, maxLag }: VerifyContext): Promise<StepOutcome> {
  const connected = await admin();
  const positions: GroupPosition[] = await Promise.all(pipelines.map((name) => groupPosition(connected, settings.pipelines[name])));
  const limit = (position: GroupPosition) => BigInt(maxLag[position.pipeline as PipelineName]);
  const problems = positions.flatMap((position) =>
    position.lag > limit(position)
      ? [`group ${position.group} lags ${position.lag} message(s), more than ${limit(position)}`]
      : position.lag > 0n && position.members.length === 0
        ? [`group ${position.group} has ${position.lag} message(s) of lag and no members: its pipeline is not consuming`]
        : [],
  );
  return {
    ok: problems.length === 0,
    summary: problems.length > 0 ? problems.join('; ') : positions.map((position) => `${position.group}: ${position.lag}`).join(', '),
    data: positions.map(positionJson),
    details: renderTable<GroupPosition>(
      [
        { header: 'PIPELINE', value: (row) => row.pipeline },
        { header: 'GROUP', value: (row) => row.group },
        { header: 'STATE', value: (row) => row.state },
        { header: 'MEMBERS', value: (row) => row.members.length, align: 'right' },
        { header: 'LAG', value: (row) => row.lag, align: 'right' },
      ],
      positions,
    ),
  };
}

const CHECKS: Record<VerifyStep, (context: VerifyContext) => Promise<StepOutcome>> = {
  schema: checkSchema,
  topics: checkTopics,
  messages: checkMessages,
  'dead-letters': checkDeadLetters,
  lag: checkLag,
};

/**
 * Runs every step in order, each whatever the others found (an error fails its step only):
 * with the database down, topics and lag still report, which is what a database incident needs.
 */
async function runVerifySteps(context: VerifyContext): Promise<RenderedStep[]> {
  const reports: RenderedStep[] = [];
  for (const step of VERIFY_STEPS) {
    let outcome: StepOutcome;
    try {
      outcome = await CHECKS[step](context);
    } catch (error) {
      outcome = { ok: false, summary: error instanceof Error ? error.message : String(error), data: null };
    }
    reports.push({ step, status: outcome.ok ? 'ok' : 'failed', summary: outcome.summary, data: outcome.data, details: outcome.details });
  }
  return reports;
}

function renderReport(reports: readonly RenderedStep[]): string {
  const steps = renderTable<RenderedStep>(
    [
      { header: 'STEP', value: (report) => report.step },
      { header: 'STATUS', value: (report) => report.status },
      { header: 'RESULT', value: (report) => report.summary },
    ],
    reports,
  );
  const details = reports.flatMap((report) => (report.details === undefined ? [] : [report.details]));
  const failed = reports.filter((report) => report.status === 'failed');
  const verdict =
    failed.length > 0
      ? failed.map((report) => `verify FAILED at step ${report.step}: ${report.summary}`).join('\n')
      : 'verify: everything holds';
  return `${[steps, ...details].join('\n')}\n${verdict}\n`;
}

function formatThresholds(thresholds: LagThresholds): string {
  return Object.entries(thresholds)
    .map(([pipeline, limit]) => `${pipeline} ${limit}`)
    .join(', ');
}

/** The lag threshold per pipeline: `--max-lag` for every group, else the stage's alarm thresholds. */
function lagThresholds(stage: string | undefined, maxLag: string | undefined): LagThresholds {
  if (stage !== undefined && maxLag !== undefined) throw new UsageError('--stage and --max-lag exclude each other');
  if (maxLag !== undefined) {
    if (!/^\d+$/.test(maxLag) || !Number.isSafeInteger(Number(maxLag)))
      throw new UsageError(`--max-lag must be a whole number >= 0, got ${JSON.stringify(maxLag)}`);
    const limit = Number(maxLag);
    return Object.fromEntries(PIPELINE_NAMES.map((name) => [name, limit])) as Record<PipelineName, number>;
  }
  const chosen = stage ?? DEFAULT_VERIFY_STAGE;
  if (!isStage(chosen)) throw new UsageError(`--stage must be one of ${STAGES.join(', ')}, got ${JSON.stringify(chosen)}`);
  return lagAlarmThresholds(chosen);
}

/** `verify`: the stack end to end, step by step. */
const DEFAULT_THRESHOLDS = `${DEFAULT_VERIFY_STAGE}'s: ${formatThresholds(lagAlarmThresholds(DEFAULT_VERIFY_STAGE))}`;

export const verify: Command = {
  name: 'verify',
  summary: 'check schema, topics, messages and rows, dead letters and lag, in order',
  help: `Usage: storage-consumer verify [--stage S | --max-lag N] [--json]

Runs every check, in this order, each whatever the others found, and names each that failed:
  schema        every migration applied, checksums match, and the live tables, columns and
                unique keys are the ones the applied migrations define (drift is named)
  topics        each pipeline's topic exists with ${TOPIC_PARTITIONS} partitions
  messages      messages on each topic and rows in each table (reported; an idle topic is fine)
  dead-letters  dead letters per pipeline and reason (reported)
  lag           each group's lag: fails above its pipeline's threshold, or when a group has lag
                and no members
The pipelines are those of STORAGE_PIPELINES (all of them by default). Exit 0 only when every
check holds, 1 when one failed.

  --stage S     stage S (${STAGES.join(', ')}): its consumer group names and the lag thresholds of its
                offset-lag alarms; default thresholds ${DEFAULT_THRESHOLDS}
  --max-lag N   one threshold for every group instead
  --json        the whole report as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandArgs(verify, args, io, { ...JSON_OPTION, 'max-lag': { type: 'string' }, stage: { type: 'string' } });
    if (!parsed) return EXIT.ok;
    const maxLag = lagThresholds(parsed.values.stage, parsed.values['max-lag']);
    const host = loadHostSettings(applyStage(io, parsed.values.stage).env);
    const pool = createPool(host.storage.database, cliLogger(io), 'cli-verify');
    const admin = createKafkaAdmin(host.kafka);
    let connected: Promise<Admin> | undefined;
    try {
      const reports = await runVerifySteps({
        settings: host.storage,
        pipelines: host.storage.selectedPipelines,
        pool,
        admin: () => (connected ??= admin.connect().then(() => admin)),
        maxLag,
      });
      const ok = reports.every((report) => report.status === 'ok');
      if (parsed.values.json === true) {
        const failedStep = reports.find((report) => report.status === 'failed')?.step ?? null;
        const steps: StepReport[] = reports.map(({ details: _details, ...report }) => report);
        io.stdout(renderJson({ ok, failedStep, maxLag, steps }));
      } else {
        io.stdout(renderReport(reports));
      }
      return ok ? EXIT.ok : EXIT.failed;
    } finally {
      await Promise.allSettled([pool.end(), connected === undefined ? Promise.resolve() : admin.disconnect()]);
    }
  },
};
