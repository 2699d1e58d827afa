import { describe, expect, it } from 'vitest';
import { codePointsAtMost, currency, packageName, text, uuid } from '../../../../shared/contracts/text.js';
import { schemaOutcome as outcome } from '../../../helpers/schemas.js';

const EMOJI = '\u{1F326}'; // 1 code point, 2 UTF-16 units
describe('strings', () => {
  it('counts code points, not UTF-16 units', () => {
    const version = text({ max: 64 });
    expect(outcome(version, EMOJI.repeat(64))).toBe(`ok "${EMOJI.repeat(64)}"`);
    expect(outcome(version, EMOJI.repeat(65))).toBe(': must be a string of at most 64 characters');
    expect(outcome(version, 'é'.repeat(64))).toBe(`ok "${'é'.repeat(64)}"`);
    expect(outcome(version, 'x'.repeat(65))).toBe(': must be a string of at most 64 characters');
    expect(outcome(version, `${'x'.repeat(63)}${EMOJI}`)).toBe(`ok "${'x'.repeat(63)}${EMOJI}"`);
    expect(outcome(version, `${'x'.repeat(64)}${EMOJI}`)).toBe(': must be a string of at most 64 characters');
    expect(outcome(version, '')).toBe('ok ""');
  });

  it('codePointsAtMost is exact around the bound', () => {
    expect(codePointsAtMost('', 0)).toBe(true);
    expect(codePointsAtMost('a', 0)).toBe(false);
    expect(codePointsAtMost(EMOJI, 1)).toBe(true);
    expect(codePointsAtMost(`${EMOJI}a`, 1)).toBe(false);
    expect(codePointsAtMost(`a${EMOJI}${EMOJI}`, 3)).toBe(true);
    expect(codePointsAtMost(`a${EMOJI}${EMOJI}`, 2)).toBe(false);
    expect(codePointsAtMost(EMOJI.repeat(255), 255)).toBe(true);
    expect(codePointsAtMost(EMOJI.repeat(256), 255)).toBe(false);
  });

  it('1..255 for review_id-like fields', () => {
    const id = text({ min: 1, max: 255 });
    expect(outcome(id, '')).toBe(': must be a string of 1 to 255 characters');
    expect(outcome(id, EMOJI.repeat(255)).startsWith('ok')).toBe(true);
    expect(outcome(id, EMOJI.repeat(256))).toBe(': must be a string of 1 to 255 characters');
  });

  it('rejects NUL and lone surrogates, also in TEXT fields without a limit', () => {
    for (const schema of [text(), text({ max: 64 }), packageName]) {
      expect(outcome(schema, 'a\u0000b')).toBe(': must not contain a NUL character');
      expect(outcome(schema, 'a\ud800b')).toBe(': must not contain a lone surrogate');
      expect(outcome(schema, 'a\udc00')).toBe(': must not contain a lone surrogate');
      expect(outcome(schema, '\ud83c')).toBe(': must not contain a lone surrogate');
    }
    expect(outcome(text(), 'x'.repeat(100_000)).startsWith('ok')).toBe(true);
    expect(outcome(text(), 17)).toBe(': must be a string');
  });

  it('package_name: 1..255 characters, no whitespace of any kind', () => {
    const rule = ': must be a string of 1 to 255 characters without whitespace';
    expect(outcome(packageName, 'com.example.weather')).toBe('ok "com.example.weather"');
    expect(outcome(packageName, 'a'.repeat(255))).toBe(`ok "${'a'.repeat(255)}"`);
    expect(outcome(packageName, 'a'.repeat(256))).toBe(rule);
    expect(outcome(packageName, EMOJI.repeat(255)).startsWith('ok')).toBe(true);
    expect(outcome(packageName, '')).toBe(rule);
    for (const space of [' ', '\t', '\n', '\u00a0', '\u2003', '\u3000', '\ufeff']) {
      expect(outcome(packageName, `com.example${space}weather`)).toBe(rule);
    }
    expect(outcome(packageName, undefined)).toBe(': required');
  });
});

describe('uuid', () => {
  it('accepts any version in 8-4-4-4-12 form and writes it in lower case', () => {
    expect(outcome(uuid, '9B2F6A0E-3C4D-4E5F-8A9B-0C1D2E3F4A5B')).toBe('ok "9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"');
    expect(outcome(uuid, '00000000-0000-0000-0000-000000000000')).toBe('ok "00000000-0000-0000-0000-000000000000"');
    expect(outcome(uuid, '01890a5d-ac96-774b-bcce-b302099a8057')).toBe('ok "01890a5d-ac96-774b-bcce-b302099a8057"');
  });

  it.each([
    '9b2f6a0e3c4d4e5f8a9b0c1d2e3f4a5b',
    '{9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b}',
    '9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5',
    '9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b0',
    '9b2f6a0g-3c4d-4e5f-8a9b-0c1d2e3f4a5b',
    ' 9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b',
    '',
  ])('rejects %j', (input) => {
    expect(outcome(uuid, input)).toBe(': must be a UUID (8-4-4-4-12 hexadecimal digits)');
  });
});

describe('currency', () => {
  it('exactly 3 upper-case ASCII letters', () => {
    const rule = ': must be 3 upper-case letters A-Z';
    expect(outcome(currency, 'USD')).toBe('ok "USD"');
    for (const bad of ['usd', 'US', 'USDT', 'ÜSD', 'U$D', 'US ', '']) expect(outcome(currency, bad)).toBe(rule);
  });
});
