/**
 * The host's HTTP endpoint: `/healthz`, `/readyz`, `/metrics` and the pipeline API
 * (host/status-api.ts) on one port.
 */
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { ConfigurationError } from '../shared/errors.js';
import { redactAnswer } from '../shared/redaction.js';
import { HTTP_PATHS, PIPELINES_PATH } from '../host-api/http-paths.js';
import { handlePipelinesRequest } from './status-api.js';
import type { PipelinesTarget } from './status-api.js';
import type { Readiness } from './health.js';
import type { HostState, Liveness } from './health.js';
import type { HttpSettings } from '../config/host-settings.js';

/** What the endpoint asks the host; `undefined` while the host is not created yet. */
export interface EndpointTarget {
  state(): HostState;
  liveness(): Liveness;
  readiness(): Promise<Readiness>;
  /** The pipeline status and control API (`/pipelines/...`). */
  readonly pipelinesApi?: PipelinesTarget;
}

/** A listening endpoint. */
export interface HttpEndpoint {
  /** The bound port (the given one, or the one the OS chose). */
  readonly port: number;
  close(): Promise<void>;
}

/** A JSON body passes through the one redaction (shared/redaction.ts); the metrics text is sent as it is. */
function send(response: ServerResponse, status: number, body: unknown, contentType = 'application/json'): void {
  const text = typeof body === 'string' ? body : `${JSON.stringify(redactAnswer(body))}\n`;
  response.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
  response.end(text);
}

/**
 * Serves the host's health and metrics over HTTP:
 * - `/healthz`: 200 while every pipeline's heartbeat is fresh, by the rule of
 *   `storage-consumer healthcheck` (see `Liveness` in ./supervisor.ts), else 503 naming why;
 * - `/readyz`: 200 only when every pipeline is RUNNING (host/progress.ts) and its database
 *   answers, else 503 with a JSON body naming what is missing;
 * - `/metrics`: the Prometheus text format of `registry`; it never waits for Kafka or
 *   PostgreSQL (every value is in memory).
 * A port that cannot be bound is a start-up error naming `STORAGE_HTTP_PORT`.
 */
export async function startHttpEndpoint(
  settings: HttpSettings,
  registry: Registry,
  target: () => EndpointTarget | undefined,
): Promise<HttpEndpoint> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    // Never an exception's text: it may name addresses, and the caller can do nothing with it.
    const fail = () => {
      if (!response.headersSent) send(response, 500, { error: 'internal error: the request could not be answered' });
      else response.destroy();
    };
    if (path?.startsWith(PIPELINES_PATH)) {
      handlePipelinesRequest(request, response, target()?.pipelinesApi, settings.controlToken)
        .then((handled) => {
          if (!handled) send(response, 404, { error: 'not found', paths: Object.values(HTTP_PATHS) });
        })
        .catch(fail);
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      send(response, 405, { error: 'method not allowed' });
      return;
    }
    const host = target();
    const handle = async () => {
      switch (path) {
        case HTTP_PATHS.health: {
          const liveness: Liveness = host
            ? host.liveness()
            : { alive: false, state: 'Starting', maxAgeMs: 0, pipelines: {}, missing: ['host: Starting (no heartbeat written yet)'] };
          send(response, liveness.alive ? 200 : 503, liveness);
          return;
        }
        case HTTP_PATHS.ready: {
          const readiness: Readiness = host
            ? await host.readiness()
            : { ready: false, state: 'Starting', pipelines: {}, missing: ['host: Starting'] };
          send(response, readiness.ready ? 200 : 503, readiness);
          return;
        }
        case HTTP_PATHS.metrics:
          send(response, 200, await registry.metrics(), registry.contentType);
          return;
        default:
          send(response, 404, { error: 'not found', paths: Object.values(HTTP_PATHS) });
      }
    };
    handle().catch(fail);
  });
  // A request Node's parser refuses (a bad request line, a header too large) gets a JSON 400 too,
  // not Node's bare one.
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable || error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    const body = `${JSON.stringify({ error: status === 431 ? 'request header fields too large' : 'malformed request' })}\n`;
    // The answer to a HEAD has no body, even to a HEAD the parser refused.
    const head = (error as { rawPacket?: unknown }).rawPacket;
    const bodyless = Buffer.isBuffer(head) && head.subarray(0, 5).toString('latin1') === 'HEAD ';
    socket.end(
      `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${bodyless ? '' : body}`,
    );
  });
  // A probe must never hold the stop: idle keep-alive connections are not waited for.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new ConfigurationError(
          `STORAGE_HTTP_PORT=${settings.port} cannot be served on ${settings.host}: ${error.code ?? error.message} (set another port, ` +
            `or 0 to turn the endpoint off)`,
          { cause: error },
        ),
      ),
    );
    server.listen(settings.port, settings.host, () => resolve());
  });
  const address = server.address();
  const port = address !== null && typeof address === 'object' ? address.port : settings.port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
