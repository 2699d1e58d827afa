/**
 * The record as the batch flow sees it, and what can become of it. On its way from the broker to
 * a table a record takes these shapes, each for a reason:
 * 1. kafkajs' `KafkaMessage` (the host, the CLI's peek): what the client library fetched;
 *    kafka/kafkajs/wire-records.ts keeps its headers in wire order.
 * 2. `SourceRecord` (shared/kafka-event-builder.ts, made by a Kafka client's adapter behind kafka/port.ts): a record as
 *    any Kafka client hands it over, free of kafkajs types, so the event builder knows no client.
 * 3. `KafkaEventRecord` in a `KafkaEvent` (shared/kafka-event.ts): the JSON of a Lambda Kafka
 *    event (base64 key and value). AWS's event source mapping sends it and the host builds it, so
 *    both runtimes run the one handler on the same input. The host's record lists also carry the
 *    bytes they were built from, which the in-process parse takes instead of decoding the base64
 *    back (`carryRecordBytes`).
 * 4. `KafkaRecord` (this file): the event parsed and checked once (bytes as Buffers, a safe
 *    integer offset, an exact timestamp or null); an envelope that rules the record out carries
 *    its `rejection`.
 * 5. A decoded message with its record (shared/process-batch.ts `Decoded`): the contract's typed
 *    value (shared/contracts/), or a `Rejection` that becomes a `DeadLetter` (shared/dead-letters.ts).
 * 6. `BoundRow` (shared/pipeline-spec.ts): the message bound to its application id: one table row,
 *    which the pipeline's columns turn into the UNNEST arrays of the upsert (shared/upsert.ts).
 *    The stored row is that; `WriteOutcome` below counts what the upserts did.
 */
/** One Kafka record as the pipeline sees it, after the Lambda event was parsed. */
export interface KafkaRecord {
  readonly topic: string;
  readonly partition: number;
  /** A safe integer, checked when the event was parsed. */
  readonly offset: number;
  /**
   * Milliseconds since the epoch, as Kafka (and the Lambda event) carries it; `null` when the
   * event holds none that is exact: absent, negative (-1 is Kafka's "none"), beyond 2^53 - 1
   * (a producer writing nanoseconds) or not an integer.
   */
  readonly timestamp: number | null;
  /** `CREATE_TIME`, `LOG_APPEND_TIME`, ... as the event says; `null` when it is not a string. */
  readonly timestampType: string | null;
  readonly key: Buffer | null;
  /** Raw value bytes; `null` for a tombstone / null value. */
  readonly value: Buffer | null;
  readonly headers: readonly KafkaHeader[];
  /**
   * Set when the event's envelope already rules the record out (its value is not a base64
   * string): the record is dead-lettered with this rejection instead of being decoded.
   */
  readonly rejection?: Rejection;
}

/** One header, in order, with its raw bytes. */
export interface KafkaHeader {
  readonly name: string;
  readonly value: Buffer;
}

/** Reasons a message can be dead-lettered (docs/design.md section 6); stored in `dead_letter_events.reason`. */
export const REJECTION_REASONS = [
  'invalid_encoding',
  'invalid_json',
  'invalid_message',
  'unknown_application',
  'empty_message',
  'rejected_by_database',
] as const;

export type RejectionReason = (typeof REJECTION_REASONS)[number];

/** Every contract violation of a message, bounded: the first `kept.length` of `total`. */
export interface Violations {
  readonly total: number;
  /** `<path>: <rule>`, in the contract's order; at most `MAX_KEPT_VIOLATIONS`. */
  readonly kept: readonly string[];
}

/** Why one message cannot be stored. `detail` never contains a NUL character. */
export interface Rejection {
  readonly reason: RejectionReason;
  readonly detail: string;
  /** A contract's rejection (`invalid_message`): all its violations, where `detail` names the first. */
  readonly violations?: Violations;
}

/** What a batch write did, per the `RETURNING (xmax = 0)` of each upsert (counted into one row). */
export interface WriteOutcome {
  readonly inserted: number;
  readonly updated: number;
  readonly skipped: number;
}
