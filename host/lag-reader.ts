/**
 * The host's background lag reader: every pipeline's consumer lag, read from the broker
 * (committed offset to the end of each partition) into the pipeline's progress record, where
 * `/metrics` and the status read it. Scrapes never wait for the broker: they answer from the last
 * reading, whose age is a metric.
 */
import type { KafkaAdmin } from '../kafka/port.js';
import type { GroupOfTopic, GroupPosition } from '../kafka/lag.js';
import { groupPosition } from '../kafka/lag.js';
import type { CoreLogger } from '../shared/logger.js';
import { TIMED_OUT, within } from '../shared/timeout.js';
import type { Clock } from './clock.js';
import { systemClock } from './clock.js';
import type { HostAdmin } from './host-admin.js';
import type { PipelineProgress } from './progress.js';

/** One pipeline as the lag reader sees it: its group on its topic, and where a reading goes. */
export interface LagTarget {
  readonly settings: GroupOfTopic;
  readonly progress: Pick<PipelineProgress, 'lagRead'>;
}

/** What a lag reader is built from. */
export interface LagReaderOptions {
  readonly admin: HostAdmin;
  readonly pipelines: readonly LagTarget[];
  /** `STORAGE_LAG_INTERVAL_MS`: one reading started this often (none while one is running). */
  readonly intervalMs: number;
  /** `STORAGE_LAG_TIMEOUT_MS`: a reading not done by then is given up (a warning, once). */
  readonly timeoutMs: number;
  readonly logger: CoreLogger;
  readonly clock?: Clock;
  /** How one group's position is read; default: from the broker. */
  readonly read?: (admin: KafkaAdmin, pipeline: GroupOfTopic) => Promise<GroupPosition>;
}

/**
 * Reads the lag at once and then every `intervalMs`, one reading at a time (a reading that hangs
 * on a frozen broker is not joined by another), each given up after `timeoutMs`. A failed or
 * late reading warns once until a reading succeeds again. Returns the function that stops it.
 */
export function readLagInBackground(options: LagReaderOptions): () => void {
  const { admin, pipelines, logger } = options;
  const clock = options.clock ?? systemClock;
  const read = options.read ?? groupPosition;
  let reading: Promise<void> | undefined;
  let warned = false;

  const readOnce = async (): Promise<void> => {
    if (admin.closed()) return;
    const connected = await admin.connected();
    const startedAt = clock.monotonic();
    const positions = await Promise.all(pipelines.map((pipeline) => read(connected, pipeline.settings)));
    if (admin.closed()) return;
    positions.forEach((position, index) =>
      pipelines[index]?.progress.lagRead(
        position.partitions.map(({ partition, lag }) => ({ partition, lag: Number(lag) })),
        startedAt,
      ),
    );
  };
  const warn = (error: string) => {
    if (!warned) logger.warn('cannot read the consumer lag from the broker; /metrics shows the last reading and its age', { error });
    warned = true;
  };

  const tick = () => {
    if (reading !== undefined || admin.closed()) return;
    const attempt = readOnce();
    void within(attempt, options.timeoutMs)
      .then((outcome) => {
        if (outcome === TIMED_OUT) warn(`Error: no answer within ${options.timeoutMs} ms (STORAGE_LAG_TIMEOUT_MS)`);
        else warned = false;
      })
      .catch((error: unknown) => warn(String(error)));
    reading = attempt.catch(() => undefined).finally(() => (reading = undefined));
  };
  tick();
  const interval = setInterval(tick, options.intervalMs);
  interval.unref();
  return () => clearInterval(interval);
}
