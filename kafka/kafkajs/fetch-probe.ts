/**
 * What kafkajs does not tell about its fetches, found out where it knows: whether a fetch
 * completed, and where a record batch that cannot be decoded sits.
 *
 * - A completed fetch. kafkajs emits its `consumer.fetch` event also after a fetch that failed
 *   and was "recovered" (stale metadata, a deleted topic: it returns no batches and fetches
 *   again), so that event proves nothing. A Fetch response that decoded and parsed without an
 *   error code does: the Fetch request's response is wrapped here, and each listener of a topic
 *   that was in the request is told (see {@link onFetchCompleted}).
 * - An unreadable record batch. kafkajs decodes a whole Fetch response at once; a batch that
 *   cannot be decompressed fails it without saying which partition or offsets, and its retry
 *   wrapper (`KafkaJSNonRetriableError(e, { cause: e.cause || e })`) drops the thrower from the
 *   cause chain. The record batch decoder (`protocol/recordBatch/v0/decoder.js`) is wrapped to
 *   read the failing batch's header (base offset, last offset delta: readable even when the
 *   records are not), and the partition decoder (`protocol/requests/fetch/v4/decodeMessages.js`,
 *   used by Fetch v4 to v11) to name the partition: the n-th record set of a response belongs to
 *   the n-th partition of its request (the broker answers in request order). The failure is
 *   rethrown as a not retriable {@link UnreadableFetchError} whose cause is an
 *   {@link UnreadableRecordBatchError} carrying the location, so the location survives the wrap.
 *
 * Like ./wire-records.ts (installed first: it reloads the same modules), this replaces
 * module exports in Node's module cache, once ({@link installFetchProbe}, called by each pipeline's
 * consumer before it exists); kafkajs is pinned (package.json) and tests hold this to it
 * (test/unit/kafka/kafkajs/fetch-probe.test.ts, test/integration/codecs.test.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { StorageConsumerError, causeChain } from '../../shared/errors.js';
import { installWireRecords } from './wire-records.js';

/** Where an unreadable record batch sits: what `storage-consumer replay ... --to-offset` needs. */
export interface RecordBatchLocation {
  readonly topic: string;
  readonly partition: number;
  /** The batch's first offset. */
  readonly baseOffset: string;
  /** The batch's last offset (base offset plus its last offset delta). */
  readonly lastOffset: string;
}

/** A record batch that cannot be decoded, located. Its cause is what the decoder threw. */
export class UnreadableRecordBatchError extends StorageConsumerError {
  constructor(
    readonly location: RecordBatchLocation,
    options: { cause: unknown },
  ) {
    const { cause } = options;
    super(
      `record batch at ${location.topic} partition ${location.partition} offsets ${location.baseOffset}..${location.lastOffset} cannot ` +
        `be read: ${cause instanceof Error ? cause.message : String(cause)}`,
      options,
    );
    this.name = 'UnreadableRecordBatchError';
  }
}

/**
 * The fetch failed on an unreadable batch. Not retriable: the same bytes fail the same way.
 * Carries the located error as its cause, so that kafkajs' `cause: e.cause || e` keeps it.
 */
export class UnreadableFetchError extends StorageConsumerError {
  readonly retriable = false;

  constructor(cause: UnreadableRecordBatchError) {
    super(cause.message, { cause });
    this.name = 'UnreadableFetchError';
  }
}

/** The located unreadable batch in an error's cause chain, if there is one. */
export function unreadableBatchOf(error: unknown): UnreadableRecordBatchError | undefined {
  for (const cause of causeChain(error)) {
    if (cause instanceof UnreadableRecordBatchError) return cause;
  }
  return undefined;
}

type FetchListener = () => void;
const listeners = new Map<string, Set<FetchListener>>();

/**
 * Calls `listener` after every Fetch response that names `topic` and decoded and parsed without
 * an error (for any client of this process). Returns the function that stops it.
 */
export function onFetchCompleted(topic: string, listener: FetchListener): () => void {
  let set = listeners.get(topic);
  if (set === undefined) {
    set = new Set();
    listeners.set(topic, set);
  }
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0 && listeners.get(topic) === set) listeners.delete(topic);
  };
}

/** What one Fetch response's decoding knows: the request's partitions in order, and the failing batch. */
interface DecodeContext {
  readonly partitions: ReadonlyArray<{ readonly topic: string; readonly partition: number }>;
  next: number;
  failedBatch: { baseOffset: string; lastOffset: string } | undefined;
}

const decoding = new AsyncLocalStorage<DecodeContext>();

const require = createRequire(import.meta.url);
const protocol = join(dirname(require.resolve('kafkajs')), 'src', 'protocol');
const FETCH = join(protocol, 'requests', 'fetch', 'index.js');
const BATCH_DECODER = join(protocol, 'recordBatch', 'v0', 'decoder.js');
const DECODE_MESSAGES = join(protocol, 'requests', 'fetch', 'v4', 'decodeMessages.js');
const FETCH_RESPONSES = join(protocol, 'requests', 'fetch');
const INSTALLED = Symbol.for('storage-consumer.kafka-fetch-probe');

interface KafkajsDecoder {
  readonly buffer: Buffer;
  readonly offset: number;
}
type Wrapped<F> = F & { [INSTALLED]?: true };
type Decode = (decoder: KafkajsDecoder) => Promise<unknown>;
interface FetchResponse {
  decode(raw: Buffer): Promise<unknown>;
  parse(data: unknown): Promise<unknown>;
}
interface FetchRequestArgs {
  readonly topics: ReadonlyArray<{ readonly topic: string; readonly partitions: ReadonlyArray<{ readonly partition: number }> }>;
}
type FetchBuilder = (args: FetchRequestArgs) => { response: FetchResponse } & Record<string, unknown>;
interface FetchDefinition {
  protocol: Wrapped<(version: { version: number }) => FetchBuilder>;
}

// Offsets inside a record batch header (v2): base offset int64, length int32, leader epoch
// int32, magic int8, crc int32, attributes int16, then the last offset delta int32.
const LAST_OFFSET_DELTA_AT = 8 + 4 + 4 + 1 + 4 + 2;

function replaceExport(path: string, wrap: (original: Decode) => Decode): void {
  const original = require(path) as Wrapped<Decode>;
  if (original[INSTALLED]) return;
  const wrapper: Wrapped<Decode> = wrap(original);
  wrapper[INSTALLED] = true;
  const cached = require.cache[path];
  if (cached === undefined) throw new Error(`kafkajs module is not in the module cache (${path})`);
  cached.exports = wrapper;
}

/**
 * Installs the probe (idempotent; after ./wire-records.ts, which it installs first). Throws a
 * `KafkajsIncompatibleError` when kafkajs' record decoder is not where or what it should be.
 */
export function installFetchProbe(): void {
  installWireRecords();
  const fetch = require(FETCH) as FetchDefinition;
  if (fetch.protocol[INSTALLED]) return;

  replaceExport(BATCH_DECODER, (original) => async (decoder) => {
    const at = decoder.offset;
    const { buffer } = decoder;
    try {
      return await original(decoder);
    } catch (error) {
      const context = decoding.getStore();
      // A partial batch at the end of a response is normal (kafkajs stops there); anything else
      // fails the fetch, and the header is still readable.
      if (
        context !== undefined &&
        (error as Error).name !== 'KafkaJSPartialMessageError' &&
        buffer.length >= at + LAST_OFFSET_DELTA_AT + 4
      ) {
        const base = buffer.readBigInt64BE(at);
        context.failedBatch = {
          baseOffset: base.toString(),
          lastOffset: (base + BigInt(buffer.readInt32BE(at + LAST_OFFSET_DELTA_AT))).toString(),
        };
      }
      throw error;
    }
  });
  // The partition decoder captured the batch decoder when it loaded: load it again, and the
  // Fetch responses, which capture it in turn (they load lazily, at the first fetch).
  delete require.cache[DECODE_MESSAGES];
  replaceExport(DECODE_MESSAGES, (original) => async (decoder) => {
    const context = decoding.getStore();
    const index = context === undefined ? -1 : context.next++;
    try {
      return await original(decoder);
    } catch (error) {
      const where = context?.partitions[index];
      const batch = context?.failedBatch;
      if (where === undefined || batch === undefined || error instanceof UnreadableFetchError) throw error;
      throw new UnreadableFetchError(new UnreadableRecordBatchError({ ...where, ...batch }, { cause: error }));
    }
  });
  for (const path of Object.keys(require.cache)) {
    if (path.startsWith(FETCH_RESPONSES) && path.endsWith('response.js')) delete require.cache[path];
  }

  const protocolOf = fetch.protocol;
  const wrapped: Wrapped<(version: { version: number }) => FetchBuilder> = (version) => {
    const build = protocolOf(version);
    return (args) => {
      const built = build(args);
      const partitions = args.topics.flatMap(({ topic, partitions: list }) => list.map(({ partition }) => ({ topic, partition })));
      const topics = [...new Set(args.topics.map(({ topic }) => topic))];
      const { response } = built;
      return {
        ...built,
        response: {
          ...response,
          decode: (raw: Buffer) => decoding.run({ partitions, next: 0, failedBatch: undefined }, () => response.decode(raw)),
          async parse(data: unknown) {
            const parsed = await response.parse(data);
            for (const topic of topics) for (const listener of listeners.get(topic) ?? []) listener();
            return parsed;
          },
        },
      };
    };
  };
  wrapped[INSTALLED] = true;
  fetch.protocol = wrapped;
}
