/**
 * The paths of the host's HTTP endpoint (host/http-endpoint.ts): part of the host's outward
 * contract, read by `storage-consumer healthcheck --http`.
 */

/** The paths the endpoint serves (an interface: probes and scrape configs name them). */
export const HTTP_PATHS = { health: '/healthz', ready: '/readyz', metrics: '/metrics' } as const;
