/**
 * A topic's metadata on `@platformatic/kafka`: its id, its partitions and their leaders, always
 * asked of the cluster (never the client's cache), a missing topic told apart from a failure.
 */
import type { Base, ClusterMetadata, ClusterTopicMetadata } from '@platformatic/kafka';
import { isMissingTopic } from './errors.js';

/** A platformatic client of any kind (admin, consumer): each asks metadata the same way. */
type MetadataClient = Pick<Base, 'metadata'>;

/**
 * The cluster's metadata for `topic`, `undefined` when the cluster does not know it. A missing
 * topic is first asked once without retries: the client retries "unknown topic" answers for
 * seconds, which says nothing more here. Any other failure is asked again with the client's retries.
 */
export async function topicMetadata(client: MetadataClient, topic: string): Promise<ClusterTopicMetadata | undefined> {
  const ask = (retries?: number): Promise<ClusterMetadata> =>
    client.metadata({ topics: [topic], forceUpdate: true, ...(retries === undefined ? {} : { retries }) });
  try {
    return (await ask(0)).topics.get(topic);
  } catch (error) {
    if (isMissingTopic(error)) return undefined;
    try {
      return (await ask()).topics.get(topic);
    } catch (again) {
      if (isMissingTopic(again)) return undefined;
      throw again;
    }
  }
}

/** The partition numbers of a topic's metadata, in order. */
export function partitionsOf(metadata: ClusterTopicMetadata): number[] {
  return Array.from({ length: metadata.partitionsCount }, (_, partition) => partition);
}
