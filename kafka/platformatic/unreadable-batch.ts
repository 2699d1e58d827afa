/**
 * Where a record batch lies that a platformatic fetch could not decode (kafka/port.ts
 * `UnreadableBatch`). The client decodes a whole Fetch answer at once and its error does not say
 * which partition or which batch failed; the host's failure line must (its replay steps over
 * exactly that batch). So the partitions of the failed fetch are fetched again, alone, by a
 * consumer without the client's retries (each failing fetch would otherwise take a second per
 * retry), until one fails:
 *
 * - its first offset: one batch per fetch from the partition's position (the broker answers at
 *   least one whole batch however small the limit), up to the first that fails;
 * - its last offset: the offset before the first one a fetch reads again, found by doubling steps
 *   and then halving them (a fetch from inside the batch answers the whole batch, and fails again),
 *   or the partition's end.
 */
import type { fetchV17 } from '@platformatic/kafka';
import type { UnreadableBatch } from '../port.js';
import { codecOf, decodeFailureOf } from './fetch-errors.js';

/** One partition of the failed fetch, and the offset it was fetched from. */
interface FetchedPartition {
  readonly topic: string;
  readonly partition: number;
  readonly position: bigint;
}

/** What the search needs: the partitions, the decode failure, and how to fetch one partition alone. */
interface LocateOptions {
  readonly partitions: readonly FetchedPartition[];
  readonly failure: Error;
  readonly maxBytesPerPartition: number;
  /** Fetches one partition from `offset` (without the client's retries). */
  readonly fetch: (partition: FetchedPartition, offset: bigint, partitionMaxBytes: number) => Promise<fetchV17.FetchResponse>;
  /** The partition's end offset. */
  readonly end: (partition: FetchedPartition) => Promise<bigint | undefined>;
}

/** One fetch of a partition alone: the last offset it read, or the decode failure. */
async function readsAt(
  options: LocateOptions,
  partition: FetchedPartition,
  offset: bigint,
  partitionMaxBytes: number,
): Promise<{ readonly last: bigint | undefined } | { readonly failure: Error }> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const answer = await options.fetch(partition, offset, partitionMaxBytes);
      let last: bigint | undefined;
      for (const batch of answer.responses[0]?.partitions[0]?.records ?? []) {
        const batchLast = batch.firstOffset + BigInt(batch.lastOffsetDelta);
        if (last === undefined || batchLast > last) last = batchLast;
      }
      return { last };
    } catch (error) {
      const failure = decodeFailureOf(error);
      if (failure !== undefined) return { failure };
      // A fetch that failed to decode leaves the client's fetch session behind the broker's: the next
      // one is refused (INVALID_FETCH_SESSION_EPOCH), and the client starts a new session after it.
      if (attempt >= 3) throw error;
    }
  }
}

/** The unreadable batch of a failed fetch, located when the broker lets us (see the file's comment). */
export async function locateUnreadableBatch(options: LocateOptions): Promise<UnreadableBatch> {
  const { failure } = options;
  const found = codecOf(failure);
  const unlocated: UnreadableBatch = { ...(found ? { codec: found } : {}), reason: failure.message };
  try {
    for (const partition of options.partitions) {
      let base = partition.position;
      const whole = await readsAt(options, partition, base, options.maxBytesPerPartition);
      if (!('failure' in whole)) continue;
      let unreadable = whole.failure;
      for (;;) {
        const one = await readsAt(options, partition, base, 1);
        if ('failure' in one) {
          unreadable = one.failure;
          break;
        }
        if (one.last === undefined || one.last < base) return unlocated;
        base = one.last + 1n;
      }
      const end = (await options.end(partition)) ?? base + 1n;
      let bad = base;
      let readable = end;
      for (let step = 1n; bad + step < end; step *= 2n) {
        if (!('failure' in (await readsAt(options, partition, bad + step, 1)))) {
          readable = bad + step;
          break;
        }
        bad += step;
      }
      while (readable - bad > 1n) {
        const middle = (bad + readable) / 2n;
        if ('failure' in (await readsAt(options, partition, middle, 1))) bad = middle;
        else readable = middle;
      }
      const codec = codecOf(unreadable);
      return {
        ...(codec ? { codec } : {}),
        reason: unreadable.message,
        location: { partition: partition.partition, baseOffset: base.toString(), lastOffset: (readable - 1n).toString() },
      };
    }
  } catch {
    // The broker went away while we looked: the batch stays unlocated, the crash is fatal all the same.
  }
  return unlocated;
}
