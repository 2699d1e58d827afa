/**
 * The host's start-up check that kafkajs still hands over a record's headers in wire order
 * (fail closed). A record batch holding one record with the headers trace=1, other=2, trace=3
 * is written with kafkajs' own encoders and read back through kafkajs' own record batch decoder,
 * the path every fetch takes; {@link wireRecordOf} must give those headers, in that order. If
 * it does not (the batch decoder no longer decodes through the wrapped record decoder, the
 * record decoder no longer reads the header list through `Decoder.readVarIntArray`, a module
 * moved), a `KafkajsIncompatibleError` names kafkajs and its installed version, and the host
 * does not start rather than store records without their headers.
 */
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import type { KafkaMessage } from 'kafkajs';
import { headersUnavailable, installedKafkajsVersion, KafkajsIncompatibleError } from './version.js';
import { wireRecordOf } from './wire-records.js';

/** Reads one record batch (its bytes) into kafkajs' messages, as a fetch does. */
export type RecordBatchDecode = (batch: Buffer) => Promise<readonly KafkaMessage[]>;

interface KafkajsEncoder {
  writeInt8(value: number): KafkajsEncoder;
  writeVarLong(value: number): KafkajsEncoder;
  writeVarInt(value: number): KafkajsEncoder;
  writeVarIntBytes(value: Buffer | null): KafkajsEncoder;
  writeVarIntArray(array: KafkajsEncoder[]): KafkajsEncoder;
  writeEncoder(value: KafkajsEncoder): KafkajsEncoder;
  size(): number;
  readonly buffer: Buffer;
}
type RecordBatchEncode = (batch: {
  compression: number;
  records: KafkajsEncoder[];
  lastOffsetDelta: number;
  firstTimestamp: number;
  maxTimestamp: number;
}) => Promise<KafkajsEncoder>;

const require = createRequire(import.meta.url);
const protocol = join(dirname(require.resolve('kafkajs')), 'src', 'protocol');

/** The probe record's headers: a repeated name around another one, which kafkajs' own view folds. */
const PROBE_HEADERS = [
  ['trace', '1'],
  ['other', '2'],
  ['trace', '3'],
] as const;
const EXPECTED = PROBE_HEADERS.map(([name, value]) => `${name}=${value}`).join(', ');

/** kafkajs' private module at `path` (under its protocol folder), or a KafkajsIncompatibleError. */
function kafkajsModule<T>(...path: string[]): T {
  const file = join(protocol, ...path);
  try {
    return require(file) as T;
  } catch (error) {
    const name = `kafkajs/${relative(join(protocol, '..', '..'), file)}`;
    throw headersUnavailable(`cannot load ${name}: ${(error instanceof Error ? error.message : String(error)).split('\n')[0]}`, {
      cause: error,
    });
  }
}

/** One record as the Java client writes it: key, value and headers in the given order. */
export interface WireRecordInput {
  readonly offsetDelta: number;
  readonly key: string;
  readonly value: string;
  readonly headers: ReadonlyArray<readonly [string, string | null]>;
}

/**
 * A record batch written with kafkajs' own encoders, as the Java client writes records: kafkajs'
 * record encoder takes headers as an object and so cannot interleave a repeated name; its
 * Encoder writes the wire format as is. The self-check's probe, and the tests' batches.
 */
export async function encodeWireBatch(records: readonly WireRecordInput[], compression = 0, timestamp = 0): Promise<Buffer> {
  const Encoder = kafkajsModule<new () => KafkajsEncoder>('encoder.js');
  const Header = kafkajsModule<(header: { key: string; value: Buffer | null }) => KafkajsEncoder>(
    'recordBatch',
    'header',
    'v0',
    'index.js',
  );
  const { RecordBatch } = kafkajsModule<{ RecordBatch: RecordBatchEncode }>('recordBatch', 'v0', 'index.js');
  const encoded = records.map(({ offsetDelta, key, value, headers }) => {
    const body = new Encoder()
      .writeInt8(0)
      .writeVarLong(0)
      .writeVarInt(offsetDelta)
      .writeVarIntBytes(Buffer.from(key))
      .writeVarIntBytes(Buffer.from(value))
      .writeVarIntArray(headers.map(([name, text]) => Header({ key: name, value: text === null ? null : Buffer.from(text) })));
    return new Encoder().writeVarInt(body.size()).writeEncoder(body);
  });
  const lastOffsetDelta = Math.max(0, ...records.map((record) => record.offsetDelta));
  const batch = await RecordBatch({ compression, records: encoded, lastOffsetDelta, firstTimestamp: timestamp, maxTimestamp: timestamp });
  return batch.buffer;
}

/** The probe batch: one record with {@link PROBE_HEADERS}. */
function probeBatch(): Promise<Buffer> {
  return encodeWireBatch([{ offsetDelta: 0, key: 'key', value: 'value', headers: PROBE_HEADERS }]);
}

/** kafkajs' record batch decoder, as the Fetch responses load it (after the wrapper's install). */
function kafkajsRecordBatchDecode(): RecordBatchDecode {
  const Decoder = kafkajsModule<new (buffer: Buffer) => unknown>('decoder.js');
  const decode = kafkajsModule<(decoder: unknown) => Promise<{ records: KafkaMessage[] }>>('recordBatch', 'v0', 'decoder.js');
  return async (batch) => (await decode(new Decoder(batch))).records;
}

/**
 * Decodes the probe batch through `decode` (default: kafkajs' record batch decoder) and throws a
 * `KafkajsIncompatibleError` naming kafkajs and `version` unless its record carries the probe's
 * headers in wire order. The wrapper must be installed first (`installKafkajsWorkarounds`).
 */
export async function checkWireHeaders(decode?: RecordBatchDecode, version = installedKafkajsVersion()): Promise<void> {
  const fail = (reason: string, cause?: unknown) => headersUnavailable(reason, { cause, version });
  let records: readonly KafkaMessage[];
  try {
    records = await (decode ?? kafkajsRecordBatchDecode())(await probeBatch());
  } catch (error) {
    if (error instanceof KafkajsIncompatibleError) throw error;
    throw fail(
      `its record batch decoder fails on a batch its own encoder wrote: ${error instanceof Error ? error.message : String(error)}`,
      error,
    );
  }
  const record = records[0];
  if (record === undefined) throw fail('its record batch decoder returns no record for a batch of one');
  const wire = wireRecordOf(record);
  if (wire === undefined)
    throw fail(
      'its record batch decoder does not decode records through kafkajs/src/protocol/recordBatch/record/v0/decoder.js, the module the ' +
        'wrapper replaces',
    );
  const headers = wire.headers.map(({ name, value }) => `${name}=${value === null ? 'null' : value.toString()}`).join(', ');
  if (wire.headers.length === 0)
    throw fail(
      `its record decoder does not read the header list through Decoder.readVarIntArray: a record with the headers ${EXPECTED} came ` +
        `back with none`,
    );
  if (headers !== EXPECTED) throw fail(`a record with the headers ${EXPECTED} came back with ${headers}`);
}
