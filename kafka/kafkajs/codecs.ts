/**
 * The compression codecs every kafkajs client of this project reads and writes: gzip, snappy,
 * lz4 and zstd, the four a Kafka producer may use (and Lambda's event source mapping reads).
 * kafkajs itself only ships gzip; the others throw `KafkaJSNotImplemented`, which used to stop
 * the host on every start. {@link registerKafkaCodecs} (called by `installKafkajsWorkarounds`,
 * ./index.ts) registers them once per process, before any client exists: kafkajs looks codecs
 * up in one shared table at every batch, so the order among modules does not matter.
 *
 * - gzip: Node's zlib (what kafkajs uses).
 * - zstd: Node's own zlib (`zstdDecompress`, Node >= 22.15).
 * - snappy: `snappy` (napi-rs; its binaries are npm packages). Kafka's Java client frames
 *   snappy the xerial way (`SnappyOutputStream`: a magic header, then length-prefixed raw
 *   blocks); other clients (librdkafka) write one raw block. Both are read.
 * - lz4: `lz4-napi` (napi-rs, lz4_flex; binaries are npm packages), LZ4 frame format, which
 *   is what Kafka writes for record batches (magic v2).
 *
 * A batch that still cannot be decompressed (corrupt, or a codec id Kafka does not define)
 * fails with an {@link UnreadableBatchError} naming the codec; it is not retriable, so the
 * consumer stops and the host reports it once and exits 1 (see host/topic-consumer.ts).
 */
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import kafkajs from 'kafkajs';
import { compressFrame, decompressFrame } from 'lz4-napi';
import { compressSync as snappyCompress, uncompressSync as snappyUncompress } from 'snappy';
import { StorageConsumerError } from '../../shared/errors.js';

/** The codecs Kafka defines, by the id a record batch carries in its attributes (bits 0-2). */
export const KAFKA_CODECS = { 1: 'gzip', 2: 'snappy', 3: 'lz4', 4: 'zstd' } as const;

/**
 * A fetched batch cannot be decompressed. Not retriable (kafkajs reads `retriable`): the same
 * bytes would fail the same way, so the consumer crashes instead of looping.
 */
export class UnreadableBatchError extends StorageConsumerError {
  readonly retriable = false;

  constructor(
    /** The codec, e.g. `lz4`, or `codec id 5` for an id Kafka does not define. */
    readonly codec: string,
    options?: { cause?: unknown },
  ) {
    const cause = options?.cause;
    const why = cause === undefined ? '' : `: ${cause instanceof Error ? cause.message : String(cause)}`;
    super(`cannot decompress a record batch compressed with ${codec}${why}`, options);
    this.name = 'UnreadableBatchError';
  }
}

/** What kafkajs expects of a codec: it compresses an Encoder's buffer and decompresses a Buffer. */
interface KafkajsCodec {
  compress(encoder: { readonly buffer: Buffer }): Promise<Buffer>;
  decompress(buffer: Buffer): Promise<Buffer>;
}

// kafkajs is CommonJS: Node's ESM loader does not see these two among its named exports.
const { CompressionCodecs, CompressionTypes } = kafkajs;

const gzip = promisify(zlib.gzip);
const unzip = promisify(zlib.unzip);
const zstdCompress = promisify(zlib.zstdCompress);
const zstdDecompress = promisify(zlib.zstdDecompress);

// xerial's SnappyOutputStream header: magic, then version 1 and minimum compatible version 1.
const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER_BYTES = XERIAL_MAGIC.length + 8;
// The Java client's block size for snappy (SnappyOutputStream's default).
const XERIAL_BLOCK_BYTES = 32 * 1024;

/** Reads snappy as Kafka clients write it: xerial-framed blocks (Java) or one raw block. */
export function snappyDecompress(buffer: Buffer): Buffer {
  if (buffer.length < XERIAL_HEADER_BYTES || !buffer.subarray(0, XERIAL_MAGIC.length).equals(XERIAL_MAGIC)) {
    return snappyUncompress(buffer, { asBuffer: true }) as Buffer;
  }
  const blocks: Buffer[] = [];
  let offset = XERIAL_HEADER_BYTES;
  while (offset < buffer.length) {
    if (offset + 4 > buffer.length) throw new RangeError(`truncated xerial snappy block length at byte ${offset}`);
    const length = buffer.readInt32BE(offset);
    offset += 4;
    if (length < 0 || offset + length > buffer.length)
      throw new RangeError(`xerial snappy block of ${length} bytes at byte ${offset} overruns the batch`);
    blocks.push(snappyUncompress(buffer.subarray(offset, offset + length), { asBuffer: true }) as Buffer);
    offset += length;
  }
  return Buffer.concat(blocks);
}

/** Writes snappy as the Java client does (xerial framing), which every Kafka client reads. */
export function snappyCompressXerial(buffer: Buffer): Buffer {
  const header = Buffer.alloc(XERIAL_HEADER_BYTES);
  XERIAL_MAGIC.copy(header);
  header.writeInt32BE(1, XERIAL_MAGIC.length);
  header.writeInt32BE(1, XERIAL_MAGIC.length + 4);
  const parts: Buffer[] = [header];
  for (let offset = 0; offset < buffer.length; offset += XERIAL_BLOCK_BYTES) {
    const block = snappyCompress(buffer.subarray(offset, offset + XERIAL_BLOCK_BYTES));
    const length = Buffer.alloc(4);
    length.writeInt32BE(block.length);
    parts.push(length, block);
  }
  return Buffer.concat(parts);
}

/** A kafkajs codec whose every decompression failure is an UnreadableBatchError naming it. */
function codec(
  name: string,
  compress: (buffer: Buffer) => Promise<Buffer> | Buffer,
  decompress: (buffer: Buffer) => Promise<Buffer> | Buffer,
): () => KafkajsCodec {
  const instance: KafkajsCodec = {
    async compress(encoder) {
      return compress(encoder.buffer);
    },
    async decompress(buffer) {
      try {
        return await decompress(buffer);
      } catch (error) {
        throw new UnreadableBatchError(name, { cause: error });
      }
    },
  };
  return () => instance;
}

const refuse = (name: string) => () => {
  throw new UnreadableBatchError(name);
};

/** The codec table this module installs, by codec id (exported for tests). */
export const PROJECT_CODECS: Readonly<Record<number, () => KafkajsCodec>> = {
  [CompressionTypes.GZIP]: codec(
    'gzip',
    (buffer) => gzip(buffer),
    (buffer) => unzip(buffer),
  ),
  [CompressionTypes.Snappy]: codec('snappy', snappyCompressXerial, snappyDecompress),
  [CompressionTypes.LZ4]: codec(
    'lz4',
    (buffer) => compressFrame(buffer),
    (buffer) => decompressFrame(buffer),
  ),
  [CompressionTypes.ZSTD]: codec(
    'zstd',
    (buffer) => zstdCompress(buffer),
    (buffer) => zstdDecompress(buffer),
  ),
  // Ids 5-7 are undefined; without an entry kafkajs would read such a batch as uncompressed garbage.
  5: codec('codec id 5', refuse('codec id 5'), refuse('codec id 5')),
  6: codec('codec id 6', refuse('codec id 6'), refuse('codec id 6')),
  7: codec('codec id 7', refuse('codec id 7'), refuse('codec id 7')),
};

/** Installs the project's codecs in kafkajs' shared table (idempotent). */
export function registerKafkaCodecs(): void {
  Object.assign(CompressionCodecs as Record<number, () => KafkajsCodec>, PROJECT_CODECS);
}
