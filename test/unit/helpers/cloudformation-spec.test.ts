/**
 * The offline CloudFormation check (test/helpers/cloudformation-spec.ts) on small templates: each
 * rule both ways. The packaged templates of every stage are checked in
 * test/integration/deploy-package.test.ts.
 */
import type { SpecDatabase } from '@aws-cdk/service-spec-types';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CloudFormationTemplate } from '../../helpers/cloudformation-spec.js';
import { loadSpecification, validateTemplate } from '../../helpers/cloudformation-spec.js';

let spec: SpecDatabase;
beforeAll(async () => {
  spec = await loadSpecification();
}, 60_000);

/** A valid base: a function, a Kafka mapping with the newer properties, a log group, a custom resource. */
function template(): CloudFormationTemplate & { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> } {
  return {
    Parameters: { Stage: { Type: 'String' } },
    Conditions: { UsesMsk: { 'Fn::Equals': ['a', 'b'] } },
    Resources: {
      Logs: {
        Type: 'AWS::Logs::LogGroup',
        Properties: { LogGroupName: { 'Fn::Sub': '/aws/lambda/${AWS::StackName}-${Stage}' }, RetentionInDays: 30 },
      },
      Role: {
        Type: 'AWS::IAM::Role',
        Properties: {
          AssumeRolePolicyDocument: { Version: '2012-10-17', Statement: [] },
          Policies: [
            {
              PolicyName: 'logs',
              PolicyDocument: {
                Statement: [{ Effect: 'Allow', Action: 'logs:PutLogEvents', Resource: { 'Fn::GetAtt': ['Logs', 'Arn'] } }],
              },
            },
          ],
        },
      },
      Fn: {
        Type: 'AWS::Lambda::Function',
        Properties: {
          Code: { ZipFile: 'exports.handler = async () => {}' },
          Role: { 'Fn::GetAtt': ['Role', 'Arn'] },
          Runtime: 'nodejs24.x',
          Handler: 'index.handler',
          Architectures: ['arm64'],
          Timeout: 120,
          MemorySize: '512',
        },
      },
      Mapping: {
        Type: 'AWS::Lambda::EventSourceMapping',
        Properties: {
          FunctionName: { Ref: 'Fn' },
          Topics: ['reviews'],
          EventSourceArn: { 'Fn::If': ['UsesMsk', 'arn:aws:kafka:eu-west-1:123456789012:cluster/x/y', { Ref: 'AWS::NoValue' }] },
          StartingPosition: 'TRIM_HORIZON',
          ProvisionedPollerConfig: { MinimumPollers: 1, MaximumPollers: '3' },
          FunctionResponseTypes: ['ReportBatchItemFailures'],
          MaximumRetryAttempts: -1,
          MaximumRecordAgeInSeconds: -1,
          BisectBatchOnFunctionError: false,
          MetricsConfig: { Metrics: ['EventCount', 'ErrorCount', 'KafkaMetrics'] },
        },
      },
      Migration: { Type: 'Custom::SchemaMigration', Properties: { ServiceToken: { 'Fn::GetAtt': ['Fn', 'Arn'] }, Hash: 'x' } },
    },
  };
}

const check = (t: CloudFormationTemplate) => validateTemplate(t, spec, 'test');

/** Exactly these problems, in any order: each pattern matches one line, and no line is left. */
function expectProblems(problems: string[], patterns: RegExp[]): void {
  expect(problems, problems.join('\n')).toHaveLength(patterns.length);
  for (const pattern of patterns)
    expect(
      problems.filter((line) => pattern.test(line)),
      `${pattern} in\n${problems.join('\n')}`,
    ).toHaveLength(1);
}

describe('validateTemplate against @aws-cdk/aws-service-spec', () => {
  it("accepts a valid template, the Kafka mapping's provisioned-mode and error-handling properties and intrinsics included", () => {
    expect(check(template())).toEqual([]);
  });

  it('names the stage, resource and property of a misspelled property name', () => {
    const t = template();
    t.Resources.Mapping!.Properties.MaximumRetryAttempt = t.Resources.Mapping!.Properties.MaximumRetryAttempts;
    delete t.Resources.Mapping!.Properties.MaximumRetryAttempts;
    const problems = check(t);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^stage test, resource Mapping \(AWS::Lambda::EventSourceMapping\), property MaximumRetryAttempt: unknown property/,
    );
  });

  it('finds a misspelled property of a nested property type', () => {
    const t = template();
    t.Resources.Mapping!.Properties.ProvisionedPollerConfig = { MinimumPoller: 1, MaximumPollers: 3 };
    expect(check(t)).toEqual([
      expect.stringMatching(
        /resource Mapping .*property ProvisionedPollerConfig\.MinimumPoller: unknown property of ProvisionedPollerConfig/,
      ),
    ]);
  });

  it('finds an unknown resource type', () => {
    const t = template();
    t.Resources.Logs!.Type = 'AWS::Logs::LogGroups';
    expect(check(t)).toEqual([
      'stage test, resource Logs (AWS::Logs::LogGroups): resource type AWS::Logs::LogGroups does not exist in the CloudFormation specification',
    ]);
  });

  it('finds a missing required property, also inside a nested type', () => {
    const t = template();
    delete t.Resources.Fn!.Properties.Code;
    t.Resources.Role!.Properties.Policies = [{ PolicyDocument: {} }];
    expectProblems(check(t), [
      /resource Fn \(AWS::Lambda::Function\), property Code: required property is missing/,
      /resource Role \(AWS::IAM::Role\), property Policies\[0\]\.PolicyName: required property of Policy is missing/,
    ]);
  });

  it('finds a literal of the wrong primitive type or outside the allowed values', () => {
    const t = template();
    t.Resources.Fn!.Properties.Timeout = 'two minutes';
    t.Resources.Mapping!.Properties.BisectBatchOnFunctionError = 'no';
    t.Resources.Mapping!.Properties.Topics = 'reviews';
    t.Resources.Mapping!.Properties.MetricsConfig = { Metrics: ['EventCount', 'KafkaMetric'] };
    expectProblems(check(t), [
      /property BisectBatchOnFunctionError: expects a boolean, got "no"/,
      /property MetricsConfig\.Metrics\[1\]: "KafkaMetric" is not one of the allowed values/,
      /property Topics: expects a list, got "reviews"/,
      /resource Fn .*property Timeout: expects an integer, got "two minutes"/,
    ]);
  });

  it('checks both branches of Fn::If, and the references inside values', () => {
    const t = template();
    t.Resources.Mapping!.Properties.StartingPosition = { 'Fn::If': ['UsesMsk', 'TRIM_HORIZON', 'OLDEST'] };
    t.Resources.Mapping!.Properties.FunctionName = { Ref: 'Function' };
    t.Resources.Logs!.Properties.LogGroupName = { 'Fn::Sub': '/aws/lambda/${Missing}' };
    expectProblems(check(t), [
      /resource Logs .*property Properties\.LogGroupName\.Fn::Sub: \$\{Missing\} names no parameter, resource or variable/,
      /resource Mapping .*property Properties\.FunctionName: Ref to Function, which is neither a parameter nor a resource/,
    ]);
    // StartingPosition is a free string in the registry schema: both branches are strings.
    t.Resources.Mapping!.Properties.StartingPosition = { 'Fn::If': ['UsesMsk', 'TRIM_HORIZON', ['LATEST']] };
    expect(check(t)).toContainEqual(expect.stringMatching(/property StartingPosition\.Fn::If\[2\]: expects a string, got a list/));
  });

  it('accepts Fn::GetAtt of an attribute the target type has, refuses one it lacks', () => {
    const t = template();
    t.Resources.Role!.Properties.Policies = [
      { PolicyName: 'logs', PolicyDocument: { Statement: [{ Resource: { 'Fn::GetAtt': ['Logs', 'Arm'] } }] } },
    ];
    expect(check(t)).toEqual([
      expect.stringMatching(/resource Role .*Fn::GetAtt Logs\.Arm: AWS::Logs::LogGroup has no attribute Arm \(it has Arn\)/),
    ]);
  });

  it('refuses a function that cannot stand for a value, and a DependsOn or Condition naming nothing', () => {
    const t = template();
    t.Resources.Fn!.Properties.Handler = { 'Fn::Equals': ['a', 'b'] };
    (t.Resources.Fn as Record<string, unknown>).DependsOn = ['Nothing'];
    (t.Resources.Logs as Record<string, unknown>).Condition = 'Never';
    expectProblems(check(t), [
      /resource Fn .*: DependsOn "Nothing"/,
      /resource Fn .*property Handler: Fn::Equals cannot stand for a value/,
      /resource Logs .*: Condition "Never" is not declared/,
    ]);
  });
});
