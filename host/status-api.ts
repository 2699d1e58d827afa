/**
 * The host's Kafka Connect-like pipeline API (docs/operations.md, "Pause, resume and status"):
 * - `GET /pipelines`: every pipeline of this host with its state;
 * - `GET /pipelines/{pipeline}/status`: state, this host's id, per partition owner, offsets,
 *   lag, the batch in flight, and the last error with its stack (`trace`);
 * - `PUT /pipelines/{pipeline}/pause` and `/resume`: 202; they write `pipeline_pauses`, which
 *   every host obeys. They need `Authorization: Bearer <STORAGE_HTTP_CONTROL_TOKEN>`: 403 when
 *   no token is configured (control is off), 401 when the header is missing or wrong; 503 with
 *   a JSON error when the change or its audit entry cannot be written (no entry, no change).
 * An unknown pipeline (or one this host does not run) is a 404 with a JSON body.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isPipelineName } from '../shared/pipelines.js';
import type { PipelineName } from '../shared/pipelines.js';
import { AuditUnavailableError } from '../shared/operator-actions.js';
import { pauseChangeJson } from '../shared/pause-store.js';
import type { PauseChangeResult } from '../shared/pause-store.js';
import { errorCode, redactAnswer } from '../shared/redaction.js';
import { PIPELINES_PATH } from '../host-api/http-paths.js';

/** The path prefix of the API (an interface: operators and the CLI's `--host` call it). */

/** One pipeline in `GET /pipelines`. */
export interface PipelineSummary {
  readonly pipeline: PipelineName;
  readonly state: string;
  readonly paused: boolean;
}

/** What the API asks the host. */
export interface PipelinesTarget {
  /** The pipelines this host runs. */
  readonly pipelines: readonly PipelineName[];
  summaries(): PipelineSummary[];
  /** The status document of one of the host's pipelines. Never waits long on Kafka. */
  status(pipeline: PipelineName): Promise<unknown>;
  /** Writes a pause (`true`) or resume and applies it here; other hosts follow within their poll interval. */
  control(pipeline: PipelineName, paused: boolean, by: string, reason: string | undefined): Promise<PauseChangeResult>;
}

/** Longest request body a control call may carry (`{"reason": "..."}`). */
const MAX_BODY_BYTES = 4_096;

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Whether `header` is `Bearer <token>`. Both sides are hashed first, so the comparison is
 * constant-time on equal-length digests whatever the lengths of what was sent.
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer +(\S+) *$/i.exec(header ?? '');
  const given = digest(match?.[1] ?? '');
  const expected = digest(token);
  return timingSafeEqual(given, expected) && match !== null;
}

/** Every answer passes through the one redaction: no field may carry an address, a user or a password. */
function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  response.end(`${JSON.stringify(redactAnswer(body), null, 2)}\n`);
}

/** The path's segments, percent-decoded; `undefined` when an escape is malformed (`%`, `%zz`, not UTF-8). */
function pathSegments(path: string): string[] | undefined {
  try {
    return path
      .split('/')
      .filter((part) => part !== '')
      .map((part) => decodeURIComponent(part));
  } catch {
    return undefined;
  }
}

/** A name as an answer may quote it: at most 100 characters. */
const quoted = (name: string) => JSON.stringify(name.length > 100 ? `${name.slice(0, 100)}...` : name);

async function readBody(request: IncomingMessage): Promise<string> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new RangeError(`request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** `{"reason": "..."}` (optional; an empty body is no reason). */
function parseReason(body: string): string | undefined {
  if (body.trim() === '') return undefined;
  const parsed: unknown = JSON.parse(body);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new TypeError('the body must be a JSON object');
  const reason = (parsed as { reason?: unknown }).reason;
  if (reason === undefined || reason === null) return undefined;
  if (typeof reason !== 'string' || reason.length > 1_000) throw new TypeError('"reason" must be a string of at most 1000 characters');
  return reason;
}

/**
 * Answers a request under {@link PIPELINES_PATH}; returns false for any other path (the
 * caller's own routes). `controlToken` undefined: control is disabled.
 */
export async function handlePipelinesRequest(
  request: IncomingMessage,
  response: ServerResponse,
  target: PipelinesTarget | undefined,
  controlToken: string | undefined,
): Promise<boolean> {
  const path = (request.url ?? '/').split('?')[0] ?? '/';
  if (path !== PIPELINES_PATH && !path.startsWith(`${PIPELINES_PATH}/`)) return false;
  const parts = pathSegments(path.slice(PIPELINES_PATH.length));
  if (parts === undefined) {
    send(response, 400, { error: 'malformed path: a percent-escape is not valid (% and two hex digits, UTF-8)' });
    return true;
  }
  const method = request.method ?? 'GET';
  const read = method === 'GET' || method === 'HEAD';

  if (parts.length === 0) {
    if (!read) send(response, 405, { error: 'method not allowed', allow: 'GET' }, { allow: 'GET, HEAD' });
    else if (target === undefined) send(response, 503, { error: 'the host is starting' });
    else send(response, 200, { pipelines: target.summaries() });
    return true;
  }
  const [rawName, action, ...rest] = parts;
  const name = rawName ?? '';
  const control = action === 'pause' || action === 'resume';
  if (rest.length > 0 || (action !== 'status' && !control)) {
    send(response, 404, {
      error: 'not found',
      paths: ['GET /pipelines', 'GET /pipelines/{pipeline}/status', 'PUT /pipelines/{pipeline}/pause', 'PUT /pipelines/{pipeline}/resume'],
    });
    return true;
  }
  if (control) {
    if (method !== 'PUT') {
      send(response, 405, { error: 'method not allowed', allow: 'PUT' }, { allow: 'PUT' });
      return true;
    }
    // Authentication first: a caller without the token learns nothing, not even which pipelines exist.
    if (controlToken === undefined) {
      send(response, 403, { error: 'control is disabled on this host: STORAGE_HTTP_CONTROL_TOKEN is not set' });
      return true;
    }
    if (!bearerMatches(request.headers.authorization, controlToken)) {
      send(
        response,
        401,
        { error: 'a valid Authorization: Bearer <STORAGE_HTTP_CONTROL_TOKEN> header is required' },
        { 'www-authenticate': 'Bearer realm="storage-consumer"' },
      );
      return true;
    }
  } else if (!read) {
    send(response, 405, { error: 'method not allowed', allow: 'GET' }, { allow: 'GET, HEAD' });
    return true;
  }
  if (target === undefined) {
    send(response, 503, { error: 'the host is starting' });
    return true;
  }
  if (!isPipelineName(name) || !target.pipelines.includes(name)) {
    send(response, 404, {
      error: `unknown pipeline ${quoted(name)}: this host runs ${target.pipelines.join(', ')}`,
      pipelines: target.pipelines,
    });
    return true;
  }
  if (!control) {
    let status: unknown;
    try {
      status = await target.status(name);
    } catch (error) {
      send(response, 503, { error: `the status could not be built: ${errorCode(error)}` });
      return true;
    }
    send(response, 200, status);
    return true;
  }
  let reason: string | undefined;
  try {
    reason = parseReason(await readBody(request));
  } catch (error) {
    send(response, 400, { error: `bad request body: ${(error as Error).message}` });
    return true;
  }
  const by = `http:${request.socket.remoteAddress ?? 'unknown'}`;
  let result: PauseChangeResult;
  try {
    result = await target.control(name, action === 'pause', by, reason);
  } catch (error) {
    // The driver's message can name the database's address: the answer gives its code only.
    if (error instanceof AuditUnavailableError) {
      // Audit before acting: the HTTP API has no --no-audit, an unrecorded change is refused.
      send(response, 503, {
        error:
          `the ${action} was refused: its audit entry could not be written to operator_actions (${error.code ?? 'no code'}); ` +
          'nothing changed',
        audit: 'unavailable',
      });
      return true;
    }
    send(response, 503, { error: `the ${action} could not be written to pipeline_pauses: ${errorCode(error)}; nothing changed` });
    return true;
  }
  send(response, 202, pauseChangeJson(result));
  return true;
}
