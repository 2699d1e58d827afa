/**
 * The one error a host pipeline fails with ({@link PipelineFailedError}), and where its batch
 * sits: what the supervisor catches to stop every pipeline and exit 1, and what the
 * `pipeline failed` line and the status show.
 */
import { StorageConsumerError } from '../shared/errors.js';

/** Where a failed batch sits: its topic, partition, and first and last offset (decimal strings). */
export interface FailedBatchPlace {
  readonly topic: string;
  readonly partition: number;
  readonly firstOffset: string;
  readonly lastOffset: string;
}

/**
 * A pipeline of the host cannot go on (a fatal handler error, repeated commit failures, a
 * consumer that crashed for good, no fetch for too long). The host stops every other pipeline
 * and exits 1. `batch` says where, when the failure concerns a batch.
 */
export class PipelineFailedError extends StorageConsumerError {
  readonly batch: FailedBatchPlace | undefined;

  constructor(
    readonly pipeline: string,
    message: string,
    options?: { cause?: unknown; batch?: FailedBatchPlace | undefined },
  ) {
    super(`pipeline ${pipeline} failed: ${message}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'PipelineFailedError';
    this.batch = options?.batch;
  }
}
