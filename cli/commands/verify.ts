/**
 * `storage-consumer verify`: the stack checked end to end in five steps (schema, topics, messages,
 * dead letters, lag), each run whatever the others found; exit 0 only when every one holds
 * (docs/operations.md, "Daily checks").
 */
import type { KafkaAdmin } from '../../kafka/port.js';
import type pg from 'pg';
import { groupPosition } from '../../kafka/lag.js';
import type { GroupPosition } from '../../kafka/lag.js';
import { describeTopics, TOPIC_PARTITIONS } from '../../kafka/topics.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { DEFAULT_MIGRATIONS_DIRECTORY, loadMigrations, schemaStatus } from '../../shared/migrations/index.js';
import { describeMismatches } from '../../shared/migrations/status.js';
import { findSchemaDrift } from '../../shared/migrations/drift.js';
import { PIPELINES } from '../../shared/pipelines.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import type { ConsumerSettings } from '../../config/pipeline-settings.js';
import { STORAGE_GROUP } from '../../config/setting-declarations.js';
import { SettingsReader } from '../../shared/setting.js';
import type { CliIo } from '../command.js';
import { defineCommand, EXIT, jsonOption, UsageError } from '../command.js';
import { cliLogger, createCliPool } from '../context.js';
import type { DeadLetterCount } from '../dead-letter-store.js';
import { countDeadLetters } from '../dead-letter-store.js';
import type { LagThresholds } from '../lag-thresholds.js';
import { DEFAULT_VERIFY_STAGE, lagAlarmThresholds } from '../lag-thresholds.js';
import { isStage, STAGES } from '../../shared/stages.js';
import { envSuffix } from '../../shared/pipeline-spec.js';
import { readPipelinePauses } from '../../shared/pause-store.js';
import type { PipelinePause } from '../../shared/pause-store.js';
import { otherGroupsOnTopic, otherGroupsText, pausedText } from '../group-notes.js';
import { createKafkaAdmin, positionJson } from '../kafka.js';
import { errorText, renderJson, renderTable } from '../output.js';
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
  readonly admin: () => Promise<KafkaAdmin>;
  /** Per pipeline: above it, a group's total lag fails the check. */
  readonly maxLag: LagThresholds;
  /** The stage named with `--stage`, if any (its group names are checked where no variable names one). */
  readonly stage: string | undefined;
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
    driftError = errorText(error);
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

/**
 * A failed count in words: a statement the server cancelled after the statement timeout waited
 * for the table (most often a lock: the lock runbook finds its holder).
 */
function waitedOn(error: unknown, table: string, settings: ConsumerSettings): string {
  const message = errorText(error);
  if ((error as { code?: unknown }).code !== '57014') return message;
  return (
    `${message} (no answer within STORAGE_DB_STATEMENT_TIMEOUT_MS=${settings.database.statementTimeoutMs}: ` +
    `is ${table} locked? pg_stat_activity names the waiting query and its blocker: docs/operations.md, "When the host is not ready")`
  );
}

async function checkMessages({ settings, pipelines, pool, admin }: VerifyContext): Promise<StepOutcome> {
  const connected = await admin();
  const rows = await Promise.all(
    pipelines.map(async (name) => {
      const { topic } = settings.pipelines[name];
      const table = PIPELINES[name].table.name;
      const offsets = await connected.partitionOffsets(topic);
      const messages = offsets.reduce((sum, { low, high }) => sum + BigInt(high) - BigInt(low), 0n);
      const counted = await pool.query<{ rows: string }>(`SELECT count(*)::text AS rows FROM ${table}`).catch((error: unknown) => {
        throw new Error(`counting the rows of ${table}: ${waitedOn(error, table, settings)}`, { cause: error });
      });
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

/** The pause rows, or why they could not be read (the lag step still reports). */
async function readPauses(pool: pg.Pool): Promise<Map<PipelineName, PipelinePause> | string> {
  try {
    return await readPipelinePauses(pool);
  } catch (error) {
    return errorText(error);
  }
}

/** Why a group with lag has no members: another group reads the topic (a group-name mismatch), or nothing does. */
async function noMembersProblem(context: VerifyContext, admin: KafkaAdmin, position: GroupPosition): Promise<string> {
  const base = `group ${position.group} has ${position.lag} message(s) of lag and no members`;
  const others = await otherGroupsOnTopic(admin, position.topic, position.group).catch(() => []);
  if (others.length === 0) return `${base}: its pipeline is not consuming`;
  const variable = `STORAGE_GROUP_${envSuffix(position.pipeline)}`;
  const named = context.stage === undefined ? '' : ` (--stage ${context.stage} named ${position.group})`;
  return (
    `${base}, but ${otherGroupsText(position.topic, others)}: the pipeline may consume under that group${named}; ` +
    `check it with ${variable}=<group>`
  );
}

async function checkLag(context: VerifyContext): Promise<StepOutcome> {
  const { settings, pipelines, admin, maxLag, pool } = context;
  const connected = await admin();
  const [positions, pauses] = await Promise.all([
    Promise.all(pipelines.map((name) => groupPosition(connected, settings.pipelines[name]))),
    readPauses(pool),
  ]);
  const limit = (position: GroupPosition) => BigInt(maxLag[position.pipeline as PipelineName]);
  const pauseOf = (position: GroupPosition) => (typeof pauses === 'string' ? undefined : pauses.get(position.pipeline as PipelineName));
  const pausedNote = (position: GroupPosition) => {
    const pause = pauseOf(position);
    return pause?.paused === true
      ? ` (pipeline ${position.pipeline} is ${pausedText(pause)}; \`storage-consumer resume ${position.pipeline}\`)`
      : '';
  };
  const problems: string[] = [];
  for (const position of positions) {
    if (position.lag > limit(position))
      problems.push(`group ${position.group} lags ${position.lag} message(s), more than ${limit(position)}${pausedNote(position)}`);
    else if (position.lag > 0n && position.members.length === 0)
      problems.push(`${await noMembersProblem(context, connected, position)}${pausedNote(position)}`);
  }
  const fine = positions.map((position) => `${position.group}: ${position.lag}${pausedNote(position)}`).join(', ');
  const unknownPauses = typeof pauses === 'string' ? `; pause state unknown: ${pauses}` : '';
  return {
    ok: problems.length === 0,
    summary: `${problems.length > 0 ? problems.join('; ') : fine}${unknownPauses}`,
    data: positions.map((position) => ({
      ...positionJson(position),
      paused: typeof pauses === 'string' ? null : (pauseOf(position)?.paused ?? false),
    })),
    details: renderTable<GroupPosition>(
      [
        { header: 'PIPELINE', value: (row) => row.pipeline },
        { header: 'GROUP', value: (row) => row.group },
        { header: 'STATE', value: (row) => row.state },
        { header: 'MEMBERS', value: (row) => row.members.length, align: 'right' },
        { header: 'LAG', value: (row) => row.lag, align: 'right' },
        { header: 'PAUSED', value: (row) => (typeof pauses === 'string' ? 'unknown' : pauseOf(row)?.paused === true ? 'yes' : 'no') },
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
      outcome = { ok: false, summary: errorText(error), data: null };
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

/**
 * The consumer groups verify checks, and where each name came from: a `STORAGE_GROUP_<PIPELINE>`
 * variable, `--stage`, or the default (prod's names, which the host uses unless told otherwise).
 */
function checkedGroups(io: CliIo, settings: ConsumerSettings, stage: string | undefined) {
  const setInEnvironment = (pipeline: PipelineName) => {
    const reader = new SettingsReader(io.env);
    reader.read(STORAGE_GROUP.of(pipeline));
    return reader.readings()[0]?.source === 'environment';
  };
  const source = (pipeline: PipelineName) =>
    setInEnvironment(pipeline) ? STORAGE_GROUP.of(pipeline).name : stage !== undefined ? `--stage ${stage}` : 'default';
  const json = Object.fromEntries(
    settings.selectedPipelines.map((name) => [name, { group: settings.pipelines[name].group, from: source(name) }]),
  );
  const bySource = new Map<string, string[]>();
  for (const name of settings.selectedPipelines)
    bySource.set(source(name), [...(bySource.get(source(name)) ?? []), settings.pipelines[name].group]);
  const line = `checking groups ${[...bySource].map(([from, names]) => `${names.join(', ')} (${from})`).join('; ')}`;
  return { json, line };
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

/** The lag thresholds without `--stage` or `--max-lag`, as `--help` states them. */
const DEFAULT_THRESHOLDS = `${DEFAULT_VERIFY_STAGE}'s: ${formatThresholds(lagAlarmThresholds(DEFAULT_VERIFY_STAGE))}`;

/** `verify`: the stack end to end, step by step. */
export const verify = defineCommand({
  name: 'verify',
  summary: 'check schema, topics, messages and rows, dead letters and lag, in order',
  usage: ['[--stage <S> | --max-lag <N>] [--json]'],
  description: `Runs every check, in this order, each whatever the others found, and names each that failed:
  schema        every migration applied, checksums match, and the live tables, columns and
                unique keys are the ones the applied migrations define (drift is named)
  topics        each pipeline's topic exists with ${TOPIC_PARTITIONS} partitions
  messages      messages on each topic and rows in each table (reported; an idle topic is fine)
  dead-letters  dead letters per pipeline and reason (reported)
  lag           each group's lag: fails above its pipeline's threshold, or when a group has lag
                and no members (naming other groups whose members read the topic, when there
                are: a group-name mismatch); a paused pipeline is named as paused
The pipelines are those of STORAGE_PIPELINES (all of them by default); the first line names the
groups checked and where each name came from. Exit 0 only when every check holds, 1 when one
failed.`,
  options: {
    stage: {
      type: 'string',
      value: 'S',
      help:
        `stage S (${STAGES.join(', ')}): the lag thresholds of its offset-lag alarms AND its consumer group names ` +
        '(dev: storage-consumer-dev.<pipeline>; a STORAGE_GROUP_<PIPELINE> variable that is set wins); default thresholds ' +
        `${DEFAULT_THRESHOLDS} and the default groups (storage-consumer.<pipeline>, as the host and npm start use them)`,
    },
    'max-lag': { type: 'string', value: 'N', help: 'one threshold for every group instead' },
    ...jsonOption('the whole report as JSON'),
  },
  async run({ values }, io) {
    const maxLag = lagThresholds(values.stage, values['max-lag']);
    const host = loadHostSettings(applyStage(io, values.stage).env);
    const groups = checkedGroups(io, host.storage, values.stage);
    const pool = createCliPool(host.storage.database, cliLogger(io), 'cli-verify');
    const admin = createKafkaAdmin(host.kafka);
    let connected: Promise<KafkaAdmin> | undefined;
    try {
      const reports = await runVerifySteps({
        settings: host.storage,
        pipelines: host.storage.selectedPipelines,
        pool,
        admin: () => (connected ??= admin.connect().then(() => admin)),
        maxLag,
        stage: values.stage,
      });
      const ok = reports.every((report) => report.status === 'ok');
      if (values.json === true) {
        const failedStep = reports.find((report) => report.status === 'failed')?.step ?? null;
        const steps: StepReport[] = reports.map(({ details: _details, ...report }) => report);
        io.stdout(renderJson({ ok, failedStep, maxLag, groups: groups.json, steps }));
      } else {
        io.stdout(`${groups.line}\n${renderReport(reports)}`);
      }
      return ok ? EXIT.ok : EXIT.failed;
    } finally {
      await Promise.allSettled([pool.end(), connected === undefined ? Promise.resolve() : admin.disconnect()]);
    }
  },
});
