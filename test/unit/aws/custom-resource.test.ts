/** The migration custom resource's protocol (aws/custom-resource.ts). No services. */
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { customResourceResponse, isCustomResourceEvent, physicalResourceIdOf } from '../../../aws/custom-resource.js';
const createEvent: CloudFormationCustomResourceEvent = {
  RequestType: 'Create',
  ServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:storage-consumer-prod-migrate',
  ResponseURL: 'https://cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com/x',
  StackId: 'arn:aws:cloudformation:eu-west-1:123456789012:stack/storage-consumer-prod/0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9',
  RequestId: 'd1e2f3a4',
  LogicalResourceId: 'SchemaMigration',
  ResourceType: 'Custom::SchemaMigration',
  ResourceProperties: {
    ServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:storage-consumer-prod-migrate',
    MigrationsHash: 'abc',
  },
};

describe('custom resource protocol', () => {
  it('tells a CloudFormation request from a direct invoke', () => {
    expect(isCustomResourceEvent(createEvent)).toBe(true);
    expect(isCustomResourceEvent({})).toBe(false);
    expect(isCustomResourceEvent({ ...createEvent, RequestType: 'Migrate' })).toBe(false);
    expect(isCustomResourceEvent({ ...createEvent, ResponseURL: undefined })).toBe(false);
    expect(isCustomResourceEvent(null)).toBe(false);
  });

  it('derives the physical id from the stack on Create and keeps the one it was given afterwards', () => {
    expect(physicalResourceIdOf(createEvent)).toBe('storage-consumer-prod-SchemaMigration');
    expect(physicalResourceIdOf({ ...createEvent, RequestType: 'Delete', PhysicalResourceId: 'kept-as-is' })).toBe('kept-as-is');
  });

  it("cuts a long reason so the response stays under CloudFormation's 4 KB, keeping where the logs are", () => {
    const logs = { logGroupName: '/aws/lambda/storage-consumer-prod-migrate-0b1c2d3e', logStreamName: '2026/11/30/[$LATEST]abc' };
    const response = customResourceResponse(createEvent, { status: 'FAILED', reason: 'x'.repeat(10_000) }, logs);
    expect(response.Reason.length).toBeLessThanOrEqual(1500);
    expect(response.Reason).toMatch(
      /x… \(log group \/aws\/lambda\/storage-consumer-prod-migrate-0b1c2d3e, stream 2026\/11\/30\/\[\$LATEST\]abc\)$/,
    );
    expect(customResourceResponse(createEvent, { status: 'FAILED', reason: 'short' }, logs).Reason).toBe(
      'short (log group /aws/lambda/storage-consumer-prod-migrate-0b1c2d3e, stream 2026/11/30/[$LATEST]abc)',
    );
    expect(Buffer.byteLength(JSON.stringify(response))).toBeLessThan(4096);
    expect(response).toMatchObject({ Status: 'FAILED', NoEcho: false, RequestId: 'd1e2f3a4', LogicalResourceId: 'SchemaMigration' });
  });
});
