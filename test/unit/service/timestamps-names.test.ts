import { describe, expect, test } from 'vitest';
import { timestampError, toStoredTimestamp } from '../../../src/kinds/timestamps.js';
import { nameError } from '../../../src/kinds/names.js';
import { createAjv, toFieldErrors } from '../../../src/kinds/validator.js';

describe('timestamps (the one rule behind every date-time)', () => {
  test.each([
    ['2016-12-31T23:59:60Z', /leap seconds/],
    ['2024-13-01T00:00:00Z', /month/],
    ['2024-00-10T00:00:00Z', /month/],
    ['2023-02-29T00:00:00Z', /day that exists/],
    ['2024-04-31T00:00:00Z', /day that exists/],
    ['2024-01-01T24:00:00Z', /hour/],
    ['2024-01-01T23:60:00Z', /minutes/],
    ['2024-01-01T00:00:00+24:00', /offset/],
    ['0000-01-01T00:00:00Z', /year/],
    ['0001-01-01T00:00:00+00:01', /between/],
    ['9999-12-31T23:59:59-00:01', /between/],
    ['+010000-01-01T00:00:00Z', /RFC 3339/],
    ['2024-01-01T00:00:00', /RFC 3339/],
    ['2024-01-01 00:00:00Z', /RFC 3339/],
    ['2024-01-01T00:00:00.1234567890Z', /RFC 3339/],
  ])('%s is refused', (value, why) => {
    expect(timestampError(value)).toMatch(why);
    expect(() => toStoredTimestamp(value)).toThrow();
  });

  test.each([
    ['2024-02-29T12:00:00Z', '2024-02-29T12:00:00.000Z'],
    ['2000-02-29T00:00:00Z', '2000-02-29T00:00:00.000Z'],
    ['2024-05-01T12:00:00.123456789+02:00', '2024-05-01T10:00:00.123Z'],
    ['2024-05-01t12:00:00.5z', '2024-05-01T12:00:00.500Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['0050-06-01T00:00:00Z', '0050-06-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
  ])('%s is stored as %s', (value, stored) => {
    expect(timestampError(value)).toBeNull();
    expect(toStoredTimestamp(value)).toBe(stored);
  });

  test('every Ajv of ours (bodies, queries, YAML, provider) uses it for format date-time', () => {
    const validate = createAjv().compile({ type: 'object', properties: { at: { type: 'string', format: 'date-time' } } });
    expect(validate({ at: '2016-12-31T23:59:59Z' })).toBe(true);
    expect(validate({ at: '2016-12-31T23:59:60Z' })).toBe(false);
    expect(toFieldErrors(validate.errors)).toEqual([{ field: 'at', message: 'must match format "date-time"' }]);
  });
});

describe('names', () => {
  test.each([
    ['a\u202Eb', 'a bidirectional control character (U+202E at position 1)'],
    ['\u2067x', 'a bidirectional control character (U+2067 at position 0)'],
    ['x\u200E', 'a bidirectional control character (U+200E at position 1)'],
    ['x\u061C', 'a bidirectional control character (U+061C at position 1)'],
    ['x\uD83D', 'a lone surrogate (not valid Unicode) (U+D83D at position 1)'],
    ['\uDE00x', 'a lone surrogate (not valid Unicode) (U+DE00 at position 0)'],
    ['tab\there', 'a control character (U+0009 at position 3)'],
    ['c1\u009B', 'a control character (U+009B at position 2)'],
    ['p\u2029', 'a line or paragraph separator (U+2029 at position 1)'],
  ])('%j is refused', (value, what) => {
    expect(nameError(value)).toBe(`must not contain ${what}`);
  });

  test.each([
    ['   ', 'must not be blank'],
    ['\u3000', 'must not be blank'],
    ['orders ', 'must not start or end with whitespace'],
    [' orders', 'must not start or end with whitespace'],
    ['orders\u00a0', 'must not start or end with whitespace'],
  ])('%j is refused: %s', (value, message) => {
    expect(nameError(value)).toBe(message);
  });

  test.each(['orders-db', 'données', '😀', '👩‍💻', 'کتاب‌ها', 'Ünïcødé name'])('%j is a name', (value) => {
    expect(nameError(value)).toBeNull();
  });

  test('x-format: name reports the field', () => {
    const validate = createAjv().compile({
      type: 'object',
      properties: { steps: { type: 'array', items: { type: 'object', properties: { name: { type: 'string', 'x-format': 'name' } } } } },
    });
    expect(validate({ steps: [{ name: 'ok' }, { name: 'x\u202E' }] })).toBe(false);
    expect(toFieldErrors(validate.errors)).toEqual([
      { field: 'steps[1].name', message: 'must not contain a bidirectional control character (U+202E at position 1)' },
    ]);
  });
});
