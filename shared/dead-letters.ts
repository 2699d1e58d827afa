/**
 * Dead letters: a rejected record's row in `dead_letter_events` (reason, detail, payload within
 * its limit, coordinates), written in the batch's own transaction, once per record.
 */
import { createHash } from 'node:crypto';
import { arrayLiteral } from './array-literal.js';
import { sanitizeDetail } from './contracts/decode.js';
import type { Queryable } from './queryable.js';
import type { TableDescription, UpsertOptions } from './upsert.js';
import { upsertRows } from './upsert.js';
import type { KafkaHeader, KafkaRecord, Rejection } from './records.js';

/** Payloads of rejected messages are cut to this many bytes (docs/design.md section 6). */
export const DEAD_LETTER_PAYLOAD_LIMIT = 64 * 1024;

/** One message that can never be stored, ready for `dead_letter_events`. */
export interface DeadLetter {
  readonly pipeline: string;
  readonly record: KafkaRecord;
  readonly rejection: Rejection;
}

/** A dead letter as `dead_letter_events` stores it (truncation and hash applied). */
export interface DeadLetterRow {
  readonly pipeline: string;
  readonly record: KafkaRecord;
  readonly reason: string;
  readonly detail: string;
  readonly payload: Buffer | null;
  readonly payloadSize: number;
  readonly payloadSha256: Buffer;
  /** The invocation (one `processBatch` call) whose transaction stores it; see {@link lettersStoredBy}. */
  readonly invocationId: string | null;
  /** Every contract violation, bounded: `{"total": n, "kept": ["<path>: <rule>", ...]}`, or null. */
  readonly violations: string | null;
}

function storableName(name: string): boolean {
  return !name.includes('\u0000') && name.isWellFormed();
}

/**
 * Headers as stored: one element per header, in order, `{name, value: base64}`; a name JSON
 * or JSONB cannot hold (NUL, lone surrogate) goes base64 under `name_base64` instead.
 */
export function headersToJson(headers: readonly KafkaHeader[]): string {
  return JSON.stringify(
    headers.map((header) =>
      storableName(header.name)
        ? { name: header.name, value: header.value.toString('base64') }
        : { name_base64: Buffer.from(header.name, 'utf8').toString('base64'), value: header.value.toString('base64') },
    ),
  );
}

/**
 * Builds the stored row: the payload cut to 64 KiB (stated in `detail`) unless the message is
 * a valid one waiting for its app, the original size, and the sha256 of the full value.
 */
export function deadLetterRow(letter: DeadLetter, invocationId: string | null = null): DeadLetterRow {
  const value = letter.record.value;
  const size = value?.length ?? 0;
  // A valid message waiting for its app is kept whole so it can be re-driven.
  const keepWhole = letter.rejection.reason === 'unknown_application';
  const truncated = !keepWhole && size > DEAD_LETTER_PAYLOAD_LIMIT;
  // Every detail passes the one sanitiser: no NUL (TEXT cannot hold it), no lone surrogate, short.
  const detail =
    sanitizeDetail(letter.rejection.detail) + (truncated ? ` [payload truncated to ${DEAD_LETTER_PAYLOAD_LIMIT} of ${size} bytes]` : '');
  return {
    pipeline: letter.pipeline,
    record: letter.record,
    reason: letter.rejection.reason,
    detail,
    payload: value === null ? null : truncated ? value.subarray(0, DEAD_LETTER_PAYLOAD_LIMIT) : value,
    payloadSize: size,
    payloadSha256: createHash('sha256')
      .update(value ?? Buffer.alloc(0))
      .digest(),
    invocationId,
    violations: letter.rejection.violations === undefined ? null : JSON.stringify(letter.rejection.violations),
  };
}

/** `dead_letter_events`, written by the same generic upsert as the data tables. */
export const deadLetterTable: TableDescription<DeadLetterRow> = {
  name: 'dead_letter_events',
  columns: [
    { name: 'pipeline', type: 'text', value: (row) => row.pipeline },
    { name: 'topic', type: 'text', value: (row) => row.record.topic },
    { name: 'partition', type: 'integer', value: (row) => row.record.partition },
    { name: 'kafka_offset', type: 'bigint', value: (row) => row.record.offset },
    {
      name: 'kafka_timestamp',
      type: 'bigint',
      // Exact to the millisecond for every safe integer (to_timestamp of a fraction rounds far out).
      select: "to_timestamp(div(input.kafka_timestamp, 1000)) + mod(input.kafka_timestamp, 1000) * interval '1 millisecond'",
      // NULL when there is no exact timestamp: absent, -1 (Kafka's "none"), beyond 2^53.
      value: ({ record }) => (record.timestamp !== null && record.timestamp >= 0 ? record.timestamp : null),
    },
    { name: 'message_key', type: 'bytea', value: (row) => row.record.key },
    { name: 'payload', type: 'bytea', value: (row) => row.payload },
    { name: 'payload_size', type: 'integer', value: (row) => row.payloadSize },
    { name: 'payload_sha256', type: 'bytea', value: (row) => row.payloadSha256 },
    { name: 'headers', type: 'jsonb', value: (row) => headersToJson(row.record.headers) },
    { name: 'reason', type: 'text', value: (row) => row.reason },
    { name: 'detail', type: 'text', value: (row) => row.detail },
    { name: 'invocation_id', type: 'text', value: (row) => row.invocationId },
    { name: 'violations', type: 'jsonb', value: (row) => row.violations },
  ],
  conflictColumns: ['topic', 'partition', 'kafka_offset', 'payload_sha256'],
};

/** How dead letters are written: the upsert's options, and the invocation that writes them. */
export interface DeadLetterWriteOptions extends UpsertOptions {
  /** Stored on each new row; {@link lettersStoredBy} finds them again. */
  readonly invocationId?: string;
}

/**
 * Writes dead letters with one statement, in the caller's transaction. A replayed partition
 * conflicts on the identity and writes nothing new. Returns how many rows were new.
 */
export async function insertDeadLetters(
  client: Queryable,
  letters: readonly DeadLetter[],
  options: DeadLetterWriteOptions = {},
): Promise<number> {
  if (letters.length === 0) return 0;
  const invocationId = options.invocationId ?? null;
  const outcome = await upsertRows(
    client,
    deadLetterTable,
    letters.map((letter) => deadLetterRow(letter, invocationId)),
    options,
  );
  return outcome.inserted;
}

/**
 * Which of `letters` are stored with `invocationId`: the ones this invocation stored, in this
 * attempt or in an earlier one whose COMMIT was applied though its acknowledgement was lost
 * (the retry then meets its own letters as conflicts). A letter stored by another invocation
 * (a replay, a redelivery) is not among them. One probe of the identity index per letter.
 */
export async function lettersStoredBy(client: Queryable, letters: readonly DeadLetter[], invocationId: string): Promise<DeadLetter[]> {
  if (letters.length === 0) return [];
  const rows = letters.map((letter) => deadLetterRow(letter));
  const result = await client.query<{ position: string }>(
    `SELECT input.position::text AS position
       FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bytea[]) WITH ORDINALITY
            AS input(topic, partition, kafka_offset, payload_sha256, position)
       JOIN dead_letter_events AS stored
         ON stored.topic = input.topic AND stored.partition = input.partition
        AND stored.kafka_offset = input.kafka_offset AND stored.payload_sha256 = input.payload_sha256
      WHERE stored.invocation_id = $5`,
    [
      arrayLiteral(rows.map((row) => row.record.topic)),
      arrayLiteral(rows.map((row) => row.record.partition)),
      arrayLiteral(rows.map((row) => row.record.offset)),
      rows.map((row) => row.payloadSha256),
      invocationId,
    ],
  );
  const positions = new Set(result.rows.map((row) => Number(row.position) - 1));
  return letters.filter((_, index) => positions.has(index));
}
