/**
 * A rebalance storm (issue 38): 200,000 reviews drained while hosts of the pipeline join and
 * leave every few seconds, SIGTERM and SIGKILL mixed, at least 20 membership changes. A watcher
 * reads the group's committed offsets from the broker all along: none may ever move back; the
 * rows end exact, the group's offsets at the topic's end, and no host exits but the ones the test
 * stopped (a SIGTERM'd one with 0). A SIGKILL'd member leaves the group when its session times
 * out (STORAGE_SESSION_TIMEOUT_MS=6000, hostEnvironment's). `HOST_STORM_REVIEWS` sets the count
 * (default 200,000).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Message } from 'kafkajs';
import type { HostLogLine, HostProcess, HostTestStack } from '../helpers/host.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  endOffsets,
  hostEnvironment,
  killAllHosts,
  openHostTestStack,
  spawnHost,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';
import { watchCommittedOffsets } from '../helpers/offset-watcher.js';
import type { OffsetWatcher } from '../helpers/offset-watcher.js';

const REVIEWS = Number(process.env.HOST_STORM_REVIEWS ?? 200_000);
const MIN_CHANGES = 20;
/** The pause between one membership change taking effect and the next. */
const CHURN_PAUSE_MS = 2_000;
/** Hosts besides the one that runs throughout. */
const MAX_CHURNERS = 2;
const PRODUCE_CHUNK = 20_000;
/** After the drain, how long the watcher goes on reading. */
const SETTLE_MS = 10_000;

let stack: HostTestStack;
let watcher: OffsetWatcher | undefined;

beforeAll(async () => {
  stack = await openHostTestStack('host-storm');
});

afterAll(async () => {
  await killAllHosts();
  await watcher?.stop();
  await closeHostTestStack(stack, []);
});

const joined = (line: HostLogLine) => line.message === 'joined the consumer group';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A host of the storm and what the test did to it. */
interface StormHost {
  readonly name: string;
  readonly process: HostProcess;
  stoppedWith?: 'SIGTERM' | 'SIGKILL';
  exit?: { code: number | null; signal: NodeJS.Signals | null };
}

const sumOf = (offsets: ReadonlyMap<number, bigint>) =>
  [...offsets.values()].reduce((sum, offset) => sum + (offset > 0n ? offset : 0n), 0n);

describe('a rebalance storm', () => {
  it(
    `drains ${REVIEWS} reviews while hosts join and leave (SIGTERM and SIGKILL): no committed offset moves back, rows exact`,
    async () => {
      // Prepare: the backlog (keyed, so spread over the partitions as a producer would)
      const names = await createTestPipelines('storm');
      const producedIn = performance.now();
      for (let from = 0; from < REVIEWS; from += PRODUCE_CHUNK) {
        const messages: Message[] = [];
        for (let index = from; index < Math.min(REVIEWS, from + PRODUCE_CHUNK); index += 1) {
          const id = `storm:${index}`;
          messages.push({ key: id, value: JSON.stringify({ ...sampleReview(), review_id: id }) });
        }
        await produce(names.topics.reviews, messages);
      }
      const produceMs = performance.now() - producedIn;
      const env = hostEnvironment({
        databaseUrl: stack.schema.url,
        names,
        heartbeatDir: stack.heartbeats.path,
        extra: { STORAGE_PIPELINES: 'reviews' },
      });
      const watch = watchCommittedOffsets(stack.admin, names.groups.reviews, names.topics.reviews);
      watcher = watch;
      const hosts: StormHost[] = [];
      const unexpectedExits: string[] = [];
      const start = (name: string): StormHost => {
        const host: StormHost = { name, process: spawnHost(env) };
        hosts.push(host);
        void host.process.exited.then((exit) => {
          host.exit = exit;
          if (host.stoppedWith === undefined) {
            unexpectedExits.push(`${name}: ${JSON.stringify(exit)}; last lines ${JSON.stringify(host.process.lines.slice(-5))}`);
            watch.note(`${name} exited unasked`);
          }
        });
        return host;
      };
      const stop = async (host: StormHost, signal: 'SIGTERM' | 'SIGKILL') => {
        host.stoppedWith = signal;
        host.process.child.kill(signal);
        await host.process.exited;
      };
      const changes: string[] = [];
      let drainedAtChange: number | undefined;
      const drained = async () => {
        if (drainedAtChange !== undefined) return;
        const [committed, ends] = await Promise.all([
          committedOffsets(stack.admin, names.groups.reviews, names.topics.reviews),
          endOffsets(stack.admin, names.topics.reviews),
        ]);
        if (sumOf(committed) === sumOf(ends)) drainedAtChange = changes.length;
      };

      const began = performance.now();
      const anchor = start('A');
      let stormMs = 0;
      let drainMs = 0;
      try {
        await watch.guard(anchor.process.waitForLog((line) => line.message === 'batch stored', 90_000));
        watch.note('A storing');

        // Act: one membership change every few seconds: a host joins, or the oldest other one leaves
        let kills = 0;
        let stops = 0;
        let serial = 0;
        while (changes.length < MIN_CHANGES) {
          const live = hosts.filter((host) => host !== anchor && host.stoppedWith === undefined);
          if (live.length < MAX_CHURNERS) {
            serial += 1;
            const name = `H${serial}`;
            const host = start(name);
            await watch.guard(host.process.waitForLog(joined, 90_000));
            changes.push(`${name} joined`);
          } else {
            const oldest = live[0] as StormHost;
            const signal = (stops + kills) % 2 === 0 ? 'SIGTERM' : 'SIGKILL';
            if (signal === 'SIGTERM') stops += 1;
            else kills += 1;
            await watch.guard(stop(oldest, signal));
            changes.push(`${oldest.name} ${signal}`);
          }
          watch.note(changes.at(-1) as string);
          await drained();
          await sleep(CHURN_PAUSE_MS);
        }
        stormMs = performance.now() - began;
        await watch.guard(waitForCommittedToEnd(stack.admin, names.groups.reviews, names.topics.reviews, 600_000));
        drainMs = performance.now() - began;
        watch.note('all committed');
        await watch.guard(sleep(SETTLE_MS));
        await watch.guard(waitForCommittedToEnd(stack.admin, names.groups.reviews, names.topics.reviews, 60_000));
        for (const host of hosts.filter((each) => each.stoppedWith === undefined)) await stop(host, 'SIGTERM');
        await watch.stop();

        // Assess
        const { rows } = await stack.schema.pool.query<{ n: number; distinct_ids: number }>(
          `SELECT count(*)::int AS n, count(DISTINCT review_id)::int AS distinct_ids FROM reviews WHERE review_id LIKE 'storm:%'`,
        );
        const [committed, ends] = await Promise.all([
          committedOffsets(stack.admin, names.groups.reviews, names.topics.reviews),
          endOffsets(stack.admin, names.topics.reviews),
        ]);
        const plain = (offsets: ReadonlyMap<number, bigint>) => Object.fromEntries([...offsets].map(([p, o]) => [p, String(o)]));
        console.log(
          `[storm] ${REVIEWS} reviews produced in ${Math.round(produceMs)} ms; ${changes.length} membership changes ` +
            `(${changes.join(', ')}) in ${Math.round(stormMs)} ms; drained in ${Math.round(drainMs)} ms ` +
            `(everything committed ${drainedAtChange === undefined ? 'after the storm' : `after change ${drainedAtChange}`}); ` +
            `rows ${JSON.stringify(rows[0])}; committed ${JSON.stringify(plain(committed))}, ends ${JSON.stringify(plain(ends))}; ` +
            `exits ${JSON.stringify(hosts.map((host) => [host.name, host.stoppedWith, host.exit?.code ?? host.exit?.signal]))}`,
        );
        watch.assertNoMoveBack();
        expect(unexpectedExits).toEqual([]);
        expect(changes.length).toBeGreaterThanOrEqual(MIN_CHANGES);
        expect(kills).toBeGreaterThan(0);
        expect(stops).toBeGreaterThan(0);
        expect(rows[0]).toEqual({ n: REVIEWS, distinct_ids: REVIEWS });
        expect(plain(committed)).toEqual(plain(ends));
        for (const host of hosts) {
          expect(host.exit, host.name).toEqual(
            host.stoppedWith === 'SIGKILL' ? { code: null, signal: 'SIGKILL' } : { code: 0, signal: null },
          );
        }
      } finally {
        console.log(`[storm] ${watch.summary()}`);
        if (unexpectedExits.length > 0) console.log(`[storm] unexpected exits:\n${unexpectedExits.join('\n')}`);
      }
    },
    // Heavy: 200,000 reviews produced and drained, 20+ host processes started and stopped, on a shared broker.
    900_000,
  );
});
