import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decimalPlaces,
  formatPath,
  hasFractionOrExponent,
  MAX_DETAIL_LENGTH,
  sanitizeDetail,
} from '../../../../shared/contracts/decode.js';
import { decodeAppStats } from '../../../../shared/contracts/app-stats.js';
import { decodeNetworkMetrics } from '../../../../shared/contracts/network-metrics.js';
import { decodeReview } from '../../../../shared/contracts/reviews.js';
import type { DecodeResult } from '../../../../shared/contracts/decoder.js';
import { recordValue, sampleAppStats, sampleReview } from '../../../helpers/messages.js';

const decoders = [
  ['app-stats', decodeAppStats],
  ['reviews', decodeReview],
  ['network-metrics', decodeNetworkMetrics],
] as const;

/** `<reason>: <detail>`, or `ok`. */
function outcome(result: DecodeResult<unknown>): string {
  return result.ok ? 'ok' : `${result.rejection.reason}: ${result.rejection.detail}`;
}

/** The review's JSON text with `"score":3` replaced by `"score":<numberText>` (and the like). */
function reviewWith(field: string, jsonText: string): Buffer {
  const base = JSON.stringify(sampleReview());
  const pattern = new RegExp(`"${field}":(?:"[^"]*"|[^,}]*)`);
  return Buffer.from(base.replace(pattern, `"${field}":${jsonText}`), 'utf8');
}

describe.each(decoders)('the generic path of %s', (_name, decode) => {
  it('a null or zero-length value is empty_message', () => {
    expect(outcome(decode(null))).toBe('empty_message: value is null');
    expect(outcome(decode(Buffer.alloc(0)))).toBe('empty_message: value is empty (0 bytes)');
  });

  it('invalid UTF-8 is invalid_encoding, naming the first bad byte', () => {
    expect(outcome(decode(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d])))).toBe(
      'invalid_encoding: not valid UTF-8: first invalid byte at offset 2',
    );
    // An encoded surrogate (CESU-8), an overlong '/', a truncated 3-byte sequence at the end.
    expect(decode(Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22])).ok).toBe(false);
    expect(outcome(decode(Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22])))).toMatch(/^invalid_encoding: .* offset [12]$/);
    expect(outcome(decode(Buffer.from([0x7b, 0xc0, 0xaf, 0x7d])))).toMatch(/^invalid_encoding: .* offset 1$/);
    expect(outcome(decode(Buffer.from([0x7b, 0x7d, 0xe2, 0x82])))).toBe(
      'invalid_encoding: not valid UTF-8: first invalid byte at offset 2',
    );
  });

  it('text that is not JSON is invalid_json', () => {
    for (const text of ['{', '{"a":1,}', "{'a':1}", 'NaN', '{"a": 1} x', '\ufeff{}', ' ']) {
      expect(outcome(decode(Buffer.from(text, 'utf8')))).toMatch(/^invalid_json: not valid JSON: /);
    }
  });

  it.each([
    ['[]', 'an array'],
    ['[{"review_id": "x"}]', 'an array'],
    ['"text"', 'a string'],
    ['17', 'a number'],
    ['true', 'a boolean'],
    ['null', 'null'],
  ])('JSON that is not an object (%s) is invalid_message', (text, kind) => {
    expect(outcome(decode(Buffer.from(text, 'utf8')))).toBe(`invalid_message: message: must be a JSON object, not ${kind}`);
  });

  it('a NUL or lone surrogate anywhere, even in ignored fields and keys, is invalid_message', () => {
    const cases: Array<[string, string]> = [
      ['{"extra":"a\\u0000b"}', 'extra: must not contain a NUL character'],
      ['{"extra":"\\ud800"}', 'extra: must not contain a lone surrogate'],
      ['{"extra":"\\udfff x"}', 'extra: must not contain a lone surrogate'],
      ['{"extra":{"deep":["ok","\\u0000"]}}', 'extra.deep[1]: must not contain a NUL character'],
      ['{"ex\\u0000tra":1}', '["ex\\u0000tra"]: field name must not contain a NUL character'],
      ['{"x":{"\\ud800":1}}', 'x["\\ud800"]: field name must not contain a lone surrogate'],
    ];
    for (const [text, detail] of cases) {
      expect(outcome(decode(Buffer.from(text, 'utf8')))).toBe(`invalid_message: ${detail}`);
    }
  });

  it('a surrogate pair written as escapes is one character, not a lone surrogate', () => {
    const result = decodeReview(reviewWith('content', '"sun \\ud83c\\udf26"'));
    expect(result.ok && result.message.content).toBe('sun \u{1F326}');
  });

  it('never throws on deep nesting', () => {
    const deep = `{"extra":${'['.repeat(100_000)}1.5${']'.repeat(100_000)}}`;
    expect(() => decode(Buffer.from(deep, 'utf8'))).not.toThrow();
    expect(decode(Buffer.from(deep, 'utf8')).ok).toBe(false);
  });
});

describe('contract violations', () => {
  it('the detail names the field path and the rule, and how many more problems there are', () => {
    expect(outcome(decodeReview(recordValue({ ...sampleReview(), score: 7 })))).toBe(
      'invalid_message: score: must be an integer between 1 and 5',
    );
    expect(outcome(decodeReview(recordValue({ ...sampleReview(), score: 7, thumbs_up_count: -1 })))).toBe(
      'invalid_message: score: must be an integer between 1 and 5 (+1 more)',
    );
    const { review_id: _dropped, ...withoutId } = sampleReview();
    expect(outcome(decodeReview(recordValue(withoutId)))).toBe('invalid_message: review_id: required');
    expect(outcome(decodeAppStats(recordValue({ ...sampleAppStats(), histogram: [1, 2, 3, 4, -5] })))).toBe(
      `invalid_message: histogram[4]: must be an integer between 0 and ${Number.MAX_SAFE_INTEGER}`,
    );
  });

  it('never echoes a long value (no review texts) and never contains a NUL', () => {
    const secret = 'my private review text '.repeat(500);
    const result = decodeReview(recordValue({ ...sampleReview(), content: 5, user_name: secret }));
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.rejection.detail).not.toContain('private');
      expect(result.rejection.detail.length).toBeLessThanOrEqual(MAX_DETAIL_LENGTH);
    }
    const invalid = decodeReview(Buffer.from(`{"content": "${secret}", x}`, 'utf8'));
    expect(invalid.ok || invalid.rejection.detail.length <= MAX_DETAIL_LENGTH).toBe(true);
    const raw = decodeReview(Buffer.from('{\u0000}', 'utf8'));
    expect(raw.ok || raw.rejection.detail.includes('\u0000')).toBe(false);
  });

  it('a BIGINT beyond 2^53-1 is rejected, never rounded', () => {
    for (const big of ['9007199254740992', '9007199254740993', '18446744073709551615', '1e20', '1e999']) {
      const value = Buffer.from(JSON.stringify(sampleAppStats()).replace('"ratings_count":182734', `"ratings_count":${big}`));
      expect(outcome(decodeAppStats(value))).toBe(
        `invalid_message: ratings_count: must be an integer between 0 and ${Number.MAX_SAFE_INTEGER}`,
      );
    }
    const limit = Buffer.from(JSON.stringify(sampleAppStats()).replace('"ratings_count":182734', '"ratings_count":9007199254740991'));
    const result = decodeAppStats(limit);
    expect(result.ok && result.message.ratings_count).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('an integer written with a fraction or exponent counts only when it denotes that integer', () => {
    for (const [text, expected] of [
      ['17.0', 17],
      ['17.000', 17],
      ['1.7e1', 17],
      ['1700e-2', 17],
      ['17E0', 17],
    ] as const) {
      const result = decodeReview(reviewWith('thumbs_up_count', text));
      expect(result.ok && result.message.thumbs_up_count).toBe(expected);
    }
    for (const text of ['17.0000000000000001', '16.99999999999999999', '1.7', '17.5', '1e-400']) {
      expect(outcome(decodeReview(reviewWith('thumbs_up_count', text)))).toBe(
        'invalid_message: thumbs_up_count: must be an integer between 0 and 2147483647',
      );
    }
  });

  it('a price written with more than 2 decimals is rejected even when the double looks like 2', () => {
    const appWithPrice = (text: string) => Buffer.from(JSON.stringify(sampleAppStats()).replace('"price":0', `"price":${text}`), 'utf8');
    const accepted = decodeAppStats(appWithPrice('4.990'));
    expect(accepted.ok && accepted.message.price).toBe('4.99');
    const exponent = decodeAppStats(appWithPrice('499e-2'));
    expect(exponent.ok && exponent.message.price).toBe('4.99');
    expect(outcome(decodeAppStats(appWithPrice('4.990000000000000001')))).toBe(
      'invalid_message: price: must be a number between 0 and 9999999999.99 with at most 2 decimal places',
    );
  });

  it('a plain number whose text has more digits than a double holds takes the parsed value', () => {
    const value = Buffer.from(JSON.stringify(sampleAppStats()).replace('"score":4.31', '"score":4.3100000000000000000001'));
    const result = decodeAppStats(value);
    expect(result.ok && result.message.score).toBe(4.31);
  });
});

describe('helpers', () => {
  it('decimalPlaces reads JSON and String(number) texts', () => {
    expect(decimalPlaces('0')).toBe(0);
    expect(decimalPlaces('-0.0')).toBe(0);
    expect(decimalPlaces('4.99')).toBe(2);
    expect(decimalPlaces('4.990')).toBe(2);
    expect(decimalPlaces('1e2')).toBe(0);
    expect(decimalPlaces('1.5e1')).toBe(0);
    expect(decimalPlaces('1.25e1')).toBe(1);
    expect(decimalPlaces('100e-2')).toBe(0);
    expect(decimalPlaces('1e-7')).toBe(7);
    expect(decimalPlaces('1.5e+21')).toBe(0);
    expect(decimalPlaces('0.000e5')).toBe(0);
  });

  it('hasFractionOrExponent finds every number with a fraction or exponent inside an object or array, never one in a string', () => {
    // The reference: JSON.parse's own account of every number token below the root.
    const reference = (text: string): boolean => {
      const found: boolean[] = [];
      JSON.parse(text, (_key, value: unknown, context?: { source?: string }) => {
        found.push(typeof value === 'number' && /[.eE]/.test(context?.source ?? ''));
        return value;
      });
      found.pop(); // the root, whose number the contracts refuse as "not a JSON object" either way
      return found.includes(true);
    };
    const key = fc.string({ unit: fc.constantFrom('a', '"', '\\', '1', '.', 'e', ':', ',', '[', '{', '\u00e9', '\ud83d\ude00') });
    const number = fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constantFrom(1e21, 5e-7, -0.5, 0));
    const value = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small' }, number, key, fc.boolean(), fc.constant(null), tie('array'), tie('object')),
      array: fc.array(tie('node'), { maxLength: 4 }),
      object: fc.dictionary(key, tie('node'), { maxKeys: 4 }),
    })).node;
    fc.assert(
      fc.property(value, fc.constantFrom(undefined, 1, '\t'), (generated, indent) => {
        const text = JSON.stringify(generated, null, indent);
        expect(hasFractionOrExponent(text)).toBe(reference(text));
      }),
      { numRuns: 3000 },
    );
    // Numbers as JSON writes them and JavaScript does not, escapes before quotes, the root.
    for (const text of ['{"a":1E5}', '[-0.0e-0]', '{"a" : 2.50 }', '[1,true,false,null,"x"]', '{"t":"06:02:11.48Z","n":1}']) {
      expect(hasFractionOrExponent(text)).toBe(reference(text));
    }
    expect(hasFractionOrExponent('{"a\\\\":"1.5\\"2.5","b":[3]}')).toBe(false);
    expect(hasFractionOrExponent('{"a\\\\":"x","b":[3.5]}')).toBe(true);
    expect(hasFractionOrExponent('1.5')).toBe(false);
  }, 30_000);

  it('formatPath quotes names that are not plain identifiers', () => {
    expect(formatPath(['score'])).toBe('score');
    expect(formatPath(['histogram', 2])).toBe('histogram[2]');
    expect(formatPath(['protocols', 'tls'])).toBe('protocols.tls');
    expect(formatPath(['protocols', 'odd name'])).toBe('protocols["odd name"]');
    expect(formatPath(['protocols', 'x'.repeat(100)])).toBe(`protocols["${'x'.repeat(40)}"]`);
    expect(formatPath([])).toBe('message');
  });

  it('sanitizeDetail escapes control characters, mends lone surrogates and caps the length', () => {
    expect(sanitizeDetail('a\u0000b\nc')).toBe('a\\u0000b\\u000ac');
    expect(sanitizeDetail('a\ud800')).toBe('a\ufffd');
    expect(sanitizeDetail('x'.repeat(1000)).length).toBe(MAX_DETAIL_LENGTH);
  });
});
