import { Logger } from '@aws-lambda-powertools/logger';
import type { Admin, Kafka } from 'kafkajs';
import { hostname } from 'node:os';
import type { CoreLogger } from '../shared/logger.js';
import { migrationConnection, runMigrations } from '../shared/migrations/index.js';
import type { PipelineName } from '../shared/pipelines.js';
import { systemClock } from './clock.js';
import { createHeartbeat, defaultMaxAgeMs } from './heartbeat.js';
import { createKafka, memberClientId } from '../kafka/connection.js';
import { kafkaLogging } from '../kafka/kafkajs/log-adapter.js';
import type { Invoker, RetryRecorder } from './invoker.js';
import { createInvoker } from './invoker.js';
import { groupPosition } from '../kafka/lag.js';
import type { GroupPosition } from '../kafka/lag.js';
import type { HostMetrics, PipelineMetrics, PipelineView } from './metrics.js';
import { createPauseControl } from './pause-control.js';
import type { PauseControl } from './pause-control.js';
import type { PipelineConsumer } from './topic-consumer.js';
import { createPipelineConsumer, REBALANCE_MARGIN_MS } from './topic-consumer.js';
import { PipelineFailedError } from './pipeline-failure.js';
import type { PipelineState } from './progress.js';
import { batchFields, evaluateProgress, PipelineProgress } from './progress.js';
import { watchProgress } from './progress-watch.js';
import { buildPipelineStatus } from './status-report.js';
import type { PipelinesTarget } from './status-api.js';
import { databaseProblem, evaluateReadiness } from './readiness.js';
import type { Readiness } from './readiness.js';
import type { HostSettings } from './settings.js';
import { SERVICE_VERSION } from '../shared/version.js';
import { redactErrorText } from '../shared/redaction.js';

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
  readonly createInvoker?: (pipeline: PipelineName, settings: HostSettings, metrics?: PipelineMetrics, progress?: RetryRecorder) => Invoker;
  /** Where the pipelines count their batches (the HTTP endpoint's `/metrics`); default: nowhere. */
  readonly metrics?: HostMetrics;
}

/** The status endpoint waits this long for the broker's view of a group, then answers without it. */
const STATUS_KAFKA_TIMEOUT_MS = 5_000;

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

/**
 * The answer of `/healthz`. A pipeline is alive while its heartbeat file was written within the
 * health check's default limit (3 heartbeat intervals plus one poll timeout); the file is written
 * while the pipeline has not failed or stopped. So `/healthz` fails exactly when `storage-consumer
 * healthcheck` does (one rule, two transports), and also once the host is Failing or Stopped.
 */
export interface Liveness {
  readonly alive: boolean;
  readonly state: HostState;
  readonly maxAgeMs: number;
  /** Per pipeline: its state and the age of its heartbeat (ms; `null`: never written). */
  readonly pipelines: Readonly<Partial<Record<PipelineName, { readonly state: PipelineState; readonly heartbeatAgeMs: number | null }>>>;
  /** Why not alive, one line each; empty when alive. */
  readonly missing: readonly string[];
}

/** The host's own log lines: JSON through Powertools, like the handlers'. */
export function createHostLogger(): CoreLogger {
  return new Logger({ serviceName: 'storage-consumer', persistentKeys: { component: 'host' }, jsonReplacerFn: redactErrorText });
}

/** Why the pause table could not be read, without connection details: an error code, or a timeout. */
function pauseReadProblem(error: unknown): string {
  const problem = databaseProblem(error);
  // node-postgres' client-side query timeout carries no code (a locked table, a hung server).
  return problem === 'Error' && error instanceof Error && /timeout/i.test(error.message) ? 'no answer within the query timeout' : problem;
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
  /** Set once the host lets go of its lag admin: a reading after that must not connect a new one. */
  let lagClosed = false;

  // The progress records, their heartbeat files and their watches exist from the start, so the
  // health check and `/healthz` agree from the first moment (a long migration included).
  // kafkajs gives a JoinGroup up after the rebalance timeout plus 5 s (its network delay).
  const bounds = { ...settings.progress, rebalanceTimeoutMs: settings.maxPollIntervalMs + REBALANCE_MARGIN_MS + 5_000 };
  const records = settings.storage.selectedPipelines.map(
    (name) =>
      new PipelineProgress({
        pipeline: name,
        topic: settings.storage.pipelines[name].topic,
        group: settings.storage.pipelines[name].group,
      }),
  );
  const heartbeatMaxAgeMs = defaultMaxAgeMs(settings.heartbeat.intervalMs, settings.pollTimeoutMs);
  const unwatch = records.map((progress, index) =>
    watchProgress({
      progress,
      bounds,
      logger,
      attemptBudgetMs: settings.maxPollIntervalMs,
      heartbeat: createHeartbeat({
        dir: settings.heartbeat.dir,
        pipeline: progress.pipeline,
        intervalMs: settings.heartbeat.intervalMs,
        logger,
        now: () => systemClock.monotonic(),
        onWritten: (at) => progress.beat(at),
      }),
      onFailed: (reason) => {
        const consumer = consumers[index];
        if (consumer) consumer.fail(reason);
        else onFailure(new PipelineFailedError(progress.pipeline, reason));
      },
    }),
  );

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
        kafka = createKafka(settings.kafka, { ...kafkaLogging(logger), clientId: memberClientId(settings.kafka.clientId) });
        for (const name of pipelines) {
          const pipelineMetrics = options.metrics?.pipeline(name);
          const invoker = makeInvoker(name, settings, pipelineMetrics, records[consumers.length]);
          invokers.push(invoker);
          consumers.push(
            createPipelineConsumer({
              pipeline: settings.storage.pipelines[name],
              settings,
              kafka,
              invoker,
              logger,
              onFailure,
              metrics: pipelineMetrics,
              progress: records[consumers.length] as PipelineProgress,
            }),
          );
        }
        // The pause state is read before any consumer joins: a paused pipeline stays paused across
        // restarts. A consumer fetches nothing until its pause state was read once: while the
        // table cannot be read, the pipeline waits (STARTING, then the fetch bounds).
        pauseControl = createPauseControl({
          settings,
          logger,
          apply: (name, pause) => consumers[pipelines.indexOf(name)]?.setPaused(pause),
          onReadFailed: (error) => {
            for (const record of records) record.pauseUnread(`cannot read pipeline_pauses: ${pauseReadProblem(error)}`);
          },
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
            pipelines: pipelines.map((name) => ({
              name,
              topic: settings.storage.pipelines[name].topic,
              group: settings.storage.pipelines[name].group,
            })),
            invokeMode: settings.invoke.mode,
          });
          reportRunning(true);
          const stopReading = readLagInBackground();
          await Promise.race([stopRequested, failed]);
          stopReading();
        }
      }
    } catch (error) {
      onFailure(error instanceof Error ? error : new Error(String(error)));
    }
    reportRunning(false);

    if (failure) {
      const batch = failure instanceof PipelineFailedError && failure.batch ? batchFields(failure.batch) : {};
      enter('Failing', { error: failure.message, ...batch, cause: failure.cause === undefined ? undefined : String(failure.cause) });
    } else enter('Stopping', { reason: stopReason });
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
    for (const [index, progress] of records.entries()) {
      if (!failure) progress.stopped();
      unwatch[index]?.();
    }
    state = 'Stopped';
    logger.info('Stopped', { state: 'Stopped', exitCode });
    return exitCode;
  };

  const done = life().catch((error: unknown) => {
    logger.error('the host itself failed', { error: String(error) });
    return EXIT_FAILED;
  });
  const readiness = (): Promise<Readiness> => evaluateReadiness({ settings, state: () => state, invokers, progress });

  const progress = (): PipelineView[] => {
    const now = systemClock.monotonic();
    return records.map((record) => {
      const snapshot = record.snapshot();
      return { snapshot, verdict: evaluateProgress(snapshot, bounds, now) };
    });
  };

  const liveness = (): Liveness => {
    const now = systemClock.monotonic();
    const pipelines: Partial<Record<PipelineName, { state: PipelineState; heartbeatAgeMs: number | null }>> = {};
    const missing: string[] = [];
    if (state === 'Failing' || state === 'Stopped') missing.push(`host: ${state}`);
    for (const { snapshot, verdict } of progress()) {
      const age = snapshot.lastBeatAt === undefined ? null : now - snapshot.lastBeatAt;
      pipelines[snapshot.pipeline] = { state: verdict.state, heartbeatAgeMs: age };
      if (age === null) missing.push(`${snapshot.pipeline}: no heartbeat written yet`);
      else if (age > heartbeatMaxAgeMs)
        missing.push(`${snapshot.pipeline}: heartbeat ${age} ms old (limit ${heartbeatMaxAgeMs} ms; ${verdict.state})`);
    }
    return { alive: missing.length === 0, state, maxAgeMs: heartbeatMaxAgeMs, pipelines, missing };
  };

  /** One lag reading of every pipeline's group, from the broker (committed offset to end). */
  /** The host's one admin client (lag readings, the status endpoint), connected on first use. */
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

  const readLag = async (): Promise<void> => {
    if (kafka === undefined || lagClosed) return;
    const admin = await connectedAdmin();
    const startedAt = systemClock.monotonic();
    const positions = await Promise.all(
      settings.storage.selectedPipelines.map((name) => groupPosition(admin, settings.storage.pipelines[name])),
    );
    if (lagClosed) return;
    positions.forEach((position, index) =>
      records[index]?.lagRead(
        position.partitions.map(({ partition, lag: value }) => ({ partition, lag: Number(value) })),
        startedAt,
      ),
    );
  };

  /**
   * Reads the lag every `STORAGE_LAG_INTERVAL_MS`, one reading at a time (a reading that hangs on a
   * frozen broker is not joined by another), each given up after `STORAGE_LAG_TIMEOUT_MS`: scrapes
   * answer from the last reading, and its age is a metric. Returns the function that stops it.
   */
  const readLagInBackground = (): (() => void) => {
    let reading: Promise<void> | undefined;
    let warned = false;
    const tick = () => {
      if (reading !== undefined || lagClosed) return;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${bounds.lagTimeoutMs} ms (STORAGE_LAG_TIMEOUT_MS)`)),
          bounds.lagTimeoutMs,
        );
        timer.unref();
      });
      const attempt = readLag();
      void Promise.race([attempt, timeout])
        .then(() => (warned = false))
        .catch((error: unknown) => {
          if (!warned)
            logger.warn('cannot read the consumer lag from the broker; /metrics shows the last reading and its age', {
              error: String(error),
            });
          warned = true;
        })
        .finally(() => clearTimeout(timer));
      reading = attempt.catch(() => undefined).finally(() => (reading = undefined));
    };
    tick();
    const interval = setInterval(tick, bounds.lagIntervalMs);
    interval.unref();
    return () => clearInterval(interval);
  };

  const hostId = `${hostname()}:${process.pid}`;
  const indexOf = (name: PipelineName) => settings.storage.selectedPipelines.indexOf(name);
  /** The group as the broker describes it now, or why not (bounded: the status never hangs on a frozen broker). */
  const groupView = async (name: PipelineName): Promise<GroupPosition | { error: string }> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the broker did not answer within ${STATUS_KAFKA_TIMEOUT_MS} ms`)),
          STATUS_KAFKA_TIMEOUT_MS,
        );
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
    summaries: () =>
      progress().map(({ snapshot, verdict }) => ({ pipeline: snapshot.pipeline, state: verdict.state, paused: snapshot.paused })),
    async status(name) {
      const group = await groupView(name);
      // Read after the broker answered: the record as it is when the answer leaves.
      const view = progress()[indexOf(name)] as PipelineView;
      return buildPipelineStatus({
        progress: view.snapshot,
        pipeline: name,
        topic: settings.storage.pipelines[name].topic,
        groupId: settings.storage.pipelines[name].group,
        state: view.verdict.state,
        hostId,
        memberId: consumers[indexOf(name)]?.memberId(),
        pause: pauseControl?.pauseOf(name),
        pauseRead: pauseControl?.readState() ?? { readAt: undefined, error: 'not read yet' },
        group,
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
    liveness,
    progress,
    running,
    stop(reason = 'requested') {
      requestStop(reason);
      return done;
    },
    done,
  };
}
