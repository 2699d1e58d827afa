import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { installHeartbeatClock } from '../../../../kafka/kafkajs/heartbeat-clock.js';
import { KafkajsIncompatibleError } from '../../../../kafka/kafkajs/version.js';

// kafkajs' own ConsumerGroup (the pinned kafkajs), built with its constructor: its shared
// heartbeat is the one the wrapper drives. Only the coordinator is the test's.

const require = createRequire(import.meta.url);
const ConsumerGroup = require(join(dirname(require.resolve('kafkajs')), 'src', 'consumer', 'consumerGroup.js')) as new (
  options: Record<string, unknown>,
) => Member;

interface Member {
  memberId: string | null;
  coordinator: { heartbeat(payload: { memberId: string }): Promise<void> };
  heartbeat(options: { interval: number }): Promise<void>;
}

const INTERVAL_MS = 3_000;
const TWO_HOURS_MS = 2 * 60 * 60 * 1_000;
const logger = { info() {}, debug() {}, warn() {}, error() {}, namespace: () => logger };

/** A member of group `g` whose coordinator counts the heartbeats it receives, optionally held until released. */
function member() {
  const sent: string[] = [];
  let hold: Promise<void> | undefined;
  const group = new ConsumerGroup({
    retry: { retries: 0 },
    cluster: {},
    groupId: 'g',
    topics: ['t'],
    topicConfigurations: {},
    logger,
    instrumentationEmitter: { emit() {} },
    assigners: [],
    sessionTimeout: 10_000,
    rebalanceTimeout: 20_000,
  });
  group.memberId = 'member-1';
  group.coordinator = {
    heartbeat: async ({ memberId }) => {
      sent.push(memberId);
      await hold;
    },
  };
  return { group, sent, holdHeartbeats: (until: Promise<void>) => (hold = until) };
}

describe('the heartbeat on a monotonic clock', () => {
  let monotonic = 1_000_000;
  const wallStart = Date.now();

  beforeEach(() => {
    installHeartbeatClock();
    monotonic = 1_000_000;
    vi.spyOn(performance, 'now').mockImplementation(() => monotonic);
    vi.spyOn(Date, 'now').mockReturnValue(wallStart);
  });
  afterEach(() => vi.restoreAllMocks());

  it('sends once an interval passed on the monotonic clock after the wall clock stepped back two hours, and not before', async () => {
    // Prepare: a first heartbeat an interval after the member was made (kafkajs alone sends it
    // too), then the wall clock steps back two hours
    const { group, sent } = member();
    monotonic += INTERVAL_MS + 500;
    vi.spyOn(Date, 'now').mockReturnValue(wallStart + INTERVAL_MS + 500);
    await group.heartbeat({ interval: INTERVAL_MS });
    expect(sent).toEqual(['member-1']);
    vi.spyOn(Date, 'now').mockReturnValue(wallStart - TWO_HOURS_MS);

    // Act: 1 s later, then 3.5 s after the first heartbeat, then 4 s after the second
    monotonic += 1_000;
    await group.heartbeat({ interval: INTERVAL_MS });
    const beforeTheInterval = sent.length;
    monotonic += 2_500;
    await group.heartbeat({ interval: INTERVAL_MS });
    const afterTheInterval = sent.length;
    monotonic += 4_000;
    await group.heartbeat({ interval: INTERVAL_MS });

    // Assess
    expect(beforeTheInterval).toBe(1);
    expect(afterTheInterval).toBe(2);
    expect(sent).toHaveLength(3);
  });

  it('shares one request among the calls made while a heartbeat is in flight', async () => {
    // Prepare: the coordinator answers only when released
    const { group, sent, holdHeartbeats } = member();
    let answer!: () => void;
    holdHeartbeats(new Promise<void>((resolve) => (answer = resolve)));

    // Act: three calls while the first request is unanswered, one more after the answer
    const calls = [group.heartbeat({ interval: INTERVAL_MS }), group.heartbeat({ interval: INTERVAL_MS })];
    monotonic += 5_000;
    calls.push(group.heartbeat({ interval: INTERVAL_MS }));
    answer();
    await Promise.all(calls);
    monotonic += 1_000;
    await group.heartbeat({ interval: INTERVAL_MS });

    // Assess
    expect(sent).toHaveLength(1);
  });

  it('sends nothing without a member id, and sends at once when the member joined', async () => {
    // Prepare
    const { group, sent } = member();
    group.memberId = null;

    // Act
    await group.heartbeat({ interval: INTERVAL_MS });
    const beforeTheJoin = sent.length;
    group.memberId = 'member-2';
    monotonic += 10;
    await group.heartbeat({ interval: INTERVAL_MS });

    // Assess
    expect(beforeTheJoin).toBe(0);
    expect(sent).toEqual(['member-2']);
  });

  it('sends again at the next call after a heartbeat failed', async () => {
    // Prepare: the coordinator refuses the first heartbeat (a rebalance)
    const { group, sent } = member();
    const answer = group.coordinator.heartbeat;
    group.coordinator.heartbeat = async (payload) => {
      group.coordinator.heartbeat = answer;
      sent.push(payload.memberId);
      throw new Error('The group is rebalancing, so a rejoin is needed');
    };

    // Act
    await expect(group.heartbeat({ interval: INTERVAL_MS })).rejects.toThrow('rebalancing');
    monotonic += 10;
    await group.heartbeat({ interval: INTERVAL_MS });

    // Assess
    expect(sent).toEqual(['member-1', 'member-1']);
  });

  it('installs once, marking kafkajs own method', () => {
    // Act
    installHeartbeatClock();
    const wrapped = (ConsumerGroup.prototype as { heartbeat: unknown }).heartbeat;
    installHeartbeatClock();

    // Assess
    expect((ConsumerGroup.prototype as { heartbeat: unknown }).heartbeat).toBe(wrapped);
    expect((wrapped as Record<symbol, unknown>)[Symbol.for('storage-consumer.kafka-heartbeat-clock')]).toBe(true);
  });

  it('refuses a kafkajs whose ConsumerGroup has no heartbeat(), naming it', () => {
    // Prepare
    const prototype = ConsumerGroup.prototype as { heartbeat: unknown };
    const heartbeat = prototype.heartbeat;
    prototype.heartbeat = undefined;

    // Act / Assess
    try {
      expect(() => installHeartbeatClock()).toThrow(KafkajsIncompatibleError);
      expect(() => installHeartbeatClock()).toThrow(
        /^kafkajs' ConsumerGroup has no heartbeat\(\) \(.*consumerGroup\.js\): the host cannot send its heartbeats on a monotonic clock$/,
      );
    } finally {
      prototype.heartbeat = heartbeat;
    }
  });
});
