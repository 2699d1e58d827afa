import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { installGroupGate, runWithGroupGate } from '../../../../kafka/kafkajs/group-gate.js';
import type { GroupStep } from '../../../../kafka/kafkajs/group-gate.js';

// The wrapper on kafkajs' own ConsumerGroup prototype (the pinned kafkajs), driven on a group
// whose coordinator is a plain object: the leave is kafkajs' code, the gate the test's.

const require = createRequire(import.meta.url);
const ConsumerGroup = require(join(dirname(require.resolve('kafkajs')), 'src', 'consumer', 'consumerGroup.js')) as {
  prototype: object;
  new (options: Record<string, unknown>): Joining;
};

interface Joining {
  seekOffset: Map<string, string>;
  retrier: (attempt: (bail: (error: Error) => void) => Promise<void>) => Promise<void>;
  seek(position: { topic: string; partition: number; offset: string }): void;
  joinAndSync(): Promise<void>;
}

const logger = { info() {}, debug() {}, warn() {}, error() {}, namespace: () => logger };

/**
 * A member built by kafkajs' own constructor (its seeks are kafkajs' Map); its retrier, which
 * runs the join and sync with the coordinator, only records how many seeks kafkajs holds when
 * its join begins.
 */
function joiningMember(seeksAtJoin: number[]) {
  const value = new ConsumerGroup({ retry: { retries: 0 }, cluster: {}, groupId: 'g', topics: ['t'], logger });
  value.retrier = async () => {
    seeksAtJoin.push(value.seekOffset.size);
  };
  return value;
}

function group(calls: string[]) {
  const value = Object.create(ConsumerGroup.prototype) as { memberId: string | null; leave(): Promise<void>; groupId: string };
  Object.assign(value, {
    groupId: 'g',
    memberId: 'member-1',
    coordinator: { leaveGroup: async ({ memberId }: { memberId: string }) => calls.push(`leave ${memberId}`) },
  });
  return value;
}

describe('the group gate', () => {
  it("runs kafkajs' leave inside the gate of the consumer whose run it belongs to, also from a timer set during that run", async () => {
    const calls: string[] = [];
    const member = group(calls);
    const gate = async <T>(work: () => Promise<T>): Promise<T> => {
      calls.push('drained');
      return work();
    };

    await runWithGroupGate(gate, async () => {
      // kafkajs restarts a crashed consumer from a timer: the gate must follow it there.
      await sleep(1);
      await member.leave();
    });

    expect(calls).toEqual(['drained', 'leave member-1']);
    expect(member.memberId).toBeNull();
  });

  it('leaves a group outside any gated run alone, and installs once', async () => {
    installGroupGate();
    installGroupGate();
    const calls: string[] = [];
    const member = group(calls);

    await member.leave();

    expect(calls).toEqual(['leave member-1']);
    const prototype = ConsumerGroup.prototype as { joinAndSync: unknown; leave: unknown };
    expect(typeof prototype.joinAndSync).toBe('function');
    expect((prototype.leave as Record<symbol, unknown>)[Symbol.for('storage-consumer.kafka-group-gate')]).toBe(true);
  });

  it('forgets every seek kafkajs holds at a gated join, those made while the writes drained included, and says how many', async () => {
    // Prepare: two seeks (a redelivery and a dropped batch); the drain makes a third
    const seeksAtJoin: number[] = [];
    const member = joiningMember(seeksAtJoin);
    member.seek({ topic: 't', partition: 0, offset: '5300' });
    member.seek({ topic: 't', partition: 1, offset: '1500' });
    const steps: string[] = [];
    const gate = async <T>(work: () => Promise<T>, step: GroupStep): Promise<T> => {
      steps.push(`${step.kind} called, forgotten ${step.forgottenSeeks}`);
      member.seek({ topic: 't', partition: 2, offset: '42' });
      const result = await work();
      steps.push(`${step.kind} done, forgotten ${step.forgottenSeeks}`);
      return result;
    };

    // Act
    await runWithGroupGate(gate, () => member.joinAndSync());

    // Assess
    expect(seeksAtJoin).toEqual([0]);
    expect(steps).toEqual(['join called, forgotten 0', 'join done, forgotten 3']);
  });

  it('keeps the seeks of a join outside any gated run, and forgets none at a leave', async () => {
    // Prepare
    const seeksAtJoin: number[] = [];
    const member = joiningMember(seeksAtJoin);
    member.seek({ topic: 't', partition: 0, offset: '5300' });
    const leaving = group([]);
    const steps: GroupStep[] = [];

    // Act
    await member.joinAndSync();
    await runWithGroupGate(
      async (work, step) => {
        const result = await work();
        steps.push({ ...step });
        return result;
      },
      () => leaving.leave(),
    );

    // Assess
    expect(seeksAtJoin).toEqual([1]);
    expect(steps).toEqual([{ kind: 'leave', forgottenSeeks: 0 }]);
  });
});
