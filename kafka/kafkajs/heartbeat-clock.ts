/**
 * kafkajs' group heartbeat on a monotonic clock. kafkajs decides whether a heartbeat is due on
 * the wall clock (`Date.now() >= this.lastRequest + interval`, the shared heartbeat in
 * `kafkajs/src/consumer/consumerGroup.js`): after the wall clock steps back two hours it sends
 * none for two hours, and the coordinator drops the member once a quiet partition lets its
 * session run out (nothing else keeps it alive then). `ConsumerGroup.prototype.heartbeat`
 * (called by kafkajs' runner between fetches and by the host while it writes, through
 * `eachBatch`'s `heartbeat`) is wrapped: whether a heartbeat is due is decided on
 * `performance.now()`, per consumer group, and a due one is sent whatever kafkajs' `lastRequest`
 * says (it is set to -Infinity first). Calls while a heartbeat is in flight are still due, so they
 * reach kafkajs' shared heartbeat and wait for the same request, as before.
 *
 * kafkajs is pinned (package.json); test/unit/kafka/kafkajs/heartbeat-clock.test.ts holds the
 * wrapper to kafkajs' own ConsumerGroup, test/integration/host-clock-step.test.ts to what it is for.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { KafkajsIncompatibleError } from './version.js';

const INSTALLED = Symbol.for('storage-consumer.kafka-heartbeat-clock');

const require = createRequire(import.meta.url);
const CONSUMER_GROUP = join(dirname(require.resolve('kafkajs')), 'src', 'consumer', 'consumerGroup.js');

/** kafkajs' wall-clock time of its last heartbeat, which its shared heartbeat compares with `Date.now()`. */
interface HeartbeatingGroup {
  lastRequest: number;
}
type Heartbeat = ((this: HeartbeatingGroup, options: { interval: number }) => Promise<void>) & { [INSTALLED]?: true };
interface ConsumerGroupClass {
  prototype: { heartbeat?: Heartbeat };
}

/** Per consumer group: `performance.now()` when its last heartbeat was answered. */
const lastHeartbeats = new WeakMap<object, number>();

/**
 * Installs the wrapper (idempotent). Throws a `KafkajsIncompatibleError` when kafkajs'
 * ConsumerGroup has no `heartbeat()`.
 */
export function installHeartbeatClock(): void {
  const ConsumerGroup = require(CONSUMER_GROUP) as ConsumerGroupClass;
  const original = ConsumerGroup.prototype.heartbeat;
  if (typeof original !== 'function')
    throw new KafkajsIncompatibleError(
      `kafkajs' ConsumerGroup has no heartbeat() (${CONSUMER_GROUP}): the host cannot send its heartbeats on a monotonic clock`,
    );
  if (original[INSTALLED]) return;
  const wrapped: Heartbeat = async function (this: HeartbeatingGroup, options: { interval: number }) {
    const last = lastHeartbeats.get(this);
    if (last !== undefined && performance.now() < last + options.interval) return;
    this.lastRequest = -Infinity;
    await original.call(this, options);
    // kafkajs sets `lastRequest` only once the coordinator answered (no member id: nothing was sent).
    if (this.lastRequest !== -Infinity) lastHeartbeats.set(this, performance.now());
  };
  wrapped[INSTALLED] = true;
  ConsumerGroup.prototype.heartbeat = wrapped;
}
