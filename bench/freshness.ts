/**
 * The host's freshness metric (`storage_consumer_record_delay_seconds`) beside the bench's own
 * network-metrics latency: the host's /metrics is scraped before and at the end of the flood,
 * and the difference is the flood's records. The bench measures its send -> the NOTIFY of the
 * COMMIT in its own process; the metric measures the record's Kafka timestamp (the bench stamps
 * it with the same send moment) -> COMMIT returned in the host. Both clocks are this machine's.
 */
import { HOST_METRIC_NAMES } from '../host/metrics.js';
import { percentile } from './support.js';

/** One pipeline's freshness histogram from a scrape: cumulative counts per upper bound (seconds). */
export interface DelayHistogram {
  readonly buckets: ReadonlyArray<{ readonly le: number; readonly count: number }>;
  readonly sum: number;
  readonly count: number;
  /** The histogram's exposition lines, as scraped. */
  readonly lines: readonly string[];
}

/** Scrapes `url` and returns `pipeline`'s freshness histogram. */
export async function scrapeDelays(url: string, pipeline: string): Promise<DelayHistogram> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  const lines = (await response.text())
    .split('\n')
    .filter((line) => line.startsWith(HOST_METRIC_NAMES.recordDelay) && line.includes(`pipeline="${pipeline}"`));
  const value = (line: string) => Number(line.slice(line.lastIndexOf(' ') + 1));
  const buckets = lines
    .filter((line) => line.startsWith(`${HOST_METRIC_NAMES.recordDelay}_bucket`))
    .map((line) => {
      const le = /le="([^"]+)"/.exec(line)?.[1] ?? '';
      return { le: le === '+Inf' ? Infinity : Number(le), count: value(line) };
    });
  const find = (suffix: string) => lines.find((line) => line.startsWith(`${HOST_METRIC_NAMES.recordDelay}${suffix}{`));
  const sum = find('_sum');
  const count = find('_count');
  if (buckets.length === 0 || sum === undefined || count === undefined)
    throw new Error(`no ${HOST_METRIC_NAMES.recordDelay} of ${pipeline} at ${url}`);
  return { buckets, sum: value(sum), count: value(count), lines };
}

/** `after` minus `before`: what was observed between two scrapes. */
export function delaysBetween(before: DelayHistogram, after: DelayHistogram): DelayHistogram {
  return {
    buckets: after.buckets.map((bucket, index) => ({ le: bucket.le, count: bucket.count - (before.buckets[index]?.count ?? 0) })),
    sum: after.sum - before.sum,
    count: after.count - before.count,
    lines: after.lines,
  };
}

/** The q-quantile as Prometheus' histogram_quantile estimates it (linear within the bucket), and that bucket. */
function quantile(histogram: DelayHistogram, q: number): { estimate: number; lower: number; upper: number } {
  const rank = q * histogram.count;
  let lower = 0;
  let below = 0;
  for (const { le, count } of histogram.buckets) {
    if (count >= rank) {
      const upper = le;
      if (!Number.isFinite(upper)) return { estimate: lower, lower, upper };
      return { estimate: lower + ((upper - lower) * (rank - below)) / Math.max(1, count - below), lower, upper };
    }
    lower = le;
    below = count;
  }
  return { estimate: Number.NaN, lower, upper: Infinity };
}

/** The figures of both measurements side by side, and whether they agree. */
export interface FreshnessComparison {
  readonly lines: readonly string[];
  readonly agrees: boolean;
  readonly metricMeanMs: number;
  readonly metricP99Ms: number;
}

/** The bench's own event-loop delay during the flood (perf_hooks.monitorEventLoopDelay), ms. */
export interface LoopDelay {
  readonly meanMs: number;
  readonly p99Ms: number;
}

/**
 * Compares the bench's latencies (ms) with the metric's histogram of the same records. Both
 * start at the record's timestamp (the bench stamps each message with its send time). The
 * bench ends when its own event loop runs the NOTIFY callback, the metric when COMMIT returned
 * in the host: the bench's error is its event-loop delay while it floods. They agree when the
 * counts are equal, the means differ by no more than that delay's p99, and the bench's p99 lies
 * in the histogram bucket holding the metric's p99 (the histogram resolves no finer), widened
 * by the same delay.
 */
export function compareFreshness(latenciesMs: readonly number[], histogram: DelayHistogram, loop: LoopDelay): FreshnessComparison {
  const n = latenciesMs.length;
  const benchMean = latenciesMs.reduce((total, ms) => total + ms, 0) / n;
  const benchP99 = percentile(latenciesMs, 99);
  const metricMean = (histogram.sum / histogram.count) * 1000;
  const p50 = quantile(histogram, 0.5);
  const p99 = quantile(histogram, 0.99);
  const errorMs = loop.p99Ms;
  const inBucket = benchP99 > p99.lower * 1000 && benchP99 <= p99.upper * 1000 + errorMs;
  const meansAgree = Math.abs(benchMean - metricMean) <= errorMs;
  const sameCount = histogram.count === n;
  const agrees = inBucket && meansAgree && sameCount;
  const ms = (seconds: number) => (Number.isFinite(seconds) ? `${Math.round(seconds * 1000)}` : '+Inf');
  return {
    agrees,
    metricMeanMs: metricMean,
    metricP99Ms: p99.estimate * 1000,
    lines: [
      `nm freshness (host metric storage_consumer_record_delay_seconds, the flood's records): ${histogram.count} records, ` +
        `mean ${metricMean.toFixed(1)} ms, p50 ~${Math.round(p50.estimate * 1000)} ms, ` +
        `p99 ~${Math.round(p99.estimate * 1000)} ms (in the bucket ${ms(p99.lower)}-${ms(p99.upper)} ms)`,
      `nm latency (bench, send -> NOTIFY at COMMIT): ${n} messages, mean ${benchMean.toFixed(1)} ms, p99 ${Math.round(benchP99)} ms; ` +
        `the bench's error (its event-loop delay while flooding): mean ${loop.meanMs.toFixed(1)} ms, p99 ${loop.p99Ms.toFixed(1)} ms`,
      `agreement: means differ by ${(benchMean - metricMean).toFixed(1)} ms (${meansAgree ? 'within' : 'OUTSIDE'} the bench's error), ` +
        `the bench's p99 is ${inBucket ? 'inside' : 'OUTSIDE'} the metric's p99 bucket (+ the error), ` +
        `${sameCount ? 'same' : 'DIFFERENT'} counts: ${agrees ? 'agree' : 'DISAGREE'}`,
    ],
  };
}
