/**
 * A record decoder that returns what kafkajs' own (`protocol/recordBatch/record/v0/decoder.js`)
 * returns, field for field, for every well-formed record, with the wire-order headers of
 * ./wire-records.ts beside it, without kafkajs' per-record `Long` arithmetic.
 *
 * kafkajs reads a record's timestamp delta as a `Long` built byte by byte (`readVarLong`: a
 * `Long` per byte, then zig-zag, `fromValue`, `add`, `toString`), and its offset by
 * `Long.fromValue(firstOffset).add(delta).toString()`: in a drain of 200,000 reviews that was
 * 320 MB of the 1.9 GB the host allocated. Here the varints are read from the record's bytes
 * as numbers and added to the batch's first offset and first timestamp, parsed once per batch,
 * while every value stays within 2^53; the strings are the same (`String` of a safe integer is
 * `Long#toString` of it).
 *
 * Anything outside that path answers `undefined` and the caller runs kafkajs' own decoder on the
 * same bytes instead (./wire-records.ts): a varint of 5 bytes or more, a varlong of 8 or more, a
 * length other than -1 below zero, a read past the record's end, a first offset or timestamp that
 * is not a safe integer, a sum beyond 2^53. So malformed bytes get exactly kafkajs' outcome, its
 * errors included. test/unit/kafka/kafkajs/record-decoder.test.ts holds the two equal on
 * generated and on random records.
 */
import type { WireHeader, WireRecord } from './wire-records.js';

/** What kafkajs' record decoder reads its bytes through (its `protocol/decoder.js`). */
export interface KafkajsRecordBytes {
  buffer: Buffer;
  offset: number;
}

/** The batch fields kafkajs' record decoder reads (`recordBatch/v0/decoder.js` passes them). */
export interface RecordBatchContext {
  readonly firstOffset?: string;
  readonly firstTimestamp?: string;
  readonly magicByte?: number;
  readonly isControlBatch?: boolean;
  readonly timestampType?: number;
  readonly maxTimestamp?: string;
}

// kafkajs' TimestampTypes.LOG_APPEND_TIME.
const LOG_APPEND_TIME = 1;

/** Set when a read leaves the fast path; the decoder then answers `undefined`. */
let off = false;

/** A zig-zag varint of at most 4 bytes (|value| < 2^27), as kafkajs' `readVarInt` reads it. */
function varInt(bytes: KafkajsRecordBytes): number {
  const { buffer } = bytes;
  let at = bytes.offset;
  let result = 0;
  for (let shift = 0; shift < 28; shift += 7) {
    if (at >= buffer.length) break;
    const byte = buffer[at++] as number;
    result += (byte & 0x7f) << shift;
    if (byte < 0x80) {
      bytes.offset = at;
      return (result >>> 1) ^ -(result & 1);
    }
  }
  off = true;
  return 0;
}

/** A zig-zag varlong of at most 7 bytes (|value| < 2^48), as a number. */
function varLong(bytes: KafkajsRecordBytes): number {
  const { buffer } = bytes;
  let at = bytes.offset;
  let result = 0;
  for (let scale = 1, count = 0; count < 7; count += 1, scale *= 128) {
    if (at >= buffer.length) break;
    const byte = buffer[at++] as number;
    result += (byte & 0x7f) * scale;
    if (byte < 0x80) {
      bytes.offset = at;
      return result % 2 === 0 ? result / 2 : -(result + 1) / 2;
    }
  }
  off = true;
  return 0;
}

/** `[start, end)` of the next varint-prefixed bytes; `start` -1 for null (length -1). */
function varBytes(bytes: KafkajsRecordBytes): [number, number] {
  const length = varInt(bytes);
  if (length === -1) return [-1, -1];
  const start = bytes.offset;
  if (length < 0 || start + length > bytes.buffer.length) {
    off = true;
    return [-1, -1];
  }
  bytes.offset = start + length;
  return [start, start + length];
}

/** A safe integer written as its canonical decimal text, else `undefined`. */
function safeInteger(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) && String(value) === text ? value : undefined;
}

// The last batch's first offset and timestamp as numbers: the records of a batch come one after
// another with the same context object.
let lastContext: RecordBatchContext | undefined;
let firstOffsetOf: number | undefined;
let firstTimestampOf: number | undefined;

/** `first + delta` as kafkajs' `Long` writes it, while both and the sum are safe integers. */
function plus(first: number | undefined, delta: number): string | undefined {
  if (first === undefined) return undefined;
  const sum = first + delta;
  return Number.isSafeInteger(sum) ? String(sum) : undefined;
}

// What a record without headers shares with every other one (most records): frozen, so that a
// write to one of them throws instead of reaching the others. A fetched record lives until its
// event is written, so each object less per record is less for every young-generation collection
// to copy (docs/design.md section 3, "Fetching ahead": the wire-record paragraph).
const NO_HEADERS: readonly WireHeader[] = Object.freeze([]);
const NO_GROUPED_HEADERS: Record<string, unknown> = Object.freeze({});
const CREATE_TIME_WIRE: WireRecord = Object.freeze({ headers: NO_HEADERS, timestampType: 'CREATE_TIME' });
const LOG_APPEND_TIME_WIRE: WireRecord = Object.freeze({ headers: NO_HEADERS, timestampType: 'LOG_APPEND_TIME' });

/** kafkajs' grouping of the headers by name, exactly as its record decoder folds them. */
function groupedHeaders(list: readonly WireHeader[]): Record<string, unknown> {
  return list.reduce<Record<string, unknown>>(
    (grouped, { name, value }) => ({
      ...grouped,
      [name]: grouped[name] === undefined ? value : Array.isArray(grouped[name]) ? grouped[name].concat([value]) : [grouped[name], value],
    }),
    {},
  );
}

/**
 * The record kafkajs' decoder would return for the bytes at `bytes.offset`, with its wire record
 * (headers in order, timestamp type), or `undefined` (the offset put back) when the bytes leave
 * the fast path described above.
 */
export function decodeRecordFast(
  bytes: KafkajsRecordBytes,
  context: RecordBatchContext,
): { readonly record: Record<string, unknown>; readonly wire: WireRecord } | undefined {
  const { buffer } = bytes;
  const start = bytes.offset;
  if (!Buffer.isBuffer(buffer) || start >= buffer.length) return undefined;
  if (context !== lastContext) {
    lastContext = context;
    firstOffsetOf = safeInteger(context.firstOffset);
    firstTimestampOf = safeInteger(context.firstTimestamp);
  }
  off = false;
  const attributes = buffer.readInt8(start);
  bytes.offset = start + 1;
  const timestampDelta = varLong(bytes);
  const offsetDelta = varInt(bytes);
  const [keyStart, keyEnd] = varBytes(bytes);
  const [valueStart, valueEnd] = varBytes(bytes);
  const count = off ? 0 : varInt(bytes);
  const headers: WireHeader[] | undefined = count > 0 ? [] : undefined;
  for (let i = 0; i < count && !off; i += 1) {
    const [nameStart, nameEnd] = varBytes(bytes);
    const [headerStart, headerEnd] = varBytes(bytes);
    // kafkajs reads a null header key as null, which the grouping spells "null".
    const name = (nameStart < 0 ? null : buffer.toString('utf8', nameStart, nameEnd)) as string;
    headers?.push({ name, value: headerStart < 0 ? null : buffer.subarray(headerStart, headerEnd) });
  }
  const logAppend = context.timestampType === LOG_APPEND_TIME && Boolean(context.maxTimestamp);
  const timestamp = logAppend ? context.maxTimestamp : plus(firstTimestampOf, timestampDelta);
  const offset = plus(firstOffsetOf, offsetDelta);
  if (off || count < -1 || timestamp === undefined || offset === undefined) {
    bytes.offset = start;
    return undefined;
  }
  return {
    record: {
      magicByte: context.magicByte,
      attributes,
      timestamp,
      offset,
      key: keyStart < 0 ? null : buffer.subarray(keyStart, keyEnd),
      value: valueStart < 0 ? null : buffer.subarray(valueStart, valueEnd),
      headers: headers === undefined || headers.length === 0 ? NO_GROUPED_HEADERS : groupedHeaders(headers),
      isControlRecord: context.isControlBatch === undefined ? false : context.isControlBatch,
      batchContext: context,
    },
    wire:
      headers === undefined || headers.length === 0
        ? context.timestampType === LOG_APPEND_TIME
          ? LOG_APPEND_TIME_WIRE
          : CREATE_TIME_WIRE
        : { headers, timestampType: context.timestampType === LOG_APPEND_TIME ? 'LOG_APPEND_TIME' : 'CREATE_TIME' },
  };
}
