import type { Admin } from 'kafkajs';
import type { PipelineSettings } from '../../shared/settings.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs, RefusedError, UsageError } from '../command.js';
import type { GroupPosition } from '../kafka.js';
import { groupPosition, positionJson, withKafkaAdmin } from '../kafka.js';
import { renderJson, renderTable } from '../output.js';
import type { ReplayStep } from '../replay-plan.js';
import { describeSkips, planReplay } from '../replay-plan.js';
import { parseInstant } from '../time.js';
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
    if (!WHOLE_NUMBER.test(toOffset)) throw new UsageError(`--to-offset must be an offset (a whole number), got ${JSON.stringify(toOffset)}`);
    if (partition === undefined) throw new UsageError('--to-offset needs --partition: an offset belongs to one partition');
    return { kind: 'offset', offset: BigInt(toOffset) };
  }
  if (to === undefined) throw new UsageError('--to is required: earliest, latest or an ISO timestamp (or --partition N --to-offset X)');
  if (to === 'earliest' || to === 'latest') return { kind: to };
  return { kind: 'timestamp', at: parseInstant(to, '--to') };
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

/**
 * The offset per partition the target names (only `partition` when given). Explicit numbers,
 * never kafkajs' -1/-2 "latest / earliest" markers: a committed marker reads as "no offset", and
 * the consumer would then fall back to its own reset policy (earliest), turning `--to latest`
 * into a full replay.
 * @throws RefusedError for a partition the topic does not have, or an offset outside the log.
 */
async function targetOffsets(admin: Admin, position: GroupPosition, target: ReplayTarget, partition: number | undefined): Promise<Map<number, bigint>> {
  const chosen = position.partitions.filter((candidate) => partition === undefined || candidate.partition === partition);
  if (chosen.length === 0) {
    throw new RefusedError(`topic ${position.topic} has no partition ${partition} (partitions ${position.partitions.map((p) => p.partition).join(', ')})`);
  }
  const byTime =
    target.kind === 'timestamp' ? new Map((await admin.fetchTopicOffsetsByTimestamp(position.topic, target.at.getTime())).map((found) => [found.partition, found.offset])) : undefined;
  const targets = new Map<number, bigint>();
  for (const { partition: number, start, end } of chosen) {
    let offset: bigint;
    if (target.kind === 'earliest') offset = start;
    else if (target.kind === 'latest') offset = end;
    else if (target.kind === 'offset') offset = target.offset;
    else {
      // The first offset whose timestamp is at or after the instant; the end when there is none.
      const found = BigInt(byTime?.get(number) ?? '-1');
      offset = found < 0n ? end : found;
    }
    if (offset < start || offset > end) {
      throw new RefusedError(`offset ${offset} is outside partition ${number} of ${position.topic}: it holds offsets ${start} to ${end} (the end); nothing was changed`);
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
    `replay would move group ${position.group} forward past ${total} message(s) it never consumed, which would then never be stored: ` +
    `${describeSkips(steps)}; nothing was changed. Give --allow-skip if that is meant (a legacy backlog at the first ` +
    `deployment, or one record that blocks its partition).`
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
  request: { target: ReplayTarget; partition: number | undefined; allowSkip: boolean; dryRun: boolean },
): Promise<Replay> {
  const before = await groupPosition(admin, pipeline);
  const steps = planReplay(before, await targetOffsets(admin, before, request.target, request.partition));
  const skips = steps.some((step) => step.skipped > 0n);
  const refusal = before.members.length > 0 ? membersRefusal(before) : skips && !request.allowSkip ? skipRefusal(before, steps) : undefined;
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
  help: `Usage: storage-consumer replay <pipeline> --to earliest|latest|<ISO timestamp> [--partition N] [--allow-skip] [--dry-run] [--json]
       storage-consumer replay <pipeline> --partition N --to-offset X [--allow-skip] [--dry-run] [--json]

Moves the committed offsets of that pipeline's consumer group, and of no other group:
  earliest         the oldest message still on the topic: everything is consumed again
  latest           the end of the topic: what is there now is skipped (e.g. a legacy backlog
                   at the first deployment)
  <ISO timestamp>  the first message at or after that instant (UTC unless it has an offset)
  --to-offset X    exactly offset X of partition N (X from the partition's first kept offset
                   to its end): e.g. move past the one record that blocks a partition
Re-consuming is safe: every write is idempotent. Prints per partition the committed offset
before and after, the end, the lag after and the messages skipped.

Refused (exit 1, nothing changed):
  * while the group has active members: stop that pipeline first. On AWS the event source
    mapping is always a member: disable it, wait until the group is empty, replay, enable it
    again (docs/operations.md);
  * when it would move any partition forward past messages the group has not consumed (they
    would never be stored), unless --allow-skip is given; the refusal names each partition
    and the number of messages it would skip.

  --to T          earliest, latest or an ISO timestamp
  --partition N   only partition N (the others keep their offsets)
  --to-offset X   with --partition: exactly offset X
  --allow-skip    allow moving forward past unconsumed messages
  --dry-run       print what would change (and whether it would be refused); change nothing
  --json          the same as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const options = {
      ...JSON_OPTION,
      to: { type: 'string' },
      'to-offset': { type: 'string' },
      partition: { type: 'string' },
      'allow-skip': { type: 'boolean' },
      'dry-run': { type: 'boolean' },
    } as const;
    const parsed = parseCommandArgs(replay, args, io, options, { min: 1, max: 1 });
    if (!parsed) return EXIT.ok;
    const name = parsePipeline(parsed.positionals[0], '<pipeline>');
    if (name === undefined) throw new UsageError('<pipeline> is required');
    const partition = parsePartition(parsed.values.partition);
    const target = parseTarget(parsed.values.to, parsed.values['to-offset'], partition);
    const allowSkip = parsed.values['allow-skip'] === true;
    const dryRun = parsed.values['dry-run'] === true;
    const result = await withKafkaAdmin(io, ({ admin, settings }) =>
      replayGroup(admin, settings.pipelines[name], { target, partition, allowSkip, dryRun }),
    );
    const { before, steps, refusal, after } = result;
    if (parsed.values.json === true) {
      io.stdout(
        renderJson({
          pipeline: name,
          to: describeTarget(target),
          partition: partition ?? null,
          dryRun,
          allowSkip,
          replayed: after !== undefined,
          refusal: refusal ?? null,
          skipped: steps.reduce((sum, step) => sum + Number(step.skipped), 0),
          plan: steps.map((step) => ({
            partition: step.partition,
            before: step.before?.toString() ?? null,
            after: step.after.toString(),
            end: step.end.toString(),
            skipped: Number(step.skipped),
          })),
          before: positionJson(before),
          after: after === undefined ? null : positionJson(after),
        }),
      );
    } else {
      const verb =
        after !== undefined ? 'reset' : !dryRun ? 'not reset' : refusal === undefined ? 'dry run, nothing changed: would reset' : 'dry run, nothing changed: would not reset';
      io.stdout(`${groupHeading(before)}${verb} to ${describeTarget(target)}:\n${renderSteps(steps)}`);
      if (dryRun && refusal !== undefined) io.stdout(`would be refused: ${refusal}\n`);
    }
    if (refusal !== undefined && !dryRun) throw new RefusedError(refusal);
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
