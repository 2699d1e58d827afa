import { describe, expect, it } from 'vitest';
import { existingTopicId, portTopicId } from '../../../../kafka/platformatic/topic-ids.js';

// The expected ids are Python's base64.urlsafe_b64encode(uuid.UUID(...).bytes) without padding,
// the form Kafka's tools print and kafkajs' reader (kafka/kafkajs/topic-ids.ts) returns.

function thrown(work: () => unknown): unknown {
  try {
    return work();
  } catch (error) {
    return error;
  }
}

describe('a platformatic topic id in the port’s form', () => {
  it('writes the UUID’s 16 bytes in base64url, as the kafkajs reader does', () => {
    // Act / Assess
    expect(portTopicId('10fd6e13-f08f-4f2d-954a-8d07cb0b013f')).toBe('EP1uE_CPTy2VSo0HywsBPw');
    expect(portTopicId('FBFF7EFE-0000-4000-8000-00000000FFFF')).toBe('-_9-_gAAQACAAAAAAAD__w');
  });

  it('gives none for the all-zero id and for a topic name the client put in the id’s place', () => {
    // Act / Assess
    expect(portTopicId('00000000-0000-0000-0000-000000000000')).toBeUndefined();
    expect(portTopicId('reviews')).toBeUndefined();
  });

  it('refuses an existing topic without an id: lasting when the broker has no ids at all, not when the id is all zeros', () => {
    // Act
    const zero = thrown(() => existingTopicId('reviews', '00000000-0000-0000-0000-000000000000'));
    const named = thrown(() => existingTopicId('reviews', 'reviews'));

    // Assess
    expect(zero).toMatchObject({ name: 'TopicIdError', lasting: false });
    expect(named).toMatchObject({ name: 'TopicIdError', lasting: true });
    expect(existingTopicId('reviews', '10fd6e13-f08f-4f2d-954a-8d07cb0b013f')).toBe('EP1uE_CPTy2VSo0HywsBPw');
  });
});
