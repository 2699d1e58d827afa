// @ts-check
/**
 * The two execution roles, `ConsumerRole` and `MigrationRole` (serverless.yml loads them with
 * `${file(./deploy/roles.js):roles}`). Generated rather than written out with `Fn::If`: the
 * stage's parameters are known when packaging, so each role holds exactly the statements its
 * stage needs and no branch it never takes (cfn-lint reads an untaken `Resource: ""` as an
 * invalid ARN, and it is one).
 */
import { logGroupArns, mskGroupArns, mskTopicArns, stageShape } from './resources.js';

/** @typedef {import('./resources.js').Resolver} Resolver */
/** @typedef {{ Effect: 'Allow', Action: string[], Resource: unknown, Condition?: object }} Statement */

const LAMBDA_TRUST = {
  Version: '2012-10-17',
  Statement: [{ Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' }],
};

/** @param {string} name @param {Statement[]} statements */
const policy = (name, statements) => ({ PolicyName: name, PolicyDocument: { Version: '2012-10-17', Statement: statements } });

/**
 * The function's VPC attachment and the Kafka mapping's pollers. EC2's Describe actions accept no
 * resource but '*'.
 */
const NETWORK_POLICY = policy('vpc-network-interfaces', [
  {
    Effect: 'Allow',
    Action: ['ec2:DescribeNetworkInterfaces', 'ec2:DescribeSubnets', 'ec2:DescribeVpcs', 'ec2:DescribeSecurityGroups'],
    Resource: '*',
  },
  {
    Effect: 'Allow',
    Action: ['ec2:CreateNetworkInterface', 'ec2:DeleteNetworkInterface', 'ec2:AssignPrivateIpAddresses', 'ec2:UnassignPrivateIpAddresses'],
    Resource: { 'Fn::Sub': 'arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:*/*' },
  },
]);

/**
 * `kms:Decrypt` on the stage's customer-managed key (`secretsKmsKeyArn`), only as Secrets
 * Manager uses it on the role's behalf: reading a secret encrypted with it needs this; the
 * default `aws/secretsmanager` key needs nothing.
 * @param {string} keyArn
 */
const secretsKeyPolicy = (keyArn) =>
  policy('secrets-kms-key', [
    {
      Effect: 'Allow',
      Action: ['kms:Decrypt'],
      Resource: keyArn,
      Condition: { StringEquals: { 'kms:ViaService': { 'Fn::Sub': 'secretsmanager.${AWS::Region}.amazonaws.com' } } },
    },
  ]);

/**
 * The roles' parameters as the stage sets them ('' = not used there).
 * @param {Resolver} [resolver]
 */
async function roleParameters({ resolveVariable } = {}) {
  const read = async (/** @type {string} */ name) => (resolveVariable ? String((await resolveVariable(`param:${name}`)) ?? '') : '');
  return {
    databaseSecretArn: await read('databaseSecretArn'),
    kafkaSecretArn: await read('kafkaSecretArn'),
    secretsKmsKeyArn: await read('secretsKmsKeyArn'),
  };
}

/**
 * The consumers' role and the migration's, nothing in one that it does not use.
 * @param {Resolver} [resolver]
 */
export async function roles(resolver) {
  const shape = await stageShape(resolver);
  const parameters = await roleParameters(resolver);
  const databaseSecret = parameters.databaseSecretArn
    ? [policy('database-secret', [{ Effect: 'Allow', Action: ['secretsmanager:GetSecretValue'], Resource: parameters.databaseSecretArn }])]
    : [];
  const secretsKey = parameters.secretsKmsKeyArn ? [secretsKeyPolicy(parameters.secretsKmsKeyArn)] : [];
  const msk =
    shape.kafkaSource === 'msk'
      ? [
          policy('msk-cluster', [
            {
              Effect: 'Allow',
              Action: ['kafka:DescribeCluster', 'kafka:DescribeClusterV2', 'kafka:GetBootstrapBrokers'],
              Resource: '${self:custom.mskClusterArn}',
            },
            {
              Effect: 'Allow',
              Action: ['kafka-cluster:Connect', 'kafka-cluster:DescribeClusterDynamicConfiguration'],
              Resource: '${self:custom.mskClusterArn}',
            },
            { Effect: 'Allow', Action: ['kafka-cluster:DescribeTopic', 'kafka-cluster:ReadData'], Resource: await mskTopicArns(resolver) },
            {
              Effect: 'Allow',
              Action: ['kafka-cluster:DescribeGroup', 'kafka-cluster:AlterGroup'],
              Resource: await mskGroupArns(resolver),
            },
          ]),
        ]
      : [];
  // SASL/SCRAM credentials the self-managed mapping reads.
  const kafkaSecret = parameters.kafkaSecretArn
    ? [policy('kafka-secret', [{ Effect: 'Allow', Action: ['secretsmanager:GetSecretValue'], Resource: parameters.kafkaSecretArn }])]
    : [];
  // Metrics travel in the logs (EMF): no cloudwatch:PutMetricData needed.
  /** @param {unknown} resource */
  const logs = (resource) =>
    policy('logs', [{ Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: resource }]);
  return {
    Resources: {
      ConsumerRole: {
        Type: 'AWS::IAM::Role',
        Properties: {
          AssumeRolePolicyDocument: LAMBDA_TRUST,
          Policies: [logs(await logGroupArns(resolver)), NETWORK_POLICY, ...databaseSecret, ...secretsKey, ...msk, ...kafkaSecret],
        },
      },
      MigrationRole: {
        Type: 'AWS::IAM::Role',
        Properties: {
          AssumeRolePolicyDocument: LAMBDA_TRUST,
          Policies: [logs({ 'Fn::GetAtt': ['MigrateLogGroup', 'Arn'] }), NETWORK_POLICY, ...databaseSecret, ...secretsKey],
        },
      },
    },
  };
}
