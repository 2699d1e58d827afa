/**
 * The consumer port: the part of a Kafka consumer that a host pipeline's consumer
 * (host/topic-consumer.ts) uses, as plain methods and listeners, and its kafkajs implementation.
 * A unit test fakes the port with a plain object (no cast); a change of Kafka client replaces
 * {@link kafkajsConsumers} and the `eachBatch` payload it hands over (host/batch-loop.ts `BatchPort`).
 */
import type { ConsumerConfig, ConsumerRunConfig, Kafka } from 'kafkajs';
import type { GroupGate } from './kafkajs/group-gate.js';
import { runWithGroupGate } from './kafkajs/group-gate.js';

export type { GroupGate } from './kafkajs/group-gate.js';

/** The member's place after a join: its id, its group and its partitions per topic. */
export interface GroupJoin {
  readonly memberId: string;
  readonly groupId: string;
  readonly memberAssignment: Readonly<Record<string, number[]>>;
}

/** A consumer crash: the error, and whether the client restarts the consumer by itself. */
export interface ConsumerCrash {
  readonly error: Error;
  readonly restart: boolean;
}

/** What a pipeline's consumer calls on its Kafka consumer. */
export interface ConsumerPort {
  connect(): Promise<void>;
  subscribe(subscription: { topics: string[]; fromBeginning: boolean }): Promise<void>;
  /**
   * Joins the group and consumes; `eachBatch` gets one partition's polled batch at a time. Every
   * join (the first included) and the leave of a stop pass `gate` first: the host drains its
   * writes there, and a join starts from the committed offsets (the client forgets its seeks).
   */
  run(
    config: Pick<ConsumerRunConfig, 'autoCommit' | 'eachBatchAutoResolve' | 'partitionsConsumedConcurrently' | 'eachBatch'> & {
      readonly gate: GroupGate;
    },
  ): Promise<void>;
  /** Moves a partition's fetch position (the next fetch of it starts at `offset`). */
  seek(position: { topic: string; partition: number; offset: string }): void;
  /** Stops fetching the topics' partitions (also ones assigned later), or starts again. */
  pause(topics: Array<{ topic: string }>): void;
  resume(topics: Array<{ topic: string }>): void;
  /** Leaves the group and closes the connections. */
  disconnect(): Promise<void>;
  onGroupJoin(listener: (join: GroupJoin) => void): void;
  /** The group rebalances: the member's partitions are no longer its own until the next join. */
  onRebalancing(listener: () => void): void;
  onCrash(listener: (crash: ConsumerCrash) => void): void;
}

/** Builds a consumer from its settings. */
export type ConsumerFactory = (config: ConsumerConfig) => ConsumerPort;

/** The port over kafkajs' consumers of `kafka`. */
export function kafkajsConsumers(kafka: Kafka): ConsumerFactory {
  return (config) => {
    const consumer = kafka.consumer(config);
    return {
      connect: () => consumer.connect(),
      subscribe: (subscription) => consumer.subscribe(subscription),
      run: ({ gate, ...runConfig }) => runWithGroupGate(gate, () => consumer.run(runConfig)),
      seek: (position) => consumer.seek(position),
      pause: (topics) => consumer.pause(topics),
      resume: (topics) => consumer.resume(topics),
      disconnect: () => consumer.disconnect(),
      onGroupJoin: (listener) => {
        consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => listener(payload));
      },
      onRebalancing: (listener) => {
        consumer.on(consumer.events.REBALANCING, () => listener());
      },
      onCrash: (listener) => {
        consumer.on(consumer.events.CRASH, ({ payload }) => listener({ error: payload.error, restart: payload.restart }));
      },
    };
  };
}
