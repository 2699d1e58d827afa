import { Logger } from '@aws-lambda-powertools/logger';
import { logLevel } from 'kafkajs';
import type { Admin, Kafka, LogEntry } from 'kafkajs';
import { hostname } from 'node:os';
import { groupPosition } from '../cli/kafka.js';
import type { GroupPosition } from '../cli/kafka.js';
import type { CoreLogger } from '../shared/logger.js';
import { migrationConnection, runMigrations } from '../shared/migrations/index.js';
import type { PipelineName } from '../shared/pipeline-names.js';
import { createHeartbeat } from './heartbeat.js';
import { createKafka } from './kafka-connection.js';
import type { KafkaClientOptions } from './kafka-connection.js';
import type { Invoker } from './invoker.js';
import { createInvoker } from './invoker.js';
import type { HostMetrics, PartitionLag, PipelineMetrics } from './metrics.js';
import { createPauseControl } from './pause-control.js';
import type { PauseControl } from './pause-control.js';
import type { PipelineConsumer } from './pipeline-consumer.js';
import { createPipelineConsumer } from './pipeline-consumer.js';
import { buildPipelineStatus } from './pipeline-status.js';
import type { PipelinesTarget } from './pipelines-api.js';
import type { HostSettings } from './settings.js';
import { SERVICE_VERSION } from '../shared/version.js';

/** The host's life cycle (docs/design.md section 9). */
export const HOST_STATES = ['Starting', 'Migrating', 'Running', 'Stopping', 'Failing', 'Stopped'] as const;
export type HostState = (typeof HOST_STATES)[number];

/** Exit codes: 0 when no pipeline failed and the stop finished in time, else 1. */
const EXIT_OK = 0;
export const EXIT_FAILED = 1;

/** Options of a host; all optional (tests inject their own invokers and logger). */
export interface HostOptions {
  readonly logger?: CoreLogger;
  /** Builds each pipeline's invoker; default: in-process or Lambda, as the settings say. */
  readonly createInvoker?: (pipeline: PipelineName, settings: HostSettings, metrics?: PipelineMetrics) => Invoker;
  /** Where the pipelines count their batches (the HTTP endpoint's `/metrics`); default: nowhere. */
  readonly metrics?: HostMetrics;
}

/** One pipeline as readiness sees it. */
export interface PipelineReadiness {
  /** The consumer holds its place in its group (joined, not rebalancing). */
  readonly joined: boolean;
  readonly failed: boolean;
  /** `ok`, the error of a database that does not answer, or why it was not checked. */
  readonly database: string;
}

/** The answer of `/readyz`: ready only when every pipeline has joined its group and its database answers. */
export interface Readiness {
  readonly ready: boolean;
  readonly state: HostState;
  readonly pipelines: Readonly<Partial<Record<PipelineName, PipelineReadiness>>>;
  /** What keeps the host from being ready, one line each; empty when ready. */
  readonly missing: readonly string[];
}

/** The status endpoint waits this long for the broker's view of a group, then answers without it. */
const STATUS_KAFKA_TIMEOUT_MS = 5_000;

/** A readiness database check never waits longer than this. */
const READINESS_DATABASE_TIMEOUT_MS = 3_000;

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
  /** Checks every pipeline's group membership and database (`/readyz`). Never rejects. */
  readiness(): Promise<Readiness>;
  /** Each pipeline's lag per partition, read from the broker (committed offset to end). */
  lag(): Promise<PartitionLag[]>;
  /** The pipeline status and control API (`/pipelines/...`). */
  readonly pipelinesApi: PipelinesTarget;
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
    (next === 'Failing' ? logger.error : logger.info).call(logger, next, { state: next, version: SERVICE_VERSION, ...extra });
  };

  const invokers: Invoker[] = [];
  const consumers: PipelineConsumer[] = [];
  let pauseControl: PauseControl | undefined;
  let kafka: Kafka | undefined;
  let lagAdmin: Promise<Admin> | undefined;
  /** Set once the host lets go of its lag admin: a scrape after that must not connect a new one. */
  let lagClosed = false;

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
        kafka = createKafka(settings.kafka, kafkaLogging(logger));
        for (const name of pipelines) {
          const pipelineMetrics = options.metrics?.pipeline(name);
          const invoker = makeInvoker(name, settings, pipelineMetrics);
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
              metrics: pipelineMetrics,
            }),
          );
        }
        // The pause state is read before any consumer joins: a paused pipeline stays paused across restarts.
        pauseControl = createPauseControl({
          settings,
          logger,
          apply: (name, pause) => consumers[pipelines.indexOf(name)]?.setPaused(pause),
        });
        await pauseControl.refresh();
        pauseControl.start();
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
    await pauseControl?.close();
    lagClosed = true;
    const admin = lagAdmin;
    lagAdmin = undefined;
    await admin?.then((connected) => connected.disconnect()).catch(() => undefined);
    const exitCode = failure || outcome === 'timeout' ? EXIT_FAILED : EXIT_OK;
    state = 'Stopped';
    logger.info('Stopped', { state: 'Stopped', exitCode });
    return exitCode;
  };

  const done = life().catch((error: unknown) => {
    logger.error('the host itself failed', { error: String(error) });
    return EXIT_FAILED;
  });
  const pingDatabase = async (invoker: Invoker | undefined): Promise<string> => {
    if (invoker?.ping === undefined) return settings.invoke.mode === 'lambda' ? 'not checked (the functions hold the database)' : 'not started';
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${READINESS_DATABASE_TIMEOUT_MS} ms`)), READINESS_DATABASE_TIMEOUT_MS);
    });
    try {
      await Promise.race([invoker.ping(), timeout]);
      return 'ok';
    } catch (error) {
      return error instanceof Error ? error.message || error.name : String(error);
    } finally {
      clearTimeout(timer);
    }
  };

  const readiness = async (): Promise<Readiness> => {
    const names = settings.storage.selectedPipelines;
    // Only a running host's pools are pinged: a stopping or stopped invoker would open a new pool
    // that nothing closes, and the state alone already makes such a host not ready.
    const running = state === 'Running';
    const databases = await Promise.all(
      names.map((_, index) => (running ? pingDatabase(invokers[index]) : Promise.resolve(`not checked (host ${state})`))),
    );
    const pipelines: Partial<Record<PipelineName, PipelineReadiness>> = {};
    const missing: string[] = [];
    if (state !== 'Running') missing.push(`host: ${state}`);
    names.forEach((name, index) => {
      const status = consumers[index]?.status() ?? { joined: false, failed: false };
      const database = databases[index] as string;
      pipelines[name] = { ...status, database };
      if (status.failed) missing.push(`${name}: failed`);
      else if (!status.joined) missing.push(`${name}: not in its consumer group ${settings.storage.pipelines[name].group}`);
      if (running && database !== 'ok' && settings.invoke.mode !== 'lambda') missing.push(`${name}: database does not answer (${database})`);
    });
    return { ready: missing.length === 0, state, pipelines, missing };
  };

  const connectedAdmin = async (): Promise<Admin> => {
    if (kafka === undefined || lagClosed) throw new Error(`the host is ${state}`);
    const client = kafka;
    lagAdmin ??= (async () => {
      const admin = client.admin();
      await admin.connect();
      return admin;
    })();
    return lagAdmin.catch((error: unknown) => {
      lagAdmin = undefined;
      throw error;
    });
  };

  const lag = async (): Promise<PartitionLag[]> => {
    if (kafka === undefined || lagClosed) return [];
    const admin = await connectedAdmin();
    const positions = await Promise.all(settings.storage.selectedPipelines.map((name) => groupPosition(admin, settings.storage.pipelines[name])));
    return positions.flatMap((position, index) =>
      position.partitions.map(({ partition, lag: value }) => ({
        pipeline: settings.storage.selectedPipelines[index] as PipelineName,
        partition,
        lag: Number(value),
      })),
    );
  };

  const hostId = `${hostname()}:${process.pid}`;
  const consumerOf = (name: PipelineName) => consumers[settings.storage.selectedPipelines.indexOf(name)];
  const pipelineState = (name: PipelineName): string => {
    const status = consumerOf(name)?.status();
    if (status === undefined) return 'STARTING';
    if (status.failed) return 'FAILED';
    if (status.paused) return 'PAUSED';
    return status.joined ? 'RUNNING' : 'STARTING';
  };
  const groupView = async (name: PipelineName): Promise<GroupPosition | { error: string }> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the broker did not answer within ${STATUS_KAFKA_TIMEOUT_MS} ms`)), STATUS_KAFKA_TIMEOUT_MS);
      });
      return await Promise.race([connectedAdmin().then((admin) => groupPosition(admin, settings.storage.pipelines[name])), timeout]);
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    } finally {
      clearTimeout(timer);
    }
  };
  const pipelinesApi: PipelinesTarget = {
    pipelines: settings.storage.selectedPipelines,
    summaries: () => settings.storage.selectedPipelines.map((name) => ({ pipeline: name, state: pipelineState(name), paused: pauseControl?.pauseOf(name) !== undefined })),
    async status(name) {
      const { topic, group } = settings.storage.pipelines[name];
      return buildPipelineStatus({
        // No progress record on this host yet (issue 18): batch and error fields are left out, not guessed.
        progress: undefined,
        pipeline: name,
        topic,
        groupId: group,
        state: pipelineState(name),
        hostId,
        memberId: consumerOf(name)?.memberId(),
        pause: pauseControl?.pauseOf(name),
        pauseRead: pauseControl?.readState() ?? { readAt: undefined, error: 'not read yet' },
        group: await groupView(name),
      });
    },
    async control(name, paused, by, reason) {
      if (pauseControl === undefined) throw new Error(`the host is ${state}`);
      return pauseControl.change({ pipeline: name, paused, by, reason, via: 'http', details: { host: hostId } });
    },
  };

  return {
    state: () => state,
    pipelinesApi,
    readiness,
    lag,
    running,
    stop(reason = 'requested') {
      requestStop(reason);
      return done;
    },
    done,
  };
}
