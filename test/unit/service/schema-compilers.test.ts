import { describe, expect, it } from 'vitest';
import { buildSerializer, compileValidator } from '../../../src/service/schema-compilers.js';

/** Route schemas are compiled once per process: each service start builds its schemas afresh, equal in content. */
describe('schema compilers of the service', () => {
  const route = (httpPart: string, schema: object) => ({ schema, httpPart, method: 'POST', url: '/x' });
  const body = () => ({ type: 'object', properties: { n: { type: 'integer', default: 1 } } });

  it('gives a schema equal in content the validator already compiled, per part of the request', () => {
    const first = compileValidator(route('body', body()));
    expect(compileValidator(route('body', body()))).toBe(first);
    // Query strings are coerced: another validator for the same schema.
    const query = compileValidator(route('querystring', body()));
    expect(query).not.toBe(first);
    const value: Record<string, unknown> = { n: '2' };
    expect(query(value)).toBe(true);
    expect(value.n).toBe(2);
    expect(first({ n: '2' })).toBe(false);
    const empty: Record<string, unknown> = {};
    expect(first(empty)).toBe(true);
    expect(empty).toEqual({ n: 1 });
  });

  it('compiles another schema with the same $id (a start with other options) instead of refusing it', () => {
    const a = compileValidator(route('body', { $id: 'Same', type: 'object', required: ['a'] }));
    const b = compileValidator(route('body', { $id: 'Same', type: 'object', required: ['b'] }));
    expect(a).not.toBe(b);
    expect(b({ b: 1 })).toBe(true);
    expect(b({ a: 1 })).toBe(false);
  });

  it('gives a response schema equal in content, with the same shared schemas, the serializer already compiled', () => {
    const shared = { Err: { $id: 'Err', type: 'object', properties: { code: { type: 'string' } } } };
    const response = () => ({ type: 'object', properties: { id: { type: 'string' }, error: { $ref: 'Err#' } } });
    const compile = buildSerializer(shared, {});
    const serialize = compile({ schema: response(), method: 'GET', url: '/x', httpStatus: '200' });
    expect(buildSerializer(structuredClone(shared), {})({ schema: response(), method: 'GET', url: '/y', httpStatus: '200' })).toBe(
      serialize,
    );
    expect(serialize({ id: 'a', extra: 1, error: { code: 'c', x: 2 } })).toBe('{"id":"a","error":{"code":"c"}}');
    // Other shared schemas: compiled again.
    const other = { Err: { $id: 'Err', type: 'object', properties: { message: { type: 'string' } } } };
    expect(buildSerializer(other, {})({ schema: response(), method: 'GET', url: '/x', httpStatus: '200' })).not.toBe(serialize);
  });
});
