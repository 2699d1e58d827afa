/**
 * Topic ids (kafka/port.ts `TopicIdReader`) from `@platformatic/kafka`'s public metadata. The
 * client writes a topic id as a hyphenated UUID; the port carries it as kafkajs' reader does
 * (../kafkajs/topic-ids.ts), the 16 bytes in base64url as Kafka's own tools print them, so a
 * host that changes clients sees the same id for the same topic. As there, an id of `undefined`
 * means the topic does not exist (the host's watch reads it so); an existing topic whose id the
 * cluster does not tell is an error.
 */
import { Admin } from '@platformatic/kafka';
import type { AdminOptions } from '@platformatic/kafka';
import { StorageConsumerError } from '../../shared/errors.js';
import { TIMED_OUT, within } from '../../shared/timeout.js';
import type { TopicIdReader } from '../port.js';
import { partitionsOf, topicMetadata } from './metadata.js';

/**
 * A read of topic ids that takes longer has failed (the client's own retries included), as on
 * kafkajs: the host's watch tries again, on new connections.
 */
const READ_TIMEOUT_MS = 10_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The cluster does not tell a topic's id, as kafkajs' reader says it (its `TopicIdError`): `lasting`
 * when no later read can do better (the broker's metadata carries no ids), which the host's
 * watch (host/topic-incarnation.ts) reads as "ids cannot be had here" rather than "the topic is gone".
 */
class TopicIdError extends StorageConsumerError {
  readonly lasting: boolean;
  constructor(message: string, lasting: boolean) {
    super(message);
    this.name = 'TopicIdError';
    this.lasting = lasting;
  }
}

/**
 * The port's form of the client's topic id; `undefined` when it is none: the all-zero id, or the
 * topic's name, which the client puts in its place when the broker's metadata carries no ids (before v10).
 */
export function portTopicId(clientId: string): string | undefined {
  if (!UUID.test(clientId)) return undefined;
  const bytes = Buffer.from(clientId.replaceAll('-', ''), 'hex');
  return bytes.every((byte) => byte === 0) ? undefined : bytes.toString('base64url');
}

/** The id of an existing topic; an error when the cluster does not tell it (an id of `undefined` means a missing topic). */
export function existingTopicId(topic: string, clientId: string): string {
  const id = portTopicId(clientId);
  if (id !== undefined) return id;
  if (!UUID.test(clientId))
    throw new TopicIdError(`the broker's metadata carries no topic ids (Kafka 2.8 or later has them); topic ${topic}`, true);
  throw new TopicIdError(`the cluster does not describe topic ${topic}: its id is all zeros`, false);
}

/** A reader over its own platformatic admin (one connection pool, opened at the first read). */
export function platformaticTopicIds(options: AdminOptions): TopicIdReader {
  let admin: Admin | undefined;
  return {
    async read(topics) {
      const client = (admin ??= new Admin(options));
      try {
        const read = Promise.all(
          topics.map(async (topic) => {
            const found = await topicMetadata(client, topic);
            return found === undefined
              ? { topic, id: undefined, partitions: [] }
              : { topic, id: existingTopicId(topic, found.id), partitions: partitionsOf(found) };
          }),
        );
        const answer = await within(read, READ_TIMEOUT_MS);
        if (answer === TIMED_OUT) throw new TopicIdError(`no answer to the topic id request within ${READ_TIMEOUT_MS} ms`, false);
        return answer;
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
