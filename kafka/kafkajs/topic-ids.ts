/**
 * A topic's identity: Kafka's topic id, a UUID the cluster gives a topic when it creates it and
 * never gives again, so a topic deleted and re-created under the same name has a new one. Only
 * Metadata v10 and later carry it, and kafkajs 2.2.4 speaks Metadata up to v6: this file encodes
 * the one request it needs (v10 to v12, the flexible encoding: compact strings, tagged fields)
 * and decodes the topics' names, ids and partitions from the response, with plain Buffers. The
 * request is sent through the kafkajs client's own connections (its TLS, SASL and MSK IAM): a
 * cluster of kafkajs' making, reached through the client's private `createCluster`
 * (./index.ts lists the internals).
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Kafka } from 'kafkajs';
import { StorageConsumerError } from '../../shared/errors.js';
import type { TopicIdReader, TopicIdentity } from '../port.js';

/** The Metadata API's key in Kafka's protocol. */
const METADATA_API_KEY = 3;
/** The first Metadata version whose response carries topic ids. */
const FIRST_VERSION = 10;
/** The last version this file encodes (v13 adds a top-level error code). */
const LAST_VERSION = 12;
/** Kafka's codes for a topic that does not exist and for one this client may not describe. */
const UNKNOWN_TOPIC_OR_PARTITION = 3;
const TOPIC_AUTHORIZATION_FAILED = 29;
const UUID_BYTES = 16;

/**
 * The cluster's answer could not be read or names a problem other than a missing topic;
 * `lasting` when no later read can do better (the broker has no topic ids, kafkajs changed).
 */
export class TopicIdError extends StorageConsumerError {
  readonly lasting: boolean;
  constructor(message: string, options?: { cause?: unknown; lasting?: boolean }) {
    super(message, options);
    this.name = 'TopicIdError';
    this.lasting = options?.lasting ?? false;
  }
}

/** Appends unsigned varints, compact strings and the rest of the flexible encoding to a byte list. */
class Writer {
  private readonly bytes: number[] = [];
  uvarint(value: number): this {
    let rest = value >>> 0;
    while (rest >= 0x80) {
      this.bytes.push((rest & 0x7f) | 0x80);
      rest >>>= 7;
    }
    this.bytes.push(rest);
    return this;
  }
  byte(value: number): this {
    this.bytes.push(value);
    return this;
  }
  raw(buffer: Uint8Array): this {
    this.bytes.push(...buffer);
    return this;
  }
  compactString(value: string): this {
    const encoded = Buffer.from(value, 'utf8');
    return this.uvarint(encoded.length + 1).raw(encoded);
  }
  /** No tagged fields. */
  noTags(): this {
    return this.uvarint(0);
  }
  buffer(): Buffer {
    return Buffer.from(this.bytes);
  }
}

/** Reads the flexible encoding from a Buffer, failing with a TopicIdError past its end. */
class Reader {
  private offset = 0;
  constructor(private readonly data: Buffer) {}
  private need(length: number): void {
    if (this.offset + length > this.data.length)
      throw new TopicIdError(`Metadata response ends at byte ${this.data.length}, ${length} more expected at byte ${this.offset}`);
  }
  int16(): number {
    this.need(2);
    const value = this.data.readInt16BE(this.offset);
    this.offset += 2;
    return value;
  }
  int32(): number {
    this.need(4);
    const value = this.data.readInt32BE(this.offset);
    this.offset += 4;
    return value;
  }
  boolean(): boolean {
    this.need(1);
    return this.data[this.offset++] !== 0;
  }
  uvarint(): number {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      this.need(1);
      const byte = this.data[this.offset++] as number;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new TopicIdError('Metadata response holds a varint longer than 5 bytes');
  }
  bytes(length: number): Buffer {
    this.need(length);
    const value = this.data.subarray(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }
  /** A COMPACT_NULLABLE_STRING (a COMPACT_STRING is one that is never null). */
  compactString(): string | null {
    const length = this.uvarint();
    return length === 0 ? null : this.bytes(length - 1).toString('utf8');
  }
  /** A COMPACT_ARRAY, `null` for -1 (encoded 0). */
  compactArray<T>(item: (reader: Reader) => T): T[] {
    const length = this.uvarint();
    const items: T[] = [];
    for (let index = 0; index < length - 1; index += 1) items.push(item(this));
    return items;
  }
  /** Skips a TAG_BUFFER: tagged fields this file does not read. */
  skipTags(): void {
    const count = this.uvarint();
    for (let index = 0; index < count; index += 1) {
      this.uvarint();
      this.bytes(this.uvarint());
    }
  }
}

function checkVersion(version: number): void {
  if (!Number.isInteger(version) || version < FIRST_VERSION || version > LAST_VERSION)
    throw new TopicIdError(`Metadata v${version} is not one this client encodes (v${FIRST_VERSION} to v${LAST_VERSION})`);
}

/**
 * The body of a Metadata request (v10 to v12) for `topics`, after the header's client id: the
 * request header v2's empty tagged fields first (kafkajs writes header v1, which is header v2
 * without them), no automatic topic creation, no authorized operations.
 */
export function encodeTopicIdRequest(version: number, topics: readonly string[]): Buffer {
  checkVersion(version);
  const writer = new Writer().noTags().uvarint(topics.length + 1);
  for (const topic of topics) writer.raw(new Uint8Array(UUID_BYTES)).compactString(topic).noTags();
  writer.byte(0); // allow_auto_topic_creation
  if (version === 10) writer.byte(0); // include_cluster_authorized_operations (v8 to v10)
  return writer.byte(0).noTags().buffer(); // include_topic_authorized_operations
}

/**
 * The topics of a Metadata response (v10 to v12), from the bytes after the correlation id (the
 * response header v1's tagged fields first). A topic the cluster does not know comes back
 * without an id; one this client may not describe, or another error without an id, throws.
 */
export function decodeTopicIdResponse(version: number, body: Buffer): TopicIdentity[] {
  checkVersion(version);
  const reader = new Reader(body);
  reader.skipTags();
  reader.int32(); // throttle_time_ms
  reader.compactArray((broker) => {
    broker.int32(); // node_id
    broker.compactString(); // host
    broker.int32(); // port
    broker.compactString(); // rack
    broker.skipTags();
  });
  reader.compactString(); // cluster_id
  reader.int32(); // controller_id
  return reader.compactArray((topic) => {
    const errorCode = topic.int16();
    const name = topic.compactString() ?? '';
    const id = topic.bytes(UUID_BYTES);
    topic.boolean(); // is_internal
    const partitions = topic.compactArray((partition) => {
      partition.int16(); // error_code
      const index = partition.int32();
      partition.int32(); // leader_id
      partition.int32(); // leader_epoch
      for (let list = 0; list < 3; list += 1) partition.compactArray((node) => node.int32()); // replicas, isr, offline
      partition.skipTags();
      return index;
    });
    topic.int32(); // topic_authorized_operations
    topic.skipTags();
    const known = id.some((byte) => byte !== 0);
    if (errorCode === UNKNOWN_TOPIC_OR_PARTITION) return { topic: name, id: undefined, partitions: [] };
    if (errorCode === TOPIC_AUTHORIZATION_FAILED || !known)
      throw new TopicIdError(`the cluster does not describe topic ${name}: error code ${errorCode}`);
    return { topic: name, id: id.toString('base64url'), partitions: partitions.sort((a, b) => a - b) };
  });
}

/** The part of a kafkajs broker this file uses: the versions it speaks and its connections. */
interface KafkajsBroker {
  readonly versions: Record<number, { minVersion: number; maxVersion: number }> | null;
  isConnected(): boolean;
  connect(): Promise<void>;
  readonly connectionPool: {
    send(request: {
      request: { apiKey: number; apiVersion: number; apiName: string; encode(): Promise<unknown> };
      response: { decode(body: Buffer): Promise<unknown>; parse(decoded: unknown): Promise<unknown> };
    }): Promise<unknown>;
  };
}
interface KafkajsCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  readonly brokerPool: { readonly seedBroker: KafkajsBroker | undefined };
}
type CreateCluster = (options: { allowAutoTopicCreation: boolean; metadataMaxAge?: number }) => KafkajsCluster;

const require = createRequire(import.meta.url);

/** kafkajs' Encoder: what its connection accepts as a request body. */
function kafkajsEncoder(body: Buffer): unknown {
  const Encoder = require(join(dirname(require.resolve('kafkajs')), 'src', 'protocol', 'encoder.js')) as new () => {
    writeBuffer(value: Buffer): unknown;
  };
  return new Encoder().writeBuffer(body);
}

/**
 * The client's private cluster factory (kafkajs' `Client`, `private:Kafka:createCluster`): the
 * topic id reader's, and ./partition-fetcher.ts's own cluster.
 */
export function createClusterOf(kafka: Kafka): CreateCluster {
  const key = Object.getOwnPropertySymbols(kafka).find((symbol) => symbol.description === 'private:Kafka:createCluster');
  const create = key === undefined ? undefined : (kafka as unknown as Record<symbol, unknown>)[key];
  if (typeof create !== 'function')
    throw new TopicIdError(
      'this kafkajs client has no private:Kafka:createCluster (kafka/kafkajs/index.ts lists the internals relied on)',
      {
        lasting: true,
      },
    );
  return create as CreateCluster;
}

/** A read of topic ids that takes longer has failed: the watch tries again on a new connection. */
const READ_TIMEOUT_MS = 10_000;

/**
 * A reader over `kafka`'s own connection settings: one connection of its own (a cluster kafkajs
 * builds for it, never a consumer's), one Metadata request per read, at the highest version
 * from v10 to v12 that the broker speaks. A broker older than Kafka 2.8 (no v10) fails the read.
 */
export function kafkajsTopicIds(kafka: Kafka): TopicIdReader {
  let cluster: KafkajsCluster | undefined;
  const broker = async (): Promise<KafkajsBroker> => {
    cluster ??= createClusterOf(kafka)({ allowAutoTopicCreation: false });
    await cluster.connect();
    const seed = cluster.brokerPool.seedBroker;
    if (seed === undefined) throw new TopicIdError('kafkajs connected no broker');
    if (!seed.isConnected()) await seed.connect();
    return seed;
  };
  /** One read on the cluster as it is; {@link TopicIdReader.read} bounds it and starts afresh after a failure. */
  const readOn = async (topics: readonly string[]): Promise<TopicIdentity[]> => {
    const connected = await broker();
    const supported = connected.versions?.[METADATA_API_KEY];
    const version = Math.min(LAST_VERSION, supported?.maxVersion ?? 0);
    if (version < FIRST_VERSION)
      throw new TopicIdError(
        `the broker speaks Metadata up to v${supported?.maxVersion ?? '?'}, topic ids need v${FIRST_VERSION} (Kafka 2.8 or later)`,
        { lasting: true },
      );
    {
      const answer = await connected.connectionPool.send({
        request: {
          apiKey: METADATA_API_KEY,
          apiVersion: version,
          apiName: 'Metadata',
          encode: () => Promise.resolve(kafkajsEncoder(encodeTopicIdRequest(version, topics))),
        },
        response: {
          decode: (body) => Promise.resolve(decodeTopicIdResponse(version, body)),
          parse: (decoded) => Promise.resolve(decoded),
        },
      });
      const described = new Map((answer as TopicIdentity[]).map((identity) => [identity.topic, identity]));
      return topics.map((topic) => described.get(topic) ?? { topic, id: undefined, partitions: [] });
    }
  };
  return {
    async read(topics) {
      let timer: NodeJS.Timeout | undefined;
      try {
        return await Promise.race([
          readOn(topics),
          new Promise<never>((_resolve, reject) => {
            timer = setTimeout(
              () => reject(new TopicIdError(`no answer to the topic id request within ${READ_TIMEOUT_MS} ms`)),
              READ_TIMEOUT_MS,
            );
            timer.unref();
          }),
        ]);
      } catch (error) {
        // A broken or hung connection (a broker frozen, then resumed) is never asked again: the
        // next read builds a new one, whatever state kafkajs left this one in.
        const broken = cluster;
        cluster = undefined;
        void broken?.disconnect().catch(() => undefined);
        throw error;
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      const current = cluster;
      cluster = undefined;
      await current?.disconnect().catch(() => undefined);
    },
  };
}
