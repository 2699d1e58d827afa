/**
 * How the host invokes a pipeline's handler with an event: in-process (the batch handler itself)
 * or through the Lambda Invoke API, with the invocation's deadline, and what came back.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import { RetryBudgetExhaustedError } from '../shared/errors.js';
import type { MonotonicInstant } from './clock.js';
import { msUntil } from './clock.js';
import type { KafkaEvent } from '../shared/kafka-event.js';
import { createPipelineHandler } from '../invoke/batch-handler.js';
import type { PipelineName } from '../shared/pipelines.js';
import type { PingResult } from '../shared/runtime.js';
import type { Settings } from '../shared/settings.js';
import type { PipelineMetrics } from './metrics.js';
import type { HandlerOutcome } from './offsets.js';
import type { HostSettings } from '../config/host-settings.js';

/**
 * An invocation's outcome plus the host's verdict on an error: a `fatal` error stops the
 * host (exit 1); any other error is redelivered after a back-off.
 */
export type InvocationResult = HandlerOutcome & { readonly fatal?: boolean };

/** Where an in-process invoker records a batch's in-invocation database retries (the pipeline's progress record). */
export interface RetryRecorder {
  retried(partition: number, error: unknown): void;
}

/** Calls one pipeline's handler with a Lambda Kafka event. */
export interface Invoker {
  /** Never throws: every failure is an outcome. `deadline` is an instant on the monotonic clock (`performance.now()`, host/clock.ts). */
  invoke(event: KafkaEvent, deadline: MonotonicInstant): Promise<InvocationResult>;
  /** Releases what the invoker holds (the pipeline's database pool, the HTTP client). */
  close(): Promise<void>;
  /** Prepares for the first invocation (in-process: opens a database connection); may fail. */
  warm?(): Promise<void>;
  /**
   * Checks that the pipeline's database answers (readiness); absent when the host has no database
   * (Lambda mode). Says so when the database answers but every connection of the pool is held.
   */
  ping?(): Promise<PingResult | void>;
}

/**
 * Handler errors the host redelivers instead of stopping: the transient retry budget ran out
 * (the database is down or overloaded; Lambda would retry forever too). Everything else a
 * handler throws in-process is fatal (docs/design.md section 4): a ConfigurationError, an
 * InvalidEventError (the host built a bad event), a MigrationError, a non-transient database
 * error such as a missing table (42P01), or any unexpected bug.
 */
function isRedeliverableHandlerError(error: unknown): boolean {
  return error instanceof RetryBudgetExhaustedError;
}

/** Error types a remote function reports that no redelivery can cure: the host stops. */
const FATAL_FUNCTION_ERROR_TYPES: ReadonlySet<string> = new Set(['ConfigurationError', 'InvalidEventError', 'MigrationError']);

/** A Lambda-like context whose remaining time runs out at `deadline`. */
function hostContext(functionName: string, deadline: MonotonicInstant): Context {
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: '0',
    awsRequestId: randomUUID(),
    logGroupName: 'storage-consumer-host',
    logStreamName: functionName,
    getRemainingTimeInMillis: () => msUntil(deadline),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/**
 * Runs the pipeline's handler in this process: the same middy handler Lambda runs, built with
 * the host's settings, called with a context whose deadline the host derives from the max
 * poll interval. Each stored batch's counts and each database retry go to `metrics`, if given.
 */
export function createInProcessInvoker(
  pipeline: PipelineName,
  settings: Settings,
  metrics?: PipelineMetrics,
  progress?: RetryRecorder,
): Invoker {
  const handler = createPipelineHandler(pipeline, {
    settings,
    onBatch: metrics && ((report) => metrics.recordsStored(report)),
    onWait: (retry) => {
      metrics?.retried();
      // The batch in flight keeps the retry's number and error: the status and the stall line show them.
      for (const partition of retry.partitions) progress?.retried(partition, retry.error);
    },
  });
  const functionName = `storage-consumer-${pipeline}`;
  return {
    async invoke(event, deadline) {
      try {
        const payload: unknown = await handler(event, hostContext(functionName, deadline));
        return { kind: 'response', payload: payload ?? null };
      } catch (error) {
        return { kind: 'error', error, fatal: !isRedeliverableHandlerError(error) };
      }
    },
    close: () => handler.close(),
    warm: () => handler.warm(),
    ping: () => handler.ping(),
  };
}

interface AwsErrorShape {
  readonly name?: string;
  readonly $fault?: 'client' | 'server';
}

/**
 * Invoke API errors: a client fault (missing function, access denied, request too large,
 * invalid request) is a configuration problem no redelivery cures; throttling, server faults
 * and network errors are redelivered. Missing credentials are fatal too.
 */
function isFatalInvokeError(error: unknown): boolean {
  const shape = (typeof error === 'object' && error !== null ? error : {}) as AwsErrorShape;
  if (shape.name === 'CredentialsProviderError') return true;
  return shape.$fault === 'client' && shape.name !== 'TooManyRequestsException';
}

/**
 * Invokes the pipeline's function through the Lambda Invoke API (RequestResponse), against
 * AWS, LocalStack or a local emulator. A `FunctionError` is a function error; its
 * `errorType` decides whether it is fatal ({@link FATAL_FUNCTION_ERROR_TYPES}).
 */
function createLambdaInvoker(pipeline: PipelineName, settings: HostSettings): Invoker {
  const lambda = settings.invoke.lambda;
  const functionName = lambda?.functions[pipeline];
  if (!lambda || !functionName) throw new Error(`no Lambda function configured for pipeline ${pipeline}`);
  // Loaded only in this mode: the in-process host never pays for the AWS SDK's memory.
  const sdk = import('@aws-sdk/client-lambda').then(({ InvokeCommand, LambdaClient }) => ({
    InvokeCommand,
    client: new LambdaClient({ region: lambda.region, ...(lambda.endpoint ? { endpoint: lambda.endpoint } : {}) }),
  }));
  return {
    async invoke(event, deadline) {
      let response;
      try {
        const { InvokeCommand, client } = await sdk;
        response = await client.send(
          new InvokeCommand({ FunctionName: functionName, InvocationType: 'RequestResponse', Payload: JSON.stringify(event) }),
          { abortSignal: AbortSignal.timeout(Math.max(1, msUntil(deadline))) },
        );
      } catch (error) {
        return { kind: 'error', error, fatal: isFatalInvokeError(error) };
      }
      const text = response.Payload ? Buffer.from(response.Payload).toString('utf8') : '';
      let payload: unknown = null;
      let parseError: string | undefined;
      if (text.trim() !== '') {
        try {
          payload = JSON.parse(text);
        } catch (error) {
          parseError = (error as Error).message;
        }
      }
      if (response.FunctionError) {
        const body = (typeof payload === 'object' && payload !== null ? payload : {}) as { errorType?: unknown; errorMessage?: unknown };
        const errorType = typeof body.errorType === 'string' ? body.errorType : response.FunctionError;
        const error = Object.assign(new Error(typeof body.errorMessage === 'string' ? body.errorMessage : text.slice(0, 500)), {
          name: errorType,
        });
        return { kind: 'error', error, fatal: FATAL_FUNCTION_ERROR_TYPES.has(errorType) };
      }
      if (parseError !== undefined) return { kind: 'invalid-response', detail: `${parseError}: ${text.slice(0, 200)}` };
      return { kind: 'response', payload };
    },
    close: async () => (await sdk).client.destroy(),
  };
}

/** The invoker the settings ask for; in-process, its batches report into `metrics` and their retries into `progress`. */
export function createInvoker(
  pipeline: PipelineName,
  settings: HostSettings,
  metrics?: PipelineMetrics,
  progress?: RetryRecorder,
): Invoker {
  return settings.invoke.mode === 'lambda'
    ? createLambdaInvoker(pipeline, settings)
    : createInProcessInvoker(pipeline, settings.storage, metrics, progress);
}
