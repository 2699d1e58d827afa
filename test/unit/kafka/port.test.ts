import { describe, expect, it } from 'vitest';
import { isUnknownTopic, UnknownTopicError } from '../../../kafka/port.js';

describe('a missing topic, as the port tells it', () => {
  it('is found anywhere in the cause chain, as the port’s error or as Kafka’s own code', () => {
    // Prepare: kafkajs wraps the broker's answer in retrier errors
    const broker = Object.assign(new Error('This server does not host this topic-partition'), { type: 'UNKNOWN_TOPIC_OR_PARTITION' });
    const wrapped = new Error('retries exhausted', { cause: new Error('fetch failed', { cause: broker }) });

    // Act / Assess
    expect(isUnknownTopic(wrapped)).toBe(true);
    expect(isUnknownTopic(new Error('outer', { cause: new UnknownTopicError('t') }))).toBe(true);
    expect(isUnknownTopic(Object.assign(new Error('platformatic'), { apiCode: 3 }))).toBe(true);
    expect(isUnknownTopic(new Error('Connection error: connect ECONNREFUSED'))).toBe(false);
  });
});
