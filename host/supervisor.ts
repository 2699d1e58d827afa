import { Logger } from '@aws-lambda-powertools/logger';
import { logLevel } from 'kafkajs';
import type { LogEntry } from 'kafkajs';
import type { CoreLogger } from '../shared/db.js';
import { migrationConnection, runMigrations } from '../shared/migrations/index.js';
import type { PipelineName } from '../shared/pipeline-names.js';
import { createHeartbeat } from './heartbeat.js';
import { createKafka } from './kafka-connection.js';
import type { KafkaClientOptions } from './kafka-connection.js';
import type { Invoker } from './invoker.js';
import { createInvoker } from './invoker.js';
import type { PipelineConsumer } from './pipeline-consumer.js';
import { createPipelineConsumer } from './pipeline-consumer.js';
import type { HostSettings } from './settings.js';

/** The host's life cycle (docs/design.md section 9). */
export const HOST_STATES = ['Starting', 'Migrating', 'Running', 'Stopping', 'Failing', 'Stopped'] as const;
export type HostState = (typeof HOST_STATES)[number];

/** Exit codes: 0 when no pipeline failed and the stop finished in time, else 1. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;

/** Options of a host; all optional (tests inject their own invokers and logger). */
export interface HostOptions {
  readonly logger?: CoreLogger;
  /** Builds each pipeline's invoker; default: in-process or Lambda, as the settings say. */
  readonly createInvoker?: (pipeline: PipelineName, settings: HostSettings) => Invoker;
}

/** A running host. */
export interface HostHandle {
  /** The current life-cycle state. */
  state(): HostState;
  /** Resolves true once every pipeline consumes, false if the host stopped before. */
  readonly running: Promise<boolean>;
  /** Asks the host to stop (idempotent); resolves with the exit code, like `done`. */
  stop(reason?: string): Promise<number>;
  /** Resolves with the exit code once the host has stopped. Never rejects. */
  readonly done: Promise<number>;
}

/** The host's own log lines: JSON through Powertools, like the handlers'. */
export function createHostLogger(): CoreLogger {
  return new Logger({ serviceName: 'storage-consumer', persistentKeys: { component: 'host' } });
}

function kafkaLogging(logger: CoreLogger): KafkaClientOptions {
  return {
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ namespace, level, log }: LogEntry) => {
        const { message, timestamp: _timestamp, logger: _logger, ...extra } = log;
        // kafkajs logs every error response of a connection as an ERROR, retriable ones
        // included (a coordinator still loading); the client retries them, so they warn.
        const error = level <= logLevel.ERROR && namespace !== 'Connection';
        (error ? logger.error : logger.warn).call(logger, `kafkajs: ${message}`, { namespace, ...extra });
      },
  };
}

/** Resolves after `ms` without keeping the process alive. */
const after = (ms: number) =>
  new Promise<'timeout'>((resolve) => {
    setTimeout(() => resolve('timeout'), ms).unref();
  });

/**
 * Starts the host: Migrating (when `migrateOnStart`) -> Running, one kafkajs consumer per
 * selected pipeline -> Stopping (on `stop()`) or Failing (a pipeline failed: the others are
 * asked to stop; in-flight batches finish and commit) -> Stopped. All or nothing: the host
 * never runs with a pipeline missing. `done` resolves 0 after a clean stop, 1 when a pipeline
 * failed or the stop outlasted the shutdown timeout. Installs no signal handlers (see `runHost`).
 */
export function startHost(settings: HostSettings, options: HostOptions = {}): HostHandle {
  const logger = options.logger ?? createHostLogger();
  const makeInvoker = options.createInvoker ?? createInvoker;
  let state: HostState = 'Starting';
  let failure: Error | undefined;
  let requestStop!: (reason: string) => void;
  const stopRequested = new Promise<string>((resolve) => (requestStop = resolve));
  let reportRunning!: (running: boolean) => void;
  const running = new Promise<boolean>((resolve) => (reportRunning = resolve));
  let reportFailure!: (error: Error) => void;
  const failed = new Promise<Error>((resolve) => (reportFailure = resolve));
  const onFailure = (error: Error) => {
    failure ??= error;
    reportFailure(error);
  };
  const enter = (next: HostState, extra: Record<string, unknown> = {}) => {
    state = next;
    (next === 'Failing' ? logger.error : logger.info).call(logger, next, { state: next, ...extra });
  };

  const invokers: Invoker[] = [];
  const consumers: PipelineConsumer[] = [];

  const life = async (): Promise<number> => {
    const pipelines = settings.storage.selectedPipelines;
    let stopReason: string | undefined;
    void stopRequested.then((reason) => (stopReason = reason));
    try {
      if (settings.migrateOnStart) {
        enter('Migrating');
        const report = await runMigrations({ ...migrationConnection(settings.storage.database), logger });
        logger.info('migrations applied', { ...report });
      }
      if (stopReason === undefined) {
        const kafka = createKafka(settings.kafka, kafkaLogging(logger));
        for (const name of pipelines) {
          const invoker = makeInvoker(name, settings);
          invokers.push(invoker);
          consumers.push(
            createPipelineConsumer({
              pipeline: settings.storage.pipelines[name],
              settings,
              kafka,
              invoker,
              logger,
              heartbeat: createHeartbeat({ dir: settings.heartbeat.dir, pipeline: name, intervalMs: settings.heartbeat.intervalMs, logger }),
              onFailure,
            }),
          );
        }
        // A first batch should not pay connection set-up (network-metrics: a user is waiting).
        // A database that is down now is the batches' business: they retry and redeliver.
        await Promise.all(
          invokers.map((invoker, index) =>
            invoker.warm?.().catch((error: unknown) =>
              logger.warn('could not open a database connection at start; the first batch will retry', {
                pipeline: pipelines[index],
                error: String(error),
              }),
            ),
          ),
        );
        const started = Promise.all(consumers.map((consumer) => consumer.start())).then(() => 'started' as const);
        const first = await Promise.race([started, stopRequested, failed]);
        if (first === 'started') {
          enter('Running', {
            pipelines: pipelines.map((name) => ({ name, topic: settings.storage.pipelines[name].topic, group: settings.storage.pipelines[name].group })),
            invokeMode: settings.invoke.mode,
          });
          reportRunning(true);
          await Promise.race([stopRequested, failed]);
        }
      }
    } catch (error) {
      onFailure(error instanceof Error ? error : new Error(String(error)));
    }
    reportRunning(false);

    if (failure) enter('Failing', { error: failure.message, cause: failure.cause === undefined ? undefined : String(failure.cause) });
    else enter('Stopping', { reason: stopReason });
    const stopped = Promise.allSettled(consumers.map((consumer) => consumer.stop())).then(() => 'stopped' as const);
    const outcome = await Promise.race([stopped, after(settings.shutdownTimeoutMs)]);
    if (outcome === 'timeout') {
      logger.error('shutdown timed out: in-flight batches were not committed and will be redelivered', {
        shutdownTimeoutMs: settings.shutdownTimeoutMs,
      });
    } else {
      await Promise.allSettled(invokers.map((invoker) => invoker.close()));
    }
    const exitCode = failure || outcome === 'timeout' ? EXIT_FAILED : EXIT_OK;
    state = 'Stopped';
    logger.info('Stopped', { state: 'Stopped', exitCode });
    return exitCode;
  };

  const done = life().catch((error: unknown) => {
    logger.error('the host itself failed', { error: String(error) });
    return EXIT_FAILED;
  });
  return {
    state: () => state,
    running,
    stop(reason = 'requested') {
      requestStop(reason);
      return done;
    },
    done,
  };
}
