import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { arrayLiteral, arrayParameter } from '../../../shared/array-literal.js';

const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue: (value: unknown) => unknown };

describe('arrayLiteral', () => {
  it('is byte for byte the text node-postgres sends for the same array', () => {
    const element = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.constantFrom('"', '\\', '\\"', ',', '{}', 'NULL', ' ', '', '2026-11-30T06:00:00.000000+00:00'),
      fc.double(),
      fc.integer(),
      fc.bigInt(),
      fc.boolean(),
      fc.constant(null),
      fc.constant(undefined),
    );
    fc.assert(
      fc.property(fc.array(element, { maxLength: 20 }), (values) => {
        expect(arrayLiteral(values)).toBe(prepareValue(values));
      }),
      { numRuns: 2000 },
    );
    // 2000 runs take about a second alone; the shared CI machine can make that five.
  }, 30_000);

  it('leaves an array with any other element to the driver', () => {
    for (const values of [[{ a: 1 }], ['a', [1, 2]], [new Date(0)], [Buffer.from('x')]]) {
      expect(arrayLiteral(values)).toBe(values);
    }
  });
});

describe('arrayParameter', () => {
  it('is sent by node-postgres as the array literal, made when the driver prepares it', () => {
    // Prepare
    const values: unknown[] = ['a"b', 'c\\d', null, 7, 'plain'];
    const parameter = arrayParameter(values);
    values.push('added before the send');

    // Act
    const sent = prepareValue(parameter);

    // Assess: the literal of the values as they are when the driver prepares the statement
    expect(sent).toBe(arrayLiteral(values));
    expect(sent).toBe('{"a\\"b","c\\\\d",NULL,"7","plain","added before the send"}');
  });

  it('leaves an array with any other element to the driver, as arrayLiteral does', () => {
    // Act
    const sent = prepareValue(arrayParameter([Buffer.from('x'), null]));

    // Assess: the driver's own array text (a bytea element as hex)
    expect(sent).toBe(prepareValue([Buffer.from('x'), null]));
  });
});
