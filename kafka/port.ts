/**
 * The Kafka port: everything the host and the CLI ask of a Kafka client, in types that name no
 * client. A consumer hands over one partition's polled records at a time as the shared event
 * builder's source records (bytes, headers an ordered list, offsets as strings), with a handle on
 * that partition (resolve, seek, heartbeat, commit); it reports the membership's events (joining
 * through the host's gate, assigned with its generation, revoked, crashed) and leaves through the
 * gate on a stop. An admin reads topics, group offsets and descriptions and end offsets. Each
 * client implements it in its own folder (kafka/kafkajs/, kafka/platformatic/); kafka/clients.ts
 * picks one by the settings (KAFKA_CLIENT). kafkajs is the default.
 */
import type { SourceRecord } from '../shared/kafka-event-builder.js';
import { causeChain } from '../shared/errors.js';
import { StorageConsumerError } from '../shared/errors.js';
import type { CoreLogger } from '../shared/logger.js';
import type { KafkaSettings } from './settings.js';

/** The Kafka clients this project can run on; `kafkajs` is the default. */
export const CLIENT_NAMES = ['kafkajs', 'platformatic'] as const;
export type KafkaClientName = (typeof CLIENT_NAMES)[number];

/** One polled batch of one partition. */
export interface PolledBatch {
  readonly topic: string;
  readonly partition: number;
  /** The partition's end offset when the batch was fetched: more records exist when it lies past the batch. */
  readonly highWatermark: string;
  /** The records, in offset order (control records left out), as the event builder takes them. */
  readonly records: readonly SourceRecord[];
  firstOffset(): string | null;
  /** The fetch's last offset (past trailing control records and gaps, if any). */
  lastOffset(): string;
}

/** Offsets to commit: the next offset to read per partition. */
export interface CommitRequest {
  topics: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }>;
}

/** A handle on the partition of one polled batch, for as long as the host works on it. */
export interface PartitionHandle {
  readonly batch: PolledBatch;
  /** False once the consumer is stopping: the rest of the batch is not ours to invoke. */
  isRunning(): boolean;
  /** True once the partition was sought or reassigned: the batch is someone else's now. */
  isStale(): boolean;
  /** Keeps the membership alive (a client without background heartbeats sends one); rejects when the member left its generation. */
  heartbeat(): Promise<void>;
  /** Marks records consumed up to `offset` (inclusive): the next fetch of the partition starts after it. Never a commit. */
  resolveOffset(offset: string): void;
  /** Commits the offsets in the member's current generation; rejects when the group refuses them. */
  commitOffsetsIfNecessary(offsets: CommitRequest): Promise<void>;
}

/** What passes a gate: a join of the group (every one, the first included) or the leave of a stop. */
export interface GroupStep {
  readonly kind: 'join' | 'leave';
  /** Of a join, from the moment its `work` started: how many pending seeks the client forgot (0 before, and for a leave). */
  readonly forgottenSeeks: number;
}

/**
 * Runs a join or a leave (`work`) when the host's writes allow it: called when the client starts
 * the step; `work` runs the client's own step and settles when it finished (a join resolves once
 * the member joined, after `onGroupJoin`). A join through the gate starts from the committed offsets.
 */
export type GroupGate = <T>(work: () => Promise<T>, step: GroupStep) => Promise<T>;

/** The member's place after a join: its id, its group, its generation and its partitions per topic. */
export interface GroupJoin {
  readonly memberId: string;
  readonly groupId: string;
  /** The group's generation, when the client says it. */
  readonly generationId?: number;
  readonly memberAssignment: Readonly<Record<string, number[]>>;
}

/** Where an undecodable record batch lies. */
export interface UnreadableBatch {
  /** The codec of the batch when decompression failed (`gzip`, `snappy`, `lz4`, `zstd`). */
  readonly codec?: string;
  /** Its place, when the client could locate it. */
  readonly location?: { readonly partition: number; readonly baseOffset: string; readonly lastOffset: string };
  /** Why it could not be read. */
  readonly reason: string;
}

/** A consumer crash: the error, whether the client restarts the consumer by itself, and an unreadable batch behind it. */
export interface ConsumerCrash {
  readonly error: Error;
  readonly restart: boolean;
  readonly unreadable?: UnreadableBatch;
}

/** A pipeline consumer's settings, in the project's words. */
export interface ConsumerOptions {
  readonly groupId: string;
  readonly sessionTimeoutMs: number;
  readonly rebalanceTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  /** How long a fetch waits for records. */
  readonly maxWaitMs: number;
  readonly maxBytesPerPartition: number;
  readonly maxBytes: number;
  /** Asked when the client failed on a retriable error: true restarts the consumer, false crashes it. */
  readonly restartOnFailure: (error: Error) => Promise<boolean>;
}

/** How a consumer runs: its batches, how many partitions at once, and the host's gate. */
export interface RunOptions {
  /** Partitions handed over at the same time. */
  readonly partitionsConsumedConcurrently: number;
  /** One partition's polled batch; the client fetches it again once this returns (and only after a resolve or a seek moves on). */
  readonly eachBatch: (handle: PartitionHandle) => Promise<void>;
  readonly gate: GroupGate;
}

/** What a pipeline's consumer calls on its Kafka consumer. */
export interface ConsumerPort {
  connect(): Promise<void>;
  subscribe(subscription: { topics: string[]; fromBeginning: boolean }): Promise<void>;
  /** Joins the group (through the gate) and consumes; resolves once the consumer runs. */
  run(options: RunOptions): Promise<void>;
  /** Moves a partition's fetch position (the next fetch of it starts at `offset`). */
  seek(position: { topic: string; partition: number; offset: string }): void;
  /** Stops fetching the topics' partitions (also ones assigned later), or starts again. */
  pause(topics: Array<{ topic: string }>): void;
  resume(topics: Array<{ topic: string }>): void;
  /** Leaves the group (through the gate) and closes the connections. */
  disconnect(): Promise<void>;
  onGroupJoin(listener: (join: GroupJoin) => void): void;
  /** The group rebalances: the member's partitions are no longer its own until the next join. */
  onRebalancing(listener: () => void): void;
  onCrash(listener: (crash: ConsumerCrash) => void): void;
  /** Calls `listener` after every completed fetch of `topic` (with or without records); returns what stops it. */
  onFetched(topic: string, listener: () => void): () => void;
}

/** One partition's earliest and end offsets. */
export interface PartitionOffsets {
  readonly partition: number;
  /** The earliest offset still on the broker. */
  readonly low: string;
  /** The end (high watermark). */
  readonly high: string;
}

/** A group member as the coordinator describes it, its assignment decoded. */
export interface DescribedMember {
  readonly memberId: string;
  readonly clientId: string;
  readonly clientHost: string;
  /** Partitions per topic; empty while the group rebalances or for another protocol. */
  readonly assignment: Readonly<Record<string, readonly number[]>>;
}

/** A consumer group as the coordinator describes it. */
export interface DescribedGroup {
  readonly groupId: string;
  /** Stable, Empty, PreparingRebalance, CompletingRebalance, Dead (never existed) ... */
  readonly state: string;
  readonly protocolType: string;
  readonly members: readonly DescribedMember[];
}

/** The admin side of the port: topics, groups and offsets. */
export interface KafkaAdmin {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  listTopics(): Promise<string[]>;
  /** The partition count of each named topic the broker knows; a missing one is absent. */
  topicPartitions(topics: readonly string[]): Promise<Map<string, number>>;
  /** Creates the topics and waits for their leaders; false when they existed already. */
  createTopics(topics: ReadonlyArray<{ topic: string; partitions: number }>): Promise<boolean>;
  /** Every partition's earliest and end offsets; an {@link UnknownTopicError} for a missing topic. */
  partitionOffsets(topic: string): Promise<PartitionOffsets[]>;
  /** Per partition the first offset whose timestamp is at or after `timestampMs` (the end when none). */
  offsetsAtTime(topic: string, timestampMs: number): Promise<Array<{ partition: number; offset: string }>>;
  /** The group's committed offsets of `topic` (the next offset to read); a partition without one is absent. */
  committedOffsets(group: string, topic: string): Promise<Map<number, bigint>>;
  describeGroups(groups: readonly string[]): Promise<DescribedGroup[]>;
  listGroups(): Promise<Array<{ groupId: string; protocolType: string }>>;
  /** Sets the committed offsets of an empty group (the coordinator refuses a group with members). */
  setOffsets(group: string, topic: string, partitions: ReadonlyArray<{ partition: number; offset: string }>): Promise<void>;
  deleteGroups(groups: readonly string[]): Promise<void>;
}

/** A topic's identity: its id (`undefined` when the broker has none) and its partitions. */
export interface TopicIdentity {
  readonly topic: string;
  readonly id: string | undefined;
  readonly partitions: readonly number[];
}

/** Reads topic ids (host/topic-incarnation.ts). */
export interface TopicIdReader {
  read(topics: readonly string[]): Promise<TopicIdentity[]>;
  close(): Promise<void>;
}

/** Reads records of one partition without a group of the service (the CLI's peek). */
export interface PartitionReader {
  /**
   * Up to `count` records of `partition` from `offset`, stopping at `end` (exclusive) or after
   * `timeoutMs`; `complete` false when the time ran out first.
   */
  read(request: {
    topic: string;
    partition: number;
    offset: bigint;
    count: number;
    end: bigint;
    timeoutMs: number;
  }): Promise<{ records: SourceRecord[]; complete: boolean }>;
}

/** One fetch answer of one partition, read straight from its leader. */
export interface FetchedRange {
  /** The committed records at or after the offset asked for, in offset order (control records and aborted transactions left out). */
  readonly records: SourceRecord[];
  /**
   * Where the next fetch starts: past the answer's last record batch (a transaction marker or
   * records compacted away at its end count); the offset asked for when the answer held nothing.
   */
  readonly next: bigint;
  /** The partition's high watermark when it answered. */
  readonly highWatermark: bigint;
}

/** Fetches one partition's records from its leader, one answer at a time, without a group and without committing (reconcile). */
export interface PartitionFetcher {
  /**
   * One fetch of `partition` from `offset`, committed records only, retried across a leadership change.
   * @throws PartitionRangeGoneError when the broker no longer holds `offset`.
   */
  fetch(topic: string, partition: number, offset: bigint): Promise<FetchedRange>;
  close(): Promise<void>;
}

/** The records a partition no longer holds: retention or a deletion moved its start past `offset`. */
export class PartitionRangeGoneError extends Error {
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offset: bigint,
    options?: { cause?: unknown },
  ) {
    super(`offset ${offset} of ${topic}-${partition} is no longer on the broker (retention or deleted records)`, options);
    this.name = 'PartitionRangeGoneError';
  }
}

/** Options of a client: who it says it is, where its log lines go. */
export interface KafkaClientOptions {
  /** The client id; default the settings'. */
  readonly clientId?: string;
  /** The client's own log lines (WARN and ERROR); none without. */
  readonly logger?: CoreLogger;
  /** How often a failing admin request is retried. */
  readonly retries?: number;
}

/** One Kafka client over the settings' cluster. */
export interface KafkaClient {
  readonly name: KafkaClientName;
  /** Checks the client can do what the host needs (a pinned version, headers in order); rejects naming what is wrong. */
  verify(): Promise<void>;
  consumer(options: ConsumerOptions): ConsumerPort;
  /** An admin, not connected yet. */
  admin(): KafkaAdmin;
  topicIds(): TopicIdReader;
  partitionReader(): PartitionReader;
  /** A fetcher of partitions without a group, on connections of its own. */
  partitionFetcher(): PartitionFetcher;
}

/** Builds a client from the Kafka settings. */
export type KafkaClientFactory = (settings: KafkaSettings, options?: KafkaClientOptions) => KafkaClient;

/** The broker does not know the topic. */
export class UnknownTopicError extends StorageConsumerError {
  readonly topic: string;
  constructor(topic: string, options?: { cause?: unknown }) {
    super(`topic ${topic} does not exist`, options);
    this.name = 'UnknownTopicError';
    this.topic = topic;
  }
}

/** Whether the error or one of its causes says a topic is unknown (an {@link UnknownTopicError}, or Kafka's UNKNOWN_TOPIC_OR_PARTITION). */
export function isUnknownTopic(error: unknown): boolean {
  for (const cause of causeChain(error)) {
    if (cause instanceof UnknownTopicError) return true;
    const { type, code, apiCode } = cause as { type?: unknown; code?: unknown; apiCode?: unknown };
    if (type === 'UNKNOWN_TOPIC_OR_PARTITION' || code === 'UNKNOWN_TOPIC_OR_PARTITION' || apiCode === 3) return true;
  }
  return false;
}

/** The timestamp type of a record whose client does not say it (Java's `TimestampType.CREATE_TIME`). */
export const TIMESTAMP_TYPE = 'CREATE_TIME';

/** The group has members: its offsets cannot be set from outside now. */
export class GroupNotEmptyError extends StorageConsumerError {
  readonly group: string;
  constructor(group: string, options?: { cause?: unknown }) {
    super(`consumer group ${group} has running members; stop them first`, options);
    this.name = 'GroupNotEmptyError';
    this.group = group;
  }
}
