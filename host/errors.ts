import { StorageConsumerError } from '../shared/errors.js';

/**
 * A pipeline of the host cannot go on (a fatal handler error, repeated commit failures, a
 * consumer that crashed for good). The host stops every other pipeline and exits 1.
 */
export class PipelineFailedError extends StorageConsumerError {
  constructor(
    readonly pipeline: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`pipeline ${pipeline} failed: ${message}`, options);
    this.name = 'PipelineFailedError';
  }
}
