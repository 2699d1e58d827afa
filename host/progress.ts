/**
 * One record of progress per pipeline, kept by the consumer loop (host/topic-consumer.ts).
 * Every signal the host gives about a pipeline is derived from it: the heartbeat file,
 * `/healthz`, `/readyz`, `/metrics` (and the status endpoint), so they can never disagree
 * (docs/design.md section 9, docs/operations.md "Health and metrics of the host").
 *
 * The record only collects facts (what happened, when); {@link evaluateProgress} turns the facts
 * and the bounds into a verdict (state, ready, up, the causes), purely, at the moment asked.
 * Offsets are decimal strings, never `Number`.
 */
import type { PipelineName } from '../shared/pipelines.js';

/**
 * A pipeline's state as the signals report it (Kafka Connect's vocabulary where it fits):
 * - `STARTING`: created, not yet in its consumer group for the first time;
 * - `JOINING`: between a rebalance or a consumer restart and the next assignment;
 * - `RUNNING`: in its group and fetching;
 * - `NOT_FETCHING`: no fetch completed for `STORAGE_FETCH_UNREADY_AFTER_MS` (crash loop,
 *   deleted topic, lost authorization, unreachable broker);
 * - `STALLED`: lag and no stored batch for `STORAGE_STALL_AFTER_MS`;
 * - `PAUSED`: paused by an operator (set through {@link PipelineProgress.setPaused});
 * - `FAILED`: failed (a fatal error, or no fetch for `STORAGE_FETCH_FAIL_AFTER_MS`); the host stops;
 * - `STOPPED`: stopped on request.
 */
export const PIPELINE_STATES = ['STARTING', 'JOINING', 'RUNNING', 'NOT_FETCHING', 'STALLED', 'PAUSED', 'FAILED', 'STOPPED'] as const;
export type PipelineState = (typeof PIPELINE_STATES)[number];

/** The bounds of the rules (settings `STORAGE_FETCH_UNREADY_AFTER_MS`, `STORAGE_FETCH_FAIL_AFTER_MS`, `STORAGE_STALL_AFTER_MS`). */
export interface ProgressBounds {
  /** No completed fetch for this long: not ready, `pipeline_up` 0. */
  readonly fetchUnreadyAfterMs: number;
  /** No completed fetch for this long: the pipeline has failed (the host exits 1). */
  readonly fetchFailAfterMs: number;
  /** Lag and no stored batch for this long: stalled (not ready, `pipeline_up` 0, a WARN each minute). */
  readonly stallAfterMs: number;
}

/** An error as the record keeps it: message, stack and when. */
export interface RecordedError {
  readonly message: string;
  readonly stack: string | undefined;
  readonly at: number;
}

/** The batch (one invocation's event) a partition is working on, kept until it is stored or dropped. */
export interface InFlightBatch {
  readonly topic: string;
  readonly partition: number;
  readonly firstOffset: string;
  readonly lastOffset: string;
  /** When the first attempt at these offsets began (ms since the epoch). */
  readonly startedAt: number;
  /** 1 for the first attempt; a redelivery of the same first offset counts up. */
  readonly attempt: number;
  /** When the current attempt began. */
  readonly attemptStartedAt: number;
  /** Why the previous attempt was not stored, if one was not. */
  readonly lastError: RecordedError | undefined;
}

/** What the record knows about one partition. */
export interface PartitionProgress {
  readonly partition: number;
  /** The offset this host last committed (the next to read); `undefined` until it commits. */
  readonly committed: string | undefined;
  /** Messages after the group's committed offset, from the last lag reading or fetched batch. */
  readonly lag: number | undefined;
  /** Since when the partition has had lag without a break (ms), `undefined` while it has none. */
  readonly pendingSince: number | undefined;
  /** When a batch of this partition was last stored. */
  readonly lastStoredAt: number | undefined;
}

/** A frozen copy of the record at one moment: what every signal reads. */
export interface ProgressSnapshot {
  readonly pipeline: PipelineName;
  readonly topic: string;
  readonly group: string;
  readonly createdAt: number;
  /** When the kafkajs consumer was started (the fetch clock runs from here); `undefined` before. */
  readonly consumerStartedAt: number | undefined;
  /** Set once by `failed()` / `stopped()`: the end of the pipeline. */
  readonly ended: 'failed' | 'stopped' | undefined;
  readonly paused: boolean;
  /** While paused: when the pause began (the pause row's time, ms since the epoch), else `undefined`. */
  readonly pausedSince: number | undefined;
  /** The consumer holds an assignment now (joined, not rebalancing, not crashed). */
  readonly inGroup: boolean;
  /** Partitions of the topic assigned to this member; `undefined` while not in the group. */
  readonly assignment: readonly number[] | undefined;
  readonly joinedAt: number | undefined;
  /** The last fetch from the broker that returned without error. */
  readonly lastFetchAt: number | undefined;
  /** The last time a batch ended (stored, not stored, or dropped). */
  readonly lastBatchEndAt: number | undefined;
  readonly lastStoredAt: number | undefined;
  /** Consumer crashes since the last completed fetch, and in all. */
  readonly crashesSinceFetch: number;
  readonly crashesTotal: number;
  readonly inFlight: readonly InFlightBatch[];
  readonly partitions: readonly PartitionProgress[];
  /** When the lag was last read from the broker. */
  readonly lagReadAt: number | undefined;
  readonly lastError: RecordedError | undefined;
  /** When the heartbeat file was last written successfully. */
  readonly lastBeatAt: number | undefined;
}

/** What the signals say about a pipeline at one moment. */
export interface ProgressVerdict {
  readonly state: PipelineState;
  /** `/readyz`: only a RUNNING (or PAUSED) pipeline is ready. */
  readonly ready: boolean;
  /** `storage_consumer_pipeline_up`: 1 only while RUNNING. */
  readonly up: boolean;
  /** Why the pipeline is not ready, one line each (no connection details); empty when ready. */
  readonly causes: readonly string[];
  /** Time since the last completed fetch, or 0 while a batch is in flight or nothing is assigned. */
  readonly notFetchingMs: number;
  /** The oldest in-flight batch, if any. */
  readonly oldestInFlight: InFlightBatch | undefined;
  /** Set when the rules say the pipeline has failed although nothing else failed it yet. */
  readonly failure: string | undefined;
}

function recordError(error: unknown, at: number): RecordedError {
  if (error instanceof Error) return { message: `${error.name}: ${error.message}`, stack: error.stack, at };
  return { message: String(error), stack: undefined, at };
}

interface MutablePartition {
  committed: string | undefined;
  highWatermark: bigint | undefined;
  lag: number | undefined;
  pendingSince: number | undefined;
  lastStoredAt: number | undefined;
}

/**
 * The mutable record of one pipeline. The consumer loop calls the `on*`-style methods as things
 * happen; readers take {@link snapshot}s. Never throws; every method is cheap (no I/O).
 */
export class PipelineProgress {
  readonly pipeline: PipelineName;
  readonly topic: string;
  readonly group: string;
  private readonly now: () => number;
  private readonly createdAt: number;
  private consumerStartedAt: number | undefined;
  private ended: 'failed' | 'stopped' | undefined;
  private paused = false;
  private pausedSince: number | undefined;
  private assignment: number[] | undefined;
  private joinedAt: number | undefined;
  private lastFetchAt: number | undefined;
  private lastBatchEndAt: number | undefined;
  private lastStoredAt: number | undefined;
  private crashesSinceFetch = 0;
  private crashesTotal = 0;
  private readonly inFlight = new Map<number, InFlightBatch>();
  private readonly partitions = new Map<number, MutablePartition>();
  private lagReadAt: number | undefined;
  private lastError: RecordedError | undefined;
  private lastBeatAt: number | undefined;

  constructor(options: { readonly pipeline: PipelineName; readonly topic: string; readonly group: string; readonly now?: () => number }) {
    this.pipeline = options.pipeline;
    this.topic = options.topic;
    this.group = options.group;
    this.now = options.now ?? Date.now;
    this.createdAt = this.now();
  }

  private partition(partition: number): MutablePartition {
    let entry = this.partitions.get(partition);
    if (entry === undefined) {
      entry = { committed: undefined, highWatermark: undefined, lag: undefined, pendingSince: undefined, lastStoredAt: undefined };
      this.partitions.set(partition, entry);
    }
    return entry;
  }

  private setLag(partition: number, lag: number, at: number): void {
    const entry = this.partition(partition);
    entry.lag = lag;
    if (lag > 0) entry.pendingSince ??= at;
    else entry.pendingSince = undefined;
  }

  /** The kafkajs consumer is being started (after migrations): the fetch clock starts now. */
  consumerStarted(): void {
    this.consumerStartedAt ??= this.now();
  }

  /** The consumer joined its group with these partitions of the topic. */
  joined(partitions: readonly number[]): void {
    this.assignment = [...partitions].sort((a, b) => a - b);
    this.joinedAt = this.now();
    // A partition no longer ours has no batch of ours in flight.
    for (const partition of this.inFlight.keys()) if (!this.assignment.includes(partition)) this.inFlight.delete(partition);
  }

  /** The consumer lost its assignment: a rebalance began, or it crashed and restarts. */
  left(): void {
    this.assignment = undefined;
  }

  /** A fetch from the broker returned without error. */
  fetched(): void {
    this.lastFetchAt = this.now();
    this.crashesSinceFetch = 0;
  }

  /** The kafkajs consumer crashed (it restarts when `restart`). */
  crashed(error: unknown): void {
    this.crashesSinceFetch += 1;
    this.crashesTotal += 1;
    this.assignment = undefined;
    this.lastError = recordError(error, this.now());
  }

  /**
   * An attempt at a batch begins. A batch with the same first offset as the one in flight on
   * its partition is that batch redelivered: it keeps its start and counts the attempt up.
   * `highWatermark` (from the fetch) gives the partition's lag before a lag reading does.
   */
  attemptStarted(batch: {
    readonly partition: number;
    readonly firstOffset: string;
    readonly lastOffset: string;
    readonly highWatermark?: string;
  }): InFlightBatch {
    const at = this.now();
    const previous = this.inFlight.get(batch.partition);
    const same = previous !== undefined && previous.firstOffset === batch.firstOffset;
    const entry: InFlightBatch = {
      topic: this.topic,
      partition: batch.partition,
      firstOffset: batch.firstOffset,
      lastOffset: batch.lastOffset,
      startedAt: same ? previous.startedAt : at,
      attempt: same ? previous.attempt + 1 : 1,
      attemptStartedAt: at,
      lastError: same ? previous.lastError : undefined,
    };
    this.inFlight.set(batch.partition, entry);
    if (batch.highWatermark !== undefined) {
      this.partition(batch.partition).highWatermark = BigInt(batch.highWatermark);
      const lag = BigInt(batch.highWatermark) - BigInt(batch.firstOffset);
      if (lag > 0n) this.setLag(batch.partition, Number(lag), at);
    }
    return entry;
  }

  /** The batch in flight on `partition` was stored and its offsets committed up to `next`. */
  stored(partition: number, next: string): void {
    const at = this.now();
    this.inFlight.delete(partition);
    this.lastStoredAt = at;
    this.lastBatchEndAt = at;
    const entry = this.partition(partition);
    entry.lastStoredAt = at;
    entry.committed = next;
    // What the fetch said is left on the partition, until the next lag reading says better.
    if (entry.highWatermark !== undefined) {
      const left = entry.highWatermark - BigInt(next);
      this.setLag(partition, Number(left > 0n ? left : 0n), at);
    }
  }

  /** An offset commit succeeded (also for a partial success). */
  committed(partition: number, next: string): void {
    this.partition(partition).committed = next;
  }

  /** The attempt at the batch on `partition` was not stored; the batch stays in flight for its redelivery. */
  notStored(partition: number, error: unknown): void {
    const at = this.now();
    this.lastBatchEndAt = at;
    const entry = this.inFlight.get(partition);
    const recorded = recordError(error, at);
    this.lastError = recorded;
    if (entry !== undefined) this.inFlight.set(partition, { ...entry, lastError: recorded });
  }

  /** The batch on `partition` is no longer ours (a rebalance, a stop): nothing of it is in flight here. */
  dropped(partition: number): void {
    this.lastBatchEndAt = this.now();
    this.inFlight.delete(partition);
  }

  /**
   * The broker's lag of the group, per partition of the topic (one lag reading), asked for at
   * `startedAt`. A partition that stored a batch after that keeps the lag the store left: the
   * reading saw the committed offset from before the store, and would bring the old lag back
   * (a false stall after every recovery, until the next reading).
   */
  lagRead(partitions: ReadonlyArray<{ readonly partition: number; readonly lag: number }>, startedAt: number = this.now()): void {
    const at = this.now();
    this.lagReadAt = at;
    for (const { partition, lag } of partitions) {
      const storedAt = this.partitions.get(partition)?.lastStoredAt;
      if (storedAt !== undefined && storedAt > startedAt) continue;
      // A batch in flight is lag whatever the broker says (its offsets are not committed yet).
      this.setLag(partition, this.inFlight.has(partition) ? Math.max(lag, 1) : lag, at);
    }
  }

  /** Records an error (with its stack) as the pipeline's last one. */
  error(error: unknown): void {
    this.lastError = recordError(error, this.now());
  }

  /** The heartbeat file was written. */
  beat(at: number = this.now()): void {
    this.lastBeatAt = at;
  }

  /**
   * An operator paused (true) or resumed (false) the pipeline; `since` is when the pause began
   * (the pause row's wall-clock time, so a restart keeps it), default now.
   */
  setPaused(paused: boolean, since?: number): void {
    this.paused = paused;
    this.pausedSince = paused ? (since ?? Date.now()) : undefined;
  }

  /** The pipeline failed (for good). */
  failed(error: unknown): void {
    this.ended ??= 'failed';
    this.lastError = recordError(error, this.now());
    this.assignment = undefined;
  }

  /** The pipeline stopped on request. */
  stopped(): void {
    this.ended ??= 'stopped';
    this.assignment = undefined;
  }

  /** A frozen copy of the record now. */
  snapshot(): ProgressSnapshot {
    return Object.freeze({
      pipeline: this.pipeline,
      topic: this.topic,
      group: this.group,
      createdAt: this.createdAt,
      consumerStartedAt: this.consumerStartedAt,
      ended: this.ended,
      paused: this.paused,
      pausedSince: this.pausedSince,
      inGroup: this.assignment !== undefined,
      assignment: this.assignment === undefined ? undefined : [...this.assignment],
      joinedAt: this.joinedAt,
      lastFetchAt: this.lastFetchAt,
      lastBatchEndAt: this.lastBatchEndAt,
      lastStoredAt: this.lastStoredAt,
      crashesSinceFetch: this.crashesSinceFetch,
      crashesTotal: this.crashesTotal,
      inFlight: [...this.inFlight.values()].sort((a, b) => a.partition - b.partition),
      partitions: [...this.partitions.entries()]
        .sort(([a], [b]) => a - b)
        .map(([partition, { committed, lag, pendingSince, lastStoredAt }]) => ({ partition, committed, lag, pendingSince, lastStoredAt })),
      lagReadAt: this.lagReadAt,
      lastError: this.lastError,
      lastBeatAt: this.lastBeatAt,
    });
  }
}

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;

/** The oldest in-flight batch of a snapshot. */
function oldest(snapshot: ProgressSnapshot): InFlightBatch | undefined {
  let found: InFlightBatch | undefined;
  for (const batch of snapshot.inFlight) if (found === undefined || batch.startedAt < found.startedAt) found = batch;
  return found;
}

/** How long a partition has had lag without a stored batch (0 when it has none, or is not ours). */
function stallOf(snapshot: ProgressSnapshot, partition: PartitionProgress, now: number): number {
  if (partition.pendingSince === undefined || (partition.lag ?? 0) <= 0) return 0;
  if (!snapshot.assignment?.includes(partition.partition)) return 0;
  return now - Math.max(partition.pendingSince, partition.lastStoredAt ?? 0);
}

/**
 * The verdict on one pipeline at `now`, by the rules of docs/operations.md:
 * no completed fetch for `fetchUnreadyAfterMs` (no batch in flight, partitions assigned or not
 * yet joined) is NOT_FETCHING, and for `fetchFailAfterMs` FAILED; a partition of ours with lag
 * and no stored batch for `stallAfterMs` (or a batch in flight for that long) is STALLED.
 */
export function evaluateProgress(snapshot: ProgressSnapshot, bounds: ProgressBounds, now: number = Date.now()): ProgressVerdict {
  const oldestInFlight = oldest(snapshot);
  const idle = snapshot.inGroup && snapshot.assignment?.length === 0;
  const since = snapshot.consumerStartedAt;
  const notFetchingMs =
    since === undefined || oldestInFlight !== undefined || idle || snapshot.paused
      ? 0
      : Math.max(0, now - Math.max(snapshot.lastFetchAt ?? since, snapshot.lastBatchEndAt ?? since, since));
  const verdict = (state: PipelineState, causes: string[], failure?: string): ProgressVerdict => ({
    state,
    ready: state === 'RUNNING' || state === 'PAUSED',
    up: state === 'RUNNING',
    causes,
    notFetchingMs,
    oldestInFlight,
    failure,
  });
  const name = snapshot.pipeline;
  if (snapshot.ended === 'failed')
    return verdict('FAILED', [`${name}: failed${snapshot.lastError ? `: ${snapshot.lastError.message}` : ''}`]);
  if (snapshot.ended === 'stopped') return verdict('STOPPED', [`${name}: stopped`]);
  if (snapshot.paused) return verdict('PAUSED', []);
  const crashes =
    snapshot.crashesSinceFetch > 0
      ? `, ${snapshot.crashesSinceFetch} consumer crashes since (last: ${snapshot.lastError?.message ?? 'unknown'})`
      : '';
  const fetchAge =
    snapshot.lastFetchAt === undefined
      ? `no fetch completed since the start ${seconds(notFetchingMs)} ago`
      : `no fetch completed for ${seconds(notFetchingMs)}`;
  if (notFetchingMs > bounds.fetchFailAfterMs) {
    const cause = `${fetchAge}${crashes} (STORAGE_FETCH_FAIL_AFTER_MS=${bounds.fetchFailAfterMs})`;
    return verdict('FAILED', [`${name}: ${cause}`], cause);
  }
  if (notFetchingMs > bounds.fetchUnreadyAfterMs) {
    return verdict('NOT_FETCHING', [`${name}: ${fetchAge}${crashes}`]);
  }
  const stalled: string[] = [];
  for (const partition of snapshot.partitions) {
    const stall = stallOf(snapshot, partition, now);
    if (stall > bounds.stallAfterMs)
      stalled.push(`partition ${partition.partition}: lag ${partition.lag} and no stored batch for ${seconds(stall)}`);
  }
  if (
    oldestInFlight !== undefined &&
    now - oldestInFlight.startedAt > bounds.stallAfterMs &&
    !stalled.some((line) => line.startsWith(`partition ${oldestInFlight.partition}:`))
  ) {
    stalled.push(`partition ${oldestInFlight.partition}: batch in flight for ${seconds(now - oldestInFlight.startedAt)}`);
  }
  if (stalled.length > 0) {
    const batch = oldestInFlight === undefined ? '' : `; in flight: ${describeBatch(oldestInFlight, now)}`;
    return verdict('STALLED', [`${name}: stalled: ${stalled.join('; ')}${batch}`]);
  }
  if (snapshot.joinedAt === undefined) return verdict('STARTING', [`${name}: not yet in its consumer group ${snapshot.group}`]);
  if (!snapshot.inGroup) return verdict('JOINING', [`${name}: not in its consumer group ${snapshot.group} (rebalancing or restarting)`]);
  return verdict('RUNNING', []);
}

/** `topic 3 offsets 100..199, attempt 2, 35 s old, last error: ...`: a batch in one phrase. */
export function describeBatch(batch: InFlightBatch, now: number = Date.now()): string {
  const error = batch.lastError === undefined ? '' : `, last error: ${batch.lastError.message}`;
  return (
    `${batch.topic} partition ${batch.partition} offsets ${batch.firstOffset}..${batch.lastOffset}, attempt ${batch.attempt}, ` +
    `${seconds(now - batch.startedAt)} old${error}`
  );
}

/** The JSON fields every log line about a batch carries (docs/operations.md). */
export function batchFields(batch: {
  readonly topic: string;
  readonly partition: number;
  readonly firstOffset: string;
  readonly lastOffset: string;
}): {
  topic: string;
  partition: number;
  first_offset: string;
  last_offset: string;
} {
  return { topic: batch.topic, partition: batch.partition, first_offset: batch.firstOffset, last_offset: batch.lastOffset };
}
