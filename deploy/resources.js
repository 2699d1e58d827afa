// @ts-check
/**
 * Everything serverless.yml deploys per pipeline, generated from the pipelines' specs
 * (shared/pipelines.ts, loaded through tsx): the consumer function, its Kafka event source
 * mapping, its eight alarms and the ARNs its role needs. serverless.yml loads each export with
 * `${file(./deploy/resources.js):<name>}`; osls calls an exported function with a resolver (which
 * names the stage) and resolves the `${...}` variables in what it returns. What is the stage's
 * alone (its Kafka source, VPC, database, alarm topic) stays in deploy/params.yml; what is a
 * pipeline's (memory, batching window, pollers, lag thresholds per stage, groups) is its spec's.
 */
import { tsImport } from 'tsx/esm/api';

/**
 * @typedef {object} Pipeline One pipeline as the deployment sees it on the stage packaged.
 * @property {string} name The pipeline's name (`network-metrics`).
 * @property {string} topic Its Kafka topic.
 * @property {string} id Its name in logical ids and parameter names (`NetworkMetrics`).
 * @property {string} functionKey Its function's key in `functions` (`networkMetrics`).
 * @property {string} group Its consumer group id: the stage's `group<Id>` parameter, else the spec's for the stage.
 * @property {string} batchSize The stage's `batchSize<Id>` parameter, else the spec's batch size.
 * @property {number} memorySize The function's memory in MB.
 * @property {number} batchingWindowSeconds The mapping's MaximumBatchingWindowInSeconds.
 * @property {string} minimumPollers The stage's `minimumPollers` parameter, else the spec's.
 * @property {string} maximumPollers The stage's `maximumPollers` parameter, else the spec's.
 * @property {number} lagAlarmThreshold The stage's offset-lag alarm threshold.
 * @property {number} freshnessObjectiveSeconds The stage's freshness objective (the freshness alarm's threshold).
 */

/**
 * @typedef {{ resolveVariable?: (name: string) => Promise<unknown> }} Resolver What osls hands an
 * exported function: `resolveVariable('sls:stage')` names the stage being packaged.
 */

/** @type {Map<string, Promise<Pipeline[]>>} */
const loaded = new Map();

/**
 * The one list of pipelines, in the order of shared/pipelines.ts (also deploy/dashboard.js's),
 * with the values of the stage osls is packaging.
 * @param {Resolver} [resolver]
 * @returns {Promise<Pipeline[]>}
 */
export async function pipelines({ resolveVariable } = {}) {
  const stage = resolveVariable ? String(await resolveVariable('sls:stage')) : 'local';
  let list = loaded.get(stage);
  if (list === undefined) {
    list = loadPipelines(stage);
    loaded.set(stage, list);
  }
  return list;
}

/**
 * @param {string} stage
 * @returns {Promise<Pipeline[]>}
 */
async function loadPipelines(stage) {
  /** @type {typeof import('../shared/pipelines.ts')} */
  const { PIPELINE_NAMES, PIPELINES } = await tsImport('../shared/pipelines.ts', import.meta.url);
  /** @type {typeof import('../shared/stages.ts')} */
  const { isStage, STAGES, stageGroup, valueForStage } = await tsImport('../shared/stages.ts', import.meta.url);
  /** @type {typeof import('../shared/pipeline-spec.ts')} */
  const { logicalId } = await tsImport('../shared/pipeline-spec.ts', import.meta.url);
  if (!isStage(stage)) throw new Error(`unknown stage ${JSON.stringify(stage)}: shared/stages.ts knows ${STAGES.join(', ')}`);
  return PIPELINE_NAMES.map((name) => {
    const spec = PIPELINES[name];
    const id = logicalId(name);
    return {
      name,
      topic: spec.topic,
      id,
      functionKey: id.charAt(0).toLowerCase() + id.slice(1),
      group: `\${param:group${id}, '${stageGroup(spec, stage)}'}`,
      batchSize: `\${param:batchSize${id}, ${spec.batchSize}}`,
      memorySize: spec.lambda.memorySize,
      batchingWindowSeconds: spec.lambda.batchingWindowSeconds,
      minimumPollers: `\${param:minimumPollers, ${spec.lambda.pollers.minimum}}`,
      maximumPollers: `\${param:maximumPollers, ${spec.lambda.pollers.maximum}}`,
      lagAlarmThreshold: valueForStage(spec.lagAlarmThreshold, stage),
      freshnessObjectiveSeconds: valueForStage(spec.freshnessObjectiveSeconds, stage),
    };
  });
}

/**
 * What the stage's parameters decide about the template's shape, read while packaging so that
 * the template holds only what the stage deploys (no `Fn::If` branch it never takes, which
 * cfn-lint rightly reads as a property with an empty value). Without a resolver (unit tests
 * that build one part), the local stage's defaults.
 * @param {Resolver} [resolver]
 * @returns {Promise<{ kafkaSource: string, kafkaMappings: boolean, kafkaAccessConfigurations: unknown[], consumerTimeoutSeconds: number }>}
 */
export async function stageShape({ resolveVariable } = {}) {
  const read = async (/** @type {string} */ name, /** @type {unknown} */ fallback) =>
    resolveVariable ? ((await resolveVariable(name)) ?? fallback) : fallback;
  const kafkaSource = String(await read('param:kafkaSource', 'selfManaged'));
  if (kafkaSource !== 'msk' && kafkaSource !== 'selfManaged') {
    throw new Error(`param kafkaSource is ${JSON.stringify(kafkaSource)}: it must be msk or selfManaged`);
  }
  const accessConfigurations = await read('param:kafkaAccessConfigurations', []);
  return {
    kafkaSource,
    kafkaMappings: String(await read('param:kafkaMappings', 'true')) === 'true',
    kafkaAccessConfigurations: Array.isArray(accessConfigurations) ? accessConfigurations : [],
    consumerTimeoutSeconds: Number(await read('self:custom.consumerTimeout', 120)),
  };
}

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
        `(${neededMs} ms: STORAGE_DB_CONNECT_TIMEOUT_MS + STORAGE_DB_STATEMENT_TIMEOUT_MS + 1 s client margin + 1 s to hand the batch ` +
        `back): ` +
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
    (await pipelines({ resolveVariable })).map((pipeline) => [
      pipeline.functionKey,
      {
        handler: `handlers/${pipeline.name}.handler`,
        description: `Kafka topic ${pipeline.topic} -> PostgreSQL ${pipeline.name.replaceAll('-', '_')}`,
        memorySize: pipeline.memorySize,
        timeout: '${self:custom.consumerTimeout}',
        // A Sub rather than the role's name: osls adds a DependsOn for a named role that the
        // reference already implies (cfn-lint W3005).
        role: { 'Fn::Sub': '${ConsumerRole.Arn}' },
        environment: { STORAGE_FAILURE_RESPONSE: 'report' },
      },
    ]),
  );
}

/**
 * A consumer's mapping: what every mapping shares, the stage's source (MSK, or self-managed
 * brokers with their access configurations, when there are any), and the pipeline's own topic,
 * group, batch size, batching window and pollers.
 * @param {Pipeline} pipeline
 * @param {Awaited<ReturnType<typeof stageShape>>} shape
 */
function mappingProperties(pipeline, shape) {
  const source =
    shape.kafkaSource === 'msk'
      ? {
          EventSourceArn: '${self:custom.mskClusterArn}',
          AmazonManagedKafkaEventSourceConfig: { ConsumerGroupId: pipeline.group },
        }
      : {
          SelfManagedEventSource: { Endpoints: { KafkaBootstrapServers: '${param:kafkaBootstrapServers}' } },
          ...(shape.kafkaAccessConfigurations.length > 0 ? { SourceAccessConfigurations: '${param:kafkaAccessConfigurations}' } : {}),
          SelfManagedKafkaEventSourceConfig: { ConsumerGroupId: pipeline.group },
        };
  return {
    ...source,
    StartingPosition: 'TRIM_HORIZON',
    ProvisionedPollerConfig: { MinimumPollers: pipeline.minimumPollers, MaximumPollers: pipeline.maximumPollers },
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
    FunctionName: functionRef(pipeline.id),
    Topics: [pipeline.topic],
    BatchSize: pipeline.batchSize,
    MaximumBatchingWindowInSeconds: pipeline.batchingWindowSeconds,
  };
}

/**
 * One event source mapping per consumer. Declared as resources, not as osls `msk`/`kafka`
 * events, because osls names an MSK mapping after the cluster, so no stable id could be extended.
 * @param {Resolver} [resolver]
 */
export async function eventSourceMappings(resolver) {
  const shape = await stageShape(resolver);
  // kafkaMappings 'false' (LocalStack Community): no mapping at all, rather than three under a
  // condition that never holds.
  if (!shape.kafkaMappings) return {};
  if (shape.kafkaSource === 'selfManaged') {
    const servers = resolver?.resolveVariable ? await resolver.resolveVariable('param:kafkaBootstrapServers') : ['unchecked'];
    if (!Array.isArray(servers) || servers.length === 0) {
      throw new Error(
        'param kafkaBootstrapServers is empty: a self-managed Kafka mapping needs at least one broker (or kafkaMappings: false)',
      );
    }
  }
  const all = await pipelines(resolver);
  return {
    // A pipeline is paused on AWS by disabling its mapping; with the UUID an output, the
    // runbook's `aws lambda update-event-source-mapping --uuid ... --no-enabled` needs no lookup.
    Outputs: Object.fromEntries(
      all.map((pipeline) => [
        `${pipeline.id}EventSourceMappingUuid`,
        {
          Description:
            `UUID of the ${pipeline.name} event source mapping (pause: aws lambda update-event-source-mapping --uuid <this> ` +
            `--no-enabled)`,
          Value: { Ref: `${pipeline.id}EventSourceMapping` },
        },
      ]),
    ),
    Resources: Object.fromEntries(
      all.map((pipeline) => [
        `${pipeline.id}EventSourceMapping`,
        {
          Type: 'AWS::Lambda::EventSourceMapping',
          DependsOn: ['SchemaMigration'],
          Properties: mappingProperties(pipeline, shape),
        },
      ]),
    ),
  };
}

/** No consumer function is created or updated before the schema it needs (docs/design.md section 2). */
/** @param {Resolver} [resolver] */
export async function functionsAfterMigration(resolver) {
  return {
    extensions: Object.fromEntries(
      (await pipelines(resolver)).map((pipeline) => [`${pipeline.id}LambdaFunction`, { DependsOn: ['SchemaMigration'] }]),
    ),
  };
}

/** The consumers' log groups (their role writes nothing else). */
/** @param {Resolver} [resolver] */
export async function logGroupArns(resolver) {
  return (await pipelines(resolver)).map((pipeline) => ({ 'Fn::GetAtt': [`${pipeline.id}LogGroup`, 'Arn'] }));
}

/** The MSK topics the consumers read. */
/** @param {Resolver} [resolver] */
export async function mskTopicArns(resolver) {
  return (await pipelines(resolver)).map((pipeline) => kafkaArn('topic', pipeline.topic));
}

/** The MSK consumer groups the consumers' mappings join. */
/** @param {Resolver} [resolver] */
export async function mskGroupArns(resolver) {
  return (await pipelines(resolver)).map((pipeline) => kafkaArn('group', pipeline.group));
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

/** The duration alarm's share of the function's timeout. */
const DURATION_ALARM_SHARE = 0.8;

/**
 * @param {Pipeline} pipeline
 * @param {{ durationThresholdMs: number }} stage
 * @returns {Record<string, object>} The pipeline's alarms' properties by logical id.
 */
function alarmsOf({ id, name, lagAlarmThreshold, freshnessObjectiveSeconds }, { durationThresholdMs }) {
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
      AlarmDescription:
        `The ${name} function threw (fatal error, or a batch that keeps failing); its batch is redelivered until this ` + `is fixed.`,
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
      Threshold: durationThresholdMs,
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
      Threshold: lagAlarmThreshold,
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
    [`${id}FreshnessAlarm`]: {
      ...ALARM_ACTIONS,
      AlarmName: alarmName('freshness'),
      AlarmDescription:
        `${name} records reach PostgreSQL later than the stage's freshness objective (${freshnessObjectiveSeconds} s after their ` +
        `Kafka timestamp): the p99 of the batches' oldest record, 10 minutes over it.`,
      Namespace: 'StorageConsumer/${sls:stage}',
      MetricName: 'RecordDelayMs',
      Dimensions: byPipeline,
      ExtendedStatistic: 'p99',
      Period: 300,
      EvaluationPeriods: 2,
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: freshnessObjectiveSeconds * 1000,
      // No batch, no delay to judge: silence is the stalled alarm's.
      TreatMissingData: 'notBreaching',
    },
    [`${id}StalledAlarm`]: {
      ...ALARM_ACTIONS,
      AlarmName: alarmName('stalled'),
      AlarmDescription:
        `The ${name} topic has lag but the function is not invoked, or the mapping reports nothing at all (missing data ` +
        `counts as stalled).`,
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

/** Alarms on what only a Kafka event source mapping reports (OffsetLag): none without mappings. */
const MAPPING_ALARMS = new Set(['OffsetLagAlarm', 'StalledAlarm']);

/**
 * Eight alarms per consumer, the AWS form of "a half-alive pipeline counts as dead": errors,
 * throttles, duration, offset lag, dead letters, failed batches, freshness over the objective,
 * and lag without invocations. Where the stage has no mappings (kafkaMappings 'false') the two
 * on OffsetLag are left out: they could never have data, and the stalled alarm would sit in
 * ALARM for good.
 */
/** @param {Resolver} [resolver] */
export async function alarms(resolver) {
  const shape = await stageShape(resolver);
  const stage = { durationThresholdMs: Math.round(DURATION_ALARM_SHARE * shape.consumerTimeoutSeconds * 1000) };
  const resources = {};
  for (const pipeline of await pipelines(resolver)) {
    for (const [logicalId, properties] of Object.entries(alarmsOf(pipeline, stage))) {
      if (!shape.kafkaMappings && MAPPING_ALARMS.has(logicalId.slice(pipeline.id.length))) continue;
      Object.assign(resources, { [logicalId]: { Type: 'AWS::CloudWatch::Alarm', Properties: properties } });
    }
  }
  return { Resources: resources };
}
