/**
 * The pure offset decisions: from what an invocation returned (a partial batch response, a
 * failure) to where each partition of the event continues and what is committed.
 */
import type { EventPartition } from './event-cut.js';
import { isObject } from '../shared/kafka-event.js';

/** What came back from one invocation, as the offset decisions see it. */
export type HandlerOutcome =
  /** The function returned; `payload` is its (parsed) response, possibly `null`. */
  | { readonly kind: 'response'; readonly payload: unknown }
  /** The function returned something that is not JSON. */
  | { readonly kind: 'invalid-response'; readonly detail: string }
  /** A thrown error (in-process) or a function error (Lambda). */
  | { readonly kind: 'error'; readonly error: unknown };

/** A partition and an offset: where to commit, or where to redeliver from. Offsets are decimal strings. */
export interface PartitionOffset {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
}

/** What to do with one event's offsets once its invocation is over. */
export interface OffsetDecision {
  /** `success`: everything commits; `partial`: reported failures; `failed`: nothing commits. */
  readonly outcome: 'success' | 'partial' | 'failed';
  /** Offsets to commit: the next offset to read, per partition (only partitions that advanced). */
  readonly commit: readonly PartitionOffset[];
  /** Partitions to redeliver, and from where (after a back-off). */
  readonly redeliver: readonly PartitionOffset[];
  /** Why the batch counts as failed, for the log. */
  readonly reason?: string;
  /**
   * The response reported failures although the switch is off: how many entries. They were
   * honoured all the same (logged as an ERROR): on AWS such a mapping would lose the batch.
   */
  readonly reportedWithoutSwitch: number;
}

/** A reported offset as a decimal string, or undefined when it is not a non-negative integer. */
function offsetText(value: unknown): string | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? String(value) : undefined;
  if (typeof value === 'string' && /^\d+$/.test(value)) return BigInt(value).toString();
  return undefined;
}

function everything(partitions: readonly EventPartition[]): OffsetDecision {
  return {
    outcome: 'success',
    commit: partitions.map(({ topic, partition, next }) => ({ topic, partition, offset: next })),
    redeliver: [],
    reportedWithoutSwitch: 0,
  };
}

function nothing(partitions: readonly EventPartition[], reason: string): OffsetDecision {
  return {
    outcome: 'failed',
    commit: [],
    redeliver: partitions.map(({ topic, partition, offsets }) => ({ topic, partition, offset: offsets[0] as string })),
    reason,
    reportedWithoutSwitch: 0,
  };
}

/**
 * Turns one invocation's outcome into offsets, as an event source mapping would (docs/design.md section 3,
 * "Offset semantics"), except where AWS would lose data:
 *
 * - a thrown or function error, or (with the switch on) a response that is not a valid
 *   partial batch response, or an identifier naming a partition or offset that was not in
 *   the event: the whole batch failed; commit nothing, redeliver every partition from its
 *   first offset;
 * - no response, no or an empty `batchItemFailures`: commit `next` (last offset + 1) for
 *   every partition;
 * - `batchItemFailures`: a listed partition commits up to (not including) its lowest failed
 *   offset and is redelivered from it; unlisted partitions commit as on success;
 * - with the switch off, a response without a failure report (even one that is not JSON) is a
 *   success, as on AWS. A failure report is honoured all the same (`reportedWithoutSwitch`,
 *   for an ERROR log): AWS would count it as success and lose the batch, and no host setting
 *   may do that.
 *
 * Pure: no Kafka, no clock. Offsets are compared as BigInt, never rounded through Number.
 */
export function decideOffsets(
  partitions: readonly EventPartition[],
  outcome: HandlerOutcome,
  reportBatchItemFailures: boolean,
): OffsetDecision {
  if (outcome.kind === 'error') {
    const error = outcome.error;
    return nothing(partitions, `function error: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
  }
  if (outcome.kind === 'invalid-response') {
    return reportBatchItemFailures ? nothing(partitions, `invalid response: ${outcome.detail}`) : everything(partitions);
  }
  const payload = outcome.payload;
  const failures = isObject(payload) ? payload.batchItemFailures : undefined;
  if (reportBatchItemFailures) return decideResponse(partitions, payload);
  const reported = failures !== undefined && failures !== null && !(Array.isArray(failures) && failures.length === 0);
  if (!reported) return everything(partitions);
  return { ...decideResponse(partitions, payload), reportedWithoutSwitch: Array.isArray(failures) ? failures.length : 1 };
}

/** A returned payload read as a partial batch response. */
function decideResponse(partitions: readonly EventPartition[], payload: unknown): OffsetDecision {
  if (payload === null || payload === undefined) return everything(partitions);
  if (!isObject(payload)) return nothing(partitions, 'invalid response: not an object');
  const failures = payload.batchItemFailures;
  if (failures === undefined || failures === null) return everything(partitions);
  if (!Array.isArray(failures)) return nothing(partitions, 'invalid response: batchItemFailures is not an array');
  if (failures.length === 0) return everything(partitions);

  const byKey = new Map(partitions.map((partition) => [partition.key, partition]));
  const lowest = new Map<string, bigint>();
  for (const failure of failures) {
    const identifier = isObject(failure) ? failure.itemIdentifier : undefined;
    if (!isObject(identifier) || typeof identifier.partition !== 'string') {
      return nothing(partitions, `invalid itemIdentifier ${JSON.stringify(failure) ?? String(failure)}`);
    }
    const offset = offsetText(identifier.offset);
    const partition = byKey.get(identifier.partition);
    if (offset === undefined || partition === undefined || !partition.offsets.includes(offset)) {
      return nothing(partitions, `itemIdentifier ${JSON.stringify(identifier)} names a partition/offset that is not in the event`);
    }
    const value = BigInt(offset);
    const current = lowest.get(partition.key);
    if (current === undefined || value < current) lowest.set(partition.key, value);
  }

  const commit: PartitionOffset[] = [];
  const redeliver: PartitionOffset[] = [];
  for (const partition of partitions) {
    const { topic, partition: number, key, offsets, next } = partition;
    const failed = lowest.get(key);
    if (failed === undefined) {
      commit.push({ topic, partition: number, offset: next });
      continue;
    }
    if (failed > BigInt(offsets[0] as string)) commit.push({ topic, partition: number, offset: failed.toString() });
    redeliver.push({ topic, partition: number, offset: failed.toString() });
  }
  return { outcome: 'partial', commit, redeliver, reportedWithoutSwitch: 0 };
}
