/**
 * A gate before kafkajs joins or leaves a consumer group. The host writes a partition's batches
 * while kafkajs already fetches the next ones (host/partition-lanes.ts), so kafkajs' own order
 * (it rejoins only once every `eachBatch` returned) no longer keeps a member's writes from
 * overlapping those of a partition's next owner. `ConsumerGroup.prototype.joinAndSync` and
 * `ConsumerGroup.prototype.leave` (`kafkajs/src/consumer/consumerGroup.js`, every join: the first,
 * a rebalance, a rejoin after an unknown member id or stale metadata, and the leave of a stop) are
 * wrapped to run inside the gate of the consumer they belong to: the host drains its writes first.
 *
 * A join through a gate starts from the committed offsets: once the writes are drained it forgets
 * every seek kafkajs still holds (`ConsumerGroup.seekOffset`, applied at a partition's next fetch,
 * which may come after a rebalance and hours later: a redelivery's or a dropped batch's seek of a
 * partition another member committed far past since would move its committed offset back).
 *
 * The gate is found through the async context of `consumer.run` ({@link runWithGroupGate}): every
 * join and leave of a consumer is called from continuations of its `run`, including the run
 * kafkajs restarts after a crash; a consumer run outside any gate joins (keeping its seeks) and
 * leaves as before. kafkajs is pinned (package.json); test/unit/kafka/kafkajs/group-gate.test.ts
 * holds the wrapper to the prototype, test/integration/host.test.ts and chaos/ to what it is for.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { KafkajsIncompatibleError } from './version.js';

/** What passes a gate: a join of the group (every one, the first included) or the leave of a stop. */
export interface GroupStep {
  readonly kind: 'join' | 'leave';
  /** Of a join, from the moment its `work` started: how many seeks of kafkajs it forgot (0 before, and for a leave). */
  readonly forgottenSeeks: number;
}

/**
 * Runs a join or a leave (`work`) when the consumer's writes allow it. The gate is called when
 * kafkajs starts the step (for a join: the member is joining from then on, its drain included);
 * `work` runs kafkajs' own step and settles when kafkajs finished it (a join resolves once the
 * member joined, after kafkajs' `GROUP_JOIN` event, or rejects when kafkajs gave up).
 */
export type GroupGate = <T>(work: () => Promise<T>, step: GroupStep) => Promise<T>;

const gates = new AsyncLocalStorage<GroupGate>();
const INSTALLED = Symbol.for('storage-consumer.kafka-group-gate');

const require = createRequire(import.meta.url);
const CONSUMER_GROUP = join(dirname(require.resolve('kafkajs')), 'src', 'consumer', 'consumerGroup.js');

/** The part of kafkajs' ConsumerGroup a gated join reads: its pending seeks (a Map). */
interface SeekingGroup {
  seekOffset?: { readonly size: number; clear(): void };
}
type GroupMethod = ((this: SeekingGroup, ...args: unknown[]) => Promise<unknown>) & { [INSTALLED]?: true };
interface ConsumerGroupClass {
  prototype: { joinAndSync?: GroupMethod; leave?: GroupMethod };
}

/** Forgets every seek the group holds; returns how many there were. */
function forgetSeeks(group: SeekingGroup): number {
  const seeks = group.seekOffset;
  if (seeks === undefined) return 0;
  const { size } = seeks;
  seeks.clear();
  return size;
}

/** Installs the wrappers (idempotent). Throws a `KafkajsIncompatibleError` when kafkajs' group has neither method. */
export function installGroupGate(): void {
  const ConsumerGroup = require(CONSUMER_GROUP) as ConsumerGroupClass;
  for (const kind of ['join', 'leave'] as const) {
    const name = kind === 'join' ? 'joinAndSync' : 'leave';
    const original = ConsumerGroup.prototype[name];
    if (typeof original !== 'function')
      throw new KafkajsIncompatibleError(
        `kafkajs' ConsumerGroup has no ${name}() (${CONSUMER_GROUP}): the host cannot drain its writes first`,
      );
    if (original[INSTALLED]) continue;
    const wrapped: GroupMethod = function (this: SeekingGroup, ...args: unknown[]) {
      const gate = gates.getStore();
      if (gate === undefined) return original.apply(this, args);
      const step = { kind, forgottenSeeks: 0 };
      return gate(() => {
        if (kind === 'join') step.forgottenSeeks = forgetSeeks(this);
        return original.apply(this, args);
      }, step);
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
