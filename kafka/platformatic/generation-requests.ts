/**
 * Requests of the platformatic consumer (./consumer.ts) in one named generation of the group:
 * offset commits, and the heartbeats of a member whose rejoin waits in the host's gate.
 *
 * Commits. The client's own `consumer.commit` sends the member's generation of the moment
 * and, when the coordinator refuses it with a rejoin error, rejoins and sends the same offsets
 * again in the new generation. Neither suits the host: a commit of a batch belongs to the
 * generation the batch was fetched in (the coordinator must refuse it once that generation is
 * gone, and a partition's next owner may have committed past it), and the host's gate holds a
 * rejoin until its writes, commits included, are done, so a commit that waits for a rejoin would
 * never end. This sends Kafka's OffsetCommit (v8, Kafka 2.4 and later) through the client's public
 * protocol API, on a connection of its own to the group's coordinator, with the generation and
 * member id the batch was fetched under.
 *
 * Heartbeats. The client heartbeats in the background, but stops once it decided to rejoin, and
 * the host's gate may hold that rejoin for as long as a write takes (up to the rebalance
 * timeout). The coordinator would drop the member after its session timeout meanwhile and hand
 * its partitions on while it still writes them. A heartbeat in the last generation keeps the
 * session: the coordinator answers REBALANCE_IN_PROGRESS, and counts the member alive.
 */
import { ConnectionPool, heartbeatV4, offsetCommitV8, ResponseError } from '@platformatic/kafka';
import type { Connection } from '@platformatic/kafka';
import type { Consumer } from '@platformatic/kafka';
import type { CommitRequest } from '../port.js';
import type { platformaticConnection } from './connection.js';

/** Where a batch was fetched: the member and its generation as the coordinator knows them. */
export interface GenerationOfMember {
  readonly memberId: string;
  readonly generationId: number;
}

/** Requests in a named generation; closes its connections. */
interface GenerationRequests {
  commit(request: CommitRequest, generation: GenerationOfMember): Promise<void>;
  /** One heartbeat; resolves whatever the coordinator answered, rejects when it could not be sent. */
  heartbeat(generation: GenerationOfMember): Promise<void>;
  close(): Promise<void>;
}

/** Requests for `consumer`'s group, connecting as `connection` says. */
export function generationRequests(
  consumer: Consumer,
  connection: ReturnType<typeof platformaticConnection>,
  requestTimeoutMs: number,
): GenerationRequests {
  const { clientId, tls, tlsServerName, sasl } = connection;
  const pool = new ConnectionPool(clientId, {
    requestTimeout: requestTimeoutMs,
    ...(tls === undefined ? {} : { tls }),
    ...(tlsServerName === undefined ? {} : { tlsServerName }),
    ...(sasl === undefined ? {} : { sasl }),
  });
  const coordinator = async (): Promise<Connection> => {
    const id = await consumer.findGroupCoordinator();
    const broker = (await consumer.metadata({ topics: [] })).brokers.get(id);
    if (broker === undefined) throw new Error(`the group coordinator ${id} is not among the cluster's brokers`);
    return pool.get(broker);
  };
  return {
    async commit(request, { memberId, generationId }) {
      const link = await coordinator();
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
    async heartbeat({ memberId, generationId }) {
      const link = await coordinator();
      await heartbeatV4.api.async(link, consumer.groupId, generationId, memberId, null).catch((error: unknown) => {
        // An answer with an error code (REBALANCE_IN_PROGRESS above all) still reached the coordinator.
        if (!(error instanceof ResponseError)) throw error;
      });
    },
    close: () => pool.close(),
  };
}
