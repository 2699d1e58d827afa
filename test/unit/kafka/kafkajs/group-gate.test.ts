import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { installGroupGate, runWithGroupGate } from '../../../../kafka/kafkajs/group-gate.js';

// The wrapper on kafkajs' own ConsumerGroup prototype (the pinned kafkajs), driven on a group
// whose coordinator is a plain object: the leave is kafkajs' code, the gate the test's.

const require = createRequire(import.meta.url);
const ConsumerGroup = require(join(dirname(require.resolve('kafkajs')), 'src', 'consumer', 'consumerGroup.js')) as {
  prototype: object;
};

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
});
