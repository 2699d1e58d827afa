/**
 * `storage-consumer lag`: each pipeline's consumer group as the broker has it (committed and end
 * offsets, lag, members and their partitions), with a paused pipeline named. `replay` prints its
 * group heading the same way.
 */
import type { CliIo } from '../command.js';
import { defineCommand, EXIT, jsonOption } from '../command.js';
import type { GroupPosition, PartitionPosition } from '../../kafka/lag.js';
import { groupPosition } from '../../kafka/lag.js';
import { positionJson, withKafkaAdmin } from '../kafka.js';
import { errorText, renderJson, renderTable } from '../output.js';
import { parsePipeline, PIPELINE_OPTION, pipelinesFor } from './pipeline-option.js';
import { withDatabase } from '../context.js';
import { memberText, pausedText } from '../group-notes.js';
import { readPipelinePauses } from '../../shared/pause-store.js';
import type { PipelinePause } from '../../shared/pause-store.js';
import type { PipelineName } from '../../shared/pipelines.js';

/** The per-partition table of one group, as `lag` prints it (`replay` prints its own: `renderSteps`). */
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

/** One group's heading line: pipeline, group, topic, state, members with their partitions, total lag. */
export function groupHeading(position: GroupPosition): string {
  const members = position.members.length === 0 ? 'no members' : position.members.map(memberText).join(', ');
  return (
    `${position.pipeline}: group ${position.group} on ${position.topic}, ${position.state}, ${position.members.length} member(s) ` +
    `(${members}), lag ${position.lag}\n`
  );
}

/** The line under the heading that says a pipeline is paused (its lag grows by design), or that the pause state is unknown. */
function pauseNote(pipeline: PipelineName, pauses: Map<PipelineName, PipelinePause> | string): string {
  if (typeof pauses === 'string') return `  pause state unknown: ${pauses}\n`;
  const pause = pauses.get(pipeline);
  return pause?.paused === true ? `  ${pausedText(pause)}: it consumes nothing until \`storage-consumer resume ${pipeline}\`\n` : '';
}

/** The pause rows, or why they could not be read (lag reports without them). */
async function readPauses(io: CliIo): Promise<Map<PipelineName, PipelinePause> | string> {
  try {
    return await withDatabase(io, ({ pool }) => readPipelinePauses(pool));
  } catch (error) {
    return errorText(error);
  }
}

/** `lag`: where each pipeline's consumer group stands. */
export const lag = defineCommand({
  name: 'lag',
  summary: 'committed offset, end offset and lag per group and partition, with members',
  description: `For each pipeline's consumer group (those of STORAGE_PIPELINES, or just P): per partition the
committed offset (the next message the group will read), the end offset and the lag between them,
and the group's state and members with their partitions. A group that never committed reads from
the earliest message, so its lag counts from there. A paused pipeline (pipeline_pauses) is said to
be paused: its lag grows by design. A topic that does not exist is named; exit 1 then.`,
  options: { ...PIPELINE_OPTION, ...jsonOption('the same as JSON (offsets as strings)') },
  async run({ values }, io) {
    const named = parsePipeline(values.pipeline);
    const [read, pauses] = await Promise.all([
      withKafkaAdmin(io, async ({ admin, settings }) => {
        const pipelines = pipelinesFor(settings, named);
        return Promise.all(
          pipelines.map((name) =>
            groupPosition(admin, settings.pipelines[name]).then(
              (position) => ({ name, position }),
              (error: unknown) => ({ name, error: errorText(error) }),
            ),
          ),
        );
      }),
      readPauses(io),
    ]);
    const failed = read.some((entry) => 'error' in entry);
    if (values.json === true) {
      io.stdout(
        renderJson({
          groups: read.map((entry) =>
            'error' in entry
              ? { pipeline: entry.name, error: entry.error }
              : { ...positionJson(entry.position), paused: typeof pauses === 'string' ? null : (pauses.get(entry.name)?.paused ?? false) },
          ),
          ...(typeof pauses === 'string' ? { pauseError: pauses } : {}),
        }),
      );
    } else {
      io.stdout(
        read
          .map((entry) =>
            'error' in entry
              ? `${entry.name}: ${entry.error}\n`
              : `${groupHeading(entry.position)}${pauseNote(entry.name, pauses)}${renderPartitions(entry.position.partitions)}`,
          )
          .join('\n'),
      );
    }
    return failed ? EXIT.failed : EXIT.ok;
  },
});
