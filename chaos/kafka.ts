/**
 * The harness's own Kafka clients: a producer for the workload, a lag probe over the consumer
 * groups, and a read-back of everything the topics hold. Each survives a broker restart by
 * reconnecting and retrying; a message the producer writes twice is simply in the log twice
 * (the expected state is built from the log).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Admin, Message, Producer } from 'kafkajs';
import { installKafkajsWorkarounds } from '../kafka/kafkajs/index.js';
import type { PipelineName } from '../shared/pipelines.js';
import type { LoggedRecord } from './model.js';
import type { PlannedMessage } from './plan.js';
import { PLAN_HEADER } from './plan.js';

/** A consumer group and the topic it reads. */
export interface GroupTopic {
  readonly pipeline: PipelineName;
  readonly group: string;
  readonly topic: string;
}

// One record batch per partition per request, and the broker refuses one over 1 MB.
const MAX_CHUNK_BYTES = 512 * 1024;

/** Retries `attempt` (with `reset` between tries) until it succeeds or `timeoutMs` passed. */
async function retrying<T>(what: string, attempt: () => Promise<T>, reset: () => Promise<void>, timeoutMs = 180_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`${what} kept failing for ${timeoutMs} ms: ${String(error)}`, { cause: error });
      await reset().catch(() => undefined);
      await sleep(1_000);
    }
  }
}

/** Kafka clients on the run's broker. */
export class ChaosKafka {
  private readonly kafka: Kafka;
  private producer: Producer | undefined;
  private admin: Admin | undefined;

  constructor(brokers: readonly string[]) {
    installKafkajsWorkarounds();
    this.kafka = new Kafka({ clientId: 'chaos-harness', brokers: [...brokers], logLevel: logLevel.NOTHING, retry: { retries: 3 } });
  }

  private async connectedProducer(): Promise<Producer> {
    if (this.producer === undefined) {
      const producer = this.kafka.producer({
        createPartitioner: Partitioners.DefaultPartitioner,
        allowAutoTopicCreation: false,
        idempotent: true,
        maxInFlightRequests: 1,
      });
      await producer.connect();
      this.producer = producer;
    }
    return this.producer;
  }

  private async connectedAdmin(): Promise<Admin> {
    if (this.admin === undefined) {
      const admin = this.kafka.admin();
      await admin.connect();
      this.admin = admin;
    }
    return this.admin;
  }

  private async resetProducer(): Promise<void> {
    const producer = this.producer;
    this.producer = undefined;
    await producer?.disconnect();
  }

  private async resetAdmin(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    await admin?.disconnect();
  }

  /** Produces `messages` (acks from all in-sync replicas), keyed, each with its plan id header. */
  async produce(messages: readonly PlannedMessage[], topics: Readonly<Record<PipelineName, string>>): Promise<void> {
    let chunk: PlannedMessage[] = [];
    let bytes = 0;
    const flush = async () => {
      if (chunk.length === 0) return;
      const byTopic = new Map<string, Message[]>();
      for (const message of chunk) {
        const topic = topics[message.topic];
        const list = byTopic.get(topic) ?? [];
        list.push({ key: message.key, value: message.value, headers: { [PLAN_HEADER]: String(message.id) } });
        byTopic.set(topic, list);
      }
      const topicMessages = [...byTopic].map(([topic, list]) => ({ topic, messages: list }));
      await retrying(
        'producing',
        async () => (await this.connectedProducer()).sendBatch({ acks: -1, topicMessages }),
        () => this.resetProducer(),
      );
      chunk = [];
      bytes = 0;
    };
    for (const message of messages) {
      const size = (message.value?.length ?? 0) + Buffer.byteLength(message.key ?? '') + 64;
      if (bytes + size > MAX_CHUNK_BYTES) await flush();
      chunk.push(message);
      bytes += size;
    }
    await flush();
  }

  /** Records not yet committed, summed over the groups (end offsets minus committed offsets). */
  async lag(groups: readonly GroupTopic[]): Promise<number> {
    return retrying(
      'reading the lag',
      async () => {
        const admin = await this.connectedAdmin();
        let total = 0;
        for (const { group, topic } of groups) {
          const ends = await admin.fetchTopicOffsets(topic);
          const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
          for (const end of ends) {
            const offset = committed?.partitions.find((partition) => partition.partition === end.partition)?.offset ?? '-1';
            total += Number(end.high) - Math.max(0, Number(offset));
          }
        }
        return total;
      },
      () => this.resetAdmin(),
    );
  }

  /** The connected admin client (for the final offset check). */
  async adminClient(): Promise<Admin> {
    return retrying(
      'connecting the admin client',
      () => this.connectedAdmin(),
      () => this.resetAdmin(),
    );
  }

  /** Every record of the topics from the beginning: coordinates and plan id. */
  async readBack(topics: Readonly<Record<PipelineName, string>>): Promise<LoggedRecord[]> {
    const admin = await this.adminClient();
    const pipelineOf = new Map(Object.entries(topics).map(([pipeline, topic]) => [topic, pipeline as PipelineName]));
    const remaining = new Map<string, bigint>();
    for (const topic of pipelineOf.keys()) {
      for (const end of await admin.fetchTopicOffsets(topic))
        if (end.high !== end.low) remaining.set(`${topic}|${end.partition}`, BigInt(end.high) - 1n);
    }
    const records: LoggedRecord[] = [];
    if (remaining.size === 0) return records;
    const consumer = this.kafka.consumer({ groupId: `chaos-read-back-${Date.now()}`, maxBytesPerPartition: 4 * 1024 * 1024 });
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [...pipelineOf.keys()], fromBeginning: true });
      let done!: () => void;
      const finished = new Promise<void>((resolve) => (done = resolve));
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          const pipeline = pipelineOf.get(batch.topic) as PipelineName;
          for (const message of batch.messages) {
            const header = message.headers?.[PLAN_HEADER];
            const planId = Number(Buffer.isBuffer(header) ? header.toString('utf8') : String(header));
            records.push({ topic: pipeline, partition: batch.partition, offset: message.offset, planId });
            const key = `${batch.topic}|${batch.partition}`;
            if (remaining.get(key) === BigInt(message.offset)) remaining.delete(key);
          }
          if (remaining.size === 0) done();
        },
      });
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`reading the topics back timed out with ${remaining.size} partition(s) unread`)),
          300_000,
        );
      });
      try {
        await Promise.race([finished, timeout]);
      } finally {
        clearTimeout(timer);
      }
    } finally {
      await consumer.disconnect();
    }
    // A record read twice (a fetch repeated after a rebalance) counts once.
    const unique = new Map(records.map((record) => [`${record.topic}|${record.partition}|${record.offset}`, record]));
    return [...unique.values()];
  }

  /** Disconnects every client. */
  async close(): Promise<void> {
    await Promise.allSettled([this.resetProducer(), this.resetAdmin()]);
  }
}
