/**
 * The host's supervisor: its life cycle (Starting, Migrating, Running, Stopping or Failing,
 * Stopped) over one {@link HostPipeline} per selected pipeline, and the handle the HTTP endpoint
 * and `runHost` use. Health (host/health.ts), the lag reader (host/lag-reader.ts) and the status
 * API adapter (host/status-adapter.ts) each live in their own module; this file wires them.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { hostname } from 'node:os';
import { createKafkaClient } from '../kafka/clients.js';
import { memberClientId } from '../kafka/connection.js';
import type { KafkaClient, TopicIdReader } from '../kafka/port.js';
import type { CoreLogger } from '../shared/logger.js';
import { migrationConnection, runMigrations } from '../shared/migrations/index.js';
import type { PipelineName } from '../shared/pipelines.js';
import { errorCode, redactErrorText } from '../shared/redaction.js';
import { TIMED_OUT, within } from '../shared/timeout.js';
import { SERVICE_VERSION } from '../shared/version.js';
import { systemClock } from './clock.js';
import { evaluateLiveness, evaluateReadiness } from './health.js';
import type { HostState, Liveness, Readiness } from './health.js';
import { defaultMaxAgeMs } from '../host-api/heartbeat-files.js';
import { createHostAdmin } from './host-admin.js';
import type { Invoker, RetryRecorder } from './invoker.js';
import { createInvoker } from './invoker.js';
import { readLagInBackground } from './lag-reader.js';
import type { HostMetrics, PipelineMetrics, PipelineView } from './metrics.js';
import { createPauseControl } from './pause-control.js';
import type { PauseControl } from './pause-control.js';
import { HostPipeline } from './pipeline.js';
import type { StopPhase } from './pipeline.js';
import { PipelineFailedError } from './pipeline-failure.js';
import { batchFields } from '../shared/batch-report.js';
import type { HostSettings } from '../config/host-settings.js';
import type { PipelinesTarget } from './status-api.js';
import { createPipelinesApi } from './status-adapter.js';
import { createPipelineConsumer, REBALANCE_MARGIN_MS } from './topic-consumer.js';
import { committedOffsets, groupStartOffsets } from '../kafka/lag.js';
import { loggedError } from '../shared/errors.js';

/** Exit codes: 0 when no pipeline failed and the stop finished in time, else 1. */
const EXIT_OK = 0;
export const EXIT_FAILED = 1;

/** Options of a host; all optional (tests inject their own invokers and logger). */
export interface HostOptions {
  readonly logger?: CoreLogger;
  /** Builds each pipeline's invoker; default: in-process or Lambda, as the settings say. */
  readonly createInvoker?: (pipeline: PipelineName, settings: HostSettings, metrics?: PipelineMetrics, progress?: RetryRecorder) => Invoker;
  /** Where the pipelines count their batches (the HTTP endpoint's `/metrics`); default: nowhere. */
  readonly metrics?: HostMetrics;
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
  /** Checks every pipeline's progress and database (`/readyz`). Never rejects. */
  readiness(): Promise<Readiness>;
  /** `/healthz`: the same rule as `storage-consumer healthcheck` (see {@link Liveness}). */
  liveness(): Liveness;
  /** Every pipeline's progress record and the verdict on it, now (`/metrics`, the status endpoint). */
  progress(): PipelineView[];
  /** The pipeline status and control API (`/pipelines/...`). */
  readonly pipelinesApi: PipelinesTarget;
}

/** The host's own log lines: JSON through Powertools, like the handlers'. */
export function createHostLogger(): CoreLogger {
  return new Logger({ serviceName: 'storage-consumer', persistentKeys: { component: 'host' }, jsonReplacerFn: redactErrorText });
}

/** Why the pause table could not be read, without connection details: an error code, or a timeout. */
function pauseReadProblem(error: unknown): string {
  const problem = errorCode(error);
  // node-postgres' client-side query timeout carries no code (a locked table, a hung server).
  return problem === 'Error' && error instanceof Error && /timeout/i.test(error.message) ? 'no answer within the query timeout' : problem;
}

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

  let pauseControl: PauseControl | undefined;
  let kafka: KafkaClient | undefined;
  /** Reads the pipelines' topic ids (host/topic-incarnation.ts); made with the Kafka client. */
  let topicIds: TopicIdReader | undefined;
  const admin = createHostAdmin(
    () => kafka,
    () => state,
  );
  // kafkajs gives a JoinGroup up after the rebalance timeout plus 5 s (its network delay).
  const bounds = { ...settings.progress, rebalanceTimeoutMs: settings.maxPollIntervalMs + REBALANCE_MARGIN_MS + 5_000 };
  const heartbeatMaxAgeMs = defaultMaxAgeMs(settings.heartbeat.intervalMs, settings.pollTimeoutMs);
  const pipelines = new Map<PipelineName, HostPipeline>(
    settings.storage.selectedPipelines.map((name) => [
      name,
      new HostPipeline({
        settings: settings.storage.pipelines[name],
        bounds,
        heartbeat: settings.heartbeat,
        attemptBudgetMs: settings.maxPollIntervalMs,
        logger,
        onFailure,
      }),
    ]),
  );
  const all = () => [...pipelines.values()];

  /** Builds every pipeline's invoker and consumer, reads the pause state, then joins the groups. */
  const consume = async (): Promise<'started' | 'ended'> => {
    const client = createKafkaClient(settings.kafka, { logger, clientId: memberClientId(settings.kafka.clientId) });
    kafka = client;
    topicIds = client.topicIds();
    for (const pipeline of all()) {
      const metrics = options.metrics?.pipeline(pipeline.name);
      const invoker = makeInvoker(pipeline.name, settings, metrics, pipeline.progress);
      pipeline.invoker = invoker;
      pipeline.consumer = createPipelineConsumer({
        pipeline: pipeline.settings,
        settings,
        consumers: (consumerOptions) => client.consumer(consumerOptions),
        invoker,
        logger,
        onFailure,
        metrics,
        progress: pipeline.progress,
        readCommitted: async () => committedOffsets(await admin.connected(), pipeline.settings.group, pipeline.settings.topic),
        topicIds,
        readStartOffsets: async () => groupStartOffsets(await admin.connected(), pipeline.settings.group, pipeline.settings.topic),
      });
    }
    // The pause state is read before any consumer joins: a paused pipeline stays paused across
    // restarts. A consumer fetches nothing until its pause state was read once: while the
    // table cannot be read, the pipeline waits (STARTING, then the fetch bounds).
    pauseControl = createPauseControl({
      settings,
      logger,
      apply: (name, pause) => pipelines.get(name)?.consumer?.setPaused(pause),
      onReadFailed: (error) => {
        for (const pipeline of all()) pipeline.progress.pauseUnread(`cannot read pipeline_pauses: ${pauseReadProblem(error)}`);
      },
    });
    await pauseControl.refresh();
    pauseControl.start();
    // A first batch should not pay connection set-up (network-metrics: a user is waiting).
    // A database that is down now is the batches' business: they retry and redeliver.
    await Promise.all(
      all().map((pipeline) =>
        pipeline.invoker?.warm?.().catch((error: unknown) =>
          logger.warn('could not open a database connection at start; the first batch will retry', {
            pipeline: pipeline.name,
            ...loggedError(error),
          }),
        ),
      ),
    );
    const started = Promise.all(all().map((pipeline) => pipeline.consumer?.start())).then(() => 'started' as const);
    const first = await Promise.race([started, stopRequested, failed]);
    return first === 'started' ? 'started' : 'ended';
  };

  /** Stops every consumer within the shutdown timeout, then closes what the host opened; the exit code. */
  const shutDown = async (): Promise<number> => {
    const outcome = await within(Promise.allSettled(all().map((pipeline) => pipeline.stop())), settings.shutdownTimeoutMs);
    if (outcome === TIMED_OUT) {
      const inPhase = (phase: StopPhase) => all().flatMap(({ name, stopPhase }) => (stopPhase === phase ? [name] : []));
      const writing = inPhase('writing');
      logger.error(
        writing.length > 0
          ? 'shutdown timed out: in-flight batches were not committed and will be redelivered'
          : 'shutdown timed out leaving the consumer group: the writes in flight finished; ' +
              "the group's coordinator drops this member after its session timeout",
        { shutdownTimeoutMs: settings.shutdownTimeoutMs, writing, leaving: inPhase('leaving') },
      );
    } else {
      await Promise.allSettled(all().map((pipeline) => pipeline.invoker?.close()));
    }
    await pauseControl?.close();
    await admin.close();
    await topicIds?.close();
    for (const pipeline of all()) pipeline.end(failure !== undefined);
    return failure || outcome === TIMED_OUT ? EXIT_FAILED : EXIT_OK;
  };

  const life = async (): Promise<number> => {
    let stopReason: string | undefined;
    void stopRequested.then((reason) => (stopReason = reason));
    try {
      if (settings.migrateOnStart) {
        enter('Migrating');
        const report = await runMigrations({ ...migrationConnection(settings.storage.database), logger });
        logger.info('migrations applied', { ...report });
      }
      if (stopReason === undefined && (await consume()) === 'started') {
        enter('Running', {
          pipelines: all().map(({ settings: { name, topic, group } }) => ({ name, topic, group })),
          invokeMode: settings.invoke.mode,
        });
        reportRunning(true);
        const stopReading = readLagInBackground({
          admin,
          pipelines: all(),
          intervalMs: bounds.lagIntervalMs,
          timeoutMs: bounds.lagTimeoutMs,
          logger,
        });
        await Promise.race([stopRequested, failed]);
        stopReading();
      }
    } catch (error) {
      onFailure(error instanceof Error ? error : new Error(String(error)));
    }
    reportRunning(false);

    if (failure) {
      const batch = failure instanceof PipelineFailedError && failure.batch ? batchFields(failure.batch) : {};
      enter('Failing', { error: failure.message, ...batch, cause: failure.cause === undefined ? undefined : String(failure.cause) });
    } else enter('Stopping', { reason: stopReason });
    const exitCode = await shutDown();
    state = 'Stopped';
    logger.info('Stopped', { state: 'Stopped', exitCode });
    return exitCode;
  };

  const done = life().catch((error: unknown) => {
    logger.error('the host itself failed', { ...loggedError(error) });
    return EXIT_FAILED;
  });
  const progress = (): PipelineView[] => {
    const now = systemClock.monotonic();
    return all().map((pipeline) => pipeline.view(now));
  };

  return {
    state: () => state,
    pipelinesApi: createPipelinesApi({
      pipelines,
      hostId: `${hostname()}:${process.pid}`,
      admin,
      pauseControl: () => pauseControl,
      state: () => state,
    }),
    readiness: () => evaluateReadiness({ settings, state: () => state, pipelines }),
    liveness: () => evaluateLiveness(state, progress(), heartbeatMaxAgeMs, systemClock.monotonic()),
    progress,
    running,
    stop(reason = 'requested') {
      requestStop(reason);
      return done;
    },
    done,
  };
}
