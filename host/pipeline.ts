/**
 * One pipeline of the host: the one object that owns what the host runs for it. Its progress
 * record and the watch that writes its heartbeat exist from the host's start (so the health check
 * and `/healthz` agree from the first moment, a long migration included); its invoker and its
 * consumer are attached once the host starts consuming.
 */
import type { CoreLogger } from '../shared/logger.js';
import type { PipelineName } from '../shared/pipelines.js';
import type { Clock } from './clock.js';
import { systemClock } from './clock.js';
import { createHeartbeat } from '../host-api/heartbeat-files.js';
import type { Invoker } from './invoker.js';
import type { PipelineView } from './metrics.js';
import { PipelineFailedError } from './pipeline-failure.js';
import type { PipelineSettings } from '../config/pipeline-settings.js';
import type { ProgressBounds } from './progress.js';
import { evaluateProgress, PipelineProgress } from './progress.js';
import { watchProgress } from './progress-watch.js';
import type { HeartbeatSettings } from '../config/host-settings.js';
import type { PipelineConsumer } from './topic-consumer.js';

/** What a host pipeline is built from. */
export interface HostPipelineOptions {
  readonly settings: PipelineSettings;
  readonly bounds: ProgressBounds;
  readonly heartbeat: HeartbeatSettings;
  /** The deadline of one attempt (an invocation), for the watch's half-budget warning. */
  readonly attemptBudgetMs: number;
  readonly logger: CoreLogger;
  /** Told when the pipeline failed before it had a consumer to fail (the host then fails). */
  readonly onFailure: (error: Error) => void;
  readonly clock?: Clock;
}

/**
 * Where a pipeline's stop is: not asked (`running`), its lanes still writing (`writing`), the
 * writes over and kafkajs' leave going on (`leaving`), or over (`stopped`). A shutdown that
 * times out names the pipelines in each.
 */
export type StopPhase = 'running' | 'writing' | 'leaving' | 'stopped';

/** One pipeline of the host (see the file's comment). */
export class HostPipeline {
  readonly name: PipelineName;
  readonly settings: PipelineSettings;
  readonly progress: PipelineProgress;
  /** Set by the host's start; `undefined` before. */
  invoker: Invoker | undefined;
  /** Set by the host's start; `undefined` before. */
  consumer: PipelineConsumer | undefined;
  private readonly bounds: ProgressBounds;
  private readonly clock: Clock;
  private readonly unwatch: () => void;
  private phase: StopPhase = 'running';

  constructor(options: HostPipelineOptions) {
    const { settings, logger } = options;
    this.name = settings.name;
    this.settings = settings;
    this.bounds = options.bounds;
    this.clock = options.clock ?? systemClock;
    const progress = new PipelineProgress({ pipeline: settings.name, topic: settings.topic, group: settings.group, clock: this.clock });
    this.progress = progress;
    this.unwatch = watchProgress({
      progress,
      bounds: options.bounds,
      logger,
      attemptBudgetMs: options.attemptBudgetMs,
      clock: this.clock,
      heartbeat: createHeartbeat({
        dir: options.heartbeat.dir,
        pipeline: settings.name,
        intervalMs: options.heartbeat.intervalMs,
        logger,
        now: () => this.clock.monotonic(),
        onWritten: (at) => progress.beat(at),
      }),
      onFailed: (reason) => {
        if (this.consumer) this.consumer.fail(reason);
        else options.onFailure(new PipelineFailedError(settings.name, reason));
      },
    });
  }

  /** Its progress record and the verdict on it, now. */
  view(now: number = this.clock.monotonic()): PipelineView {
    const snapshot = this.progress.snapshot();
    return { snapshot, verdict: evaluateProgress(snapshot, this.bounds, now) };
  }

  /** Its consumer's member id in the group, once joined. */
  memberId(): string | undefined {
    return this.consumer?.memberId();
  }

  /** Where its stop is (see {@link StopPhase}). */
  get stopPhase(): StopPhase {
    return this.phase;
  }

  /**
   * Stops its consumer (the writes in flight finish and commit, then kafkajs leaves the group),
   * following the phases; a pipeline without a consumer is stopped at once. Rejects when the
   * consumer's stop does, the phase `stopped` all the same.
   */
  async stop(): Promise<void> {
    const consumer = this.consumer;
    if (consumer === undefined) {
      this.phase = 'stopped';
      return;
    }
    this.phase = 'writing';
    const stopping = consumer.stop();
    void consumer.idle().then(() => {
      if (this.phase === 'writing') this.phase = 'leaving';
    });
    try {
      await stopping;
    } finally {
      this.phase = 'stopped';
    }
  }

  /** The end of the host: marks a clean stop (unless the host failed) and stops the watch. */
  end(failed: boolean): void {
    if (!failed) this.progress.stopped();
    this.unwatch();
  }
}
