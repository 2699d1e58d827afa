/**
 * The host's one Kafka admin client (the background lag readings and the status endpoint share
 * it): connected on first use, reconnected after a failed connect, never connected again once the
 * host let go of it.
 */
import type { KafkaAdmin, KafkaClient } from '../kafka/port.js';

/** The shared admin client (see the file's comment). */
export interface HostAdmin {
  /** The connected admin; rejects before the host has a Kafka client and after `close()`. */
  connected(): Promise<KafkaAdmin>;
  /** Whether `close()` was called: a reading after that must not connect a new one. */
  closed(): boolean;
  /** Disconnects it (if it was connected); later `connected()` calls reject. */
  close(): Promise<void>;
}

/** `kafka()`: the host's Kafka client, `undefined` before it exists; `state()` names why there is none. */
export function createHostAdmin(kafka: () => KafkaClient | undefined, state: () => string): HostAdmin {
  let admin: Promise<KafkaAdmin> | undefined;
  let closed = false;
  return {
    async connected() {
      const client = kafka();
      if (client === undefined || closed) throw new Error(`the host is ${state()}`);
      admin ??= (async () => {
        const created = client.admin();
        await created.connect();
        return created;
      })();
      return admin.catch((error: unknown) => {
        admin = undefined;
        throw error;
      });
    },
    closed: () => closed,
    async close() {
      closed = true;
      const current = admin;
      admin = undefined;
      await current?.then((connected) => connected.disconnect()).catch(() => undefined);
    },
  };
}
