/**
 * The host's Prometheus metrics (`/metrics`): per pipeline batches, records, retries, lag and its
 * age, progress states, read from the progress records at scrape time.
 */
import { readFileSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { BatchReport } from '../shared/batch-report.js';
import type { PipelineName } from '../shared/pipelines.js';
import { systemClock } from './clock.js';
import type { ProgressSnapshot, ProgressVerdict } from './progress.js';
import { PIPELINE_STATES } from './progress.js';
import type { ProcessStalls } from './process-stalls.js';
import { processStallsOf } from './process-stalls.js';

/**
 * The host's Prometheus metric names (an interface: dashboards and alerts use them). Labels
 * carry only pipeline names, outcomes and partition numbers: never message content, never
 * credentials.
 */
export const HOST_METRIC_NAMES = {
  records: 'storage_consumer_records_total',
  batches: 'storage_consumer_batches_total',
  batchDuration: 'storage_consumer_batch_duration_seconds',
  retries: 'storage_consumer_retries_total',
  commitFailures: 'storage_consumer_commit_failures_total',
  commitsRefused: 'storage_consumer_commits_refused_total',
  consumerLag: 'storage_consumer_lag_messages',
  pipelineUp: 'storage_consumer_pipeline_up',
  lagAge: 'storage_consumer_lag_age_seconds',
  lastStored: 'storage_consumer_last_stored_timestamp_seconds',
  inFlightAge: 'storage_consumer_inflight_batch_age_seconds',
  consumerCrashes: 'storage_consumer_consumer_crashes_total',
  recordDelay: 'storage_consumer_record_delay_seconds',
  pipelineState: 'storage_consumer_pipeline_state',
  pipelinePaused: 'storage_consumer_pipeline_paused',
  pausedSince: 'storage_consumer_pipeline_paused_since_timestamp_seconds',
  buildInfo: 'storage_consumer_build_info',
} as const;

/**
 * The names the two metrics had before they followed Prometheus' conventions (a Unix time ends in
 * `_timestamp_seconds`; a name does not repeat a word): still exported with the same values for
 * one release, so dashboards and alerts built on them keep working while they move; removed in
 * the next. docs/operations.md marks them deprecated.
 */
const DEPRECATED_HOST_METRIC_NAMES = {
  pausedSince: 'storage_consumer_pipeline_paused_since_seconds',
  consumerLag: 'storage_consumer_consumer_lag',
} as const satisfies Partial<Record<keyof typeof HOST_METRIC_NAMES, string>>;

/** A metric's help under its deprecated name. */
const deprecatedHelp = (current: string, help: string) => `DEPRECATED (removed in the next release): use ${current}. ${help}`;

/** The metrics of the host process itself, without a `pipeline` label: its own stalls (host/process-stalls.ts). */
export const PROCESS_STALL_METRIC_NAMES = {
  stalls: 'storage_consumer_process_stalls_total',
  stalledSeconds: 'storage_consumer_process_stalled_seconds_total',
} as const;

/** Values of the `outcome` label of `storage_consumer_records_total`. */
export const RECORD_OUTCOMES = ['inserted', 'updated', 'skipped', 'deduplicated', 'dead_lettered'] as const;
export type RecordOutcome = (typeof RECORD_OUTCOMES)[number];

/** Values of the `result` label of `storage_consumer_batches_total`. */
export const BATCH_RESULTS = ['stored', 'failed'] as const;
export type BatchResult = (typeof BATCH_RESULTS)[number];

/** prom-client default metrics that break Prometheus' naming rules (see createHostMetrics). */
const PROMTOOL_REFUSED_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** Batch duration buckets in seconds: a network-metrics batch in milliseconds up to a worst case with retries. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/**
 * Freshness buckets in seconds, 50 ms to 1 h. Every freshness objective of shared/pipelines.ts
 * is one of them (a unit test checks), so "p99 over the objective" is exact, not interpolated.
 */
export const RECORD_DELAY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600] as const;

/** One pipeline as a scrape sees it: its progress record and the verdict on it, taken at once. */
export interface PipelineView {
  readonly snapshot: ProgressSnapshot;
  readonly verdict: ProgressVerdict;
}

/**
 * The version the host runs (package.json's), for `storage_consumer_build_info`: found next to
 * the sources (host/) or next to the build (dist/cli/).
 */
export function buildVersion(): string {
  for (const path of ['../package.json', '../../package.json']) {
    try {
      const parsed = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { name?: unknown; version?: unknown };
      if (parsed.name === 'storage-consumer' && typeof parsed.version === 'string') return parsed.version;
    } catch {
      // not here; the next place
    }
  }
  return 'unknown';
}

/** What one pipeline reports into the host's metrics. */
export interface PipelineMetrics {
  /** A batch the handler stored, in-process: its records by outcome, and each record's delay (freshness). */
  recordsStored(report: BatchReport): void;
  /** One transient database retry inside a batch (in-process). */
  retried(): void;
  /** One invocation as the host saw it: stored (offsets advance) or failed (redelivered), and how long it took. */
  batchDone(result: BatchResult, seconds: number): void;
  /** One offset commit that failed. */
  commitFailed(): void;
  /** One offset commit refused before it was sent: it would have moved the committed offset back (a bug of the host). */
  commitRefused(): void;
}

/** The host's metrics registry, one set of series per pipeline. */
export interface HostMetrics {
  readonly registry: Registry;
  pipeline(name: PipelineName): PipelineMetrics;
}

/**
 * Creates the host's registry: the `storage_consumer_*` metrics of {@link HOST_METRIC_NAMES}
 * plus prom-client's default process and event-loop metrics. Every pipeline's series exist from
 * the start, so `rate()` and absent-series alerts work from the first scrape. The gauges of a
 * pipeline's state (up, lag, ages, crashes) are read from `view` at each scrape, synchronously:
 * a scrape never waits for Kafka or PostgreSQL (the lag comes from the host's background
 * reading, see host/supervisor.ts, and its age says how old it is). `now` is the monotonic clock
 * of the records (host/clock.ts): ages are durations. `stalls` are the process's own (the records
 * and watches share them): counted from 0 at the start.
 */
export function createHostMetrics(
  pipelines: readonly PipelineName[],
  view: () => readonly PipelineView[] = () => [],
  now: () => number = systemClock.monotonic,
  stalls: ProcessStalls = processStallsOf(systemClock),
): HostMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // Gauges whose names end in _total, which Prometheus reserves for counters (`promtool check
  // metrics` objects); each is the sum of a per-type series prom-client exports anyway.
  for (const name of PROMTOOL_REFUSED_DEFAULTS) registry.removeSingleMetric(name);
  const records = new Counter({
    name: HOST_METRIC_NAMES.records,
    help: 'Records of stored batches by outcome (in-process invocations)',
    labelNames: ['pipeline', 'outcome'] as const,
    registers: [registry],
  });
  const batches = new Counter({
    name: HOST_METRIC_NAMES.batches,
    help: 'Invocations (Lambda events) by result: stored (offsets advance) or failed (redelivered)',
    labelNames: ['pipeline', 'result'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: HOST_METRIC_NAMES.batchDuration,
    help: 'Duration of one invocation (decode, database, commit decision), seconds',
    labelNames: ['pipeline'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const recordDelay = new Histogram({
    name: HOST_METRIC_NAMES.recordDelay,
    help:
      "Freshness: the batch's COMMIT time minus the record's Kafka timestamp, seconds, for every record of a stored batch " +
      '(records without a timestamp are not observed)',
    labelNames: ['pipeline'] as const,
    buckets: [...RECORD_DELAY_BUCKETS],
    registers: [registry],
  });
  const retries = new Counter({
    name: HOST_METRIC_NAMES.retries,
    help: 'Transient database errors retried inside a batch (in-process invocations)',
    labelNames: ['pipeline'] as const,
    registers: [registry],
  });
  const commitFailures = new Counter({
    name: HOST_METRIC_NAMES.commitFailures,
    help: 'Offset commits that failed (the rows were stored; a redelivery repeats them)',
    labelNames: ['pipeline'] as const,
    registers: [registry],
  });
  const commitsRefused = new Counter({
    name: HOST_METRIC_NAMES.commitsRefused,
    help: 'Offset commits refused before they were sent: below the offset read as committed at assignment (a bug of the host)',
    labelNames: ['pipeline'] as const,
    registers: [registry],
  });
  // One view per scrape, shared by the gauges below: prom-client runs every gauge's collect in
  // one synchronous pass of `registry.metrics()`, so the view lives until the pass ends (a
  // microtask). A time window would hand the next scrape, if it came soon enough, the view of
  // the last one (a recovered pipeline still down, a stored batch still in flight).
  let current: ReadonlyMap<PipelineName, PipelineView> | undefined;
  const views = (): ReadonlyMap<PipelineName, PipelineView> => {
    if (current === undefined) {
      current = new Map(view().map((entry) => [entry.snapshot.pipeline, entry]));
      queueMicrotask(() => {
        current = undefined;
      });
    }
    return current;
  };
  const perPipeline = (read: (entry: PipelineView | undefined, at: number) => number) =>
    function collect(this: Gauge<'pipeline'>) {
      const entries = views();
      const at = now();
      for (const pipeline of pipelines) this.set({ pipeline }, read(entries.get(pipeline), at));
    };
  new Gauge({
    name: HOST_METRIC_NAMES.pipelineUp,
    help: '1 while the pipeline is RUNNING (in its group, fetching, not stalled, not failed), else 0',
    labelNames: ['pipeline'] as const,
    registers: [registry],
    collect: perPipeline((entry) => (entry?.verdict.up ? 1 : 0)),
  });
  new Gauge({
    name: HOST_METRIC_NAMES.pipelineState,
    help: "1 for the pipeline's state now (STARTING, JOINING, RUNNING, NOT_FETCHING, STALLED, PAUSED, FAILED, STOPPED), 0 for the others",
    labelNames: ['pipeline', 'state'] as const,
    registers: [registry],
    collect() {
      const entries = views();
      for (const pipeline of pipelines) {
        const state = entries.get(pipeline)?.verdict.state ?? 'STARTING';
        for (const each of PIPELINE_STATES) this.set({ pipeline, state: each }, each === state ? 1 : 0);
      }
    },
  });
  new Gauge({
    name: HOST_METRIC_NAMES.pipelinePaused,
    help: "1 while an operator's pause holds the pipeline (pipeline_pauses), else 0",
    labelNames: ['pipeline'] as const,
    registers: [registry],
    collect: perPipeline((entry) => (entry?.snapshot.paused ? 1 : 0)),
  });
  const pausedSinceHelp = 'When the pause now holding the pipeline began, seconds since the epoch (0: not paused)';
  for (const [name, help] of [
    [HOST_METRIC_NAMES.pausedSince, pausedSinceHelp],
    [DEPRECATED_HOST_METRIC_NAMES.pausedSince, deprecatedHelp(HOST_METRIC_NAMES.pausedSince, pausedSinceHelp)],
  ] as const) {
    new Gauge({
      name,
      help,
      labelNames: ['pipeline'] as const,
      registers: [registry],
      collect: perPipeline((entry) => (entry?.snapshot.paused ? (entry.snapshot.pausedSince ?? 0) / 1000 : 0)),
    });
  }
  const lagHelp =
    "Messages on the partition after the group's committed offset, from the host's last background reading (see " +
    'storage_consumer_lag_age_seconds)';
  for (const [name, help] of [
    [HOST_METRIC_NAMES.consumerLag, lagHelp],
    [DEPRECATED_HOST_METRIC_NAMES.consumerLag, deprecatedHelp(HOST_METRIC_NAMES.consumerLag, lagHelp)],
  ] as const) {
    new Gauge({
      name,
      help,
      labelNames: ['pipeline', 'partition'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [pipeline, entry] of views()) {
          for (const { partition, lag } of entry.snapshot.partitions)
            if (lag !== undefined) this.set({ pipeline, partition: String(partition) }, lag);
        }
      },
    });
  }
  new Gauge({
    name: HOST_METRIC_NAMES.lagAge,
    help: 'Seconds since the lag was last read from the broker (since the start, while it never was)',
    labelNames: ['pipeline'] as const,
    registers: [registry],
    collect: perPipeline((entry, at) => (entry === undefined ? 0 : (at - (entry.snapshot.lagReadAt ?? entry.snapshot.createdAt)) / 1000)),
  });
  new Gauge({
    name: HOST_METRIC_NAMES.lastStored,
    help: 'When the pipeline last stored a batch, seconds since the epoch (0: not since the start)',
    labelNames: ['pipeline'] as const,
    registers: [registry],
    collect: perPipeline((entry) => (entry?.snapshot.lastStoredWallAt ?? 0) / 1000),
  });
  new Gauge({
    name: HOST_METRIC_NAMES.inFlightAge,
    help: "Age of the pipeline's oldest in-flight batch (first attempt to now), seconds; 0 when none",
    labelNames: ['pipeline'] as const,
    registers: [registry],
    collect: perPipeline((entry, at) =>
      entry?.verdict.oldestInFlight === undefined ? 0 : (at - entry.verdict.oldestInFlight.startedAt) / 1000,
    ),
  });
  new Counter({
    name: HOST_METRIC_NAMES.consumerCrashes,
    help: "Crashes of the pipeline's kafkajs consumer (each is followed by a restart, or fails the pipeline)",
    labelNames: ['pipeline'] as const,
    registers: [registry],
    collect() {
      const entries = views();
      this.reset();
      for (const pipeline of pipelines) this.inc({ pipeline }, entries.get(pipeline)?.snapshot.crashesTotal ?? 0);
    },
  });
  new Counter({
    name: PROCESS_STALL_METRIC_NAMES.stalls,
    help: 'Times the host process itself did not run for seconds (SIGSTOP, a suspended VM, a long pause); each restarts every bound',
    registers: [registry],
    collect() {
      // A scrape right after a stall counts it, before any watch's tick has.
      stalls.observe();
      this.reset();
      this.inc(stalls.totals().count);
    },
  });
  new Counter({
    name: PROCESS_STALL_METRIC_NAMES.stalledSeconds,
    help: `Seconds in which the host process itself did not run, summed over ${PROCESS_STALL_METRIC_NAMES.stalls}`,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stalls.totals().seconds);
    },
  });
  new Gauge({
    name: HOST_METRIC_NAMES.buildInfo,
    help: 'Always 1; the version label says which version of storage-consumer runs',
    labelNames: ['version'] as const,
    registers: [registry],
  }).set({ version: buildVersion() }, 1);
  for (const pipeline of pipelines) {
    for (const outcome of RECORD_OUTCOMES) records.inc({ pipeline, outcome }, 0);
    for (const result of BATCH_RESULTS) batches.inc({ pipeline, result }, 0);
    retries.inc({ pipeline }, 0);
    commitFailures.inc({ pipeline }, 0);
    commitsRefused.inc({ pipeline }, 0);
    // Histograms too: a quiet pipeline's panels and alerts read 0 batches, not "no data".
    duration.zero({ pipeline });
    recordDelay.zero({ pipeline });
  }
  return {
    registry,
    pipeline(pipeline) {
      const delays = recordDelay.labels({ pipeline });
      return {
        recordsStored(report) {
          const counts: Record<RecordOutcome, number> = {
            inserted: report.inserted,
            updated: report.updated,
            // A replayed poison record whose dead letter is already stored wrote nothing new: skipped.
            skipped: report.skipped + report.alreadyDeadLettered,
            deduplicated: report.deduplicated,
            dead_lettered: report.deadLettered,
          };
          for (const outcome of RECORD_OUTCOMES) if (counts[outcome] > 0) records.inc({ pipeline, outcome }, counts[outcome]);
          for (const ms of report.recordDelays.ms) delays.observe(ms / 1000);
        },
        retried: () => retries.inc({ pipeline }),
        batchDone(result, seconds) {
          batches.inc({ pipeline, result });
          duration.observe({ pipeline }, seconds);
        },
        commitFailed: () => commitFailures.inc({ pipeline }),
        commitRefused: () => commitsRefused.inc({ pipeline }),
      };
    },
  };
}
