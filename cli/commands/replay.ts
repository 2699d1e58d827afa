import type { Admin } from 'kafkajs';
import type { PipelineSettings } from '../../shared/settings.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs, RefusedError, UsageError } from '../command.js';
import type { GroupPosition } from '../kafka.js';
import { groupPosition, positionJson, withKafkaAdmin } from '../kafka.js';
import { renderJson, renderTable } from '../output.js';
import { parseInstant } from '../time.js';
import { groupHeading, renderPartitions } from './lag.js';
import { parsePipeline } from './pipeline-option.js';

/** Where a replay moves the group: the earliest message kept, the end, or the first at or after an instant. */
export type ReplayTarget = { readonly kind: 'earliest' } | { readonly kind: 'latest' } | { readonly kind: 'timestamp'; readonly at: Date };

function parseTarget(text: string | undefined): ReplayTarget {
  if (text === undefined) throw new UsageError('--to is required: earliest, latest or an ISO timestamp');
  if (text === 'earliest' || text === 'latest') return { kind: text };
  return { kind: 'timestamp', at: parseInstant(text, '--to') };
}

function describeTarget(target: ReplayTarget): string {
  return target.kind === 'timestamp' ? target.at.toISOString() : target.kind;
}

/**
 * The offset per partition the target names. Explicit numbers, never kafkajs' -1/-2 "latest /
 * earliest" markers: a committed marker reads as "no offset", and the consumer would then fall
 * back to its own reset policy (earliest), turning `--to latest` into a full replay.
 */
async function targetOffsets(admin: Admin, position: GroupPosition, target: ReplayTarget): Promise<Array<{ partition: number; offset: string }>> {
  if (target.kind === 'timestamp') {
    // The first offset whose timestamp is at or after the instant; the end when there is none.
    const found = await admin.fetchTopicOffsetsByTimestamp(position.topic, target.at.getTime());
    return found.map(({ partition, offset }) => ({ partition, offset }));
  }
  return position.partitions.map((partition) => ({
    partition: partition.partition,
    offset: (target.kind === 'earliest' ? partition.start : partition.end).toString(),
  }));
}

function refusal(position: GroupPosition): string {
  const members = position.members.map((member) => `${member.clientId}@${member.clientHost}`).join(', ');
  return (
    `group ${position.group} has ${position.members.length} active member(s) (${members}); nothing was changed. ` +
    `Stop that pipeline first: stop its hosts (or restart them without it in STORAGE_PIPELINES); on AWS disable ` +
    `its event source mapping and wait until the group is empty (docs/operations.md).`
  );
}

async function replayGroup(admin: Admin, pipeline: PipelineSettings, target: ReplayTarget) {
  const before = await groupPosition(admin, pipeline);
  if (before.members.length > 0) return { before, after: undefined };
  const partitions = await targetOffsets(admin, before, target);
  try {
    await admin.setOffsets({ groupId: pipeline.group, topic: pipeline.topic, partitions });
  } catch (error) {
    // A member joined between the check and the reset: kafkajs refuses a group that is not empty.
    if (/no running instances/.test(String(error))) return { before: await groupPosition(admin, pipeline), after: undefined };
    throw error;
  }
  return { before, after: await groupPosition(admin, pipeline) };
}

/** `replay <pipeline> --to ...`: resets one pipeline's consumer group. */
export const replay: Command = {
  name: 'replay',
  summary: "reset one pipeline's consumer group to earliest, latest or a timestamp",
  help: `Usage: storage-consumer replay <pipeline> --to earliest|latest|<ISO timestamp> [--json]

Moves the committed offsets of that pipeline's consumer group, and of no other group:
  earliest         the oldest message still on the topic: everything is consumed again
  latest           the end of the topic: what is there now is skipped (e.g. a legacy backlog
                   at the first deployment)
  <ISO timestamp>  the first message at or after that instant (UTC unless it has an offset)
Re-consuming is safe: every write is idempotent. Prints the offsets before and after.

Refused (exit 1, nothing changed) while the group has active members: stop that pipeline first.
On AWS the event source mapping is always a member: disable it, wait until the group is empty,
replay, enable it again (docs/operations.md).

  --to T    required: earliest, latest or an ISO timestamp
  --json    before and after as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandArgs(replay, args, io, { ...JSON_OPTION, to: { type: 'string' } }, { min: 1, max: 1 });
    if (!parsed) return EXIT.ok;
    const name = parsePipeline(parsed.positionals[0], '<pipeline>');
    if (name === undefined) throw new UsageError('<pipeline> is required');
    const target = parseTarget(parsed.values.to);
    const { before, after } = await withKafkaAdmin(io, ({ admin, settings }) => replayGroup(admin, settings.pipelines[name], target));
    if (parsed.values.json === true) {
      io.stdout(
        renderJson({
          pipeline: name,
          to: describeTarget(target),
          replayed: after !== undefined,
          before: positionJson(before),
          after: after === undefined ? null : positionJson(after),
        }),
      );
    } else if (after === undefined) {
      io.stdout(`${groupHeading(before)}${renderPartitions(before.partitions)}`);
    } else {
      io.stdout(`${groupHeading(before)}reset to ${describeTarget(target)}:\n${renderReset(before, after)}`);
    }
    if (after === undefined) throw new RefusedError(refusal(before));
    return EXIT.ok;
  },
};

/** Per partition: the committed offset before and after the reset, the end and the new lag. */
function renderReset(before: GroupPosition, after: GroupPosition): string {
  const rows = after.partitions.map((now) => ({
    partition: now.partition,
    before: before.partitions.find((then) => then.partition === now.partition)?.committed ?? null,
    after: now.committed,
    end: now.end,
    lag: now.lag,
  }));
  return renderTable<(typeof rows)[number]>(
    [
      { header: 'PARTITION', value: (row) => row.partition, align: 'right' },
      { header: 'BEFORE', value: (row) => row.before ?? 'none', align: 'right' },
      { header: 'AFTER', value: (row) => row.after ?? 'none', align: 'right' },
      { header: 'END', value: (row) => row.end, align: 'right' },
      { header: 'LAG', value: (row) => row.lag, align: 'right' },
    ],
    rows,
  );
}
