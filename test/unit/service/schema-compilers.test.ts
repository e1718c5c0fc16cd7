import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KINDS } from '../../../src/kinds/index.js';
import { createAjv } from '../../../src/kinds/validator.js';
import * as MERGED from '../../../src/service/generated/merged-validators.js';
import { buildSerializer, compileValidator, REQUEST_AJV, runTimeCompiles } from '../../../src/service/schema-compilers.js';
import { renderServiceValidators, requestSchemas, SERVICE_VALIDATOR_FILES } from '../../../src/service/validator-codegen.js';
import { startTestService } from '../../support/service.js';

const REPO = join(import.meta.dirname, '..', '..', '..');

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

describe('validators of the service generated at build time', () => {
  it(`${Object.values(SERVICE_VALIDATOR_FILES).join(', ')} match what a start registers (run \`npm run generate\` when this fails)`, async () => {
    const rendered = await renderServiceValidators();
    for (const [part, file] of Object.entries(SERVICE_VALIDATOR_FILES))
      expect(readFileSync(join(REPO, file), 'utf8'), file).toBe(rendered[part as keyof typeof rendered]);
  });

  it('a default start compiles no request schema at run time', async () => {
    const before = runTimeCompiles();
    const svc = await startTestService();
    await svc.close();
    expect(runTimeCompiles() - before).toBe(0);
  });

  it('each generated request validator reports (and fills in) what its schema compiled at run time does', async () => {
    const schemas = await requestSchemas();
    const inputs = [{}, { name: 42 }, { name: 'x', labels: 'no', limit: '5' }, { limit: '5', cursor: 7 }, [], 'text'];
    let compared = 0;
    for (const part of ['body', 'query'] as const) {
      const ajv = createAjv(REQUEST_AJV[part]);
      expect(Object.keys(schemas[part]).length, part).toBeGreaterThan(10);
      for (const schema of Object.values(schemas[part])) {
        const generated = compileValidator({ schema, httpPart: part === 'body' ? 'body' : 'querystring', method: 'GET', url: '/x' });
        const compiled = ajv.compile(structuredClone(schema));
        for (const input of inputs) {
          const [a, b] = [structuredClone(input), structuredClone(input)];
          expect(generated(a)).toBe(compiled(b));
          expect((generated as typeof compiled).errors ?? null).toEqual(compiled.errors ?? null);
          expect(a).toEqual(b);
          compared++;
        }
      }
    }
    expect(compared).toBeGreaterThan(300);
  });

  it("each generated merged-object validator (PATCH) reports what the kind's create schema compiled at run time does", () => {
    const ajv = createAjv();
    const generated = MERGED as unknown as Record<string, ((v: unknown) => boolean) & { errors?: unknown }>;
    const updatable = [...KINDS.values()].filter((d) => d.operations.includes('update'));
    expect(Object.keys(generated).sort()).toEqual(updatable.map((d) => d.kind).sort());
    for (const d of updatable) {
      const compiled = ajv.compile(d.createSchema);
      for (const input of [{}, { name: 42 }, { name: 'x', labels: 'no' }, { name: 'ok', type: 'webhook', config: {} }]) {
        expect(generated[d.kind](input), d.kind).toBe(compiled(input));
        expect(generated[d.kind].errors ?? null).toEqual(compiled.errors ?? null);
      }
    }
  });
});
