/**
 * The host's pause control with its database played by a scripted pool: every pipeline is told
 * its state at the first read, afterwards only on a change; a read that fails keeps the last
 * state and warns once; a row of a pipeline the host does not run is ignored.
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPauseControl } from '../../../host/pause-control.js';
import { loadHostSettings } from '../../../config/host-settings.js';
import type { PipelineName } from '../../../shared/pipelines.js';

interface Row {
  pipeline: string;
  paused: boolean;
  by: string;
  at: Date;
  reason: string | null;
}

function scriptedPool() {
  let rows: Row[] = [];
  let failure: Error | undefined;
  const queries: string[] = [];
  const pool = {
    async query(text: string) {
      queries.push(text);
      if (failure) throw failure;
      return { rows };
    },
  } as unknown as pg.Pool;
  return {
    pool,
    queries,
    set: (next: Row[]) => (rows = next),
    fail: (error: Error | undefined) => (failure = error),
  };
}

const row = (pipeline: string, paused: boolean): Row => ({
  pipeline,
  paused,
  by: 'ops@bastion',
  at: new Date('2026-12-01T12:00:00Z'),
  reason: paused ? 'maintenance' : null,
});

function setUp(pipelines = 'reviews,app-stats') {
  const database = scriptedPool();
  const applied: Array<[PipelineName, boolean]> = [];
  const warnings: Array<Record<string, unknown>> = [];
  const messages: string[] = [];
  const failedReads: unknown[] = [];
  const logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (message: string, extra?: Record<string, unknown>) => {
      messages.push(message);
      warnings.push(extra ?? {});
    },
    error: () => undefined,
  };
  const control = createPauseControl({
    settings: loadHostSettings({ KAFKA_BROKERS: '127.0.0.1:9092', STORAGE_PIPELINES: pipelines }),
    logger,
    apply: (pipeline, pause) => applied.push([pipeline, pause !== undefined]),
    onReadFailed: (error) => failedReads.push(error),
    pool: database.pool,
  });
  return { database, applied, warnings, messages, failedReads, control };
}

describe('the pause control', () => {
  it('tells every pipeline its state at the first read, then only the changes', async () => {
    const { database, applied, control } = setUp();
    database.set([row('reviews', true), row('network-metrics', true)]);

    await control.refresh();
    await control.refresh();
    database.set([row('reviews', false), row('app-stats', true)]);
    await control.refresh();

    expect(applied).toEqual([
      ['reviews', true],
      ['app-stats', false],
      ['reviews', false],
      ['app-stats', true],
    ]);
    expect(control.pauseOf('app-stats')).toMatchObject({ by: 'ops@bastion', reason: 'maintenance' });
    expect(control.pauseOf('reviews')).toBeUndefined();
    expect(database.queries.every((text) => text === 'SELECT pipeline, paused, by, at, reason FROM pipeline_pauses')).toBe(true);
    await control.close();
  });

  it('keeps the last known state when a read fails, warns once, and says so', async () => {
    const { database, applied, warnings, control } = setUp();
    database.set([row('reviews', true)]);
    await control.refresh();

    database.fail(new Error('Connection terminated unexpectedly'));
    await control.refresh();
    await control.refresh();

    expect(control.pauseOf('reviews')).toBeDefined();
    expect(applied).toEqual([
      ['reviews', true],
      ['app-stats', false],
    ]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ error: 'Connection terminated unexpectedly', paused: ['reviews'] });
    expect(control.readState().error).toBe('Connection terminated unexpectedly');

    database.fail(undefined);
    database.set([]);
    await control.refresh();
    expect(control.readState().error).toBeUndefined();
    expect(applied.at(-1)).toEqual(['reviews', false]);
    await control.close();
  });

  it('before any read succeeded applies nothing, says no pipeline fetches, and tells each failure', async () => {
    const { database, applied, warnings, messages, failedReads, control } = setUp();
    database.fail(new Error('connect ECONNREFUSED 10.0.3.7:5432'));
    await control.refresh();
    await control.refresh();

    expect(applied).toEqual([]);
    expect(failedReads).toHaveLength(2);
    expect(messages).toEqual(['cannot read the pause state; no pipeline fetches until it is read once']);
    expect(warnings[0]).toMatchObject({ error: 'connect ECONNREFUSED <address>', waiting: ['reviews', 'app-stats'] });

    database.fail(undefined);
    database.set([row('reviews', true)]);
    await control.refresh();
    expect(applied).toEqual([
      ['reviews', true],
      ['app-stats', false],
    ]);
    await control.close();
  });
});
