/**
 * The status document of one pipeline (`GET /pipelines/{pipeline}/status`, `storage-consumer
 * status`): built from its progress record, the broker's view of its group and its pause.
 */
import type { GroupPosition } from '../kafka/lag.js';
import type { PipelineName } from '../shared/pipelines.js';
import type { PipelinePause } from '../shared/pause-store.js';
import { redactConnectionDetails } from '../shared/redaction.js';

/**
 * `GET /pipelines/{pipeline}/status`: one pipeline as this host sees it, in the spirit of Kafka
 * Connect's `GET /connectors/{name}/status`. Built from the pipeline's progress record (the
 * same record every other signal of the host reads), the pause row the host obeys, and the
 * group as the broker describes it (owners, committed and end offsets). Offsets are strings.
 * No secrets and no connection details: error texts pass through `redactConnectionDetails`
 * (shared/redaction.ts), and so does every string of the answer on its way out (host/status-api.ts).
 */

/** An error as the status shows it: message, stack (`trace`, as Connect calls it) and time. */
export interface StatusError {
  readonly message: string;
  readonly trace: string | null;
  readonly at: string;
}

/** The batch a partition is working on. */
export interface InFlightStatus {
  readonly first_offset: string;
  readonly last_offset: string;
  readonly started_at: string;
  readonly attempt: number;
  /** Transient database errors retried inside the current attempt (in-process); `last_error` is the latest. */
  readonly retries: number;
  readonly last_error: StatusError | null;
}

/** Who owns a partition: a member of the group, and whether it is this host. */
export interface OwnerStatus {
  readonly member_id: string;
  readonly client_id: string;
  /** The member's address as the broker saw it, redacted (`/<address>`): the answer goes to anyone who reaches the port. */
  readonly host: string;
  readonly this_host: boolean;
}

/** One partition of the pipeline's topic. */
export interface PartitionStatus {
  readonly partition: number;
  readonly owner: OwnerStatus | null;
  readonly committed: string | null;
  readonly end: string | null;
  readonly lag: number | null;
  /** Only for a partition this host works on; absent when the host keeps no progress record. */
  readonly in_flight?: InFlightStatus | null;
  readonly last_stored_at?: string | null;
}

/** The whole answer. */
export interface PipelineStatusDocument {
  readonly pipeline: PipelineName;
  /** `RUNNING`, `PAUSED`, `STALLED`, `STARTING` ... (the progress record's verdict). */
  readonly state: string;
  readonly host_id: string;
  /** This host's member id in the group; `null` while not in it. */
  readonly member_id: string | null;
  readonly topic: string;
  readonly group: string;
  readonly group_state: string | null;
  readonly pause: { readonly by: string; readonly at: string; readonly reason: string | null } | null;
  /** When this host last read `pipeline_pauses`, and why the last read failed (`null`: it did not). */
  readonly pause_read_at: string | null;
  readonly pause_read_error: string | null;
  readonly partitions: readonly PartitionStatus[];
  /** Absent when the host keeps no progress record (then nothing is known of batches and errors). */
  readonly last_error?: StatusError | null;
  /** Why the broker's view (owners, end offsets) is missing, if it is. */
  readonly kafka_error: string | null;
}

/** An error as the progress record keeps it (host/progress.ts). */
interface KeptError {
  readonly message: string;
  readonly stack: string | undefined;
  readonly at: number;
}

/**
 * What the status needs of the progress record: structurally a `ProgressSnapshot` of
 * host/progress.ts, read, never kept apart.
 */
export interface ProgressFacts {
  readonly pipeline: PipelineName;
  readonly topic: string;
  readonly group: string;
  readonly assignment: readonly number[] | undefined;
  readonly inFlight: ReadonlyArray<{
    readonly partition: number;
    readonly firstOffset: string;
    readonly lastOffset: string;
    /** Wall clock (ms since the epoch): shown, never measured. */
    readonly startedWallAt: number;
    readonly attempt: number;
    readonly retries: number;
    readonly lastError: KeptError | undefined;
  }>;
  readonly partitions: ReadonlyArray<{
    readonly partition: number;
    readonly committed: string | undefined;
    readonly lastStoredWallAt: number | undefined;
  }>;
  readonly lastError: KeptError | undefined;
}

/** Everything one status answer is made of. */
export interface StatusInputs {
  /**
   * The pipeline's progress record; `undefined` where the host keeps none yet: batch and error
   * fields are then left out, never shown as null.
   */
  readonly progress: ProgressFacts | undefined;
  readonly pipeline: PipelineName;
  readonly topic: string;
  /** The consumer group's id. */
  readonly groupId: string;
  readonly state: string;
  readonly hostId: string;
  readonly memberId: string | undefined;
  readonly pause: PipelinePause | undefined;
  readonly pauseRead: { readonly readAt: Date | undefined; readonly error: string | undefined };
  /** The group on the broker, or why it could not be read. */
  readonly group: GroupPosition | { readonly error: string };
}

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

function statusError(error: KeptError | undefined): StatusError | null {
  if (error === undefined) return null;
  return {
    message: redactConnectionDetails(error.message),
    trace: error.stack === undefined ? null : redactConnectionDetails(error.stack),
    at: new Date(error.at).toISOString(),
  };
}

/** Builds the status document from its inputs (pure). */
export function buildPipelineStatus(inputs: StatusInputs): PipelineStatusDocument {
  const { progress, group } = inputs;
  const position = 'error' in group ? undefined : group;
  const owners = new Map<number, OwnerStatus>();
  for (const member of position?.members ?? []) {
    for (const partition of member.partitions) {
      owners.set(partition, {
        member_id: member.memberId,
        client_id: member.clientId,
        host: redactConnectionDetails(member.clientHost),
        this_host: member.memberId === inputs.memberId,
      });
    }
  }
  const known = new Map((progress?.partitions ?? []).map((entry) => [entry.partition, entry]));
  const inFlight = new Map((progress?.inFlight ?? []).map((batch) => [batch.partition, batch]));
  const numbers = new Set<number>([
    ...(position?.partitions.map((entry) => entry.partition) ?? []),
    ...known.keys(),
    ...(progress?.assignment ?? []),
  ]);
  const partitions = [...numbers]
    .sort((a, b) => a - b)
    .map((partition): PartitionStatus => {
      const broker = position?.partitions.find((entry) => entry.partition === partition);
      const local = known.get(partition);
      const batch = inFlight.get(partition);
      // Without the broker's view, this host still knows the partitions it holds.
      const owner = owners.get(partition) ?? null;
      const base = {
        partition,
        owner,
        committed: broker ? (broker.committed?.toString() ?? null) : (local?.committed ?? null),
        end: broker ? broker.end.toString() : null,
        lag: broker ? Number(broker.lag) : null,
      };
      if (progress === undefined) return base;
      return {
        ...base,
        in_flight: batch
          ? {
              first_offset: batch.firstOffset,
              last_offset: batch.lastOffset,
              started_at: new Date(batch.startedWallAt).toISOString(),
              attempt: batch.attempt,
              retries: batch.retries,
              last_error: statusError(batch.lastError),
            }
          : null,
        last_stored_at: iso(local?.lastStoredWallAt),
      };
    });
  return {
    pipeline: inputs.pipeline,
    state: inputs.state,
    host_id: inputs.hostId,
    member_id: inputs.memberId ?? null,
    topic: inputs.topic,
    group: inputs.groupId,
    group_state: position?.state ?? null,
    pause: inputs.pause
      ? { by: redactConnectionDetails(inputs.pause.by), at: inputs.pause.at.toISOString(), reason: inputs.pause.reason }
      : null,
    pause_read_at: inputs.pauseRead.readAt?.toISOString() ?? null,
    pause_read_error: inputs.pauseRead.error === undefined ? null : redactConnectionDetails(inputs.pauseRead.error),
    partitions,
    ...(progress === undefined ? {} : { last_error: statusError(progress.lastError) }),
    kafka_error: 'error' in group ? redactConnectionDetails(group.error) : null,
  };
}
