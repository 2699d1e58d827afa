/**
 * Reading records of one partition on kafkajs (the CLI's peek): a consumer of a throw-away
 * group that never commits, deleted afterwards. kafkajs has no `assign()`: the consumer
 * subscribes, seeks the partition and ignores the others.
 */
import { randomUUID } from 'node:crypto';
import type { Kafka, KafkaMessage } from 'kafkajs';
import type { SourceRecord } from '../../shared/kafka-event-builder.js';
import { TIMED_OUT, within } from '../../shared/timeout.js';
import type { PartitionReader } from '../port.js';
import { toSourceRecord } from './source-record.js';

/** A reader over `kafka`; its groups are named `<clientId>-<uuid>`. */
export function kafkajsPartitionReader(kafka: Kafka, clientId: string): PartitionReader {
  return {
    async read({ topic, partition, offset, count, end, timeoutMs }) {
      const groupId = `${clientId}-${randomUUID()}`;
      const consumer = kafka.consumer({ groupId, allowAutoTopicCreation: false, maxWaitTimeInMs: 250 });
      const collected: KafkaMessage[] = [];
      let finish!: () => void;
      const done = new Promise<void>((resolve) => (finish = resolve));
      let complete = true;
      await consumer.connect();
      try {
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
        await consumer.run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          eachBatch: async ({ batch }) => {
            if (batch.partition !== partition) return;
            for (const message of batch.messages) {
              if (BigInt(message.offset) < offset || BigInt(message.offset) >= end || collected.length >= count) continue;
              collected.push(message);
            }
            // The batch's last offset counts markers and compacted-away records too.
            if (collected.length >= count || BigInt(batch.lastOffset()) >= end - 1n) finish();
          },
        });
        consumer.seek({ topic, partition, offset: offset.toString() });
        if ((await within(done, timeoutMs)) === TIMED_OUT) complete = false;
      } finally {
        await consumer.disconnect();
        const admin = kafka.admin();
        await admin
          .connect()
          .then(() => admin.deleteGroups([groupId]))
          .catch(() => undefined)
          .finally(() => admin.disconnect().catch(() => undefined));
      }
      const records: SourceRecord[] = collected.slice(0, count).map((message) => toSourceRecord(topic, partition, message));
      return { records, complete };
    },
  };
}
