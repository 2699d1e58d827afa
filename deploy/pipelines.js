// @ts-check
/**
 * Everything serverless.yml deploys per pipeline, generated from one list: the consumer
 * function, its Kafka event source mapping, its seven alarms and the ARNs its role needs.
 * serverless.yml loads each export with `${file(./deploy/pipelines.js):<name>}`; osls calls an
 * exported function and resolves the `${...}` variables in what it returns, so stage values stay
 * in deploy/params.yml. The pipelines themselves (names, topics, docs/design.md section 1's groups and
 * batch sizes) are shared/pipeline-names.ts's, loaded through tsx: a pipeline the code knows but
 * this list does not (or the reverse) fails the packaging.
 */
import { tsImport } from 'tsx/esm/api';

/**
 * @typedef {object} PipelineDeployment What the deployment chooses per pipeline.
 * @property {number} memorySize The function's memory in MB (memory buys CPU).
 * @property {number} batchingWindowSeconds The mapping's MaximumBatchingWindowInSeconds.
 */

/** @type {Record<string, PipelineDeployment>} */
const DEPLOYMENT = {
  'app-stats': {
    // Decode + validate up to 200 records; the heap needs < 100 MB.
    memorySize: 512,
    // Hourly crawl, nobody waiting: fuller batches, fewer transactions.
    batchingWindowSeconds: 10,
  },
  reviews: {
    // 500 records per batch and floods of 200,000: a full vCPU share halves the batch time.
    memorySize: 1024,
    batchingWindowSeconds: 5,
  },
  'network-metrics': {
    // A user is waiting: enough CPU for a quick cold start and a small batch.
    memorySize: 512,
    // A user is waiting (docs/design.md section 1: under 1 s): no batching window. Kafka's default is 500 ms.
    batchingWindowSeconds: 0,
  },
};

/**
 * @typedef {object} Pipeline One pipeline as the deployment sees it.
 * @property {string} name The pipeline's name (`network-metrics`).
 * @property {string} topic Its Kafka topic.
 * @property {string} id Its name in logical ids and parameter names (`NetworkMetrics`).
 * @property {string} functionKey Its function's key in `functions` (`networkMetrics`).
 * @property {string} group Its consumer group id: the stage's `group<Id>` parameter, else design section 1's.
 * @property {string} batchSize The stage's `batchSize<Id>` parameter, else design section 1's batch size.
 * @property {number} memorySize See PipelineDeployment.
 * @property {number} batchingWindowSeconds See PipelineDeployment.
 */

/** @type {Promise<Pipeline[]> | undefined} */
let loaded;

/**
 * The one list of pipelines, in the order of shared/pipeline-names.ts (also deploy/dashboard.js's).
 * @returns {Promise<Pipeline[]>}
 */
export function pipelines() {
  loaded ??= loadPipelines();
  return loaded;
}

/** @returns {Promise<Pipeline[]>} */
async function loadPipelines() {
  /** @type {{ PIPELINE_NAMES: readonly string[], PIPELINE_DEFAULTS: Record<string, { topic: string, group: string, batchSize: number }> }} */
  const shared = await tsImport('../shared/pipeline-names.ts', import.meta.url);
  const names = [...shared.PIPELINE_NAMES];
  if (names.join() !== Object.keys(DEPLOYMENT).join()) {
    const listed = Object.keys(DEPLOYMENT).join(', ');
    throw new Error(`deploy/pipelines.js lists [${listed}]; it must list shared/pipeline-names.ts's [${names.join(', ')}], in that order`);
  }
  return names.map((name) => {
    const id = name.split('-').map((word) => word.charAt(0).toUpperCase() + word.slice(1)).join('');
    const defaults = shared.PIPELINE_DEFAULTS[name];
    const deployment = DEPLOYMENT[name];
    if (defaults === undefined || deployment === undefined) throw new Error(`no defaults for pipeline ${name}`);
    return {
      name,
      topic: defaults.topic,
      id,
      functionKey: id.charAt(0).toLowerCase() + id.slice(1),
      group: `\${param:group${id}, '${defaults.group}'}`,
      batchSize: `\${param:batchSize${id}, ${defaults.batchSize}}`,
      ...deployment,
    };
  });
}

const NO_VALUE = { Ref: 'AWS::NoValue' };
/** @param {string} id @returns {{ Ref: string }} */
const functionRef = (id) => ({ Ref: `${id}LambdaFunction` });
/** @param {string} kind @param {string} path */
const kafkaArn = (kind, path) => ({
  'Fn::Sub': `arn:\${AWS::Partition}:kafka:\${AWS::Region}:\${AWS::AccountId}:${kind}/\${self:custom.mskResourcePath}/${path}`,
});

/**
 * Refuses a consumer timeout that cannot hold one database attempt plus the hand-back reserve
 * (the connect timeout, the statement timeout + 1 s client margin, 1 s to hand the batch back:
 * shared/connection.ts's attemptTimeNeededMs, the number the host refuses at start too). With
 * less, the handler would start no attempt and hand every batch back untried.
 * @param {{ timeoutSeconds: number, environment: Record<string, string | undefined> }} consumer
 */
export async function checkConsumerTimeout({ timeoutSeconds, environment }) {
  /** @type {{ loadSettings: (env: Record<string, string | undefined>) => { database: unknown } }} */
  const { loadSettings } = await tsImport('../shared/settings.ts', import.meta.url);
  /** @type {{ attemptTimeNeededMs: (database: unknown) => number }} */
  const { attemptTimeNeededMs } = await tsImport('../shared/connection.ts', import.meta.url);
  // Only the timeouts matter here; a placeholder URL satisfies the connection settings.
  const settings = loadSettings({ ...environment, DATABASE_URL: 'postgres://packaging-check/storage', STORAGE_DB_SECRET_ID: '' });
  const neededMs = attemptTimeNeededMs(settings.database);
  const timeoutMs = Number(timeoutSeconds) * 1000;
  if (!(timeoutMs >= neededMs)) {
    throw new Error(
      `the consumer functions' timeout (${timeoutSeconds} s = ${timeoutMs} ms) cannot hold one database attempt plus the reserve ` +
        `(${neededMs} ms: STORAGE_DB_CONNECT_TIMEOUT_MS + STORAGE_DB_STATEMENT_TIMEOUT_MS + 1 s client margin + 1 s to hand the batch back): ` +
        'every batch would be handed back untried; raise consumerTimeout or lower those timeouts',
    );
  }
}

/**
 * The consumer functions, keyed as osls names them (`appStats` -> `AppStatsLambdaFunction`).
 * Packaging fails when their timeout cannot hold one database attempt ({@link checkConsumerTimeout}).
 * @param {{ resolveVariable?: (name: string) => Promise<unknown> }} [resolver]
 */
export async function functions({ resolveVariable } = {}) {
  if (resolveVariable) {
    const environment = /** @type {Record<string, string | undefined>} */ ((await resolveVariable('self:provider.environment')) ?? {});
    await checkConsumerTimeout({ timeoutSeconds: Number(await resolveVariable('self:custom.consumerTimeout')), environment });
  }
  return Object.fromEntries(
    (await pipelines()).map((pipeline) => [
      pipeline.functionKey,
      {
        handler: `handlers/${pipeline.name}.handler`,
        description: `Kafka topic ${pipeline.topic} -> PostgreSQL ${pipeline.name.replaceAll('-', '_')}`,
        memorySize: pipeline.memorySize,
        timeout: '${self:custom.consumerTimeout}',
        role: 'ConsumerRole',
        environment: { STORAGE_FAILURE_RESPONSE: 'report' },
      },
    ]),
  );
}

/** Properties every consumer's mapping shares. */
const MAPPING = {
  // One definition for both sources: the condition drops what the stage's source does not use.
  EventSourceArn: { 'Fn::If': ['UsesMsk', '${self:custom.mskClusterArn}', NO_VALUE] },
  SelfManagedEventSource: {
    'Fn::If': ['UsesMsk', NO_VALUE, { Endpoints: { KafkaBootstrapServers: '${param:kafkaBootstrapServers}' } }],
  },
  SourceAccessConfigurations: { 'Fn::If': ['UsesMsk', NO_VALUE, '${param:kafkaAccessConfigurations}'] },
  StartingPosition: 'TRIM_HORIZON',
  ProvisionedPollerConfig: { MinimumPollers: '${param:minimumPollers}', MaximumPollers: '${param:maximumPollers}' },
  // The functions run with STORAGE_FAILURE_RESPONSE=report: without this response type a
  // reported failure would count as success and the batch would be lost (docs/design.md section 3).
  FunctionResponseTypes: ['ReportBatchItemFailures'],
  // Infinite (the default, stated): capped retries or a maximum age would skip records that
  // were never stored. No DestinationConfig for the same reason (with one, Lambda also caps
  // infinite retries at 10). Kafka mappings take these error controls, and the response type
  // above, only in provisioned mode: hence ProvisionedPollerConfig.
  MaximumRetryAttempts: -1,
  MaximumRecordAgeInSeconds: -1,
  // The handler isolates poison records itself; halving a batch would only repeat work.
  BisectBatchOnFunctionError: false,
  MetricsConfig: { Metrics: ['EventCount', 'ErrorCount', 'KafkaMetrics'] },
};

/**
 * One event source mapping per consumer. Declared as resources, not as osls `msk`/`kafka`
 * events, because osls names an MSK mapping after the cluster, so no stable id could be extended.
 */
export async function eventSourceMappings() {
  const all = await pipelines();
  return {
    // A pipeline is paused on AWS by disabling its mapping; with the UUID an output, the
    // runbook's `aws lambda update-event-source-mapping --uuid ... --no-enabled` needs no lookup.
    Outputs: Object.fromEntries(
      all.map((pipeline) => [
        `${pipeline.id}EventSourceMappingUuid`,
        {
          Condition: 'KafkaMappingsEnabled',
          Description: `UUID of the ${pipeline.name} event source mapping (pause: aws lambda update-event-source-mapping --uuid <this> --no-enabled)`,
          Value: { Ref: `${pipeline.id}EventSourceMapping` },
        },
      ]),
    ),
    Resources: Object.fromEntries(
      all.map((pipeline) => [
        `${pipeline.id}EventSourceMapping`,
        {
          Type: 'AWS::Lambda::EventSourceMapping',
          Condition: 'KafkaMappingsEnabled',
          DependsOn: ['SchemaMigration'],
          Properties: {
            ...MAPPING,
            FunctionName: functionRef(pipeline.id),
            Topics: [pipeline.topic],
            BatchSize: pipeline.batchSize,
            MaximumBatchingWindowInSeconds: pipeline.batchingWindowSeconds,
            AmazonManagedKafkaEventSourceConfig: { 'Fn::If': ['UsesMsk', { ConsumerGroupId: pipeline.group }, NO_VALUE] },
            SelfManagedKafkaEventSourceConfig: { 'Fn::If': ['UsesMsk', NO_VALUE, { ConsumerGroupId: pipeline.group }] },
          },
        },
      ]),
    ),
  };
}

/** No consumer function is created or updated before the schema it needs (docs/design.md section 2). */
export async function functionsAfterMigration() {
  return {
    extensions: Object.fromEntries(
      (await pipelines()).map((pipeline) => [`${pipeline.id}LambdaFunction`, { DependsOn: ['SchemaMigration'] }]),
    ),
  };
}

/** The consumers' log groups (their role writes nothing else). */
export async function logGroupArns() {
  return (await pipelines()).map((pipeline) => ({ 'Fn::GetAtt': [`${pipeline.id}LogGroup`, 'Arn'] }));
}

/** The MSK topics the consumers read. */
export async function mskTopicArns() {
  return (await pipelines()).map((pipeline) => kafkaArn('topic', pipeline.topic));
}

/** The MSK consumer groups the consumers' mappings join. */
export async function mskGroupArns() {
  return (await pipelines()).map((pipeline) => kafkaArn('group', pipeline.group));
}

// Alarm building blocks: every alarm notifies the stage's topic, on ALARM and on OK.
const ALARM_ACTIONS = {
  ActionsEnabled: true,
  AlarmActions: ['${param:alarmTopicArn}'],
  OKActions: ['${param:alarmTopicArn}'],
};
const ANY_IN_FIVE_MINUTES = {
  ...ALARM_ACTIONS,
  Statistic: 'Sum',
  Period: 300,
  EvaluationPeriods: 1,
  ComparisonOperator: 'GreaterThanThreshold',
  Threshold: 0,
  TreatMissingData: 'notBreaching',
};
const BATCH_METRIC = { ...ANY_IN_FIVE_MINUTES, Namespace: 'StorageConsumer/${sls:stage}' };

/** @param {Pipeline} pipeline @returns {Record<string, object>} The pipeline's alarms' properties by logical id. */
function alarmsOf({ id, name }) {
  const alarmName = (/** @type {string} */ what) => `\${self:service}-\${sls:stage}-${name}-${what}`;
  const byFunction = [{ Name: 'FunctionName', Value: functionRef(id) }];
  const byPipeline = [
    { Name: 'service', Value: 'storage-consumer' },
    { Name: 'pipeline', Value: name },
  ];
  /** @param {string} metricName @param {string} stat */
  const lambdaMetric = (metricName, stat) => ({
    Metric: { Namespace: 'AWS/Lambda', MetricName: metricName, Dimensions: byFunction },
    Period: 300,
    Stat: stat,
  });
  return {
    [`${id}ErrorsAlarm`]: {
      ...ANY_IN_FIVE_MINUTES,
      AlarmName: alarmName('errors'),
      AlarmDescription: `The ${name} function threw (fatal error, or a batch that keeps failing); its batch is redelivered until this is fixed.`,
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: byFunction,
    },
    [`${id}ThrottlesAlarm`]: {
      ...ANY_IN_FIVE_MINUTES,
      AlarmName: alarmName('throttles'),
      AlarmDescription: `The ${name} function was throttled; the topic is falling behind.`,
      Namespace: 'AWS/Lambda',
      MetricName: 'Throttles',
      Dimensions: byFunction,
    },
    [`${id}DurationAlarm`]: {
      ...ALARM_ACTIONS,
      AlarmName: alarmName('duration'),
      AlarmDescription: `A ${name} batch took over 80 % of the function's timeout (database slow or retrying).`,
      Namespace: 'AWS/Lambda',
      MetricName: 'Duration',
      Dimensions: byFunction,
      Statistic: 'Maximum',
      Period: 300,
      EvaluationPeriods: 1,
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: '${self:custom.consumerDurationAlarmMs}',
      TreatMissingData: 'notBreaching',
    },
    [`${id}OffsetLagAlarm`]: {
      ...ALARM_ACTIONS,
      AlarmName: alarmName('offset-lag'),
      AlarmDescription: `The ${name} consumer group's lag stayed above the stage's threshold for 15 minutes.`,
      Namespace: 'AWS/Lambda',
      MetricName: 'OffsetLag',
      Dimensions: byFunction,
      Statistic: 'Maximum',
      Period: 300,
      EvaluationPeriods: 3,
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: `\${param:offsetLagThreshold${id}}`,
      TreatMissingData: 'notBreaching',
    },
    [`${id}DeadLetteredAlarm`]: {
      ...BATCH_METRIC,
      AlarmName: alarmName('dead-lettered'),
      AlarmDescription: `${name} messages went to dead_letter_events; inspect and re-drive them.`,
      MetricName: 'DeadLettered',
      Dimensions: byPipeline,
    },
    [`${id}BatchFailedAlarm`]: {
      ...BATCH_METRIC,
      AlarmName: alarmName('batch-failed'),
      AlarmDescription: `A ${name} batch outlasted the database retry budget and was reported back for redelivery (not a Lambda error).`,
      MetricName: 'BatchFailed',
      Dimensions: byPipeline,
    },
    [`${id}StalledAlarm`]: {
      ...ALARM_ACTIONS,
      AlarmName: alarmName('stalled'),
      AlarmDescription: `The ${name} topic has lag but the function is not invoked, or the mapping reports nothing at all (missing data counts as stalled).`,
      Metrics: [
        { Id: 'lag', ReturnData: false, MetricStat: lambdaMetric('OffsetLag', 'Maximum') },
        { Id: 'invocations', ReturnData: false, MetricStat: lambdaMetric('Invocations', 'Sum') },
        {
          Id: 'stalled',
          Label: 'lag without invocations',
          ReturnData: true,
          Expression: 'IF(lag > 0 AND FILL(invocations, 0) == 0, 1, 0)',
        },
      ],
      EvaluationPeriods: 3,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      // Missing data counts as stalled: a mapping that reports nothing at all is not healthy.
      TreatMissingData: 'breaching',
    },
  };
}

/**
 * Seven alarms per consumer, the AWS form of "a half-alive pipeline counts as dead": errors,
 * throttles, duration, offset lag, dead letters, failed batches, and lag without invocations.
 */
export async function alarms() {
  const resources = {};
  for (const pipeline of await pipelines()) {
    for (const [logicalId, properties] of Object.entries(alarmsOf(pipeline))) {
      Object.assign(resources, { [logicalId]: { Type: 'AWS::CloudWatch::Alarm', Properties: properties } });
    }
  }
  return { Resources: resources };
}
