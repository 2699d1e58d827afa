/**
 * The CloudFormation custom resource protocol, answered by the function itself: cfn-response
 * only exists for inline (ZipFile) code, not for bundled functions.
 * https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { backoffDelayMs } from '../shared/backoff.js';

/** What the handler reports back for one request. */
export interface CustomResourceOutcome {
  readonly status: 'SUCCESS' | 'FAILED';
  /** Shown in the stack events; required for FAILED. */
  readonly reason?: string;
  /** Readable with `Fn::GetAtt` on the resource. */
  readonly data?: Readonly<Record<string, string>>;
}

/** The body PUT to the ResponseURL. */
export interface CustomResourceResponse {
  readonly Status: 'SUCCESS' | 'FAILED';
  readonly Reason: string;
  readonly PhysicalResourceId: string;
  readonly StackId: string;
  readonly RequestId: string;
  readonly LogicalResourceId: string;
  readonly NoEcho: false;
  readonly Data?: Readonly<Record<string, string>>;
}

/** CloudFormation rejects a response over 4096 bytes, so a long reason is cut. */
const MAX_REASON_LENGTH = 1500;
const REQUEST_TYPES = new Set(['Create', 'Update', 'Delete']);

/** True for a custom resource request (as opposed to a direct invoke of the same function). */
export function isCustomResourceEvent(event: unknown): event is CloudFormationCustomResourceEvent {
  if (typeof event !== 'object' || event === null) return false;
  const candidate = event as Record<string, unknown>;
  return (
    typeof candidate.RequestType === 'string' &&
    REQUEST_TYPES.has(candidate.RequestType) &&
    typeof candidate.ResponseURL === 'string' &&
    typeof candidate.StackId === 'string' &&
    typeof candidate.RequestId === 'string' &&
    typeof candidate.LogicalResourceId === 'string'
  );
}

/**
 * The resource's physical id: kept as CloudFormation sent it on Update and Delete (a new id on
 * Update would make CloudFormation delete the "old" resource), derived from the stack's name on
 * Create, so it is the same for every deploy of one stack.
 */
export function physicalResourceIdOf(event: CloudFormationCustomResourceEvent): string {
  if (event.RequestType !== 'Create') return event.PhysicalResourceId;
  const stackName = /:stack\/([^/]+)\//.exec(event.StackId)?.[1] ?? event.StackId;
  return `${stackName}-${event.LogicalResourceId}`;
}

/** Where the invocation that answers logs (the Lambda context's names). */
export interface InvocationLogs {
  readonly logGroupName: string;
  readonly logStreamName: string;
}

/**
 * Builds the response document. The reason ends with the log group and stream of the invocation,
 * kept whole when a long reason is cut: the migration's log group is retained when a failed first
 * deploy deletes the stack (serverless.yml, MigrateLogGroup), so the pointer still leads somewhere.
 */
export function customResourceResponse(
  event: CloudFormationCustomResourceEvent,
  outcome: CustomResourceOutcome,
  logs: InvocationLogs,
): CustomResourceResponse {
  const pointer = `log group ${logs.logGroupName}, stream ${logs.logStreamName}`;
  const room = MAX_REASON_LENGTH - pointer.length - ' ()'.length;
  const text = outcome.reason === undefined || outcome.reason === '' ? undefined : outcome.reason;
  const cut = text === undefined || text.length <= room ? text : `${text.slice(0, room - 1)}…`;
  const reason = cut === undefined ? `see ${pointer}` : `${cut} (${pointer})`;
  return {
    Status: outcome.status,
    Reason: reason,
    PhysicalResourceId: physicalResourceIdOf(event),
    StackId: event.StackId,
    RequestId: event.RequestId,
    LogicalResourceId: event.LogicalResourceId,
    NoEcho: false,
    ...(outcome.data ? { Data: outcome.data } : {}),
  };
}

/** The wait before the first retry of the response PUT (then 1 s, 2 s). */
const RESPONSE_RETRY_BASE_MS = 500;
/** An attempt with less time than this left before the deadline is not started. */
const LEAST_ATTEMPT_MS = 250;

/** Options of `sendCustomResourceResponse`. */
export interface SendOptions {
  readonly attempts?: number;
  /** One attempt's bound (the presigned S3 URL answers in well under a second). */
  readonly timeoutMs?: number;
  /** Epoch ms by which every attempt, and the waits between them, must have ended. */
  readonly deadline?: number;
  readonly onRetry?: (attempt: number, error: unknown) => void;
}

/**
 * PUTs the response to the presigned ResponseURL, retrying network errors, timeouts and 5xx
 * within `deadline`. The body is sent as bytes with an empty content type, as the presigned S3
 * URL expects. Throws, saying how many attempts were made, when none was accepted: then only the
 * resource's ServiceTimeout ends the stack operation.
 */
export async function sendCustomResourceResponse(
  responseUrl: string,
  response: CustomResourceResponse,
  options: SendOptions = {},
): Promise<void> {
  const body = Buffer.from(JSON.stringify(response), 'utf8');
  const attempts = options.attempts ?? 4;
  const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
  const timeoutMs = options.timeoutMs ?? 10_000;
  let lastError: unknown = new Error('no time was left to attempt it');
  let made = 0;
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    const left = deadline - Date.now();
    if (left < LEAST_ATTEMPT_MS) break;
    made = attempt;
    try {
      const reply = await fetch(responseUrl, {
        method: 'PUT',
        body,
        headers: { 'content-type': '', 'content-length': String(body.length) },
        signal: AbortSignal.timeout(Math.min(timeoutMs, left)),
      });
      if (reply.ok) return;
      lastError = new Error(`ResponseURL answered ${reply.status} ${reply.statusText}`);
      if (reply.status < 500) break; // a 4xx (e.g. an expired URL) will not get better
    } catch (error) {
      lastError = error;
    }
    if (attempt < attempts) {
      const wait = backoffDelayMs(attempt, RESPONSE_RETRY_BASE_MS);
      if (deadline - Date.now() - wait < LEAST_ATTEMPT_MS) break;
      options.onRetry?.(attempt, lastError);
      await sleep(wait);
    }
  }
  throw new Error(`could not deliver the custom resource response (${made} attempt${made === 1 ? '' : 's'}): ${String(lastError)}`, {
    cause: lastError,
  });
}
