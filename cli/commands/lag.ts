import { defineCommand, EXIT, jsonOption } from '../command.js';
import type { GroupPosition, PartitionPosition } from '../../host/lag.js';
import { groupPosition } from '../../host/lag.js';
import { positionJson, withKafkaAdmin } from '../kafka.js';
import { renderJson, renderTable } from '../output.js';
import { parsePipeline, PIPELINE_OPTION, pipelinesFor } from './pipeline-option.js';

/** The per-partition table of one group, as `lag` and `replay` print it. */
function renderPartitions(partitions: readonly PartitionPosition[]): string {
  return renderTable<PartitionPosition>(
    [
      { header: 'PARTITION', value: (row) => row.partition, align: 'right' },
      { header: 'COMMITTED', value: (row) => row.committed ?? 'none', align: 'right' },
      { header: 'END', value: (row) => row.end, align: 'right' },
      { header: 'LAG', value: (row) => row.lag, align: 'right' },
    ],
    partitions,
  );
}

/** One group's heading line: pipeline, group, topic, state, members, total lag. */
export function groupHeading(position: GroupPosition): string {
  const members =
    position.members.length === 0 ? 'no members' : position.members.map((member) => `${member.clientId}@${member.clientHost}`).join(', ');
  return (
    `${position.pipeline}: group ${position.group} on ${position.topic}, ${position.state}, ${position.members.length} member(s) ` +
    `(${members}), lag ${position.lag}\n`
  );
}

/** `lag`: where each pipeline's consumer group stands. */
export const lag = defineCommand({
  name: 'lag',
  summary: 'committed offset, end offset and lag per group and partition, with members',
  description: `For each pipeline's consumer group (those of STORAGE_PIPELINES, or just P): per partition the
committed offset (the next message the group will read), the end offset and the lag between them,
and the group's state and members. A group that never committed reads from the earliest message,
so its lag counts from there.`,
  options: { ...PIPELINE_OPTION, ...jsonOption('the same as JSON (offsets as strings)') },
  async run({ values }, io) {
    const named = parsePipeline(values.pipeline);
    const positions = await withKafkaAdmin(io, async ({ admin, settings }) => {
      const pipelines = pipelinesFor(settings, named);
      return Promise.all(pipelines.map((name) => groupPosition(admin, settings.pipelines[name])));
    });
    if (values.json === true) {
      io.stdout(renderJson({ groups: positions.map(positionJson) }));
      return EXIT.ok;
    }
    io.stdout(positions.map((position) => `${groupHeading(position)}${renderPartitions(position.partitions)}`).join('\n'));
    return EXIT.ok;
  },
});
