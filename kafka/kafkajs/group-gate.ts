/**
 * A gate before kafkajs joins or leaves a consumer group. The host writes a partition's batches
 * while kafkajs already fetches the next ones (host/partition-lanes.ts), so kafkajs' own order
 * (it rejoins only once every `eachBatch` returned) no longer keeps a member's writes from
 * overlapping those of a partition's next owner. `ConsumerGroup.prototype.joinAndSync` and
 * `ConsumerGroup.prototype.leave` (`kafkajs/src/consumer/consumerGroup.js`, every join: the first,
 * a rebalance, a rejoin after an unknown member id or stale metadata, and the leave of a stop) are
 * wrapped to run inside the gate of the consumer they belong to: the host drains its writes first.
 *
 * The gate is found through the async context of `consumer.run` ({@link runWithGroupGate}): every
 * join and leave of a consumer is called from continuations of its `run`, including the run
 * kafkajs restarts after a crash; a consumer run outside any gate joins and leaves as before.
 * kafkajs is pinned (package.json); test/unit/kafka/kafkajs/group-gate.test.ts holds the wrapper
 * to the prototype, test/integration/host.test.ts and chaos/ to what it is for.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { KafkajsIncompatibleError } from './version.js';

/** Runs a join or a leave (`work`) when the consumer's writes allow it. */
export type GroupGate = <T>(work: () => Promise<T>) => Promise<T>;

const gates = new AsyncLocalStorage<GroupGate>();
const INSTALLED = Symbol.for('storage-consumer.kafka-group-gate');

const require = createRequire(import.meta.url);
const CONSUMER_GROUP = join(dirname(require.resolve('kafkajs')), 'src', 'consumer', 'consumerGroup.js');

type GroupMethod = ((this: unknown, ...args: unknown[]) => Promise<unknown>) & { [INSTALLED]?: true };
interface ConsumerGroupClass {
  prototype: { joinAndSync?: GroupMethod; leave?: GroupMethod };
}

/** Installs the wrappers (idempotent). Throws a `KafkajsIncompatibleError` when kafkajs' group has neither method. */
export function installGroupGate(): void {
  const ConsumerGroup = require(CONSUMER_GROUP) as ConsumerGroupClass;
  for (const name of ['joinAndSync', 'leave'] as const) {
    const original = ConsumerGroup.prototype[name];
    if (typeof original !== 'function')
      throw new KafkajsIncompatibleError(
        `kafkajs' ConsumerGroup has no ${name}() (${CONSUMER_GROUP}): the host cannot drain its writes first`,
      );
    if (original[INSTALLED]) continue;
    const wrapped: GroupMethod = function (this: unknown, ...args: unknown[]) {
      const gate = gates.getStore();
      return gate === undefined ? original.apply(this, args) : gate(() => original.apply(this, args));
    };
    wrapped[INSTALLED] = true;
    ConsumerGroup.prototype[name] = wrapped;
  }
}

/** Runs `start` (a kafkajs `consumer.run`) so that every join and leave of that consumer passes `gate`. */
export function runWithGroupGate<T>(gate: GroupGate, start: () => Promise<T>): Promise<T> {
  installGroupGate();
  return gates.run(gate, start);
}
