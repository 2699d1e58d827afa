/**
 * The consumer port (kafka/port.ts) on kafkajs: a kafkajs consumer with auto-commit and
 * auto-resolve off, its `eachBatch` payloads handed over as partition handles of source records,
 * every join and the leave of a stop run through the host's gate (./group-gate.ts), completed
 * fetches and unreadable batches seen by the fetch probe (./fetch-probe.ts).
 */
import type { EachBatchPayload, Kafka } from 'kafkajs';
import { causeChain } from '../../shared/errors.js';
import type { ConsumerCrash, ConsumerOptions, ConsumerPort, GroupGate, PartitionHandle, UnreadableBatch } from '../port.js';
import { UnreadableBatchError } from './codecs.js';
import { installFetchProbe, onFetchCompleted, unreadableBatchOf } from './fetch-probe.js';
import { runWithGroupGate } from './group-gate.js';
import { toSourceRecord } from './source-record.js';

/**
 * The codec of a batch the consumer could not decompress, from the crash error or its causes:
 * the project's own codecs fail with UnreadableBatchError, kafkajs' placeholders with
 * `KafkaJSNotImplemented: <Codec> compression not implemented`.
 */
export function unreadableCodec(error: unknown): string | undefined {
  for (const cause of causeChain(error)) {
    if (cause instanceof UnreadableBatchError) return cause.codec;
    const missing = /^(\w+) compression not implemented/i.exec(cause.message);
    if (cause.name === 'KafkaJSNotImplemented' && missing) return (missing[1] as string).toLowerCase();
  }
  return undefined;
}

/** The unreadable batch behind a crash, if one is: its codec and place, as far as known. */
export function unreadableOf(error: Error): UnreadableBatch | undefined {
  const codec = unreadableCodec(error);
  const located = unreadableBatchOf(error);
  if (codec === undefined && located === undefined) return undefined;
  const { partition, baseOffset, lastOffset } = located?.location ?? {};
  const cause = located?.cause;
  return {
    ...(codec === undefined ? {} : { codec }),
    ...(partition === undefined || baseOffset === undefined || lastOffset === undefined
      ? {}
      : { location: { partition, baseOffset, lastOffset } }),
    reason: located === undefined ? error.message : cause instanceof Error ? cause.message : String(cause),
  };
}

/** kafkajs' `eachBatch` payload as a partition handle: the batch's messages as source records. */
function handleOf(payload: EachBatchPayload): PartitionHandle {
  const { batch } = payload;
  const { topic, partition, highWatermark } = batch;
  const first = batch.firstOffset();
  const last = batch.lastOffset();
  return {
    batch: {
      topic,
      partition,
      highWatermark,
      records: batch.messages.map((message) => toSourceRecord(topic, partition, message)),
      firstOffset: () => first,
      lastOffset: () => last,
    },
    isRunning: () => payload.isRunning(),
    isStale: () => payload.isStale(),
    heartbeat: () => payload.heartbeat(),
    resolveOffset: (offset) => payload.resolveOffset(offset),
    commitOffsetsIfNecessary: (offsets) => payload.commitOffsetsIfNecessary(offsets),
  };
}

/** The port over kafkajs' consumers of `kafka`. */
export function kafkajsConsumer(kafka: Kafka, options: ConsumerOptions): ConsumerPort {
  // Before the consumer's first fetch: completed fetches and unreadable batches are seen there.
  installFetchProbe();
  const consumer = kafka.consumer({
    groupId: options.groupId,
    sessionTimeout: options.sessionTimeoutMs,
    rebalanceTimeout: options.rebalanceTimeoutMs,
    heartbeatInterval: options.heartbeatIntervalMs,
    maxWaitTimeInMs: options.maxWaitMs,
    maxBytesPerPartition: options.maxBytesPerPartition,
    maxBytes: options.maxBytes,
    allowAutoTopicCreation: false,
    // Only Kafka's own errors reach kafkajs' retry: the host catches every handler error.
    retry: { retries: 5, restartOnFailure: options.restartOnFailure },
  });
  /** The gate of the running consumer: its leave on a stop passes it too. */
  let gate: GroupGate | undefined;
  return {
    connect: () => consumer.connect(),
    subscribe: (subscription) => consumer.subscribe(subscription),
    run: ({ gate: runGate, eachBatch, partitionsConsumedConcurrently }) => {
      gate = runGate;
      return runWithGroupGate(runGate, () =>
        consumer.run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          partitionsConsumedConcurrently,
          eachBatch: (payload) => eachBatch(handleOf(payload)),
        }),
      );
    },
    seek: (position) => consumer.seek(position),
    pause: (topics) => consumer.pause(topics),
    resume: (topics) => consumer.resume(topics),
    // kafkajs leaves from its disconnect: run in the gate's context, the leave waits for the writes.
    disconnect: () => (gate === undefined ? consumer.disconnect() : runWithGroupGate(gate, () => consumer.disconnect())),
    onGroupJoin: (listener) => {
      // kafkajs does not say the generation it joined.
      consumer.on(consumer.events.GROUP_JOIN, ({ payload }) =>
        listener({ memberId: payload.memberId, groupId: payload.groupId, memberAssignment: payload.memberAssignment }),
      );
    },
    onRebalancing: (listener) => {
      consumer.on(consumer.events.REBALANCING, () => listener());
    },
    onCrash: (listener) => {
      consumer.on(consumer.events.CRASH, ({ payload }) => {
        const unreadable = unreadableOf(payload.error);
        const crash: ConsumerCrash = { error: payload.error, restart: payload.restart, ...(unreadable ? { unreadable } : {}) };
        listener(crash);
      });
    },
    onFetched: (topic, listener) => onFetchCompleted(topic, listener),
  };
}
