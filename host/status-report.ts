/**
 * Builds the status document of one pipeline (host-api/status-document.ts: `GET
 * /pipelines/{pipeline}/status`, `storage-consumer status`) from its progress record, the
 * broker's view of its group and its pause.
 */
import type { GroupPosition } from '../kafka/lag.js';
import type { PipelineName } from '../shared/pipelines.js';
import type { PipelinePause } from '../shared/pause-store.js';
import { redactConnectionDetails } from '../shared/redaction.js';
import type { OwnerStatus, PartitionStatus, PipelineStatusDocument, StatusError } from '../host-api/status-document.js';

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
