/**
 * The host's health (host/health.ts) on progress records driven by a hand clock: liveness past
 * the heartbeat bound, readiness's database checks within their bound (fake timers), and what a
 * database problem may show.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { evaluateLiveness, evaluateReadiness } from '../../../host/health.js';
import type { HostState, ReadinessPipeline } from '../../../host/health.js';
import type { Invoker } from '../../../host/invoker.js';
import { evaluateProgress, PipelineProgress } from '../../../host/progress.js';
import type { HostSettings } from '../../../config/host-settings.js';
import type { PipelineName } from '../../../shared/pipelines.js';
import { ManualClock } from '../../helpers/clock.js';

const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };
const MAX_AGE_MS = 21_000;

/** A pipeline that joined its group and fetched, on `clock`. */
function runningPipeline(clock: ManualClock, pipeline: PipelineName = 'reviews') {
  const progress = new PipelineProgress({ pipeline, topic: `${pipeline}-topic`, group: `g.${pipeline}`, clock });
  progress.setPaused(false);
  progress.consumerStarted();
  progress.joined([0]);
  progress.fetched();
  const view = () => {
    const snapshot = progress.snapshot();
    return { snapshot, verdict: evaluateProgress(snapshot, bounds, clock.monotonic()) };
  };
  return { progress, view };
}

describe('liveness', () => {
  it('is alive up to the heartbeat bound and not one millisecond past it, naming the pipeline and its age', () => {
    const clock = new ManualClock();
    const { progress, view } = runningPipeline(clock);
    progress.beat(clock.monotonic());

    clock.advance(MAX_AGE_MS);
    const atBound = evaluateLiveness('Running', [view()], MAX_AGE_MS, clock.monotonic());
    clock.advance(1);
    const past = evaluateLiveness('Running', [view()], MAX_AGE_MS, clock.monotonic());

    expect(atBound).toMatchObject({ alive: true, missing: [], pipelines: { reviews: { state: 'RUNNING', heartbeatAgeMs: MAX_AGE_MS } } });
    expect(past.alive).toBe(false);
    expect(past.missing).toEqual([`reviews: heartbeat ${MAX_AGE_MS + 1} ms old (limit ${MAX_AGE_MS} ms; RUNNING)`]);
  });

  it('is not alive before the first heartbeat, nor once the host is Failing or Stopped', () => {
    const clock = new ManualClock();
    const { progress, view } = runningPipeline(clock);

    expect(evaluateLiveness('Starting', [view()], MAX_AGE_MS, clock.monotonic()).missing).toEqual(['reviews: no heartbeat written yet']);
    progress.beat(clock.monotonic());
    for (const state of ['Failing', 'Stopped'] as const) {
      expect(evaluateLiveness(state, [view()], MAX_AGE_MS, clock.monotonic())).toMatchObject({ alive: false, missing: [`host: ${state}`] });
    }
    expect(evaluateLiveness('Stopping', [view()], MAX_AGE_MS, clock.monotonic()).alive).toBe(true);
  });
});

describe('readiness', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const settings = (mode: 'in-process' | 'lambda' = 'in-process') =>
    ({ storage: { selectedPipelines: ['reviews'] }, invoke: { mode } }) as unknown as HostSettings;
  const source = (state: HostState, pipeline: ReadinessPipeline, mode?: 'in-process' | 'lambda') => ({
    settings: settings(mode),
    state: () => state,
    pipelines: new Map<PipelineName, ReadinessPipeline>([['reviews', pipeline]]),
  });
  const invoker = (ping: Invoker['ping']) => ({ ping }) as Invoker;

  it('is ready when the host runs, the pipeline is RUNNING and its database answers', async () => {
    const { view } = runningPipeline(new ManualClock());
    const readiness = await evaluateReadiness(source('Running', { invoker: invoker(() => Promise.resolve(undefined)), view }));
    expect(readiness).toMatchObject({
      ready: true,
      missing: [],
      pipelines: { reviews: { state: 'RUNNING', database: 'ok', joined: true } },
    });
  });

  it('pings no pool of a host that is not Running', async () => {
    const { view } = runningPipeline(new ManualClock());
    const ping = vi.fn(() => Promise.resolve(undefined));
    const readiness = await evaluateReadiness(source('Stopping', { invoker: invoker(ping), view }));
    expect(ping).not.toHaveBeenCalled();
    expect(readiness).toMatchObject({
      ready: false,
      missing: ['host: Stopping'],
      pipelines: { reviews: { database: 'not checked (host Stopping)' } },
    });
  });

  it('gives a database that does not answer up after 3 s, not before', async () => {
    const { view } = runningPipeline(new ManualClock());
    let settled = false;
    const pending = evaluateReadiness(source('Running', { invoker: invoker(() => new Promise(() => undefined)), view })).finally(
      () => (settled = true),
    );
    await vi.advanceTimersByTimeAsync(2_999);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const readiness = await pending;
    expect(readiness.pipelines.reviews?.database).toBe('no answer within 3000 ms');
    expect(readiness.missing).toEqual(['reviews: database does not answer: no answer within 3000 ms']);
  });

  it("shows a refused connection by its code, and passes each cause through the redaction (no broker's address)", async () => {
    const clock = new ManualClock();
    const { progress, view } = runningPipeline(clock);
    clock.advance(30_001);
    progress.crashed(new Error('KafkaJSConnectionError: connect ECONNREFUSED 127.0.0.1:19711'));
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.3.7:5432'), { code: 'ECONNREFUSED' });
    const readiness = await evaluateReadiness(source('Running', { invoker: invoker(() => Promise.reject(refused)), view }));
    expect(readiness.pipelines.reviews?.database).toBe('ECONNREFUSED');
    expect(readiness.missing.join('\n')).not.toMatch(/127\.0\.0\.1|10\.0\.3\.7/);
    expect(readiness.missing).toContain('reviews: database does not answer: ECONNREFUSED');
    expect(readiness.missing.some((line) => line.includes('ECONNREFUSED <address>'))).toBe(true);
  });

  it('shows a refused login by its SQLSTATE and an error without a code by its name, never the user or the host', async () => {
    const { view } = runningPipeline(new ManualClock());
    const password = Object.assign(new Error('password authentication failed for user "storage"'), { code: '28P01' });
    const unresolved = new Error('getaddrinfo db.internal failed');
    const answers = [];
    for (const error of [password, unresolved])
      answers.push(await evaluateReadiness(source('Running', { invoker: invoker(() => Promise.reject(error)), view })));
    expect(answers.map((readiness) => readiness.pipelines.reviews?.database)).toEqual(['28P01', 'Error']);
    expect(answers.flatMap((readiness) => readiness.missing)).toEqual([
      'reviews: database does not answer: 28P01',
      'reviews: database does not answer: Error',
    ]);
  });

  it('pings again when the pool was held but no batch of this host is in flight once the ping is over (the batch ended meanwhile)', async () => {
    const { view } = runningPipeline(new ManualClock());
    const held = { poolHeld: { size: 3, waiting: 0, waits: [] } };
    const ping = vi.fn<NonNullable<Invoker['ping']>>().mockResolvedValueOnce(held).mockResolvedValueOnce({ poolHeld: undefined });
    const readiness = await evaluateReadiness(source('Running', { invoker: invoker(ping), view }));
    expect(ping).toHaveBeenCalledTimes(2);
    expect(readiness).toMatchObject({ ready: true, missing: [], pipelines: { reviews: { database: 'ok' } } });
  });

  it('says the pool is held when it still is at the second ping, naming no batch', async () => {
    const { view } = runningPipeline(new ManualClock());
    const ping = vi.fn<NonNullable<Invoker['ping']>>().mockResolvedValue({ poolHeld: { size: 3, waiting: 0, waits: [] } });
    const readiness = await evaluateReadiness(source('Running', { invoker: invoker(ping), view }));
    expect(ping).toHaveBeenCalledTimes(2);
    expect(readiness.ready).toBe(false);
    expect(readiness.pipelines.reviews?.database).toBe('pool held (3 of 3 connections busy)');
    expect(readiness.missing).toEqual([
      "reviews: database answers, but all 3 connection(s) of the pipeline's pool are held by no batch of this host in flight",
    ]);
  });

  it('does not check the database in lambda mode (the functions hold it)', async () => {
    const { view } = runningPipeline(new ManualClock());
    const readiness = await evaluateReadiness(source('Running', { invoker: undefined, view }, 'lambda'));
    expect(readiness).toMatchObject({ ready: true, pipelines: { reviews: { database: 'not checked (the functions hold the database)' } } });
  });
});
