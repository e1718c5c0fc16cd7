import { describe, expect, it } from 'vitest';
import {
  compileSafeRegex,
  estimateProgramSize,
  MAX_DOCUMENT_PROGRAM_SIZE,
  MAX_MATCHED_INPUT,
  MAX_PATTERN_LENGTH,
  MAX_PROGRAM_SIZE,
  safeRegexError,
} from '../../../src/kinds/safe-regex.js';
import { createAjv, toFieldErrors } from '../../../src/kinds/validator.js';
import { kind } from '../../../src/kinds/index.js';

/** The linear-time engine behind every user-supplied pattern, and the limits around it. */
describe('compileSafeRegex', () => {
  it('matches in linear time what backtracks exponentially in V8', () => {
    const evil = compileSafeRegex('(a+)+$');
    const started = performance.now();
    expect(evil.test(`${'a'.repeat(62)}!`)).toBe(false);
    expect(evil.test(`${'a'.repeat(1_000)}!`)).toBe(false);
    expect(evil.test('aaa')).toBe(true);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it(`matches the first ${MAX_MATCHED_INPUT} characters of longer input: a pattern that thrashes re2js's DFA cache stays cheap on 1 MB`, () => {
    // a.{200}c over random a/b took 660 ms on 100,000 characters and 3 s on 1 MB, in one call that cannot yield.
    let seed = 1;
    const random = Array.from({ length: 1_000_000 }, () => ((seed = (seed * 16807) % 2147483647) % 2 ? 'a' : 'b')).join('');
    const thrash = compileSafeRegex('a.{200}c');
    const started = performance.now();
    expect(thrash.test(random)).toBe(false);
    expect(performance.now() - started).toBeLessThan(200);
    // What lies past the cap is not seen; what is within it is.
    expect(compileSafeRegex('secret').test(`${'x'.repeat(MAX_MATCHED_INPUT)}secret`)).toBe(false);
    expect(compileSafeRegex('secret').test(`${'x'.repeat(MAX_MATCHED_INPUT - 6)}secret`)).toBe(true);
  });

  it('is case-insensitive; searches, or matches the whole input when asked', () => {
    expect(compileSafeRegex('^(customer_)?email(_address)?$').test('CUSTOMER_Email')).toBe(true);
    expect(compileSafeRegex('email').test('billing_email_2')).toBe(true);
    const type = compileSafeRegex('varchar|text', { whole: true });
    expect(type.test('TEXT')).toBe(true);
    expect(type.test('varchar(20)')).toBe(false);
    expect(type.test('tinytext')).toBe(false);
  });

  it('refuses what RE2 does not have: backreferences, lookahead, lookbehind', () => {
    expect(safeRegexError('(a)\\1')).toMatch(/^is not a valid regular expression \(RE2 syntax.*invalid escape sequence: `\\1`/);
    expect(safeRegexError('(?=a)b')).toMatch(/unsupported Perl syntax: `\(\?=`/);
    expect(safeRegexError('(?!a)b')).toMatch(/unsupported Perl syntax/);
    expect(safeRegexError('(?<=a)b')).toMatch(/not a valid regular expression/);
    expect(safeRegexError('[a-')).toMatch(/missing closing \]/);
  });

  it('accepts RE2 syntax that JavaScript lacks', () => {
    for (const p of ['\\pL+', '[[:alpha:]]+_id', '(?P<word>\\w+)', '\\x{e9}t\\x{e9}', '(?i)ssn|social', '\\Qa.b\\E'])
      expect(safeRegexError(p), p).toBeNull();
  });

  it(`refuses patterns over ${MAX_PATTERN_LENGTH} characters, without compiling them`, () => {
    expect(safeRegexError('a'.repeat(MAX_PATTERN_LENGTH))).toBeNull();
    expect(safeRegexError('a'.repeat(MAX_PATTERN_LENGTH + 1))).toBe(`must NOT have more than ${MAX_PATTERN_LENGTH} characters`);
    expect(safeRegexError('(a+)+'.repeat(2_000))).toMatch(/more than 512 characters/);
  });

  it(`refuses programs over ${MAX_PROGRAM_SIZE} instructions, cheaply when the text shows it`, () => {
    expect(safeRegexError('[a-z0-9_]{1,64}')).toBeNull();
    expect(safeRegexError('a{400}')).toBeNull();
    expect(safeRegexError('a{1000}')).toMatch(/is too complex: it compiles to 1002 instructions, more than 1000/);
    // 73 counted repetitions of 1,000 in 512 characters: a 73,000-instruction program that takes
    // 40-90 ms to compile, so 300 of them (100 matchers x 3 patterns) would block for 12-27 s;
    // refused from the estimate, they take milliseconds (1 s is the bound for a loaded machine).
    const huge = 'a{1000}'.repeat(73);
    const started = performance.now();
    for (let i = 0; i < 300; i++) expect(safeRegexError(huge)).toMatch(/is too complex: it compiles to about \d+ instructions/);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('estimates program sizes roughly right and not below (nesting overshoots)', () => {
    for (const [p, real] of [
      ['^(customer_)?email(_address)?$', 32],
      ['a{400}', 402],
      ['a{0,300}', 602],
      ['[]a]{10}', 12],
      ['\\p{Greek}{100}', 102],
      ['[[:alpha:]]{100}', 102],
    ] as const) {
      const estimate = estimateProgramSize(p);
      expect(estimate, p).toBeGreaterThanOrEqual(real - 5);
      expect(estimate, p).toBeLessThanOrEqual(real * 2);
    }
    expect(estimateProgramSize('(?:(?:x{10}){10}){10}')).toBeGreaterThan(1_000);
  });
});

describe('classification schema validation', () => {
  const validate = createAjv({ useDefaults: true }).compile(kind('classification').createSchema);
  const errors = (body: unknown) => (validate(body) ? [] : toFieldErrors(validate.errors));

  it('names the matcher field of a refused pattern, data_type included', () => {
    const body = {
      name: 'pii',
      sensitivity: 'restricted',
      column_matchers: [
        { column_pattern: 'email' },
        { column_pattern: '(a)\\1' },
        { column_pattern: 'x', table_pattern: '(?=x)', data_type: 'a'.repeat(600) },
      ],
    };
    const found = errors(body);
    expect(found.map((e) => e.field)).toEqual([
      'column_matchers[1].column_pattern',
      'column_matchers[2].table_pattern',
      'column_matchers[2].data_type',
    ]);
    expect(found[2].message).toBe('must NOT have more than 512 characters');
  });

  it(`counts all patterns of a classification against ${MAX_DOCUMENT_PROGRAM_SIZE} instructions, once each`, () => {
    // [a-z]{300}NN compiles to 304 instructions: 65 fit in the budget, the 66th does not.
    const body = {
      name: 'c',
      sensitivity: 'public',
      column_matchers: Array.from({ length: 100 }, (_, i) => ({ column_pattern: `[a-z]{300}${String(i).padStart(2, '0')}` })),
    };
    const started = performance.now();
    const found = errors(body);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(found).toHaveLength(35);
    expect(found[0]).toEqual({
      field: 'column_matchers[65].column_pattern',
      message: `is too complex: the patterns of this document together compile to more than ${MAX_DOCUMENT_PROGRAM_SIZE} instructions`,
    });
    // Validating the same document again (route schema, then the merged resource) counts nothing twice.
    expect(errors(body)).toEqual(found);
    expect(errors({ ...body, column_matchers: body.column_matchers.slice(0, 65) })).toEqual([]);
  });

  it('caps matchers at 100 like every list a tenant grows (x-max-items: 422 in the service, test/abuse/regex.test.ts), not in the request schema', () => {
    const matchers = (n: number) => Array.from({ length: n }, (_, i) => ({ column_pattern: `col_${i}` }));
    expect(errors({ name: 'c', sensitivity: 'public', column_matchers: matchers(101) })).toEqual([]);
    expect((kind('classification').createSchema.properties!.column_matchers as Record<string, unknown>)['x-max-items']).toBe(100);
  });
});
