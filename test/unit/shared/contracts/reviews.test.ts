import { describe, expect, it } from 'vitest';
import { decodeReview } from '../../../../shared/contracts/reviews.js';
import { recordValue, sampleReview } from '../../../helpers/messages.js';

function decodeWith(changes: Record<string, unknown>): ReturnType<typeof decodeReview> {
  return decodeReview(recordValue({ ...sampleReview(), ...changes }));
}

function detailWith(changes: Record<string, unknown>): string {
  const result = decodeWith(changes);
  return result.ok ? 'ok' : `${result.rejection.reason}: ${result.rejection.detail}`;
}

const EMOJI = '\u{1F326}';
const REQUIRED = ['review_id', 'package_name', 'score', 'thumbs_up_count', 'reviewed_at', 'last_synced_at'];
const OPTIONAL = ['user_name', 'content', 'review_created_version', 'app_version', 'reply_content', 'replied_at'];

describe('reviews contract', () => {
  it('decodes the docs/design.md appendix message, timestamps normalised to UTC with microseconds', () => {
    expect(decodeReview(recordValue(sampleReview()))).toEqual({
      ok: true,
      message: {
        review_id: 'gp:AOqpTOEx3k1s9QeV',
        package_name: 'com.example.weather',
        user_name: 'Sara K.',
        content: 'Accurate forecasts, but the widget stopped updating.',
        score: 3,
        thumbs_up_count: 17,
        review_created_version: '7.4.0',
        app_version: '7.4.1',
        reviewed_at: '2026-11-28T19:44:02.000000+00:00',
        reply_content: null,
        replied_at: null,
        last_synced_at: '2026-11-30T06:02:11.480113+00:00',
      },
    });
  });

  it.each(REQUIRED)('%s missing or null is "required"', (field) => {
    const message = sampleReview();
    delete message[field];
    const missing = decodeReview(recordValue(message));
    expect(missing.ok || missing.rejection).toEqual({ reason: 'invalid_message', detail: `${field}: required` });
    expect(detailWith({ [field]: null })).toBe(`invalid_message: ${field}: required`);
  });

  it.each(OPTIONAL)('%s absent or null is null', (field) => {
    const message = sampleReview();
    delete message[field];
    const absent = decodeReview(recordValue(message));
    expect(absent.ok && absent.message[field as keyof typeof absent.message]).toBeNull();
    const nulled = decodeWith({ [field]: null });
    expect(nulled.ok && nulled.message[field as keyof typeof nulled.message]).toBeNull();
  });

  it('keeps a reply and its time', () => {
    const result = decodeWith({ reply_content: 'Thanks, fixed in 7.4.2', replied_at: '2026-11-29T10:00:00+01:00' });
    expect(result.ok && [result.message.reply_content, result.message.replied_at]).toEqual([
      'Thanks, fixed in 7.4.2',
      '2026-11-29T09:00:00.000000+00:00',
    ]);
  });

  it('score: integer 1..5', () => {
    const rule = 'invalid_message: score: must be an integer between 1 and 5';
    expect(detailWith({ score: 1 })).toBe('ok');
    expect(detailWith({ score: 5 })).toBe('ok');
    for (const bad of [0, 6, -1, 3.5, '3', true, [3], { value: 3 }]) expect(detailWith({ score: bad })).toBe(rule);
  });

  it('thumbs_up_count: integer 0..2147483647', () => {
    const rule = 'invalid_message: thumbs_up_count: must be an integer between 0 and 2147483647';
    expect(detailWith({ thumbs_up_count: 0 })).toBe('ok');
    expect(detailWith({ thumbs_up_count: 2147483647 })).toBe('ok');
    for (const bad of [-1, 2147483648, 2 ** 53, 0.5, '17', false]) expect(detailWith({ thumbs_up_count: bad })).toBe(rule);
  });

  it('review_id: 1..255 characters', () => {
    const rule = 'invalid_message: review_id: must be a string of 1 to 255 characters';
    expect(detailWith({ review_id: 'x' })).toBe('ok');
    expect(detailWith({ review_id: EMOJI.repeat(255) })).toBe('ok');
    expect(detailWith({ review_id: 'x'.repeat(255) })).toBe('ok');
    expect(detailWith({ review_id: '' })).toBe(rule);
    expect(detailWith({ review_id: 'x'.repeat(256) })).toBe(rule);
    expect(detailWith({ review_id: EMOJI.repeat(256) })).toBe(rule);
    expect(detailWith({ review_id: 12345 })).toBe(rule);
  });

  it('user_name <= 255, versions <= 64, content and reply_content unlimited', () => {
    expect(detailWith({ user_name: 'ß'.repeat(255) })).toBe('ok');
    expect(detailWith({ user_name: 'ß'.repeat(256) })).toBe('invalid_message: user_name: must be a string of at most 255 characters');
    for (const field of ['review_created_version', 'app_version']) {
      expect(detailWith({ [field]: EMOJI.repeat(64) })).toBe('ok');
      expect(detailWith({ [field]: EMOJI.repeat(65) })).toBe(`invalid_message: ${field}: must be a string of at most 64 characters`);
    }
    expect(detailWith({ content: `${EMOJI} `.repeat(50_000), reply_content: 'x'.repeat(100_000) })).toBe('ok');
    expect(detailWith({ content: 42 })).toBe('invalid_message: content: must be a string');
  });

  it('NUL and lone surrogates in any text field are violations', () => {
    for (const field of ['review_id', 'user_name', 'content', 'reply_content', 'app_version']) {
      expect(detailWith({ [field]: 'a\u0000b' })).toBe(`invalid_message: ${field}: must not contain a NUL character`);
      expect(detailWith({ [field]: 'a\ud83cb' })).toBe(`invalid_message: ${field}: must not contain a lone surrogate`);
    }
  });

  it('package_name: no whitespace, 1..255', () => {
    const rule = 'invalid_message: package_name: must be a string of 1 to 255 characters without whitespace';
    expect(detailWith({ package_name: 'com.example weather' })).toBe(rule);
    expect(detailWith({ package_name: '' })).toBe(rule);
    expect(detailWith({ package_name: 'a'.repeat(256) })).toBe(rule);
  });

  it.each(['reviewed_at', 'replied_at', 'last_synced_at'])('%s follows the timestamp rules', (field) => {
    expect(detailWith({ [field]: '2026-11-28 19:44:02' })).toBe(
      `invalid_message: ${field}: must be a timestamp YYYY-MM-DDTHH:MM:SS[.ffffff][Z|+HH:MM|-HH:MM]`,
    );
    expect(detailWith({ [field]: '2026-11-28T19:44:02.1234567Z' })).toMatch(/must be a timestamp/);
    expect(detailWith({ [field]: '2026-02-30T19:44:02' })).toBe(`invalid_message: ${field}: must be a real calendar date and time`);
    expect(detailWith({ [field]: 1764359042 })).toMatch(/must be a timestamp/);
  });

  it('ignores unknown extra fields', () => {
    const result = decodeWith({ userImage: 'https://example.com/a.png', sentiment: 0.9, nested: { a: [1, 2.5] } });
    expect(result.ok).toBe(true);
    expect(result.ok && Object.keys(result.message)).toEqual(Object.keys(sampleReview()));
  });

  it("rejects the scraper's legacy camelCase review", () => {
    const legacy = {
      reviewId: 'gp:AOqpTOEx3k1s9QeV',
      userName: 'Sara K.',
      userImage: 'https://play-lh.googleusercontent.com/a',
      content: 'Accurate forecasts, but the widget stopped updating.',
      score: 3,
      thumbsUpCount: 17,
      reviewCreatedVersion: '7.4.0',
      at: '2026-11-28T19:44:02',
      replyContent: null,
      repliedAt: null,
      appVersion: '7.4.1',
    };
    const result = decodeReview(recordValue(legacy));
    expect(result.ok || result.rejection).toEqual({
      reason: 'invalid_message',
      detail: 'review_id: required (+4 more)',
      violations: {
        total: 5,
        kept: ['review_id', 'package_name', 'thumbs_up_count', 'reviewed_at', 'last_synced_at'].map((field) => `${field}: required`),
      },
    });
  });
});
