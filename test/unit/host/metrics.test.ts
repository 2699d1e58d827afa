import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import {
  BATCH_RESULTS,
  HOST_METRIC_NAMES,
  PROCESS_STALL_METRIC_NAMES,
  RECORD_OUTCOMES,
  buildVersion,
  createHostMetrics,
} from '../../../host/metrics.js';
import { ProcessStalls } from '../../../host/process-stalls.js';
import type { PipelineView } from '../../../host/metrics.js';
import { evaluateProgress, PipelineProgress } from '../../../host/progress.js';
import { ManualClock } from '../../helpers/clock.js';
import { loadHttpSettings } from '../../../config/host-settings.js';
import { ConfigurationError } from '../../../shared/errors.js';
import type { BatchReport } from '../../../shared/batch-report.js';
import { PIPELINE_NAMES } from '../../../shared/pipelines.js';
import { recordDelays } from '../../../shared/record-delay.js';
import { metricNamesIn } from '../../helpers/promql.js';

/** Every series name the host's /metrics can carry: metric names, and a histogram's _bucket/_sum/_count. */
async function exportedSeriesNames(): Promise<Set<string>> {
  const metrics = createHostMetrics(PIPELINE_NAMES);
  const names = new Set<string>();
  for (const metric of await metrics.registry.getMetricsAsJSON()) {
    names.add(metric.name);
    if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
  }
  return names;
}

describe('the host metrics', () => {
  it('have every pipeline series from the start at 0, and count a stored batch by outcome', async () => {
    const metrics = createHostMetrics(PIPELINE_NAMES);
    const report: BatchReport = {
      pipeline: 'reviews',
      records: 11,
      inserted: 4,
      updated: 2,
      skipped: 1,
      deduplicated: 1,
      deadLettered: 2,
      alreadyDeadLettered: 1,
      durationMs: 12,
      attempts: 2,
      failed: false,
      partitions: [],
      // Committed at 100 s: 40 ms, 0.8 s, 1.2 s and 2 h late; the last record has no timestamp.
      recordDelays: recordDelays(
        [99_960, 99_200, 98_800, 100_000 - 7_200_000, null].map((timestamp, offset) => ({
          topic: 'reviews',
          partition: 0,
          offset,
          timestamp,
          timestampType: null,
          key: null,
          value: null,
          headers: [],
        })),
        100_000,
      ),
    };

    metrics.pipeline('reviews').recordsStored(report);
    metrics.pipeline('reviews').retried();
    metrics.pipeline('reviews').batchDone('stored', 0.012);

    const text = await metrics.registry.metrics();
    expect(text).toContain('storage_consumer_records_total{pipeline="reviews",outcome="inserted"} 4');
    expect(text).toContain('storage_consumer_records_total{pipeline="reviews",outcome="dead_lettered"} 2');
    expect(text).toContain('storage_consumer_records_total{pipeline="reviews",outcome="skipped"} 2');
    expect(text).toContain('storage_consumer_records_total{pipeline="network-metrics",outcome="inserted"} 0');
    expect(text).toContain('storage_consumer_batches_total{pipeline="reviews",result="stored"} 1');
    expect(text).toContain('storage_consumer_batches_total{pipeline="app-stats",result="failed"} 0');
    expect(text).toContain('storage_consumer_retries_total{pipeline="reviews"} 1');
    expect(text).toContain('storage_consumer_batch_duration_seconds_count{pipeline="reviews"} 1');
    expect(text).toContain('storage_consumer_pipeline_up{pipeline="app-stats"} 0');
    expect(text).toContain('storage_consumer_pipeline_up{pipeline="reviews"} 0');
    expect(text).toContain('storage_consumer_consumer_crashes_total{pipeline="reviews"} 0');
    expect(text).toContain(`storage_consumer_build_info{version="${buildVersion()}"} 1`);
    expect(buildVersion()).toMatch(/^\d+\.\d+\.\d+/);
    for (const outcome of RECORD_OUTCOMES) expect(text).toContain(`outcome="${outcome}"`);
    for (const result of BATCH_RESULTS) expect(text).toContain(`result="${result}"`);
    // Freshness: one observation per record with a timestamp, in cumulative buckets.
    expect(text).toContain('storage_consumer_record_delay_seconds_bucket{le="0.05",pipeline="reviews"} 1');
    expect(text).toContain('storage_consumer_record_delay_seconds_bucket{le="1",pipeline="reviews"} 2');
    expect(text).toContain('storage_consumer_record_delay_seconds_bucket{le="2.5",pipeline="reviews"} 3');
    expect(text).toContain('storage_consumer_record_delay_seconds_bucket{le="3600",pipeline="reviews"} 3');
    expect(text).toContain('storage_consumer_record_delay_seconds_bucket{le="+Inf",pipeline="reviews"} 4');
    expect(text).toContain('storage_consumer_record_delay_seconds_count{pipeline="reviews"} 4');
    expect(text).toMatch(/storage_consumer_record_delay_seconds_sum\{pipeline="reviews"\} 7202\.04\d*\n/);
    expect(text).toContain('storage_consumer_record_delay_seconds_count{pipeline="network-metrics"} 0');
  });

  it('have every series of every configured pipeline before the first batch, histograms included', async () => {
    // Prepare: a host's registry as it starts (its progress records exist, nothing joined yet)
    const records = PIPELINE_NAMES.map((pipeline) => new PipelineProgress({ pipeline, topic: pipeline, group: `g.${pipeline}` }));
    const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };
    const metrics = createHostMetrics(PIPELINE_NAMES, () =>
      records.map((record) => ({ snapshot: record.snapshot(), verdict: evaluateProgress(record.snapshot(), bounds, Date.now()) })),
    );

    // Act
    const text = await metrics.registry.metrics();

    // Assess: each metric has a series per pipeline (the lag's need a partition: they come with the first reading)
    const perPipeline = Object.values(HOST_METRIC_NAMES).flatMap((name) => {
      if (name === HOST_METRIC_NAMES.buildInfo || name === HOST_METRIC_NAMES.consumerLag) return [];
      const histogram = name === HOST_METRIC_NAMES.batchDuration || name === HOST_METRIC_NAMES.recordDelay;
      return histogram ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name];
    });
    for (const pipeline of PIPELINE_NAMES) {
      for (const series of perPipeline) {
        expect(new RegExp(`^${series}\\{[^}]*pipeline="${pipeline}"[^}]*\\} `, 'm').test(text), `${series} of ${pipeline}`).toBe(true);
      }
      expect(text).toContain(`storage_consumer_batch_duration_seconds_count{pipeline="${pipeline}"} 0`);
      expect(text).toContain(`storage_consumer_record_delay_seconds_bucket{le="+Inf",pipeline="${pipeline}"} 0`);
      expect(text).toContain(`storage_consumer_pipeline_state{pipeline="${pipeline}",state="STARTING"} 1`);
      expect(text).toContain(`storage_consumer_pipeline_state{pipeline="${pipeline}",state="RUNNING"} 0`);
      expect(text).toContain(`storage_consumer_pipeline_paused{pipeline="${pipeline}"} 0`);
      expect(text).toContain(`storage_consumer_pipeline_paused_since_timestamp_seconds{pipeline="${pipeline}"} 0`);
      // The deprecated name, kept for one release with the same value.
      expect(text).toContain(`storage_consumer_pipeline_paused_since_seconds{pipeline="${pipeline}"} 0`);
    }
  });

  it('show a pause: paused 1 with its start, state PAUSED, pipeline_up 0; and 0 again after the resume', async () => {
    // Prepare: a running pipeline, paused by a row written at 2026-12-01T12:00:00Z
    const clock = new ManualClock(1_000_000, Date.parse('2026-12-01T12:05:00Z'));
    const progress = new PipelineProgress({ pipeline: 'network-metrics', topic: 'nm', group: 'g', clock });
    progress.setPaused(false);
    progress.consumerStarted();
    progress.joined([0, 1, 2]);
    progress.fetched();
    const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };
    const view = (): PipelineView[] => [
      { snapshot: progress.snapshot(), verdict: evaluateProgress(progress.snapshot(), bounds, clock.monotonic()) },
    ];
    const metrics = createHostMetrics(['network-metrics'], view, () => clock.monotonic());
    const series = (text: string, name: string, extra = '') =>
      new RegExp(`^${name}\\{pipeline="network-metrics"${extra}\\} (\\S+)$`, 'm').exec(text)?.[1];
    expect(series(await metrics.registry.metrics(), HOST_METRIC_NAMES.pipelineUp)).toBe('1');

    // Act: paused (the row's time), then resumed
    progress.setPaused(true, Date.parse('2026-12-01T12:00:00Z'));
    clock.advance(60_000);
    const paused = await metrics.registry.metrics();
    progress.setPaused(false);
    progress.fetched();
    const resumed = await metrics.registry.metrics();

    // Assess
    expect(series(paused, HOST_METRIC_NAMES.pipelinePaused)).toBe('1');
    expect(series(paused, HOST_METRIC_NAMES.pausedSince)).toBe(String(Date.parse('2026-12-01T12:00:00Z') / 1000));
    expect(series(paused, HOST_METRIC_NAMES.pipelineState, ',state="PAUSED"')).toBe('1');
    expect(series(paused, HOST_METRIC_NAMES.pipelineState, ',state="RUNNING"')).toBe('0');
    expect(series(paused, HOST_METRIC_NAMES.pipelineUp)).toBe('0');
    expect(series(resumed, HOST_METRIC_NAMES.pipelinePaused)).toBe('0');
    expect(series(resumed, HOST_METRIC_NAMES.pausedSince)).toBe('0');
    expect(series(resumed, HOST_METRIC_NAMES.pipelineState, ',state="RUNNING"')).toBe('1');
    expect(series(resumed, HOST_METRIC_NAMES.pipelineUp)).toBe('1');
  });

  it('derive up, lag, ages and crashes from the progress records at scrape time, without waiting', async () => {
    // Prepare: a record that joined, fetched, stored a batch, has one in flight, crashed once, and read its lag 20 s ago
    const clock = new ManualClock(1_000_000, 1_000_000);
    const progress = new PipelineProgress({ pipeline: 'reviews', topic: 'reviews', group: 'g', clock });
    progress.setPaused(false);
    progress.consumerStarted();
    progress.joined([0, 2]);
    progress.fetched();
    progress.attemptStarted({ partition: 0, firstOffset: '5', lastOffset: '9' });
    progress.stored(0);
    progress.lagRead([{ partition: 2, lag: 17 }]);
    clock.advance(20_000);
    progress.crashed(new Error('broker went away'));
    progress.joined([0, 2]);
    progress.fetched();
    progress.attemptStarted({ partition: 2, firstOffset: '40', lastOffset: '56' });
    clock.advance(3_000);
    // A wall-clock step changes no age, and no timestamp already taken.
    clock.stepWall(-7_200_000);
    const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };
    const view = (): PipelineView[] => [
      { snapshot: progress.snapshot(), verdict: evaluateProgress(progress.snapshot(), bounds, clock.monotonic()) },
    ];
    const metrics = createHostMetrics(['reviews'], view, () => clock.monotonic());

    // Act
    const text = await metrics.registry.metrics();

    // Assess
    expect(text).toContain('storage_consumer_pipeline_up{pipeline="reviews"} 1');
    expect(text).toContain('storage_consumer_lag_messages{pipeline="reviews",partition="2"} 17');
    expect(text).toContain('storage_consumer_consumer_lag{pipeline="reviews",partition="2"} 17');
    expect(text).toContain(
      '# HELP storage_consumer_consumer_lag DEPRECATED (removed in the next release): use storage_consumer_lag_messages.',
    );
    expect(text).toContain('storage_consumer_lag_age_seconds{pipeline="reviews"} 23');
    expect(text).toContain('storage_consumer_last_stored_timestamp_seconds{pipeline="reviews"} 1000');
    expect(text).toContain('storage_consumer_inflight_batch_age_seconds{pipeline="reviews"} 3');
    expect(text).toContain('storage_consumer_consumer_crashes_total{pipeline="reviews"} 1');
  });
});

describe('one view per scrape', () => {
  it("shares one view among a scrape's gauges and takes a new one for the next scrape, however soon it comes", async () => {
    // Prepare: a view that counts how often it is taken; a wall clock that never moves
    let taken = 0;
    const view = (): PipelineView[] => {
      taken += 1;
      return [];
    };
    const metrics = createHostMetrics(['reviews'], view, () => 1_000_000);

    // Act: two scrapes, back to back
    await metrics.registry.metrics();
    const afterFirst = taken;
    await metrics.registry.metrics();

    // Assess
    expect(afterFirst).toBe(1);
    expect(taken).toBe(2);
  });

  it("count the process's own stalls from 0 at the start, one per stall with its length, even before a watch's tick logged it", async () => {
    // Prepare: the stalls of a process whose watch ticks every second
    const clock = new ManualClock();
    const stalls = new ProcessStalls({ clock });
    const unwatch = stalls.watch(1_000);
    const metrics = createHostMetrics(
      ['reviews'],
      () => [],
      () => clock.monotonic(),
      stalls,
    );
    const value = (text: string, name: string) => text.split('\n').find((line) => line.startsWith(`${name} `));
    const fresh = await metrics.registry.metrics();
    expect(value(fresh, PROCESS_STALL_METRIC_NAMES.stalls)).toBe(`${PROCESS_STALL_METRIC_NAMES.stalls} 0`);
    expect(value(fresh, PROCESS_STALL_METRIC_NAMES.stalledSeconds)).toBe(`${PROCESS_STALL_METRIC_NAMES.stalledSeconds} 0`);

    // Act: the process does not run for 321 s; the scrape is the first to run after it
    clock.advance(321_000);
    const after = await metrics.registry.metrics();

    // Assess
    expect(value(after, PROCESS_STALL_METRIC_NAMES.stalls)).toBe(`${PROCESS_STALL_METRIC_NAMES.stalls} 1`);
    expect(value(after, PROCESS_STALL_METRIC_NAMES.stalledSeconds)).toBe(`${PROCESS_STALL_METRIC_NAMES.stalledSeconds} 321`);
    expect(stalls.takeUnreported()).toEqual([{ from: 1_000_000, to: 1_321_000, ms: 321_000 }]);
    unwatch();
  });
});

describe('the HTTP endpoint settings', () => {
  it('default to port 9464 on every address; 0 turns the endpoint off; a bad port names the variable', () => {
    expect(loadHttpSettings({})).toEqual({ port: 9464, host: '0.0.0.0' });
    expect(loadHttpSettings({ STORAGE_HTTP_PORT: '0', STORAGE_HTTP_HOST: '127.0.0.1' })).toEqual({ port: 0, host: '127.0.0.1' });
    expect(() => loadHttpSettings({ STORAGE_HTTP_PORT: '70000' })).toThrow(ConfigurationError);
    expect(() => loadHttpSettings({ STORAGE_HTTP_PORT: 'metrics' })).toThrow(/STORAGE_HTTP_PORT/);
  });
});

describe('the Grafana dashboard (docs/grafana-host-dashboard.json)', () => {
  it('names, in every panel query, only metrics the host exports', async () => {
    const dashboard = JSON.parse(await readFile(new URL('../../../docs/grafana-host-dashboard.json', import.meta.url), 'utf8')) as {
      panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
    };
    const exported = await exportedSeriesNames();
    const used = new Set<string>();

    expect(dashboard.panels.length).toBeGreaterThan(0);
    for (const panel of dashboard.panels) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const { expr } of panel.targets ?? []) {
        const names = metricNamesIn(expr);
        expect(names.length, `${panel.title}: ${expr}`).toBeGreaterThan(0);
        for (const name of names) {
          expect(exported.has(name), `${panel.title}: ${name} is not exported by the host`).toBe(true);
          used.add(name);
        }
      }
    }
    // Every storage_consumer_* metric has a panel.
    for (const name of Object.values(HOST_METRIC_NAMES)) {
      expect(
        [...used].some((series) => series === name || series.startsWith(`${name}_`)),
        name,
      ).toBe(true);
    }
  });

  it('tells a metric name from functions, labels and keywords', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le, pipeline) (rate(storage_consumer_batch_duration_seconds_bucket{pipeline=~"$pipeline"}[5m])))',
      ),
    ).toEqual(['storage_consumer_batch_duration_seconds_bucket']);
    expect(metricNamesIn('sum by (pipeline) (rate(a_total[1m])) * 60 + b')).toEqual(['a_total', 'b']);
  });
});
