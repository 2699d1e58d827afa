import type { Admin } from 'kafkajs';
import { recordOperatorAction, resolveActor } from '../../shared/operator-actions.js';
import type { PipelineSettings } from '../../host/pipeline-settings.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs, RefusedError, UsageError } from '../command.js';
import type { GroupPosition } from '../../kafka/lag.js';
import { groupPosition } from '../../kafka/lag.js';
import { positionJson, withKafkaAdmin } from '../kafka.js';
import { withDatabase } from '../context.js';
import { STAGE_OPTION, applyStage } from './stage-option.js';
import { renderJson, renderTable } from '../output.js';
import type { ReplayStep } from '../replay-plan.js';
import { describeSkips, planReplay } from '../replay-plan.js';
import { parseSince } from '../time.js';
import { groupHeading } from './lag.js';
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
async function offsetsAt(admin: Admin, topic: string, at: Date): Promise<Map<number, bigint>> {
  const found = await admin.fetchTopicOffsetsByTimestamp(topic, at.getTime());
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
  readonly after: GroupPosition | undefined;
}

async function replayGroup(
  admin: Admin,
  pipeline: PipelineSettings,
  request: { target: ReplayTarget; partition: number | undefined; allowSkip: boolean; dryRun: boolean; createGroup: boolean },
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
  if (refusal !== undefined || request.dryRun) return { before, steps, refusal, after: undefined };
  try {
    await admin.setOffsets({
      groupId: pipeline.group,
      topic: pipeline.topic,
      partitions: steps.map((step) => ({ partition: step.partition, offset: step.after.toString() })),
    });
  } catch (error) {
    // A member joined between the check and the reset: kafkajs refuses a group that is not empty.
    if (!/no running instances/.test(String(error))) throw error;
    const now = await groupPosition(admin, pipeline);
    return { before: now, steps, refusal: membersRefusal(now), after: undefined };
  }
  return { before, steps, refusal: undefined, after: await groupPosition(admin, pipeline) };
}

/** `replay <pipeline> --to ... | --partition N --to-offset X`: moves one pipeline's consumer group. */
export const replay: Command = {
  name: 'replay',
  summary: "reset one pipeline's consumer group (or one partition) to earliest, latest, a timestamp or an offset",
  help: `Usage: storage-consumer replay <pipeline> --to earliest|latest|<ISO timestamp>|<duration> [--partition N] [--allow-skip]
                                [--create-group] [--stage S] [--dry-run] [--json]
       storage-consumer replay <pipeline> --partition N --to-offset X [--allow-skip] [--dry-run] [--json]

Moves the committed offsets of that pipeline's consumer group, and of no other group:
  earliest         the oldest message still on the topic: everything is consumed again
  latest           the end of the topic: what is there now is skipped (e.g. a legacy backlog
                   at the first deployment)
  <ISO timestamp>  the first message at or after that instant (UTC unless it has an offset)
  <duration>       that long ago, e.g. 24h, 90m, 7d: the first message at or after then
  --to-offset X    exactly offset X of partition N (X from the partition's first kept offset
                   to its end): e.g. move past the one record that blocks a partition
Re-consuming is safe: every write is idempotent. Prints per partition the committed offset
before and after, the end, the lag after and the offsets skipped. A reset writes an entry in
the audit trail right after the offsets changed (storage-consumer audit).

Refused (exit 1, nothing changed; --dry-run exits the same way, changing nothing either way):
  * when the group does not exist (no members, no committed offset): a mistyped group name
    would create it; give --create-group if a new group is meant;
  * while the group has active members: stop that pipeline first. On AWS the event source
    mapping is always a member: disable it, wait until the group is empty, replay, enable it
    again (docs/operations.md);
  * when it would move any partition forward past offsets the group has not committed
    (whatever of them is not stored would never be), unless --allow-skip is given; the refusal
    names each partition and the number of offsets it would skip.

  --to T           earliest, latest, an ISO timestamp or a duration ago (24h)
  --partition N    only partition N (the others keep their offsets)
  --to-offset X    with --partition: exactly offset X
  --allow-skip     allow moving forward past offsets the group has not committed
  --create-group   allow a group that does not exist yet (it is created)
${STAGE_OPTION.help}
  --dry-run        print what would change and whether it would be refused; change nothing
  --json           the same as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const options = {
      ...JSON_OPTION,
      ...STAGE_OPTION.options,
      to: { type: 'string' },
      'to-offset': { type: 'string' },
      partition: { type: 'string' },
      'allow-skip': { type: 'boolean' },
      'create-group': { type: 'boolean' },
      'dry-run': { type: 'boolean' },
    } as const;
    const parsed = parseCommandArgs(replay, args, io, options, { min: 1, max: 1 });
    if (!parsed) return EXIT.ok;
    const name = parsePipeline(parsed.positionals[0], '<pipeline>');
    if (name === undefined) throw new UsageError('<pipeline> is required');
    const partition = parsePartition(parsed.values.partition);
    const target = parseTarget(parsed.values.to, parsed.values['to-offset'], partition);
    const allowSkip = parsed.values['allow-skip'] === true;
    const createGroup = parsed.values['create-group'] === true;
    const dryRun = parsed.values['dry-run'] === true;
    const stagedIo = applyStage(io, parsed.values.stage);
    const result = await withKafkaAdmin(stagedIo, ({ admin, settings }) =>
      replayGroup(admin, settings.pipelines[name], { target, partition, allowSkip, dryRun, createGroup }),
    );
    const { before, steps, refusal, after } = result;
    const skipped = steps.reduce((sum, step) => sum + step.skipped, 0n);
    const plan = steps.map((step) => ({
      partition: step.partition,
      before: step.before?.toString() ?? null,
      after: step.after.toString(),
      end: step.end.toString(),
      skipped: step.skipped.toString(),
    }));
    let auditId: string | undefined;
    let auditError: string | undefined;
    if (after !== undefined) {
      // Right after the offsets changed (they live in Kafka, not in this database's transaction).
      try {
        auditId = await withDatabase(stagedIo, async ({ pool }) => {
          const entry = await recordOperatorAction(pool, {
            actor: resolveActor(io.env),
            command: 'replay',
            arguments: {
              pipeline: name,
              group: before.group,
              topic: before.topic,
              to: targetJson(target),
              partition: partition ?? null,
              allowSkip,
              createGroup,
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
          });
          return entry.id;
        });
      } catch (error) {
        auditError = error instanceof Error ? error.message : String(error);
      }
    }
    if (parsed.values.json === true) {
      io.stdout(
        renderJson({
          pipeline: name,
          group: before.group,
          to: targetJson(target),
          partition: partition ?? null,
          dryRun,
          allowSkip,
          createGroup,
          replayed: after !== undefined,
          refused: refusal !== undefined,
          refusal: refusal ?? null,
          skipped: skipped.toString(),
          plan,
          before: positionJson(before),
          after: after === undefined ? null : positionJson(after),
          auditId: auditId ?? null,
          ...(auditError === undefined ? {} : { auditError }),
        }),
      );
    } else {
      if (refusal !== undefined) io.stdout(`${dryRun ? 'dry run: would be refused' : 'refused'}: ${refusal}\n\n`);
      const verb =
        after !== undefined ? 'reset' : refusal !== undefined ? 'plan, not applied: reset' : 'dry run, nothing changed: would reset';
      io.stdout(`${groupHeading(before)}${verb} to ${describeTarget(target)}:\n${renderSteps(steps)}`);
      if (auditId !== undefined) io.stdout(`audit entry ${auditId} written\n`);
    }
    if (auditError !== undefined) {
      throw new RefusedError(`the offsets WERE reset, but the audit entry could not be written: ${auditError}; record this replay by hand`);
    }
    if (refusal !== undefined) throw new RefusedError(refusal);
    return EXIT.ok;
  },
};

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
