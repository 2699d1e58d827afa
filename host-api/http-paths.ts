/**
 * The paths of the host's HTTP endpoint (host/http-endpoint.ts): part of the host's outward
 * contract, read by `storage-consumer healthcheck --http` and `storage-consumer status --host`.
 */

/** The paths the endpoint serves (an interface: probes and scrape configs name them). */
export const HTTP_PATHS = { health: '/healthz', ready: '/readyz', metrics: '/metrics' } as const;

/** Where the status and control API of the pipelines lives (host/status-api.ts). */
export const PIPELINES_PATH = '/pipelines';

/** One pipeline's status document (`GET`), as `storage-consumer status --host` asks for it. */
export function pipelineStatusPath(pipeline: string): string {
  return `${PIPELINES_PATH}/${encodeURIComponent(pipeline)}/status`;
}
