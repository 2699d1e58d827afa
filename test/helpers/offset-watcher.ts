/**
 * Watches a consumer group's committed offsets from the broker while a test runs (issue 38: "a
 * committed offset never moves back unless an operator moved it"). Every poll fetches the group's
 * offsets of one topic; every change per partition is recorded with a monotonic time since the
 * watch began, and every move back (an offset lower than the one before it, or none after one)
 * is a violation. A move back and forth between two polls is missed: the poll interval is the
 * watch's resolution, and a real move back (kafkajs applying a stale seek) lasts a whole batch or
 * more.
 */
import type { Admin } from 'kafkajs';

/** One observed change of a partition's committed offset (`-1n`: none). */
export interface OffsetChange {
  readonly partition: number;
  /** `undefined` for the partition's first observation. */
  readonly from: bigint | undefined;
  readonly to: bigint;
  /** Milliseconds since the watch began (monotonic clock). */
  readonly atMs: number;
}

/** A committed offset that went back: lower than the one before it, or none after one. */
export interface OffsetMoveBack {
  readonly partition: number;
  readonly from: bigint;
  readonly to: bigint;
  readonly atMs: number;
}

/** A running watch of one group's committed offsets on one topic. */
export interface OffsetWatcher {
  /** Every change seen so far, in the order seen. */
  changes(): readonly OffsetChange[];
  /** Every move back seen so far. */
  violations(): readonly OffsetMoveBack[];
  /** Records that `what` happened now, on the watch's clock: the summary lists it beside the moves back. */
  note(what: string): void;
  /** One line: polls, per partition its changes, min, max, last and moves back, then the notes. */
  summary(): string;
  /** Throws, naming every move back and the summary, once one was seen. */
  assertNoMoveBack(): void;
  /** Resolves with `work`'s value, or rejects as soon as a move back is seen (fail fast). */
  guard<T>(work: Promise<T>): Promise<T>;
  /** Polls once more, then stops polling. */
  stop(): Promise<void>;
}

/** Starts polling `admin.fetchOffsets` for `groupId` on `topic` every `intervalMs`. */
export function watchCommittedOffsets(admin: Admin, groupId: string, topic: string, intervalMs = 150): OffsetWatcher {
  const began = performance.now();
  const last = new Map<number, bigint>();
  const changes: OffsetChange[] = [];
  const moves: OffsetMoveBack[] = [];
  const notes: Array<{ readonly what: string; readonly atMs: number }> = [];
  const moveBackListeners = new Set<(move: OffsetMoveBack) => void>();
  let polls = 0;
  let pollErrors = 0;
  let lastPollError: unknown;
  let stopped = false;

  const poll = async () => {
    let partitions: ReadonlyArray<{ partition: number; offset: string }>;
    try {
      const [result] = await admin.fetchOffsets({ groupId, topics: [topic] });
      partitions = result?.partitions ?? [];
    } catch (error) {
      pollErrors += 1;
      lastPollError = error;
      return;
    }
    polls += 1;
    const atMs = performance.now() - began;
    for (const { partition, offset } of partitions) {
      const to = BigInt(offset);
      const from = last.get(partition);
      if (from === to) continue;
      last.set(partition, to);
      changes.push({ partition, from, to, atMs });
      if (from !== undefined && from >= 0n && (to < from || to < 0n)) {
        const move = { partition, from, to, atMs };
        moves.push(move);
        for (const listener of moveBackListeners) listener(move);
      }
    }
  };

  const loop = (async () => {
    while (!stopped) {
      const started = performance.now();
      await poll();
      const rest = intervalMs - (performance.now() - started);
      if (rest > 0 && !stopped) await new Promise((resolve) => setTimeout(resolve, rest));
    }
  })();

  const summary = () => {
    const perPartition = [...last.keys()]
      .sort((a, b) => a - b)
      .map((partition) => {
        const own = changes.filter((change) => change.partition === partition);
        const values = own.map((change) => change.to);
        const min = values.reduce((a, b) => (b < a ? b : a));
        const max = values.reduce((a, b) => (b > a ? b : a));
        const back = moves.filter((move) => move.partition === partition);
        return (
          `p${partition}: ${own.length} changes, min ${min}, max ${max}, last ${last.get(partition)}, ` +
          `${back.length} moves back${back.length > 0 ? ` (${back.map(describeMove).join(', ')})` : ''}`
        );
      });
    return (
      `offset watcher ${groupId} on ${topic}: ${polls} polls over ${seconds(performance.now() - began)} s (${pollErrors} failed` +
      `${lastPollError === undefined ? '' : `, last: ${String(lastPollError)}`}); ${perPartition.join('; ')}; ` +
      `moves back in all: ${moves.length}` +
      (notes.length > 0 ? `; notes: ${notes.map(({ what, atMs }) => `${what} at ${seconds(atMs)} s`).join(', ')}` : '')
    );
  };

  const failure = () =>
    new Error(`a committed offset moved back: ${moves.map((move) => `p${move.partition} ${describeMove(move)}`).join(', ')}\n${summary()}`);

  return {
    changes: () => changes,
    violations: () => moves,
    note(what) {
      notes.push({ what, atMs: performance.now() - began });
    },
    summary,
    assertNoMoveBack() {
      if (moves.length > 0) throw failure();
    },
    guard<T>(work: Promise<T>): Promise<T> {
      if (moves.length > 0) return Promise.reject(failure());
      let listener: ((move: OffsetMoveBack) => void) | undefined;
      const movedBack = new Promise<never>((_resolve, reject) => {
        listener = () => reject(failure());
        moveBackListeners.add(listener);
      });
      return Promise.race([work, movedBack]).finally(() => {
        if (listener) moveBackListeners.delete(listener);
      });
    },
    async stop() {
      stopped = true;
      await loop;
      await poll();
    },
  };
}

function describeMove(move: OffsetMoveBack): string {
  return `${move.from} -> ${move.to} at ${seconds(move.atMs)} s`;
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);
