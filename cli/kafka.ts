import { createKafkaClient } from '../kafka/clients.js';
import type { KafkaAdmin } from '../kafka/port.js';
import type { GroupPosition } from '../kafka/lag.js';
import type { KafkaSettings } from '../kafka/settings.js';
import { loadHostSettings } from '../config/host-settings.js';
import type { Environment } from '../shared/env.js';
import type { ConsumerSettings } from '../config/pipeline-settings.js';
import type { CliIo } from './command.js';

/** A connected admin and the settings it was made from. */
export interface KafkaContext {
  readonly admin: KafkaAdmin;
  readonly settings: ConsumerSettings;
}

/**
 * An admin (not connected yet) for the host's Kafka settings: client, brokers, TLS, SASL. A
 * command reports its own errors: the client logs nothing.
 */
export function createKafkaAdmin(kafka: KafkaSettings): KafkaAdmin {
  return createKafkaClient(kafka, { clientId: `${kafka.clientId}-cli`, retries: 3 }).admin();
}

/**
 * Connects an admin as the host would connect (`KAFKA_BROKERS`, TLS and SASL variables, read
 * and validated by the host's settings). The caller disconnects it.
 */
async function connectKafkaAdmin(env: Environment): Promise<KafkaContext> {
  const host = loadHostSettings(env);
  const admin = createKafkaAdmin(host.kafka);
  await admin.connect();
  return { admin, settings: host.storage };
}

/** Runs `work` with a connected admin (see {@link connectKafkaAdmin}); always disconnects. */
export async function withKafkaAdmin<T>(io: CliIo, work: (context: KafkaContext) => Promise<T>): Promise<T> {
  const context = await connectKafkaAdmin(io.env);
  try {
    return await work(context);
  } finally {
    await context.admin.disconnect();
  }
}

/** A position as JSON carries it: offsets as strings (never rounded), counts as numbers. */
export function positionJson(position: GroupPosition) {
  return {
    pipeline: position.pipeline,
    group: position.group,
    topic: position.topic,
    state: position.state,
    members: position.members,
    lag: Number(position.lag),
    partitions: position.partitions.map((partition) => ({
      partition: partition.partition,
      committed: partition.committed?.toString() ?? null,
      start: partition.start.toString(),
      end: partition.end.toString(),
      lag: Number(partition.lag),
    })),
  };
}
