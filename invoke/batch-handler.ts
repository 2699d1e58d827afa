/**
 * The batch handler both runtimes run: a middy chain (Powertools logger with the Lambda context)
 * around the shared batch flow. The deployed functions wrap it (aws/deployed-handler.ts); the
 * host's in-process invoker calls it directly (host/invoker.ts).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import type { BatchReport, BatchResponse } from '../shared/batch-report.js';
import { processBatch } from '../shared/process-batch.js';
import { redactErrorText } from '../shared/redaction.js';
import type { BatchRetry } from '../shared/process-batch.js';
import type { PipelineName } from '../shared/pipelines.js';
import type { DatabaseSource } from '../shared/runtime.js';
import { createPipelineRuntime } from '../shared/runtime.js';
import type { Settings } from '../shared/settings.js';
import { loadSettings } from '../shared/settings.js';

/** Options of a pipeline handler; all optional (tests and the host inject their own). */
export interface PipelineHandlerOptions {
  readonly settings?: Settings;
  readonly logger?: Logger;
  readonly database?: DatabaseSource;
  /** Told about every batch, e.g. to emit metrics. */
  readonly onBatch?: (report: BatchReport) => void;
  /** Told before each wait for a transient database retry inside a batch, e.g. to count it and show it in the status. */
  readonly onWait?: (retry: BatchRetry) => void;
  /** Flushed (EMF to stdout) after every invocation, also a failed one. */
  readonly metrics?: Metrics;
}

/**
 * A Lambda handler for one pipeline: a middy chain (Powertools logger with the Lambda
 * context) around the shared batch pipeline. Settings are validated when the handler is
 * built (a cold start), so a bad variable fails the init, not a batch hours later. The host
 * invokes it in-process; the deployed functions add credentials and metrics in
 * `deployed-handler.ts`, kept apart so the host never loads the Secrets Manager client.
 */
export function createPipelineHandler(pipeline: PipelineName, options: PipelineHandlerOptions = {}) {
  const settings = options.settings ?? loadSettings();
  const logger =
    options.logger ?? new Logger({ serviceName: 'storage-consumer', persistentKeys: { pipeline }, jsonReplacerFn: redactErrorText });
  const runtime = createPipelineRuntime(pipeline, settings, logger, options.database);
  const handler = middy(async (event: unknown, context: Context): Promise<BatchResponse> => {
    // Each invocation logs through a logger of its own that carries its context: the host runs
    // a pipeline's partitions side by side, and a shared logger would stamp every batch's lines
    // with the function_request_id of the invocation that started last. (On Lambda one
    // container runs one invocation at a time; the child costs a few objects per batch.)
    const invocationLogger = logger.createChild();
    invocationLogger.addContext(context);
    const { response, report } = await processBatch(
      event,
      { ...runtime, logger: invocationLogger },
      {
        remainingMs: () => context.getRemainingTimeInMillis(),
        onWait: options.onWait,
      },
    );
    options.onBatch?.(report);
    return response;
  }).use(injectLambdaContext(logger));
  if (options.metrics) handler.use(logMetrics(options.metrics));
  return Object.assign(handler, { close: runtime.close, warm: runtime.warm, ping: runtime.ping });
}
