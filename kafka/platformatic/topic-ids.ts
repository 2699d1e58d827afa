/**
 * Topic ids (kafka/port.ts `TopicIdReader`) from `@platformatic/kafka`'s public metadata. The
 * client writes a topic id as a hyphenated UUID; the port carries it as kafkajs' reader does
 * (../kafkajs/topic-ids.ts), the 16 bytes in base64url as Kafka's own tools print them, so a
 * host that changes clients sees the same id for the same topic.
 */
import { Admin } from '@platformatic/kafka';
import type { AdminOptions } from '@platformatic/kafka';
import type { TopicIdReader } from '../port.js';
import { partitionsOf, topicMetadata } from './metadata.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The port's form of the client's topic id; `undefined` for none: the all-zero id, or the topic's
 * name, which the client puts in its place when the broker's metadata carries no ids (before v10).
 */
export function portTopicId(clientId: string): string | undefined {
  if (!UUID.test(clientId)) return undefined;
  const bytes = Buffer.from(clientId.replaceAll('-', ''), 'hex');
  return bytes.every((byte) => byte === 0) ? undefined : bytes.toString('base64url');
}

/** A reader over its own platformatic admin (one connection pool, opened at the first read). */
export function platformaticTopicIds(options: AdminOptions): TopicIdReader {
  let admin: Admin | undefined;
  return {
    async read(topics) {
      const client = (admin ??= new Admin(options));
      try {
        return await Promise.all(
          topics.map(async (topic) => {
            const found = await topicMetadata(client, topic);
            return found === undefined
              ? { topic, id: undefined, partitions: [] }
              : { topic, id: portTopicId(found.id), partitions: partitionsOf(found) };
          }),
        );
      } catch (error) {
        // A broken or hung connection (a broker frozen, then resumed) is never asked again: the
        // next read opens new ones, whatever state the client left these in.
        if (admin === client) admin = undefined;
        void client.close().catch(() => undefined);
        throw error;
      }
    },
    async close() {
      const current = admin;
      admin = undefined;
      await current?.close();
    },
  };
}
