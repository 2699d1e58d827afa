/**
 * One record of progress per pipeline, kept by the consumer loop (host/topic-consumer.ts).
 * Every signal the host gives about a pipeline is derived from it: the heartbeat file,
 * `/healthz`, `/readyz`, `/metrics` (and the status endpoint), so they can never disagree
 * (docs/design.md section 9, docs/operations.md "Health and metrics of the host").
 *
 * The record only collects facts (what happened, when); {@link evaluateProgress} turns the facts
 * and the bounds into a verdict (state, ready, up, the causes), purely, at the moment asked.
 * Every time a rule measures is on the monotonic clock (host/clock.ts): a wall-clock step changes
 * no verdict. Fields named `...WallAt` are wall-clock timestamps, only ever shown to people.
 * Offsets are decimal strings, never `Number`.
 */
import type { PipelineName } from '../shared/pipelines.js';
import type { Clock } from './clock.js';
import { systemClock } from './clock.js';
import type { ProcessStalls } from './process-stalls.js';
import { processStallsOf } from './process-stalls.js';

/**
 * A pipeline's state as the signals report it (Kafka Connect's vocabulary where it fits):
 * - `STARTING`: created, its consumer connecting (no join begun yet), or its pause state
 *   (`pipeline_pauses`) not read yet (it fetches nothing until it is);
 * - `JOINING`: a join under way (every join: the first, after a rebalance, after the broker
 *   dropped the member, after a consumer restart) until the assignment;
 * - `RUNNING`: in its group and fetching;
 * - `NOT_FETCHING`: no fetch completed for `STORAGE_FETCH_UNREADY_AFTER_MS` (crash loop,
 *   deleted topic, lost authorization, unreachable broker);
 * - `STALLED`: lag and no stored batch for `STORAGE_STALL_AFTER_MS`;
 * - `PAUSED`: paused by an operator (set through {@link PipelineProgress.setPaused});
 * - `FAILED`: failed (a fatal error, or no progress for `STORAGE_FETCH_FAIL_AFTER_MS` while a
 *   fetch is expected); the host stops;
 * - `STOPPED`: stopped on request.
 */
export const PIPELINE_STATES = ['STARTING', 'JOINING', 'RUNNING', 'NOT_FETCHING', 'STALLED', 'PAUSED', 'FAILED', 'STOPPED'] as const;
export type PipelineState = (typeof PIPELINE_STATES)[number];

/** The bounds of the rules (settings `STORAGE_FETCH_UNREADY_AFTER_MS`, `STORAGE_FETCH_FAIL_AFTER_MS`, `STORAGE_STALL_AFTER_MS`). */
export interface ProgressBounds {
  /** No completed fetch for this long while one is expected: not ready, `pipeline_up` 0. */
  readonly fetchUnreadyAfterMs: number;
  /** No completed fetch for this long while one is expected: the pipeline has failed (the host exits 1). */
  readonly fetchFailAfterMs: number;
  /** Lag and no stored batch for this long: stalled (not ready, `pipeline_up` 0, a WARN each minute). */
  readonly stallAfterMs: number;
  /**
   * How long a join may take (from the moment it begins to the assignment): the rebalance timeout
   * (`STORAGE_MAX_POLL_INTERVAL_MS` + 10 s) plus the 5 s kafkajs waits beyond it for a JoinGroup
   * (host/supervisor.ts). A member whose join outlasts it has failed. `undefined`: no limit.
   */
  readonly rebalanceTimeoutMs?: number;
}

/** An error as the record keeps it: message, stack and when (wall clock: it is shown, never measured). */
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
  /** When the first attempt at these offsets began (monotonic ms). */
  readonly startedAt: number;
  /** The same moment on the wall clock (ms since the epoch), for people. */
  readonly startedWallAt: number;
  /** 1 for the first attempt; a redelivery of the same first offset counts up. */
  readonly attempt: number;
  /** When the current attempt began (monotonic ms). */
  readonly attemptStartedAt: number;
  /**
   * An attempt runs now (an invocation): true from its start until it was stored or not stored;
   * false during the back-off after a failed attempt and while the batch waits for its redelivery.
   */
  readonly attempting: boolean;
  /**
   * The consumer loop holds the batch: an attempt runs, or it backs off before the redelivery
   * (heartbeating the group). False once the loop let go of it to fetch it again: a batch that
   * waits for its redelivery excuses no missing fetch.
   */
  readonly busy: boolean;
  /** Transient database errors retried inside the current attempt (in-process invocations). */
  readonly retries: number;
  /** Why the previous attempt, or the last retried try inside this one, was not stored, if one was not. */
  readonly lastError: RecordedError | undefined;
}

/** What the record knows about one partition. */
export interface PartitionProgress {
  readonly partition: number;
  /** The offset this host last committed (the next to read); `undefined` until a commit succeeded. */
  readonly committed: string | undefined;
  /** Messages after the group's committed offset, from the last lag reading or fetched batch. */
  readonly lag: number | undefined;
  /** Since when the partition has had lag without a break (monotonic ms), `undefined` while it has none. */
  readonly pendingSince: number | undefined;
  /** Since when this member holds the partition (monotonic ms; `undefined`: not ours). */
  readonly heldSince: number | undefined;
  /** When a batch of this partition was last stored (monotonic ms). */
  readonly lastStoredAt: number | undefined;
  /** The same on the wall clock, for people. */
  readonly lastStoredWallAt: number | undefined;
}

/** Whether the pipeline's pause state (`pipeline_pauses`) was read, and what it says. */
export type PauseState = 'unknown' | 'paused' | 'running';

/**
 * Why the join under way began: the consumer's first join, a rebalance, the broker dropped this
 * member (a heartbeat or commit answered unknown member / illegal generation), or another rejoin
 * (a consumer kafkajs restarted, a join kafkajs began by itself).
 */
export type JoinCause = 'first' | 'rebalance' | 'dropped' | 'rejoin';

/** A frozen copy of the record at one moment: what every signal reads. All times are monotonic ms unless named `...WallAt`. */
export interface ProgressSnapshot {
  readonly pipeline: PipelineName;
  readonly topic: string;
  readonly group: string;
  readonly createdAt: number;
  /** When the kafkajs consumer was started; `undefined` before. */
  readonly consumerStartedAt: number | undefined;
  /** Set once by `failed()` / `stopped()`: the end of the pipeline. */
  readonly ended: 'failed' | 'stopped' | undefined;
  /** `pause === 'paused'`. */
  readonly paused: boolean;
  /** `unknown` until the pause state was read once: the pipeline fetches nothing until then. */
  readonly pause: PauseState;
  /** Why the pause state could not be read (an error code, no connection details), while it is unknown. */
  readonly pauseUnreadable: string | undefined;
  /** When the pipeline last became free to fetch: its resume, or the first read of its pause state that said running. */
  readonly resumedAt: number | undefined;
  /** While paused: when the pause began (the pause row's time, wall clock: ms since the epoch, for people), else `undefined`. */
  readonly pausedSince: number | undefined;
  /** The consumer holds an assignment now (joined, not rebalancing, not crashed). */
  readonly inGroup: boolean;
  /** Partitions of the topic assigned to this member; `undefined` while not in the group. */
  readonly assignment: readonly number[] | undefined;
  readonly joinedAt: number | undefined;
  /**
   * Since when a fetch has been expected without one (the fetch clock), `undefined` while none is
   * expected: a standby without partitions, a rebalance begun in good standing. Restarted by every
   * completed fetch and stored batch, and by every batch the loop lets go of unless the consumer
   * crashed since its last progress.
   */
  readonly fetchClockFrom: number | undefined;
  /** The consumer crashed since the pipeline last made progress (a fetch, a stored batch, a standby's join): no join excuses it. */
  readonly crashedSinceProgress: boolean;
  /** When the join under way began (a rebalance, a drop or the join itself); `undefined` while none is. */
  readonly joiningSince: number | undefined;
  /** Why the join under way began; `undefined` while none is. */
  readonly joinCause: JoinCause | undefined;
  /**
   * When the process last ran again after a stall of its own (host/process-stalls.ts: SIGSTOP, a
   * suspended VM, a long pause); every clock of the rules restarts there. `undefined`: never.
   */
  readonly runningSince: number | undefined;
  /** The last fetch from the broker that returned without error. */
  readonly lastFetchAt: number | undefined;
  /** The last time a batch ended (stored, not stored, or dropped). */
  readonly lastBatchEndAt: number | undefined;
  readonly lastStoredAt: number | undefined;
  /** The same on the wall clock (ms since the epoch), for people and `last_stored_timestamp_seconds`. */
  readonly lastStoredWallAt: number | undefined;
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
  /** How long a fetch has been expected without one; 0 while none is expected (see {@link evaluateProgress}). */
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
  heldSince: number | undefined;
  lastStoredAt: number | undefined;
  lastStoredWallAt: number | undefined;
}

/**
 * The mutable record of one pipeline. The consumer loop calls the `on*`-style methods as things
 * happen; readers take {@link snapshot}s. Never throws; every method is cheap (no I/O).
 */
export class PipelineProgress {
  readonly pipeline: PipelineName;
  readonly topic: string;
  readonly group: string;
  private readonly clock: Clock;
  private readonly createdAt: number;
  private consumerStartedAt: number | undefined;
  private ended: 'failed' | 'stopped' | undefined;
  private pause: PauseState = 'unknown';
  private pauseUnreadable: string | undefined;
  private resumedAt: number | undefined;
  private pausedSince: number | undefined;
  private assignment: number[] | undefined;
  private joinedAt: number | undefined;
  private fetchClockFrom: number | undefined;
  private crashedSinceProgress = false;
  private joiningSince: number | undefined;
  private joinCause: JoinCause | undefined;
  private lastFetchAt: number | undefined;
  private lastBatchEndAt: number | undefined;
  private lastStoredAt: number | undefined;
  private lastStoredWallAt: number | undefined;
  private crashesSinceFetch = 0;
  private crashesTotal = 0;
  private readonly inFlight = new Map<number, InFlightBatch>();
  private readonly partitions = new Map<number, MutablePartition>();
  private lagReadAt: number | undefined;
  private lastError: RecordedError | undefined;
  private lastBeatAt: number | undefined;
  /** The stalls of the process (shared by every record on the same clock); every snapshot observes them. */
  readonly stalls: ProcessStalls;

  constructor(options: {
    readonly pipeline: PipelineName;
    readonly topic: string;
    readonly group: string;
    readonly clock?: Clock;
    /** Default: the process's, {@link processStallsOf} the clock. */
    readonly stalls?: ProcessStalls;
  }) {
    this.pipeline = options.pipeline;
    this.topic = options.topic;
    this.group = options.group;
    this.clock = options.clock ?? systemClock;
    this.stalls = options.stalls ?? processStallsOf(this.clock);
    this.createdAt = this.now();
  }

  private now(): number {
    return this.clock.monotonic();
  }

  private partition(partition: number): MutablePartition {
    let entry = this.partitions.get(partition);
    if (entry === undefined) {
      entry = {
        committed: undefined,
        highWatermark: undefined,
        lag: undefined,
        pendingSince: undefined,
        heldSince: undefined,
        lastStoredAt: undefined,
        lastStoredWallAt: undefined,
      };
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

  /** Progress while a fetch is expected: the fetch clock starts again now. */
  private progressed(at: number): void {
    if (this.fetchClockFrom !== undefined) this.fetchClockFrom = at;
  }

  /**
   * The loop let go of a batch (its back-off is over, or it was dropped): progress, unless the
   * consumer crashed since its last progress. Then only a completed fetch or a stored batch is
   * (docs/operations.md, "The rules behind the signals"): the clock that runs from before the
   * crash goes on, else a crash during a back-off would put the failure a back-off (up to a
   * minute) past its bound.
   */
  private letGo(at: number): void {
    if (!this.crashedSinceProgress) this.progressed(at);
  }

  /**
   * The kafkajs consumer is being started (after migrations): a fetch is expected from now, while
   * it connects; its first {@link joining} takes that back until the assignment.
   */
  consumerStarted(): void {
    if (this.consumerStartedAt !== undefined) return;
    this.consumerStartedAt = this.now();
    this.fetchClockFrom = this.consumerStartedAt;
  }

  /**
   * The consumer joined its group with these partitions of the topic: the join is over. No
   * partitions: a standby, which expects no fetch (its join is its progress). Partitions after a
   * time in which no fetch was expected (a standby, a join in good standing): the full bound from
   * now. After a crash, the clock that already runs goes on (a crash loop that rejoins every time
   * still fails).
   */
  joined(partitions: readonly number[]): void {
    const at = this.now();
    const next = [...partitions].sort((a, b) => a - b);
    for (const [number, entry] of this.partitions) if (!next.includes(number)) entry.heldSince = undefined;
    // A partition new to this member starts its stall clock now, whatever lag readings said
    // while another member owned it.
    for (const number of next) this.partition(number).heldSince ??= at;
    this.assignment = next;
    this.joinedAt = at;
    this.joiningSince = undefined;
    this.joinCause = undefined;
    if (next.length === 0) {
      this.fetchClockFrom = undefined;
      this.crashedSinceProgress = false;
    } else this.fetchClockFrom ??= at;
    // A partition no longer ours has no batch of ours in flight.
    for (const partition of this.inFlight.keys()) if (!next.includes(partition)) this.inFlight.delete(partition);
  }

  /**
   * Out of the group until the next assignment, for `cause`: from now no fetch is expected, for
   * up to the join's bound (`rebalanceTimeoutMs`), unless the consumer crashed since its last
   * progress (then the fetch clock goes on). A join already under way keeps its start and cause.
   */
  private outOfGroup(cause: JoinCause): void {
    this.assignment = undefined;
    this.joiningSince ??= this.now();
    this.joinCause ??= cause;
    if (!this.crashedSinceProgress) this.fetchClockFrom = undefined;
  }

  /**
   * A join begins (the consumer's gate around kafkajs' join and sync): every join, the first
   * included, a rebalance's, and a rejoin after the broker dropped this member. No fetch is
   * expected until the assignment, for up to `rebalanceTimeoutMs` from the moment the member left
   * its assignment (or this join began); a member whose join outlasts that has failed.
   */
  joining(): void {
    this.outOfGroup(this.joinedAt === undefined ? 'first' : 'rejoin');
  }

  /** A rebalance began (the member's partitions are revoked): as {@link joining}, the rebalance its cause. */
  left(): void {
    this.outOfGroup('rebalance');
  }

  /**
   * The broker dropped this member (a heartbeat or a commit answered unknown member or illegal
   * generation): it holds no partitions and is not ready, saying so, until it rejoined; the
   * rejoin is a join like any other ({@link joining}).
   */
  memberDropped(): void {
    this.outOfGroup('dropped');
  }

  /** A fetch from the broker returned without error. */
  fetched(): void {
    const at = this.now();
    this.lastFetchAt = at;
    this.crashesSinceFetch = 0;
    this.crashedSinceProgress = false;
    this.progressed(at);
  }

  /** The kafkajs consumer crashed (it restarts when `restart`): a fetch is expected, at the latest from now. */
  crashed(error: unknown): void {
    this.crashesSinceFetch += 1;
    this.crashesTotal += 1;
    this.crashedSinceProgress = true;
    this.assignment = undefined;
    this.joiningSince = undefined;
    this.joinCause = undefined;
    this.fetchClockFrom ??= this.now();
    this.lastError = recordError(error, this.clock.wall());
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
      startedWallAt: same ? previous.startedWallAt : this.clock.wall(),
      attempt: same ? previous.attempt + 1 : 1,
      attemptStartedAt: at,
      attempting: true,
      busy: true,
      retries: 0,
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

  /**
   * The batch in flight on `partition` was stored. Its offsets count as committed only once
   * {@link committed} is told so: a commit that failed leaves the committed offset where it was.
   */
  stored(partition: number): void {
    const at = this.now();
    const wall = this.clock.wall();
    this.inFlight.delete(partition);
    this.lastStoredAt = at;
    this.lastStoredWallAt = wall;
    this.lastBatchEndAt = at;
    this.crashedSinceProgress = false;
    this.progressed(at);
    const entry = this.partition(partition);
    entry.lastStoredAt = at;
    entry.lastStoredWallAt = wall;
    // What the fetch said is left after the committed offset, until the next lag reading says
    // better (a commit that failed leaves the lag where the broker has it).
    if (entry.highWatermark !== undefined && entry.committed !== undefined) {
      const left = entry.highWatermark - BigInt(entry.committed);
      this.setLag(partition, Number(left > 0n ? left : 0n), at);
    }
  }

  /** An offset commit succeeded (also for a partial success). */
  committed(partition: number, next: string): void {
    this.partition(partition).committed = next;
  }

  /** A try of the attempt at the batch on `partition` failed transiently and is retried within the attempt. */
  retried(partition: number, error: unknown): void {
    const entry = this.inFlight.get(partition);
    const recorded = recordError(error, this.clock.wall());
    this.lastError = recorded;
    if (entry !== undefined) this.inFlight.set(partition, { ...entry, retries: entry.retries + 1, lastError: recorded });
  }

  /** The attempt at the batch on `partition` was not stored; the loop backs off, then lets the batch go for its redelivery. */
  notStored(partition: number, error: unknown): void {
    const at = this.now();
    this.lastBatchEndAt = at;
    const entry = this.inFlight.get(partition);
    const recorded = recordError(error, this.clock.wall());
    this.lastError = recorded;
    if (entry !== undefined) this.inFlight.set(partition, { ...entry, attempting: false, lastError: recorded });
  }

  /**
   * The back-off after a failed attempt is over: the batch on `partition` waits for its
   * redelivery, which needs a fetch. From now it excuses no missing fetch; the fetch clock starts
   * again now, unless the consumer crashed since its last progress.
   */
  awaitingRedelivery(partition: number): void {
    const entry = this.inFlight.get(partition);
    if (entry !== undefined) this.inFlight.set(partition, { ...entry, busy: false });
    this.letGo(this.now());
  }

  /** The batch on `partition` is no longer ours (a rebalance, a stop): nothing of it is in flight here. */
  dropped(partition: number): void {
    const at = this.now();
    this.lastBatchEndAt = at;
    this.inFlight.delete(partition);
    this.letGo(at);
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
    this.lastError = recordError(error, this.clock.wall());
  }

  /** The heartbeat file was written (at `at`, monotonic ms). */
  beat(at: number = this.now()): void {
    this.lastBeatAt = at;
  }

  /**
   * The pipeline's pause state, read from `pipeline_pauses`: paused (true) or not (false);
   * `since` is when the pause began (the pause row's wall-clock time, so a restart keeps it),
   * default now. The first call ends `unknown`. Becoming free to fetch (a resume, or a first
   * read that says running) restarts the fetch clock: nothing was fetched while it was held.
   */
  setPaused(paused: boolean, since?: number): void {
    const next: PauseState = paused ? 'paused' : 'running';
    if (next === 'running' && this.pause !== 'running') this.resumedAt = this.now();
    this.pause = next;
    this.pauseUnreadable = undefined;
    this.pausedSince = paused ? (since ?? this.clock.wall()) : undefined;
  }

  /** The pause state could not be read (`reason`: an error code, no connection details); matters only while it is unknown. */
  pauseUnread(reason: string): void {
    if (this.pause === 'unknown') this.pauseUnreadable = reason;
  }

  /** The pipeline failed (for good). */
  failed(error: unknown): void {
    this.ended ??= 'failed';
    this.lastError = recordError(error, this.clock.wall());
    this.assignment = undefined;
  }

  /** The pipeline stopped on request. */
  stopped(): void {
    this.ended ??= 'stopped';
    this.assignment = undefined;
  }

  /** A frozen copy of the record now (observing the process's stalls first: a reader right after one sees its resume). */
  snapshot(): ProgressSnapshot {
    const runningSince = this.stalls.observe(this.now());
    return Object.freeze({
      pipeline: this.pipeline,
      topic: this.topic,
      group: this.group,
      createdAt: this.createdAt,
      consumerStartedAt: this.consumerStartedAt,
      ended: this.ended,
      paused: this.pause === 'paused',
      pause: this.pause,
      pauseUnreadable: this.pauseUnreadable,
      resumedAt: this.resumedAt,
      pausedSince: this.pausedSince,
      inGroup: this.assignment !== undefined,
      assignment: this.assignment === undefined ? undefined : [...this.assignment],
      joinedAt: this.joinedAt,
      fetchClockFrom: this.fetchClockFrom,
      crashedSinceProgress: this.crashedSinceProgress,
      joiningSince: this.joiningSince,
      joinCause: this.joinCause,
      runningSince,
      lastFetchAt: this.lastFetchAt,
      lastBatchEndAt: this.lastBatchEndAt,
      lastStoredAt: this.lastStoredAt,
      lastStoredWallAt: this.lastStoredWallAt,
      crashesSinceFetch: this.crashesSinceFetch,
      crashesTotal: this.crashesTotal,
      inFlight: [...this.inFlight.values()].sort((a, b) => a.partition - b.partition),
      partitions: [...this.partitions.entries()]
        .sort(([a], [b]) => a - b)
        .map(([partition, { committed, lag, pendingSince, heldSince, lastStoredAt, lastStoredWallAt }]) => ({
          partition,
          committed,
          lag,
          pendingSince,
          heldSince,
          lastStoredAt,
          lastStoredWallAt,
        })),
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

/** The latest of `times` and the process's last resume after a stall of its own: every clock of the rules starts there at the earliest. */
function since(snapshot: ProgressSnapshot, ...times: ReadonlyArray<number | undefined>): number {
  return Math.max(snapshot.runningSince ?? -Infinity, ...times.map((time) => time ?? -Infinity));
}

/**
 * How long a partition has had lag without a stored batch while this member could work on it:
 * measured from the latest of the lag's start, its last stored batch, the moment the partition
 * became ours, the pipeline's resume and the process's (0 when it has no lag, or is not ours).
 */
function stallOf(snapshot: ProgressSnapshot, partition: PartitionProgress, now: number): number {
  if (partition.pendingSince === undefined || (partition.lag ?? 0) <= 0) return 0;
  if (!snapshot.assignment?.includes(partition.partition)) return 0;
  return Math.max(0, now - since(snapshot, partition.pendingSince, partition.lastStoredAt, partition.heldSince, snapshot.resumedAt));
}

/**
 * How long a fetch has been expected without one (docs/operations.md, "The rules behind the
 * signals"): from the consumer's start while the pause state is unknown (the pipeline cannot
 * make progress until it is read); 0 while paused, while the loop holds a batch (an attempt or
 * its back-off: the attempt's own deadline bounds it) and the consumer has not crashed since, and
 * while no fetch is expected (a standby, a join in good standing: the join has its own bound,
 * {@link joiningOf}); otherwise from the fetch clock, restarted by the pipeline's resume and the
 * process's.
 */
function notFetchingOf(snapshot: ProgressSnapshot, now: number): number {
  const started = snapshot.consumerStartedAt;
  if (started === undefined || snapshot.ended !== undefined) return 0;
  if (snapshot.pause === 'unknown') return Math.max(0, now - since(snapshot, started));
  if (snapshot.pause === 'paused') return 0;
  // A batch the loop holds excuses the missing fetch, unless the consumer crashed since its last
  // progress: then only storing that batch (or a fetch) is progress.
  if (!snapshot.crashedSinceProgress && snapshot.inFlight.some((batch) => batch.busy)) return 0;
  if (snapshot.fetchClockFrom === undefined) return 0;
  return Math.max(0, now - since(snapshot, snapshot.fetchClockFrom, snapshot.resumedAt));
}

/**
 * How long the join under way has lasted, as its bound measures it: from the moment the member
 * left its assignment (or the join began), or the process's resume; 0 outside a join, and after a
 * crash since the last progress (the fetch clock measures that member).
 */
function joiningOf(snapshot: ProgressSnapshot, now: number): number {
  if (snapshot.joiningSince === undefined || snapshot.crashedSinceProgress || snapshot.ended !== undefined) return 0;
  return Math.max(0, now - since(snapshot, snapshot.joiningSince));
}

/** Why a member is out of its group while it joins, by the join's cause. */
function joiningCause(snapshot: ProgressSnapshot, now: number): string {
  const group = snapshot.group;
  const forMs = seconds(now - (snapshot.joiningSince ?? now));
  switch (snapshot.joinCause) {
    case 'first':
      return `joining its consumer group ${group} for ${forMs} (the first join; no fetch is expected until the assignment)`;
    case 'dropped':
      return `not in its consumer group ${group} for ${forMs} (the broker dropped this member; rejoining)`;
    case 'rebalance':
      return `not in its consumer group ${group} for ${forMs} (rebalancing)`;
    default:
      return `not in its consumer group ${group} for ${forMs} (rejoining)`;
  }
}

/**
 * The verdict on one pipeline at `now` (monotonic ms), by the rules of docs/operations.md:
 * a fetch expected and none completed for `fetchUnreadyAfterMs` is NOT_FETCHING, and for
 * `fetchFailAfterMs` FAILED; a partition of ours with lag and no stored batch for `stallAfterMs`
 * (or a batch in flight for that long) is STALLED.
 */
export function evaluateProgress(
  snapshot: ProgressSnapshot,
  bounds: ProgressBounds,
  now: number = systemClock.monotonic(),
): ProgressVerdict {
  const oldestInFlight = oldest(snapshot);
  const notFetchingMs = notFetchingOf(snapshot, now);
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
  // A join past its bound has failed, paused or not: the coordinator gave up on this member long ago.
  const joiningMs = joiningOf(snapshot, now);
  if (bounds.rebalanceTimeoutMs !== undefined && joiningMs > bounds.rebalanceTimeoutMs) {
    // Whole seconds rounded up: the line says the join is longer than its bound, in the bound's unit.
    const cause =
      `joining consumer group ${snapshot.group} for ${Math.ceil(joiningMs / 1000)} s, longer than the rebalance timeout allows ` +
      `(STORAGE_MAX_POLL_INTERVAL_MS + 10 s, and kafkajs' 5 s = ${seconds(bounds.rebalanceTimeoutMs)})`;
    return verdict('FAILED', [`${name}: ${cause}`], cause);
  }
  if (snapshot.paused) return verdict('PAUSED', []);
  const crashes =
    snapshot.crashesSinceFetch > 0
      ? `, ${snapshot.crashesSinceFetch} consumer crashes since (last: ${snapshot.lastError?.message ?? 'unknown'})`
      : '';
  const waiting = snapshot.inFlight.find((batch) => !batch.busy);
  const redelivery =
    waiting === undefined
      ? ''
      : `, a batch waits for its redelivery (partition ${waiting.partition} offsets ${waiting.firstOffset}..${waiting.lastOffset})`;
  const unread = `pause state not read yet${snapshot.pauseUnreadable === undefined ? '' : ` (${snapshot.pauseUnreadable})`}`;
  const none = snapshot.lastFetchAt === undefined ? ' (none since the start)' : '';
  const fetchAge =
    snapshot.pause === 'unknown'
      ? `${unread}, nothing fetched for ${seconds(notFetchingMs)}`
      : `no fetch completed for ${seconds(notFetchingMs)}${none}`;
  if (notFetchingMs > bounds.fetchFailAfterMs) {
    const cause = `${fetchAge}${crashes}${redelivery} (STORAGE_FETCH_FAIL_AFTER_MS=${bounds.fetchFailAfterMs})`;
    return verdict('FAILED', [`${name}: ${cause}`], cause);
  }
  if (notFetchingMs > bounds.fetchUnreadyAfterMs) {
    return verdict('NOT_FETCHING', [`${name}: ${fetchAge}${crashes}${redelivery}`]);
  }
  if (snapshot.pause === 'unknown') return verdict('STARTING', [`${name}: ${unread}; nothing is fetched until it is`]);
  const stalled: string[] = [];
  for (const partition of snapshot.partitions) {
    const stall = stallOf(snapshot, partition, now);
    if (stall > bounds.stallAfterMs)
      stalled.push(`partition ${partition.partition}: lag ${partition.lag} and no stored batch for ${seconds(stall)}`);
  }
  // A batch kept across a pause (or a stall of the process) is measured from the resume: nothing could store it meanwhile.
  const batchStall = oldestInFlight === undefined ? 0 : now - since(snapshot, oldestInFlight.startedAt, snapshot.resumedAt);
  if (
    oldestInFlight !== undefined &&
    batchStall > bounds.stallAfterMs &&
    !stalled.some((line) => line.startsWith(`partition ${oldestInFlight.partition}:`))
  ) {
    stalled.push(`partition ${oldestInFlight.partition}: batch in flight for ${seconds(now - oldestInFlight.startedAt)}`);
  }
  if (stalled.length > 0) {
    const batch = oldestInFlight === undefined ? '' : `; in flight: ${describeBatch(oldestInFlight, now)}`;
    return verdict('STALLED', [`${name}: stalled: ${stalled.join('; ')}${batch}`]);
  }
  if (snapshot.joiningSince !== undefined) return verdict('JOINING', [`${name}: ${joiningCause(snapshot, now)}`]);
  if (snapshot.joinedAt === undefined) return verdict('STARTING', [`${name}: not yet in its consumer group ${snapshot.group}`]);
  if (!snapshot.inGroup) return verdict('JOINING', [`${name}: not in its consumer group ${snapshot.group} (rebalancing or restarting)`]);
  return verdict('RUNNING', []);
}

/** `topic 3 offsets 100..199, attempt 2 (1 database retry), 35 s old, last error: ...`: a batch in one phrase. */
export function describeBatch(batch: InFlightBatch, now: number = systemClock.monotonic()): string {
  const error = batch.lastError === undefined ? '' : `, last error: ${batch.lastError.message}`;
  const retries = batch.retries === 0 ? '' : ` (${batch.retries} database ${batch.retries === 1 ? 'retry' : 'retries'})`;
  return (
    `${batch.topic} partition ${batch.partition} offsets ${batch.firstOffset}..${batch.lastOffset}, attempt ${batch.attempt}${retries}, ` +
    `${seconds(now - batch.startedAt)} old${error}`
  );
}
