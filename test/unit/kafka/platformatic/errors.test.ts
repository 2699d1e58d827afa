import { MultipleErrors, ResponseError, UserError } from '@platformatic/kafka';
import { describe, expect, it } from 'vitest';
import { isMissingTopic, protocolErrorIds } from '../../../../kafka/platformatic/errors.js';

// Errors as @platformatic/kafka builds them from a broker's answer: a ResponseError per response
// holding a ProtocolError per error code, wrapped in a MultipleErrors per operation or retry.

/** The client's error for a response whose listed paths carry Kafka error codes (OffsetCommit is API 8). */
const response = (codes: Record<string, number>) =>
  new ResponseError(8, 9, Object.fromEntries(Object.entries(codes).map(([path, code]) => [path, [code, null]])), {});

describe('reading @platformatic/kafka errors', () => {
  it('finds Kafka’s error names however deep the client wrapped them', () => {
    // Prepare: a commit refused for an unknown member (25), retried once after a coordinator move (16)
    const error = new MultipleErrors('Altering consumer group offsets failed.', [
      new MultipleErrors('alterConsumerGroupOffsets failed 2 times.', [response({ '/topics/0': 16 }), response({ '/topics/0': 25 })]),
    ]);

    // Act
    const ids = protocolErrorIds(error);

    // Assess
    expect([...ids].sort()).toEqual(['NOT_COORDINATOR', 'UNKNOWN_MEMBER_ID']);
    expect(protocolErrorIds(new Error('plain')).size).toBe(0);
  });

  it('tells a missing topic by Kafka’s code or by the client’s own refusal of its metadata, and nothing else', () => {
    // Act / Assess
    expect(isMissingTopic(new MultipleErrors('Listing offsets failed.', [response({ '/topics/0/partitions/0': 3 })]))).toBe(true);
    expect(isMissingTopic(new UserError('Unknown topic reviews.'))).toBe(true);
    expect(isMissingTopic(new MultipleErrors('metadata failed 4 times.', [new UserError('Unknown partition.')]))).toBe(false);
    expect(isMissingTopic(response({ '/topics/0': 25 }))).toBe(false);
  });
});
