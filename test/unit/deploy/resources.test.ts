import { describe, expect, it } from 'vitest';
import { alarms, checkConsumerTimeout, eventSourceMappings } from '../../../deploy/resources.js';
import { roles } from '../../../deploy/roles.js';

describe('packaging: the consumer timeout holds one database attempt', () => {
  it('accepts the default 120 s, and refuses a timeout below one attempt plus the reserve, naming both numbers', async () => {
    await expect(checkConsumerTimeout({ timeoutSeconds: 120, environment: {} })).resolves.toBeUndefined();
    // Defaults: 5 s connect + 30 s statement + 1 s margin + 1 s hand-back = 37 s
    await expect(checkConsumerTimeout({ timeoutSeconds: 30, environment: {} })).rejects.toThrow(
      "the consumer functions' timeout (30 s = 30000 ms) cannot hold one database attempt plus the reserve (37000 ms",
    );
    await expect(
      checkConsumerTimeout({ timeoutSeconds: 30, environment: { STORAGE_DB_STATEMENT_TIMEOUT_MS: '10000' } }),
    ).resolves.toBeUndefined();
    // tsx compiles shared/settings.ts on first use: slow on a busy machine
  }, 60_000);
});

/** What osls hands the generators: the stage and its parameters as deploy/params.yml would resolve them. */
function resolverFor(stage: string, parameters: Record<string, unknown>, custom: Record<string, unknown> = {}) {
  const values: Record<string, unknown> = { 'sls:stage': stage, 'self:custom.consumerTimeout': 120, ...custom };
  for (const [name, value] of Object.entries(parameters)) values[`param:${name}`] = value;
  return { resolveVariable: async (name: string) => values[name] };
}

const PROD = {
  kafkaSource: 'msk',
  kafkaMappings: 'true',
  kafkaAccessConfigurations: [],
  databaseSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:storage-consumer/prod/database-Pq5rS6',
  kafkaSecretArn: '',
  secretsKmsKeyArn: '',
};
const LOCAL = {
  kafkaSource: 'selfManaged',
  kafkaMappings: 'false',
  kafkaBootstrapServers: ['host.docker.internal:9092'],
  kafkaAccessConfigurations: [],
  databaseSecretArn: '',
  kafkaSecretArn: '',
};

type Policy = { PolicyName: string; PolicyDocument: { Statement: Array<{ Action: string[]; Resource: unknown; Condition?: unknown }> } };
const policiesOf = async (stage: string, parameters: Record<string, unknown>) => {
  const { Resources } = (await roles(resolverFor(stage, parameters))) as {
    Resources: Record<string, { Properties: { Policies: Policy[] } }>;
  };
  return (role: string) => Resources[role]!.Properties.Policies;
};

describe('packaging: each stage gets only what it deploys (no untaken Fn::If branch)', () => {
  it('gives both roles kms:Decrypt on secretsKmsKeyArn, through Secrets Manager only, and nothing of KMS without it', async () => {
    const key = 'arn:aws:kms:eu-west-1:123456789012:key/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d';
    const withKey = await policiesOf('prod', { ...PROD, secretsKmsKeyArn: key });
    for (const role of ['ConsumerRole', 'MigrationRole']) {
      const kms = withKey(role)
        .flatMap((policy) => policy.PolicyDocument.Statement)
        .filter((statement) => statement.Action.includes('kms:Decrypt'));
      expect(kms, role).toEqual([
        {
          Effect: 'Allow',
          Action: ['kms:Decrypt'],
          Resource: key,
          Condition: { StringEquals: { 'kms:ViaService': { 'Fn::Sub': 'secretsmanager.${AWS::Region}.amazonaws.com' } } },
        },
      ]);
    }
    const without = await policiesOf('prod', PROD);
    expect(JSON.stringify([without('ConsumerRole'), without('MigrationRole')])).not.toContain('kms:');
  }, 60_000);

  it('leaves out every statement whose resource the stage does not have (no Resource "" anywhere)', async () => {
    const local = await policiesOf('local', LOCAL);
    expect(local('ConsumerRole').map((policy) => policy.PolicyName)).toEqual(['logs', 'vpc-network-interfaces']);
    expect(local('MigrationRole').map((policy) => policy.PolicyName)).toEqual(['logs', 'vpc-network-interfaces']);
    const prod = await policiesOf('prod', PROD);
    expect(prod('ConsumerRole').map((policy) => policy.PolicyName)).toEqual([
      'logs',
      'vpc-network-interfaces',
      'database-secret',
      'msk-cluster',
    ]);
    expect(prod('MigrationRole').map((policy) => policy.PolicyName)).toEqual(['logs', 'vpc-network-interfaces', 'database-secret']);
  }, 60_000);

  it('derives the duration threshold from the consumer timeout (80 %), whatever the stage sets', async () => {
    const thresholds = async (timeout: number) => {
      const { Resources } = (await alarms(resolverFor('prod', PROD, { 'self:custom.consumerTimeout': timeout }))) as {
        Resources: Record<string, { Properties: { Threshold: number } }>;
      };
      return ['AppStats', 'Reviews', 'NetworkMetrics'].map((id) => Resources[`${id}DurationAlarm`]!.Properties.Threshold);
    };
    expect(await thresholds(120)).toEqual([96_000, 96_000, 96_000]);
    expect(await thresholds(300)).toEqual([240_000, 240_000, 240_000]);
  }, 60_000);

  it('creates no alarm on OffsetLag (offset-lag, stalled) where the stage has no mappings, and no mapping', async () => {
    const ids = async (parameters: Record<string, unknown>) =>
      Object.keys(((await alarms(resolverFor('local', parameters))) as { Resources: object }).Resources);
    const without = await ids(LOCAL);
    expect(without).toHaveLength(3 * 6);
    expect(without.filter((id) => /OffsetLag|Stalled/.test(id))).toEqual([]);
    expect(await ids({ ...LOCAL, kafkaMappings: 'true' })).toHaveLength(3 * 8);
    expect(await eventSourceMappings(resolverFor('local', LOCAL))).toEqual({});
  }, 60_000);

  it("writes a mapping's source properties for the stage's source only, SourceAccessConfigurations only when there are some", async () => {
    const properties = async (parameters: Record<string, unknown>) => {
      const { Resources } = (await eventSourceMappings(resolverFor('local', parameters))) as {
        Resources: Record<string, { Properties: Record<string, unknown> }>;
      };
      return Object.keys(Resources.ReviewsEventSourceMapping!.Properties)
        .filter((name) => /Source|Kafka/.test(name))
        .sort();
    };
    expect(await properties({ ...LOCAL, kafkaMappings: 'true' })).toEqual(['SelfManagedEventSource', 'SelfManagedKafkaEventSourceConfig']);
    expect(
      await properties({ ...LOCAL, kafkaMappings: 'true', kafkaAccessConfigurations: [{ Type: 'SASL_SCRAM_512_AUTH', URI: 'arn:x' }] }),
    ).toEqual(['SelfManagedEventSource', 'SelfManagedKafkaEventSourceConfig', 'SourceAccessConfigurations']);
    expect(await properties(PROD)).toEqual(['AmazonManagedKafkaEventSourceConfig', 'EventSourceArn']);
    await expect(properties({ ...PROD, kafkaSource: 'kinesis' })).rejects.toThrow(
      'param kafkaSource is "kinesis": it must be msk or selfManaged',
    );
  }, 60_000);
});
