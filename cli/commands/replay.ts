/**
 * `storage-consumer replay`: moves one pipeline's consumer group (or one partition of it) to
 * earliest, latest, an instant or an offset; refused while the group has members, when it does not
 * exist, or when it would skip uncommitted offsets; audited before any offset moves
 * (docs/operations.md, "Replay one pipeline"). The plan itself is cli/replay-plan.ts's.
 */
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { KafkaAdmin } from '../../kafka/port.js';
import { GroupNotEmptyError } from '../../kafka/port.js';
import type pg from 'pg';
import { auditUnavailable, completeOperatorAction, recordOperatorAction, resolveActor } from '../../shared/operator-actions.js';
import type { AuditPolicy, AuditRecord, OperatorActionOutcome } from '../../shared/operator-actions.js';
import type { PipelineSettings } from '../../config/pipeline-settings.js';
import { defineCommand, EXIT, jsonOption, RefusedError, UsageError } from '../command.js';
import type { GroupPosition } from '../../kafka/lag.js';
import { groupPosition } from '../../kafka/lag.js';
import { positionJson, withKafkaAdmin } from '../kafka.js';
import { withDatabase } from '../context.js';
import { STAGE_OPTION, applyStage } from './stage-option.js';
import { errorText, renderJson, renderTable } from '../output.js';
import type { ReplayStep } from '../replay-plan.js';
import { describeSkips, planReplay } from '../replay-plan.js';
import { parseSince } from '../time.js';
import { groupHeading } from './lag.js';
import { auditPolicy, auditRefusal, NO_AUDIT_OPTION, reportUnrecorded } from './no-audit-option.js';
import { parsePipeline } from './pipeline-option.js';

/** Where a replay moves the group: the earliest message kept, the end, the first at or after an instant, or one offset. */
export type ReplayTarget =
  | { readonly kind: 'earliest' }
  | { readonly kind: 'latest' }
  | { readonly kind: 'timestamp'; readonly at: Date }
  | { readonly kind: 'offset'; readonly offset: bigint };

const WHOLE_NUMBER = /^\d+$/;

function parseTarget(to: string | undefined, toOffset: string | undefined, partition: number | undefined): ReplayTarget {
  if (to !== undefined && toOffset !== undefined) throw new UsageError('give --to or --to-offset, not both');
  if (toOffset !== undefined) {
    if (!WHOLE_NUMBER.test(toOffset))
      throw new UsageError(`--to-offset must be an offset (a whole number), got ${JSON.stringify(toOffset)}`);
    if (partition === undefined) throw new UsageError('--to-offset needs --partition: an offset belongs to one partition');
    return { kind: 'offset', offset: BigInt(toOffset) };
  }
  if (to === undefined)
    throw new UsageError(
      '--to is required: earliest, latest, an ISO timestamp or a duration ago such as 24h (or --partition N --to-offset X)',
    );
  if (to === 'earliest' || to === 'latest') return { kind: to };
  return { kind: 'timestamp', at: parseSince(to, '--to') };
}

function parsePartition(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!WHOLE_NUMBER.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`--partition must be a partition number, got ${JSON.stringify(text)}`);
  }
  return Number(text);
}

function describeTarget(target: ReplayTarget): string {
  if (target.kind === 'timestamp') return target.at.toISOString();
  return target.kind === 'offset' ? `offset ${target.offset}` : target.kind;
}

/** The target as `--json` carries it: `{"kind": "offset", "offset": "3"}`, `{"kind": "timestamp", "at": "..."}`. */
function targetJson(target: ReplayTarget): Record<string, string> {
  if (target.kind === 'timestamp') return { kind: target.kind, at: target.at.toISOString() };
  if (target.kind === 'offset') return { kind: target.kind, offset: target.offset.toString() };
  return { kind: target.kind };
}

/** Per partition, the first offset at or after `at`; -1 where there is none. Looked up BEFORE the ends are read. */
async function offsetsAt(admin: KafkaAdmin, topic: string, at: Date): Promise<Map<number, bigint>> {
  const found = await admin.offsetsAtTime(topic, at.getTime());
  return new Map(found.map(({ partition, offset }) => [partition, BigInt(offset)]));
}

/**
 * The offset per partition the target names (only `partition` when given). Explicit numbers,
 * never kafkajs' -1/-2 "latest / earliest" markers: a committed marker reads as "no offset", and
 * the consumer would then fall back to its own reset policy (earliest), turning `--to latest`
 * into a full replay.
 * @throws RefusedError for a partition the topic does not have, or an offset outside the log.
 */
function targetOffsets(
  position: GroupPosition,
  target: ReplayTarget,
  partition: number | undefined,
  byTime: ReadonlyMap<number, bigint> | undefined,
): Map<number, bigint> {
  const chosen = position.partitions.filter((candidate) => partition === undefined || candidate.partition === partition);
  if (chosen.length === 0) {
    throw new RefusedError(
      `topic ${position.topic} has no partition ${partition} (partitions ${position.partitions.map((p) => p.partition).join(', ')})`,
    );
  }
  const targets = new Map<number, bigint>();
  for (const { partition: number, start, end } of chosen) {
    let offset: bigint;
    if (target.kind === 'earliest') offset = start;
    else if (target.kind === 'latest') offset = end;
    else if (target.kind === 'offset') offset = target.offset;
    else {
      // The first offset whose timestamp is at or after the instant; the end when there is none.
      // Looked up before the ends were read: with producers writing, a lookup made after would
      // answer the newer high watermark, beyond the end read before it.
      const found = byTime?.get(number) ?? -1n;
      offset = found < 0n || found > end ? end : found;
    }
    if (offset < start || offset > end) {
      throw new RefusedError(
        `offset ${offset} is outside partition ${number} of ${position.topic}: it holds offsets ${start} to ${end} (the end); nothing ` +
          `was changed`,
      );
    }
    targets.set(number, offset);
  }
  return targets;
}

function membersRefusal(position: GroupPosition): string {
  const members = position.members.map((member) => `${member.clientId}@${member.clientHost}`).join(', ');
  return (
    `group ${position.group} has ${position.members.length} active member(s) (${members}); nothing was changed. ` +
    `Stop that pipeline first: stop its hosts (or restart them without it in STORAGE_PIPELINES); on AWS disable ` +
    `its event source mapping and wait until the group is empty (docs/operations.md).`
  );
}

function skipRefusal(position: GroupPosition, steps: readonly ReplayStep[]): string {
  const total = steps.reduce((sum, step) => sum + step.skipped, 0n);
  return (
    `replay would move group ${position.group} forward past ${total} offset(s) the group has not committed; ` +
    `whatever of them is not stored yet would never be: ${describeSkips(steps)}; nothing was changed. ` +
    `Give --allow-skip if that is meant (a legacy backlog at the first deployment, or one record that blocks its partition).`
  );
}

function missingGroupRefusal(position: GroupPosition): string {
  return (
    `group ${position.group} does not exist (no members, no committed offset on ${position.topic}); nothing was changed. ` +
    `Check the group name (STORAGE_GROUP_<PIPELINE>, or --stage for a stage's names); give --create-group to create it.`
  );
}

interface Replay {
  readonly before: GroupPosition;
  readonly steps: readonly ReplayStep[];
  /** Why it was not (or, in a dry run, would not be) done; `undefined` when it was (or would be). */
  readonly refusal: string | undefined;
  /** The reset was made (kafkajs answered): all planned partitions moved unless `unconfirmed` names some. */
  readonly reset: boolean;
  /** The position read right after the reset was tried; `undefined` when none was tried. */
  readonly after: GroupPosition | undefined;
  /** Partitions whose committed offset is not the planned one after the reset (a member joined meanwhile). */
  readonly unconfirmed: readonly number[];
  /** The audit entry (written `started` before the reset, completed after), or why there is none. */
  readonly audit: AuditRecord | undefined;
  /** The entry could not be completed: it stays `started` with the plan. */
  readonly completionError: string | undefined;
}

/** What a replay request asks for. */
interface ReplayRequest {
  readonly target: ReplayTarget;
  readonly partition: number | undefined;
  readonly allowSkip: boolean;
  readonly dryRun: boolean;
  readonly createGroup: boolean;
  readonly audit: AuditPolicy;
}

/** The audit entry's arguments and plan (the offsets before and after per partition, the ranges skipped). */
function auditAction(actor: string, name: string, before: GroupPosition, steps: readonly ReplayStep[], request: ReplayRequest) {
  const skipped = steps.reduce((sum, step) => sum + step.skipped, 0n);
  return {
    actor,
    command: 'replay',
    arguments: {
      pipeline: name,
      group: before.group,
      topic: before.topic,
      to: targetJson(request.target),
      partition: request.partition ?? null,
      allowSkip: request.allowSkip,
      createGroup: request.createGroup,
    },
    outcome: {
      partitions: steps.map((step) => ({
        topic: before.topic,
        partition: step.partition,
        before: step.before?.toString() ?? null,
        after: step.after.toString(),
      })),
      skipped: steps
        .filter((step) => step.skipped > 0n)
        .map((step) => ({
          topic: before.topic,
          partition: step.partition,
          from: (step.after - step.skipped).toString(),
          to: step.after.toString(),
          count: step.skipped.toString(),
        })),
      counts: { skipped: Number(skipped) },
    },
  };
}

/**
 * What really happened, for the completed entry: per partition the offset committed now beside
 * the planned one. kafkajs resets offsets through a consumer of the group: when a host joins at
 * that moment the two share the partitions and only those the reset was assigned move, so each
 * partition is read back rather than the plan recorded as done.
 */
function observedOutcome(
  planned: OperatorActionOutcome,
  steps: readonly ReplayStep[],
  after: GroupPosition | undefined,
  failure: string | undefined,
) {
  const committed = new Map(after?.partitions.map((partition) => [partition.partition, partition.committed]) ?? []);
  const partitions = steps.map((step) => {
    const now = committed.get(step.partition);
    return {
      topic: after?.topic,
      partition: step.partition,
      before: step.before?.toString() ?? null,
      after: now === undefined ? null : (now?.toString() ?? null),
      planned: step.after.toString(),
      applied: now === step.after,
    };
  });
  return {
    ...planned,
    partitions,
    ...(after === undefined ? {} : { members: after.members.length }),
    ...(failure === undefined ? {} : { error: failure }),
  };
}

async function replayGroup(
  admin: KafkaAdmin,
  pool: pg.Pool,
  pipeline: PipelineSettings,
  request: ReplayRequest,
  actor: string,
): Promise<Replay> {
  const byTime = request.target.kind === 'timestamp' ? await offsetsAt(admin, pipeline.topic, request.target.at) : undefined;
  const before = await groupPosition(admin, pipeline);
  const steps = planReplay(before, targetOffsets(before, request.target, request.partition, byTime));
  const skips = steps.some((step) => step.skipped > 0n);
  const missing =
    before.members.length === 0 && before.partitions.every((partition) => partition.committed === null) && before.state === 'Dead';
  const refusal =
    missing && !request.createGroup
      ? missingGroupRefusal(before)
      : before.members.length > 0
        ? membersRefusal(before)
        : skips && !request.allowSkip
          ? skipRefusal(before, steps)
          : undefined;
  const nothing = { reset: false, after: undefined, unconfirmed: [], audit: undefined, completionError: undefined };
  if (refusal !== undefined || request.dryRun) return { before, steps, refusal, ...nothing };

  // Audit before acting: the plan is recorded before any offset moves; no entry, no reset.
  const action = auditAction(actor, pipeline.name, before, steps, request);
  let audit: AuditRecord;
  try {
    audit = { id: (await recordOperatorAction(pool, action, 'started')).id };
  } catch (error) {
    const unavailable = auditUnavailable(error);
    if (request.audit === 'required') throw unavailable;
    audit = { unrecorded: unavailable.reason };
  }

  let failure: string | undefined;
  let refused: string | undefined;
  let notEmpty = false;
  try {
    await admin.setOffsets(
      pipeline.group,
      pipeline.topic,
      steps.map((step) => ({ partition: step.partition, offset: step.after.toString() })),
    );
  } catch (error) {
    failure = errorText(error);
    // A member joined between the check and the reset: the group is not empty.
    if (!(error instanceof GroupNotEmptyError)) refused = `the reset failed: ${failure}`;
    else notEmpty = true;
  }
  const after = await groupPosition(admin, pipeline).catch(() => undefined);
  if (failure !== undefined && refused === undefined) refused = after ? membersRefusal(after) : failure;
  const unconfirmed = steps.filter((step) => after?.partitions.find((p) => p.partition === step.partition)?.committed !== step.after);
  if (refused !== undefined && !notEmpty) {
    const moved = steps.filter((step) => !unconfirmed.includes(step) && step.before !== step.after).map((step) => step.partition);
    if (moved.length > 0) refused += `; partition(s) ${moved.join(', ')} hold the planned offset now`;
  }
  const state = failure === undefined && unconfirmed.length === 0 ? 'completed' : 'failed';
  let completionError: string | undefined;
  if (audit.id !== undefined) {
    try {
      await completeOperatorAction(pool, audit.id, state, observedOutcome(action.outcome, steps, after, refused));
    } catch (error) {
      completionError = auditUnavailable(error).reason;
    }
  }
  return {
    before,
    steps,
    refusal: refused,
    reset: failure === undefined,
    after,
    unconfirmed: unconfirmed.map((step) => step.partition),
    audit,
    completionError,
  };
}

/** `replay <pipeline> --to ... | --partition N --to-offset X`: moves one pipeline's consumer group. */
export const replay = defineCommand({
  name: 'replay',
  summary: "reset one pipeline's consumer group (or one partition) to earliest, latest, a timestamp or an offset",
  usage: [
    '<pipeline> --to earliest|latest|<ISO timestamp>|<duration> [--partition <N>] [--allow-skip]\n' +
      '                                [--create-group] [--stage <S>] [--dry-run] [--no-audit] [--json]',
    '<pipeline> --partition <N> --to-offset <X> [--allow-skip] [--create-group] [--stage <S>] [--dry-run] [--no-audit] [--json]',
  ],
  description: `Moves the committed offsets of that pipeline's consumer group, and of no other group:
  earliest         the oldest message still on the topic: everything is consumed again
  latest           the end of the topic: what is there now is skipped (e.g. a legacy backlog
                   at the first deployment)
  <ISO timestamp>  the first message at or after that instant (UTC unless it has an offset)
  <duration>       that long ago, e.g. 24h, 90m, 7d: the first message at or after then
  --to-offset X    exactly offset X of partition N (X from the partition's first kept offset
                   to its end): e.g. move past the one record that blocks a partition
Re-consuming is safe: every write is idempotent. Prints per partition the committed offset
before and after, the end, the lag after and the offsets skipped.

Audit before acting: the plan (group, partitions, offsets before and after, skipped ranges) is
written to the audit trail as a "started" entry BEFORE any offset moves, and completed after
with what each partition holds then ("completed", or "failed"; storage-consumer audit). When
that entry cannot be written (PostgreSQL unreachable, the table not writable) the replay is
refused and nothing moves, unless --no-audit: then it resets and says the change is unrecorded.
A partition whose offset is not the planned one after the reset (a host joined the group at
that moment) is named, the entry is "failed", and the exit code is 1.

Refused (exit 1, nothing changed; --dry-run exits the same way, changing nothing either way):
  * when the group does not exist (no members, no committed offset): a mistyped group name
    would create it; give --create-group if a new group is meant;
  * while the group has active members: stop that pipeline first. On AWS the event source
    mapping is always a member: disable it, wait until the group is empty, replay, enable it
    again (docs/operations.md);
  * when it would move any partition forward past offsets the group has not committed
    (whatever of them is not stored would never be), unless --allow-skip is given; the refusal
    names each partition and the number of offsets it would skip.`,
  arguments: [{ name: 'pipeline', help: PIPELINE_NAMES.join(', ') }],
  options: {
    to: { type: 'string', value: 'T', help: 'earliest, latest, an ISO timestamp or a duration ago (24h)' },
    partition: { type: 'string', value: 'N', help: 'only partition N (the others keep their offsets)' },
    'to-offset': { type: 'string', value: 'X', help: 'with --partition: exactly offset X' },
    'allow-skip': { type: 'boolean', help: 'allow moving forward past offsets the group has not committed' },
    'create-group': { type: 'boolean', help: 'allow a group that does not exist yet (it is created)' },
    ...STAGE_OPTION,
    'dry-run': { type: 'boolean', help: 'print what would change and whether it would be refused; change nothing' },
    ...jsonOption(),
    ...NO_AUDIT_OPTION,
  },
  async run({ values, positionals }, io) {
    const name = parsePipeline(positionals[0], '<pipeline>');
    if (name === undefined) throw new UsageError('<pipeline> is required');
    const partition = parsePartition(values.partition);
    const target = parseTarget(values.to, values['to-offset'], partition);
    const allowSkip = values['allow-skip'] === true;
    const createGroup = values['create-group'] === true;
    const dryRun = values['dry-run'] === true;
    const stagedIo = applyStage(io, values.stage);
    const request: ReplayRequest = { target, partition, allowSkip, dryRun, createGroup, audit: auditPolicy(values) };
    let result: Replay;
    try {
      // The database first: the audit entry is written before the offsets move.
      result = await withDatabase(stagedIo, ({ pool }) =>
        withKafkaAdmin(stagedIo, ({ admin, settings }) =>
          replayGroup(admin, pool, settings.pipelines[name], request, resolveActor(io.env)),
        ),
      );
    } catch (error) {
      throw auditRefusal(error, 'replay', 'nothing was changed: no offset moved');
    }
    const { before, steps, refusal, after, audit, unconfirmed, completionError } = result;
    if (audit?.unrecorded !== undefined) reportUnrecorded(stagedIo, 'replay', audit.unrecorded);
    const skipped = steps.reduce((sum, step) => sum + step.skipped, 0n);
    const plan = steps.map((step) => ({
      partition: step.partition,
      before: step.before?.toString() ?? null,
      after: step.after.toString(),
      end: step.end.toString(),
      skipped: step.skipped.toString(),
    }));
    const notConfirmed =
      result.reset && unconfirmed.length > 0
        ? `the reset is not confirmed on partition(s) ${unconfirmed.join(', ')} of ${steps.length}: their committed offsets are not the ` +
          `planned ones (a member joined the group during the reset: it has ${after?.members.length ?? '?'} member(s) now); ` +
          (audit?.id === undefined ? 'nothing recorded it' : `audit entry ${audit.id} records what each partition holds`)
        : undefined;
    if (values.json === true) {
      io.stdout(
        renderJson({
          pipeline: name,
          group: before.group,
          to: targetJson(target),
          partition: partition ?? null,
          dryRun,
          allowSkip,
          createGroup,
          replayed: result.reset,
          refused: refusal !== undefined,
          refusal: refusal ?? null,
          skipped: skipped.toString(),
          plan,
          unconfirmed,
          before: positionJson(before),
          after: after === undefined ? null : positionJson(after),
          auditId: audit?.id ?? null,
          ...(audit?.unrecorded === undefined ? {} : { auditUnrecorded: audit.unrecorded }),
          ...(completionError === undefined ? {} : { auditError: completionError }),
        }),
      );
    } else {
      if (refusal !== undefined) io.stdout(`${dryRun ? 'dry run: would be refused' : 'refused'}: ${refusal}\n\n`);
      const verb = result.reset ? 'reset' : refusal !== undefined ? 'plan, not applied: reset' : 'dry run, nothing changed: would reset';
      io.stdout(`${groupHeading(before)}${verb} to ${describeTarget(target)}:\n${renderSteps(steps)}`);
      if (audit?.id !== undefined && completionError === undefined) io.stdout(`audit entry ${audit.id} written\n`);
    }
    if (completionError !== undefined) {
      throw new RefusedError(
        `the offsets WERE reset, but audit entry ${audit?.id ?? '?'} could not be completed: ${completionError}; it records the plan ` +
          `and stays "started"`,
      );
    }
    if (notConfirmed !== undefined) throw new RefusedError(notConfirmed);
    if (refusal !== undefined) throw new RefusedError(refusal);
    return EXIT.ok;
  },
});

/** Per partition: the committed offset before and after, the end, the lag after and what is skipped. */
function renderSteps(steps: readonly ReplayStep[]): string {
  return renderTable<ReplayStep>(
    [
      { header: 'PARTITION', value: (step) => step.partition, align: 'right' },
      { header: 'BEFORE', value: (step) => step.before ?? 'none', align: 'right' },
      { header: 'AFTER', value: (step) => step.after, align: 'right' },
      { header: 'END', value: (step) => step.end, align: 'right' },
      { header: 'LAG', value: (step) => step.end - step.after, align: 'right' },
      { header: 'SKIPPED', value: (step) => step.skipped, align: 'right' },
    ],
    steps,
  );
}
