/**
 * What kafkajs' record decoding loses, put back: the headers of a record in wire order.
 *
 * kafkajs reads a record's headers as a list, then folds them into an object keyed by name
 * (`{trace: [1, 3], other: 2}`), so `trace=1, other=2, trace=3` comes out as
 * `trace=1, trace=3, other=2` and the interleaving is gone (docs/design.md section 6 stores headers in
 * order). It also drops the batch's timestamp type from the message it hands over.
 *
 * kafkajs' decoding is open CommonJS code, loaded lazily: the record batch decoder
 * (`protocol/recordBatch/v0/decoder.js`) is `require`d by the Fetch responses at the first
 * fetch and captures the record decoder (`protocol/recordBatch/record/v0/decoder.js`) then.
 * {@link installWireRecords} (called by `installKafkajsWorkarounds`, ./index.ts) replaces the
 * record decoder's export in Node's module cache with a wrapper. The wrapper decodes a
 * well-formed record itself (./record-decoder.ts: the fields kafkajs returns, the same values,
 * without kafkajs' per-record `Long` arithmetic) and hands anything else to kafkajs' own decoder
 * unchanged, catching the header list at the one place it exists there, the record decoder's
 * `readVarIntArray` call, by overriding that method on the record's own `Decoder` instance
 * (a fresh one per record; nothing global changes). The ordered headers and the timestamp
 * type ride on the message under a symbol, read with {@link wireRecordOf}. Should the batch
 * decoder already be cached (a consumer fetched before the install), its cache entry and
 * those of the modules that captured it are dropped, so the next fetch loads them anew with
 * the wrapper: the order of imports and installs never matters.
 *
 * kafkajs is pinned (package.json); test/unit/kafka/kafkajs/wire-records.test.ts decodes a real
 * record batch encoded by kafkajs to hold this to it, and the host checks the same at every
 * start (./self-check.ts): a kafkajs without the headers fails closed.
 */
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import type { KafkaMessage } from 'kafkajs';
import { decodeRecordFast } from './record-decoder.js';
import type { KafkajsRecordBytes, RecordBatchContext } from './record-decoder.js';
import { headersUnavailable } from './version.js';

/** A header as it was on the wire; `value` is null for a null header value. */
export interface WireHeader {
  readonly name: string;
  readonly value: Buffer | null;
}

/** What the wrapper adds to each record kafkajs decodes. */
export interface WireRecord {
  readonly headers: readonly WireHeader[];
  readonly timestampType: 'CREATE_TIME' | 'LOG_APPEND_TIME';
}

// Symbol.for: one key even if this module is evaluated twice in a process (test runners).
const WIRE = Symbol.for('storage-consumer.kafka-wire-record');
const INSTALLED = Symbol.for('storage-consumer.kafka-wire-record-decoder');
const KAFKAJS = Symbol.for('storage-consumer.kafka-wire-record-kafkajs-decoder');

// kafkajs' TimestampTypes.LOG_APPEND_TIME.
const LOG_APPEND_TIME = 1;

type Reader = (decoder: KafkajsDecoder) => unknown;
interface KafkajsDecoder {
  readVarIntArray(reader: Reader): unknown[];
}
type RecordDecoder = ((decoder: KafkajsDecoder, context?: RecordBatchContext) => Record<PropertyKey, unknown>) & {
  [INSTALLED]?: true;
  [KAFKAJS]?: RecordDecoder;
};

const require = createRequire(import.meta.url);
const protocol = join(dirname(require.resolve('kafkajs')), 'src', 'protocol');
const RECORD_DECODER = join(protocol, 'recordBatch', 'record', 'v0', 'decoder.js');
const HEADER_DECODER = join(protocol, 'recordBatch', 'header', 'v0', 'decoder.js');
// Modules that capture the record decoder, directly or through one another, when loaded.
const CAPTURING = [join(protocol, 'recordBatch', 'v0', 'decoder.js'), join(protocol, 'requests', 'fetch', 'v4', 'decodeMessages.js')];
const FETCH_RESPONSES = join(protocol, 'requests', 'fetch');

/** The ordered headers and timestamp type of a message kafkajs decoded, if the wrapper saw it. */
export function wireRecordOf(message: KafkaMessage): WireRecord | undefined {
  return (message as unknown as Record<symbol, WireRecord | undefined>)[WIRE];
}

/** kafkajs' module at `path`, which must export a function; else why the headers cannot be had. */
function kafkajsFunction<F>(path: string): F {
  const name = `kafkajs/${relative(join(protocol, '..', '..'), path)}`;
  let loaded: unknown;
  try {
    loaded = require(path);
  } catch (error) {
    throw headersUnavailable(`cannot load ${name}: ${(error instanceof Error ? error.message : String(error)).split('\n')[0]}`, {
      cause: error,
    });
  }
  if (typeof loaded !== 'function') throw headersUnavailable(`${name} does not export a function`);
  return loaded as F;
}

/**
 * Wraps kafkajs' record decoder (idempotent). Throws a `KafkajsIncompatibleError` when the
 * decoder is not where and what this module expects.
 */
export function installWireRecords(): void {
  const original = kafkajsFunction<RecordDecoder>(RECORD_DECODER);
  if (original[INSTALLED]) return;
  const capturing = capturingDecoder(original, kafkajsFunction<Reader>(HEADER_DECODER));
  const wrapper: RecordDecoder = (decoder, context = {}) => {
    const fast = decodeRecordFast(decoder as unknown as KafkajsRecordBytes, context);
    if (fast === undefined) return capturing(decoder, context);
    Object.defineProperty(fast.record, WIRE, { value: fast.wire });
    return fast.record;
  };
  wrapper[INSTALLED] = true;
  wrapper[KAFKAJS] = capturing;
  const cached = require.cache[RECORD_DECODER];
  if (cached === undefined) throw headersUnavailable(`its record decoder is not in Node's module cache (${RECORD_DECODER})`);
  cached.exports = wrapper;
  for (const path of Object.keys(require.cache)) {
    if (CAPTURING.includes(path) || (path.startsWith(FETCH_RESPONSES) && path.endsWith('response.js'))) delete require.cache[path];
  }
}

/**
 * The installed record decoder and kafkajs' own with the header capture, the reference it
 * must equal (test/unit/kafka/kafkajs/record-decoder.test.ts); installs the wrapper first.
 */
export function installedRecordDecoders(): { readonly installed: RecordDecoder; readonly kafkajs: RecordDecoder } {
  installWireRecords();
  const installed = kafkajsFunction<RecordDecoder>(RECORD_DECODER);
  const reference = installed[KAFKAJS];
  if (reference === undefined) throw new Error('the wire-record decoder is not installed');
  return { installed, kafkajs: reference };
}

/** kafkajs' own record decoder, catching the header list as it reads it (see the file's comment). */
function capturingDecoder(original: RecordDecoder, headerDecoder: Reader): RecordDecoder {
  return (decoder, context = {}) => {
    let headers: unknown[] | undefined;
    decoder.readVarIntArray = function (this: KafkajsDecoder, reader: Reader) {
      const list = Object.getPrototypeOf(this).readVarIntArray.call(this, reader) as unknown[];
      if (reader === headerDecoder) headers = list;
      return list;
    };
    const record = original(decoder, context);
    Object.defineProperty(record, WIRE, {
      value: {
        headers: (headers ?? []).map((header) => {
          const { key, value } = header as { key: string; value: Buffer | null };
          return { name: key, value };
        }),
        timestampType: context.timestampType === LOG_APPEND_TIME ? 'LOG_APPEND_TIME' : 'CREATE_TIME',
      } satisfies WireRecord,
    });
    return record;
  };
}
