/**
 * The adapter between the host and its pipeline API (host/status-api.ts): the summaries, one
 * pipeline's status document (its progress, the broker's view of its group, its pause) and the
 * pause and resume writes, read from the host's pipelines when a request asks.
 */
import type { KafkaAdmin } from '../kafka/port.js';
import type { GroupOfTopic, GroupPosition } from '../kafka/lag.js';
import { groupPosition } from '../kafka/lag.js';
import type { PipelineName } from '../shared/pipelines.js';
import { TIMED_OUT, within } from '../shared/timeout.js';
import type { HostAdmin } from './host-admin.js';
import type { PipelineView } from './metrics.js';
import type { PauseControl } from './pause-control.js';
import type { PipelinesTarget } from './status-api.js';
import { buildPipelineStatus } from './status-report.js';

/** The status endpoint waits this long for the broker's view of a group, then answers without it. */
const STATUS_KAFKA_TIMEOUT_MS = 5_000;

/** One pipeline as the status reads it. */
export interface StatusPipeline {
  readonly settings: GroupOfTopic;
  /** Its progress record and the verdict on it, now. */
  view(): PipelineView;
  /** Its consumer's member id in the group, once joined. */
  memberId(): string | undefined;
}

/** What the adapter reads of the host. */
export interface StatusSource {
  readonly pipelines: ReadonlyMap<PipelineName, StatusPipeline>;
  /** `<hostname>:<pid>`: how the status names this host. */
  readonly hostId: string;
  readonly admin: HostAdmin;
  /** The pause control, once the host built it. */
  pauseControl(): PauseControl | undefined;
  /** The host's life-cycle state (named when a control call comes too early). */
  state(): string;
  /** How one group's position is read; default: from the broker. */
  readonly read?: (admin: KafkaAdmin, pipeline: GroupOfTopic) => Promise<GroupPosition>;
  /** Default 5 s. */
  readonly kafkaTimeoutMs?: number;
}

/** The host's {@link PipelinesTarget}. */
export function createPipelinesApi(source: StatusSource): PipelinesTarget {
  const read = source.read ?? groupPosition;
  const timeoutMs = source.kafkaTimeoutMs ?? STATUS_KAFKA_TIMEOUT_MS;
  const pipelineOf = (name: PipelineName) => {
    const pipeline = source.pipelines.get(name);
    if (pipeline === undefined) throw new Error(`this host does not run ${name}`);
    return pipeline;
  };
  /** The group as the broker describes it now, or why not (bounded: the status never hangs on a frozen broker). */
  const groupView = async (pipeline: StatusPipeline): Promise<GroupPosition | { error: string }> => {
    try {
      const position = await within(
        source.admin.connected().then((admin) => read(admin, pipeline.settings)),
        timeoutMs,
      );
      return position === TIMED_OUT ? { error: `the broker did not answer within ${timeoutMs} ms` } : position;
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  };
  return {
    pipelines: [...source.pipelines.keys()],
    summaries: () =>
      [...source.pipelines.values()].map((pipeline) => {
        const { snapshot, verdict } = pipeline.view();
        return { pipeline: snapshot.pipeline, state: verdict.state, paused: snapshot.paused };
      }),
    async status(name) {
      const pipeline = pipelineOf(name);
      const group = await groupView(pipeline);
      // Read after the broker answered: the record as it is when the answer leaves.
      const view = pipeline.view();
      const pauseControl = source.pauseControl();
      return buildPipelineStatus({
        progress: view.snapshot,
        pipeline: name,
        topic: pipeline.settings.topic,
        groupId: pipeline.settings.group,
        state: view.verdict.state,
        hostId: source.hostId,
        memberId: pipeline.memberId(),
        pause: pauseControl?.pauseOf(name),
        pauseRead: pauseControl?.readState() ?? { readAt: undefined, error: 'not read yet' },
        group,
      });
    },
    async control(name, paused, by, reason) {
      const pauseControl = source.pauseControl();
      if (pauseControl === undefined) throw new Error(`the host is ${source.state()}`);
      // Over HTTP the audit entry is never waived: no entry, no change (the API answers 503).
      return pauseControl.change({ pipeline: name, paused, by, reason, via: 'http', details: { host: source.hostId }, audit: 'required' });
    },
  };
}
