/**
 * Running the host as a process: checks the kafkajs workarounds, starts the HTTP endpoint and the
 * host, installs the signal handlers and turns the host's end into an exit code.
 */
import type { CoreLogger } from '../shared/logger.js';
import type { HttpEndpoint } from './http-endpoint.js';
import { startHttpEndpoint } from './http-endpoint.js';
import { HTTP_PATHS } from '../host-api/http-paths.js';
import { verifyKafkaClient } from '../kafka/clients.js';
import { createHostMetrics } from './metrics.js';
import type { HostHandle, HostOptions } from './supervisor.js';
import { createHostLogger, EXIT_FAILED, startHost } from './supervisor.js';
import type { HostSettings } from '../config/host-settings.js';

export type { HostHandle, HostOptions } from './supervisor.js';
export { startHost } from './supervisor.js';

/** Signals that ask the host to stop. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/**
 * A terminal's Ctrl-C reaches every process of the foreground group, and `npm` and `tsx` relay
 * it to their child as well: one key press arrives as two or three SIGINTs within milliseconds.
 * A SIGINT that soon after the first one is that same key press, not a second request.
 */
const RELAYED_SIGINT_MS = 500;

/**
 * Runs the host until it stops and resolves with the process exit code. Unless
 * `STORAGE_HTTP_PORT` is 0, the HTTP endpoint (`/healthz`, `/readyz`, `/metrics`) is bound
 * first, so a port that is taken fails the start before anything connects, and it answers
 * until the host has stopped. The first SIGTERM or SIGINT stops the host gracefully
 * (in-flight batches finish and commit within the shutdown timeout; exit 0); a second one
 * gives up at once (exit 1), except a SIGINT within {@link RELAYED_SIGINT_MS} of the first.
 * The handlers are installed explicitly, so this also works as PID 1 in a container, where
 * the kernel would otherwise ignore SIGTERM. Before all that, the installed kafkajs is checked
 * (kafka/kafkajs/index.ts): a version other than the pinned one, or one that would lose record
 * headers, rejects with a `KafkajsIncompatibleError`.
 */
export async function runHost(settings: HostSettings, options: HostOptions = {}): Promise<number> {
  const logger: CoreLogger = options.logger ?? createHostLogger();
  let host: HostHandle | undefined = undefined;
  let endpoint: HttpEndpoint | undefined;
  let metrics = options.metrics;
  let giveUp!: (code: number) => void;
  const gaveUp = new Promise<number>((resolve) => (giveUp = resolve));
  let received = 0;
  let firstAt = 0;
  /** A stop signal that came before the host existed (while the HTTP endpoint was binding). */
  let earlySignal: NodeJS.Signals | undefined;
  // Installed before anything is awaited: a signal at any moment of the start stops it gracefully.
  const onSignal = (signal: NodeJS.Signals) => {
    if (received > 0 && signal === 'SIGINT' && performance.now() - firstAt < RELAYED_SIGINT_MS) return;
    received += 1;
    if (received === 1) {
      firstAt = performance.now();
      if (host === undefined) {
        earlySignal = signal;
        return;
      }
      logger.info('stop signal received; finishing in-flight batches', { signal, shutdownTimeoutMs: settings.shutdownTimeoutMs });
      void host.stop(signal);
    } else {
      logger.error('second stop signal received; exiting now without waiting for in-flight batches', { signal });
      giveUp(EXIT_FAILED);
    }
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  try {
    await verifyKafkaClient(settings.kafka);
    if (settings.http.port !== 0) {
      metrics ??= createHostMetrics(settings.storage.selectedPipelines, () => host?.progress() ?? []);
      endpoint = await startHttpEndpoint(settings.http, metrics.registry, () => host);
      logger.info('HTTP endpoint listening', { address: settings.http.host, port: endpoint.port, paths: Object.values(HTTP_PATHS) });
    }
    if (earlySignal !== undefined) {
      logger.info('stop signal received while starting; nothing was in flight', { signal: earlySignal });
      return 0;
    }
    host = startHost(settings, { ...options, logger, metrics });
    return await Promise.race([host.done, gaveUp]);
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
    await endpoint?.close();
  }
}
