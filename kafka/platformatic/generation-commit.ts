/**
 * Offset commits in one named generation of the group, for the platformatic consumer
 * (./consumer.ts). The client's own `consumer.commit` sends the member's generation of the moment
 * and, when the coordinator refuses it with a rejoin error, rejoins and sends the same offsets
 * again in the new generation. Neither suits the host: a commit of a batch belongs to the
 * generation the batch was fetched in (the coordinator must refuse it once that generation is
 * gone, and a partition's next owner may have committed past it), and the host's gate holds a
 * rejoin until its writes, commits included, are done, so a commit that waits for a rejoin would
 * never end. This sends Kafka's OffsetCommit (v8, Kafka 2.4 and later) through the client's public
 * protocol API, on a connection of its own to the group's coordinator, with the generation and
 * member id the batch was fetched under.
 */
import { ConnectionPool, offsetCommitV8 } from '@platformatic/kafka';
import type { Consumer } from '@platformatic/kafka';
import type { CommitRequest } from '../port.js';
import type { platformaticConnection } from './connection.js';

/** Where a batch was fetched: the member and its generation as the coordinator knows them. */
export interface GenerationOfMember {
  readonly memberId: string;
  readonly generationId: number;
}

/** Commits offsets in a named generation; closes its connections. */
export interface GenerationCommitter {
  commit(request: CommitRequest, generation: GenerationOfMember): Promise<void>;
  close(): Promise<void>;
}

/** A committer for `consumer`'s group, connecting as `connection` says. */
export function generationCommitter(
  consumer: Consumer,
  connection: ReturnType<typeof platformaticConnection>,
  requestTimeoutMs: number,
): GenerationCommitter {
  const { clientId, tls, tlsServerName, sasl } = connection;
  const pool = new ConnectionPool(clientId, {
    requestTimeout: requestTimeoutMs,
    ...(tls === undefined ? {} : { tls }),
    ...(tlsServerName === undefined ? {} : { tlsServerName }),
    ...(sasl === undefined ? {} : { sasl }),
  });
  return {
    async commit(request, { memberId, generationId }) {
      const coordinator = await consumer.findGroupCoordinator();
      const broker = (await consumer.metadata({ topics: [] })).brokers.get(coordinator);
      if (broker === undefined) throw new Error(`the group coordinator ${coordinator} is not among the cluster's brokers`);
      const link = await pool.get(broker);
      await offsetCommitV8.api.async(
        link,
        consumer.groupId,
        generationId,
        memberId,
        null,
        request.topics.map(({ topic, partitions }) => ({
          name: topic,
          partitions: partitions.map(({ partition, offset }) => ({
            partitionIndex: partition,
            committedOffset: BigInt(offset),
            committedLeaderEpoch: -1,
            committedMetadata: null,
          })),
        })),
      );
    },
    close: () => pool.close(),
  };
}
