// @ts-check
/**
 * The stage's CloudWatch dashboard: one row per consumer function, generated from the one list
 * of pipelines in deploy/resources.js (as the rest of what each pipeline gets). Each row shows what
 * docs/operations.md's runbooks look at: records by outcome, dead letters, BatchFailed and batch
 * duration p50/p99 (the handlers' EMF metrics, namespace `StorageConsumer/<stage>`, dimensions
 * `service` and `pipeline`, aws/metrics.ts), and the function's OffsetLag, errors, throttles
 * and concurrency (AWS/Lambda, by FunctionName), and the AWS side of the host's progress metrics
 * (docs/operations.md): batches handled per period (a flat zero is the silence
 * `storage_consumer_last_stored_timestamp_seconds` shows on the host) and the longest invocation
 * (what `storage_consumer_inflight_batch_age_seconds` shows), and freshness (`RecordDelayMs`
 * against the stage's objective, what `storage_consumer_record_delay_seconds` shows). serverless.yml loads it with
 * `${file(./deploy/dashboard.js):dashboard}`.
 */
import { tsImport } from 'tsx/esm/api';
import { pipelines } from './resources.js';

/** A widget's place in the body is its index; CloudWatch lays out 24 columns. */
const WIDTH = 6;
const HEIGHT = 6;
const PERIOD = 300;
/** Lines of widgets per consumer. */
const LINES = 3;

/**
 * A placeholder for a CloudFormation value inside the body's JSON text, cut out again by
 * {@link joined}: the body is one string, and the function names exist only once deployed.
 * @param {string} ref
 */
const placeholder = (ref) => `@@REF:${ref}@@`;

/**
 * The body as `Fn::Join` of its JSON text and the `Ref`s its placeholders stand for.
 * @param {string} text
 */
function joined(text) {
  const parts = text.split(/@@REF:([\w:]+)@@/);
  return { 'Fn::Join': ['', parts.map((part, index) => (index % 2 === 1 ? { Ref: part } : part))] };
}

/**
 * @typedef {object} MetricNames The handlers' EMF metric names (aws/metrics.ts BATCH_METRIC_NAMES).
 * @property {string} records
 * @property {string} inserted
 * @property {string} updated
 * @property {string} skipped
 * @property {string} deadLettered
 * @property {string} alreadyDeadLettered
 * @property {string} durationMs
 * @property {string} failed
 * @property {string} recordDelayMs
 */

/**
 * @param {{ name: string, id: string, namespace: string, service: string, metricNames: MetricNames, objectiveMs: number }} pipeline
 * @param {number} row
 * @returns {object[]} The consumer's widgets, one row of 24 columns (three lines of four).
 */
function widgetsOf({ name, id, namespace, service, metricNames, objectiveMs }, row) {
  const emf = (/** @type {string} */ metric, /** @type {object} */ options = {}) => [
    namespace,
    metric,
    'service',
    service,
    'pipeline',
    name,
    options,
  ];
  const lambda = (/** @type {string} */ metric, /** @type {object} */ options = {}) => [
    'AWS/Lambda',
    metric,
    'FunctionName',
    placeholder(`${id}LambdaFunction`),
    options,
  ];
  /** @param {number} column @param {number} line @param {string} title @param {unknown[][]} metrics @param {object} [extra] */
  const graph = (column, line, title, metrics, extra = {}) => ({
    type: 'metric',
    x: column * WIDTH,
    y: row * LINES * HEIGHT + line * HEIGHT,
    width: WIDTH,
    height: HEIGHT,
    properties: {
      title: `${name}: ${title}`,
      view: 'timeSeries',
      region: placeholder('AWS::Region'),
      period: PERIOD,
      metrics,
      ...extra,
    },
  });
  return [
    graph(
      0,
      0,
      'records by outcome',
      [
        emf(metricNames.inserted, { stat: 'Sum', label: 'inserted' }),
        emf(metricNames.updated, { stat: 'Sum', label: 'updated' }),
        emf(metricNames.skipped, { stat: 'Sum', label: 'skipped' }),
        emf(metricNames.deadLettered, { stat: 'Sum', label: 'dead-lettered' }),
        emf(metricNames.alreadyDeadLettered, { stat: 'Sum', label: 'already dead-lettered (replay)' }),
        emf(metricNames.records, { stat: 'Sum', label: 'records' }),
      ],
      { stacked: false },
    ),
    graph(1, 0, 'dead letters', [emf(metricNames.deadLettered, { stat: 'Sum', label: 'dead-lettered', color: '#d62728' })]),
    graph(2, 0, 'BatchFailed (handed back)', [emf(metricNames.failed, { stat: 'Sum', label: 'failed batches', color: '#ff7f0e' })]),
    graph(3, 0, 'batch duration p50 / p99 (ms)', [
      emf(metricNames.durationMs, { stat: 'p50', label: 'p50' }),
      emf(metricNames.durationMs, { stat: 'p99', label: 'p99' }),
    ]),
    graph(0, 1, 'OffsetLag (max)', [lambda('OffsetLag', { stat: 'Maximum', label: 'offset lag' })]),
    graph(1, 1, 'errors', [lambda('Errors', { stat: 'Sum', label: 'errors', color: '#d62728' })]),
    graph(2, 1, 'throttles', [lambda('Throttles', { stat: 'Sum', label: 'throttles' })]),
    graph(3, 1, 'concurrency (max)', [lambda('ConcurrentExecutions', { stat: 'Maximum', label: 'concurrent executions' })]),
    // The host's storage_consumer_last_stored_timestamp_seconds: here, batches handled per period.
    graph(0, 2, 'batches handled (0 = silence)', [emf(metricNames.durationMs, { stat: 'SampleCount', label: 'batches' })]),
    // The host's storage_consumer_inflight_batch_age_seconds: here, the longest invocation.
    graph(1, 2, 'longest invocation (ms)', [lambda('Duration', { stat: 'Maximum', label: 'duration max' })]),
    // The host's storage_consumer_record_delay_seconds: here, each batch's oldest record at COMMIT.
    graph(
      2,
      2,
      'freshness: oldest record per batch (ms)',
      [emf(metricNames.recordDelayMs, { stat: 'p99', label: 'p99' }), emf(metricNames.recordDelayMs, { stat: 'Maximum', label: 'max' })],
      { annotations: { horizontal: [{ label: 'objective', value: objectiveMs, color: '#d62728' }] } },
    ),
  ];
}

/**
 * The dashboard resource (`Dashboard`), named `<service>-<stage>`.
 * @param {import('./resources.js').Resolver} [resolver]
 */
export async function dashboard(resolver) {
  /** @type {{ BATCH_METRIC_NAMES: MetricNames, METRICS_SERVICE_NAME: string }} */
  const metrics = await tsImport('../aws/metrics.ts', import.meta.url);
  const widgets = (await pipelines(resolver)).flatMap(({ name, id, freshnessObjectiveSeconds }, row) =>
    widgetsOf(
      {
        name,
        id,
        objectiveMs: freshnessObjectiveSeconds * 1000,
        // The functions' POWERTOOLS_METRICS_NAMESPACE (serverless.yml, provider environment).
        namespace: 'StorageConsumer/${sls:stage}',
        service: metrics.METRICS_SERVICE_NAME,
        metricNames: metrics.BATCH_METRIC_NAMES,
      },
      row,
    ),
  );
  return {
    Resources: {
      Dashboard: {
        Type: 'AWS::CloudWatch::Dashboard',
        Properties: {
          DashboardName: '${self:service}-${sls:stage}',
          DashboardBody: joined(JSON.stringify({ widgets })),
        },
      },
    },
  };
}
