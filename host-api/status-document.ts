/**
 * The status document of one pipeline: the host's answer to `GET /pipelines/{pipeline}/status`
 * (host/status-api.ts), which `storage-consumer status --host` reads. Part of the host's outward
 * contract, so its field names are an interface; host/status-report.ts builds it.
 *
 * One pipeline as this host sees it, in the spirit of Kafka Connect's `GET
 * /connectors/{name}/status`. Built from the pipeline's progress record (the same record every
 * other signal of the host reads), the pause row the host obeys, and the group as the broker
 * describes it (owners, committed and end offsets). Offsets are strings. No secrets and no
 * connection details: error texts pass through `redactConnectionDetails` (shared/redaction.ts),
 * and so does every string of the answer on its way out (host/status-api.ts).
 */
import type { PipelineName } from '../shared/pipelines.js';

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
