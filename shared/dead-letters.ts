import { createHash } from 'node:crypto';
import { sanitizeDetail } from './contracts/decode.js';
import type { Queryable } from './queryable.js';
import type { TableDescription, UpsertOptions } from './upsert.js';
import { upsertRows } from './upsert.js';
import type { KafkaHeader, KafkaRecord, Rejection } from './types.js';

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
export function deadLetterRow(letter: DeadLetter): DeadLetterRow {
  const value = letter.record.value;
  const size = value?.length ?? 0;
  // A valid message waiting for its app is kept whole so it can be re-driven.
  const keepWhole = letter.rejection.reason === 'unknown_application';
  const truncated = !keepWhole && size > DEAD_LETTER_PAYLOAD_LIMIT;
  // Every detail passes the one sanitiser: no NUL (TEXT cannot hold it), no lone surrogate, short.
  const detail = sanitizeDetail(letter.rejection.detail) +
    (truncated ? ` [payload truncated to ${DEAD_LETTER_PAYLOAD_LIMIT} of ${size} bytes]` : '');
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
  ],
  conflictColumns: ['topic', 'partition', 'kafka_offset', 'payload_sha256'],
};

/**
 * Writes dead letters with one statement, in the caller's transaction. A replayed partition
 * conflicts on the identity and writes nothing new. Returns how many rows were new.
 */
export async function insertDeadLetters(
  client: Queryable,
  letters: readonly DeadLetter[],
  options: UpsertOptions = {},
): Promise<number> {
  if (letters.length === 0) return 0;
  const outcome = await upsertRows(client, deadLetterTable, letters.map(deadLetterRow), options);
  return outcome.inserted;
}
