/**
 * The Metadata request and response that carry topic ids (kafka/kafkajs/topic-ids.ts), against
 * bytes written out by hand from Kafka's protocol description (Metadata v10 to v12: flexible
 * versions, compact strings and arrays, tagged fields), and the group's start offsets over a
 * fake admin. The real broker's side is in test/integration/host-recreated-topic.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { decodeTopicIdResponse, encodeTopicIdRequest, TopicIdError } from '../../../../kafka/kafkajs/topic-ids.js';
import { groupStartOffsets } from '../../../../kafka/lag.js';

const hex = (text: string) => Buffer.from(text.replace(/\s+/g, ''), 'hex');

/** The topic id 00 01 02 ... 0f, and how Kafka prints it (URL-safe base64, no padding). */
const ID_BYTES = '000102030405060708090a0b0c0d0e0f';
const ID_TEXT = 'AAECAwQFBgcICQoLDA0ODw';

/** A v12 response: one broker, then the topics given (each already encoded). */
function response(topics: string[], topicCount = topics.length): Buffer {
  return hex(
    [
      '00', // response header v1: no tagged fields
      '00000000', // throttle_time_ms
      '02', // brokers: 1 (compact array, n + 1)
      '00000001', // node_id 1
      '0a 6c6f63616c686f7374', // host "localhost" (9 + 1)
      '00002384', // port 9092
      '00', // rack null
      '00', // broker tagged fields
      '05 61626364', // cluster_id "abcd"
      '00000001', // controller_id
      (topicCount + 1).toString(16).padStart(2, '0'), // topics
      ...topics,
    ].join(''),
  );
}

/** An existing topic "ab" with partitions 1 and 0 (in that order) and one tagged field of its own. */
const TOPIC_AB = [
  '0000', // error_code
  '03 6162', // name "ab"
  ID_BYTES, // topic_id
  '00', // is_internal
  '03', // partitions: 2
  '0000 00000001 00000001 00000000 02 00000001 02 00000001 01 00', // partition 1: leader 1, epoch 0, replicas [1], isr [1], offline [], no tags
  '0000 00000000 00000001 00000003 02 00000001 02 00000001 01 00', // partition 0
  '80000000', // topic_authorized_operations (INT32_MIN: not asked)
  '01 05 02 ffff', // tagged fields: 1 field, tag 5, 2 bytes
].join('');

/** A topic "gone" the cluster does not know: error 3, the zero id, no partitions. */
const TOPIC_GONE = ['0003', '05 676f6e65', '00'.repeat(16), '00', '01', '80000000', '00'].join('');

describe('the Metadata request for topic ids', () => {
  it('is the flexible v11/v12 body: empty header tags, topics by name with the zero id, no auto-creation, no authorized operations', () => {
    // Act
    const body = encodeTopicIdRequest(12, ['ab', 'gone']);

    // Assess
    expect(body.toString('hex')).toBe(
      [
        '00', // request header v2's tagged fields
        '03', // topics: 2
        '00'.repeat(16) + '03 6162 00', // zero topic_id, name "ab", no tags
        '00'.repeat(16) + '05 676f6e65 00', // zero topic_id, name "gone", no tags
        '00', // allow_auto_topic_creation false
        '00', // include_topic_authorized_operations false
        '00', // no tagged fields
      ]
        .join('')
        .replace(/\s+/g, ''),
    );
    expect(encodeTopicIdRequest(11, ['ab'])).toEqual(encodeTopicIdRequest(12, ['ab']));
  });

  it('carries v10 its include_cluster_authorized_operations flag', () => {
    expect(encodeTopicIdRequest(10, []).toString('hex')).toBe('00' + '01' + '00' + '00' + '00' + '00');
  });

  it('refuses a version without topic ids or one it does not know', () => {
    expect(() => encodeTopicIdRequest(9, ['ab'])).toThrow(TopicIdError);
    expect(() => encodeTopicIdRequest(13, ['ab'])).toThrow('Metadata v13 is not one this client encodes (v10 to v12)');
  });
});

describe('the Metadata response read for topic ids', () => {
  it('gives each topic its id as Kafka prints it and its partitions in order, skipping tagged fields', () => {
    // Act
    const topics = decodeTopicIdResponse(12, response([TOPIC_AB, TOPIC_GONE]));

    // Assess
    expect(topics).toEqual([
      { topic: 'ab', id: ID_TEXT, partitions: [0, 1] },
      { topic: 'gone', id: undefined, partitions: [] },
    ]);
  });

  it('throws for a topic this client may not describe, rather than say it does not exist', () => {
    const denied = ['001d', '03 6162', '00'.repeat(16), '00', '01', '80000000', '00'].join('');
    expect(() => decodeTopicIdResponse(12, response([denied]))).toThrow('the cluster does not describe topic ab: error code 29');
  });

  it('throws on a response cut short, naming where', () => {
    const whole = response([TOPIC_AB]);
    expect(() => decodeTopicIdResponse(12, whole.subarray(0, whole.length - 3))).toThrow(TopicIdError);
    expect(() => decodeTopicIdResponse(12, response([], 1))).toThrow(/Metadata response ends at byte \d+/);
  });
});

describe('where a group reads a topic', () => {
  it('is its committed offset, or with none the partition start', async () => {
    // Prepare
    const admin = {
      committedOffsets: () => Promise.resolve(new Map([[1, 17n]])),
      partitionOffsets: () =>
        Promise.resolve([
          { partition: 0, high: '40', low: '5' },
          { partition: 1, high: '40', low: '0' },
        ]),
    };

    // Act
    const starts = await groupStartOffsets(admin, 'g', 't');

    // Assess
    expect([...starts].sort()).toEqual([
      [0, '5'],
      [1, '17'],
    ]);
  });
});
