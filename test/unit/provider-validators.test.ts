import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { JsonSchema, KindDescriptor } from '../../src/kinds/index.js';
import { createAjv, toFieldErrors, type FieldError } from '../../src/kinds/validator.js';
import { resourceSpecs } from '../../src/provider/schema.js';
import { checkCreateBody } from '../../src/provider/validate.js';
import { CREATE_VALIDATORS_FILE, configSchema, renderCreateValidators } from '../../src/provider/validator-codegen.js';

/**
 * The provider checks configs with validators generated at build time, one per kind's create
 * schema, and leaves out the rules that need fields still unknown by filtering the errors. The
 * oracle is what it did before: compile at run time a schema without the unknown fields (not
 * required, and no conditional rules while anything is unknown).
 */
const REPO = join(import.meta.dirname, '..', '..');
const kinds = [...resourceSpecs().values()].map((s) => s.descriptor);
const ajv = createAjv();

function oracle(d: KindDescriptor, body: Record<string, unknown>, unknown: string[]): FieldError[] {
  const schema = configSchema(d) as JsonSchema;
  for (const name of unknown) delete schema.properties?.[name];
  schema.required = schema.required?.filter((r) => !unknown.includes(r));
  if (unknown.length) delete schema.allOf;
  const validate = ajv.compile(schema);
  return validate(body) ? [] : toFieldErrors(validate.errors);
}

/** A value of the wrong type for a property (a string where it takes anything else, a number where it takes a string). */
const wrongFor = (p: JsonSchema): unknown => (p.type === 'string' || p.enum?.every((v) => typeof v === 'string') ? 12345 : 'not-this');

/** Bodies that break each property, miss required fields or break conditional rules, with sets of unknown fields. */
function cases(d: KindDescriptor): { body: Record<string, unknown>; unknown: string[] }[] {
  const properties = Object.entries(d.createSchema.properties ?? {});
  const required = d.createSchema.required ?? [];
  const out: { body: Record<string, unknown>; unknown: string[] }[] = [
    { body: {}, unknown: [] },
    { body: {}, unknown: required },
    ...required.map((r) => ({ body: {}, unknown: [r] })),
  ];
  for (const [name, p] of properties) {
    const others = properties.map(([n]) => n).filter((n) => n !== name);
    out.push({ body: { [name]: wrongFor(p) }, unknown: [] });
    out.push({ body: { [name]: wrongFor(p) }, unknown: others.slice(0, 1) });
    if (p.enum)
      for (const value of p.enum)
        out.push({ body: { [name]: value }, unknown: [] }, { body: { [name]: value }, unknown: others.slice(-1) });
  }
  return out;
}

const sorted = (errors: FieldError[]) => [...errors].sort((a, b) => a.field.localeCompare(b.field));

describe('generated config validators of the provider', () => {
  it(`${CREATE_VALIDATORS_FILE} matches the kinds' create schemas (run \`npm run generate\` when this fails)`, () => {
    expect(readFileSync(join(REPO, CREATE_VALIDATORS_FILE), 'utf8')).toBe(renderCreateValidators());
  });

  it.each(kinds.map((d) => [d.kind, d] as const))('%s: reports what the schema without the unknown fields reports', (_kind, d) => {
    const all = cases(d);
    let withErrors = 0;
    for (const { body, unknown } of all) {
      const expected = oracle(d, body, unknown);
      if (expected.length) withErrors++;
      expect(
        sorted(checkCreateBody(d.kind, body, unknown)),
        `${JSON.stringify(body)} with ${unknown.join(', ') || 'nothing'} unknown`,
      ).toEqual(sorted(expected));
    }
    // The cases break rules (the comparison is not between two empty lists).
    expect(withErrors).toBeGreaterThan(all.length / 3);
  });

  it('leaves out a conditional rule while anything is unknown, and applies it when nothing is', () => {
    const webhook = { name: 'hook', type: 'webhook', config: {} };
    expect(checkCreateBody('notification_channel', webhook, [])).toContainEqual({ field: 'config.url', message: 'is required' });
    expect(checkCreateBody('notification_channel', webhook, ['labels'])).toEqual([]);
    // A required field that is unknown is not missing; a known one is.
    expect(checkCreateBody('connector', { name: 'c' }, ['connector_type'])).toEqual([]);
    expect(checkCreateBody('connector', { name: 'c' }, [])).toEqual([{ field: 'connector_type', message: 'is required' }]);
  });
});
