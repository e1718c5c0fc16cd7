import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, resolveSecrets, toApiBody, type ConfigDocument, type ReferenceLookup } from '../../../src/config/index.js';
import { toApiBodyShared } from '../../../src/config/api-body.js';
import { layoutOf } from '../../../src/config/layout.js';
import { deepEqual, diffResource, fillDefaults, leafChanges, normalize, type ResourceDiff } from '../../../src/engine/diff.js';
import type { JsonSchema } from '../../../src/kinds/schema-types.js';
import { deleteAt, type KindDescriptor } from '../../../src/kinds/index.js';
import { FIXTURES } from '../config/helpers.js';

/**
 * The plan's diff reads bodies without copying them (only what it removes or normalises is
 * copied, on the way to it): these tests hold it to the old definition (a structuredClone of both
 * sides, secrets and computed fields deleted, normalised in place) on deep-frozen inputs, so any
 * write to a document's body or a live object throws.
 */
const { config, errors } = loadConfig('.', { cwd: join(FIXTURES, 'valid') });
const { secrets } = resolveSecrets(config.documents, { env: { OPS_PASSWORD: 'ops-password-1', HOOK_SECRET: 'hook-secret' } });
const ids: ReferenceLookup = (kind, project, name) => `${kind}:${project ?? ''}:${name}`;

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** fillDefaults as it was: a copy of every object and array it has a schema for. */
function referenceFill(schema: JsonSchema | undefined, value: unknown): unknown {
  if (!schema) return value;
  if (Array.isArray(value)) return schema.items ? value.map((v) => referenceFill(schema.items, v)) : value;
  if (value !== null && typeof value === 'object' && schema.properties) {
    const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
    for (const [name, prop] of Object.entries(schema.properties)) {
      if (prop['x-computed'] || prop['x-secret']) continue;
      if (out[name] === undefined && prop.default !== undefined) out[name] = structuredClone(prop.default);
      if (out[name] !== undefined) out[name] = referenceFill(prop, out[name]);
    }
    return out;
  }
  return value;
}

/** diffResource as it was, copying everything first. */
function referenceDiff(
  d: KindDescriptor,
  desiredBody: Record<string, unknown>,
  live: Record<string, unknown>,
  options: { clearUndeclared?: boolean } = {},
): ResourceDiff {
  const strip = (body: Record<string, unknown>) => {
    const out = structuredClone(body);
    for (const p of d.secretPaths) deleteAt(out, p);
    for (const p of layoutOf(d).computedPaths) deleteAt(out, p);
    return out;
  };
  const schema = d.createSchema;
  const desired = strip(desiredBody);
  normalize(d, desired);
  const actual = strip(live);
  const result: ResourceDiff = { fields: [], immutable: [], changes: [] };
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    if (d.computedFields.includes(name)) continue;
    let want: unknown;
    if (desired[name] !== undefined) want = referenceFill(prop, desired[name]);
    else if (prop.default !== undefined) want = referenceFill(prop, structuredClone(prop.default));
    else if (
      options.clearUndeclared &&
      actual[name] !== undefined &&
      actual[name] !== null &&
      name !== d.identity &&
      !(schema.required ?? []).includes(name)
    )
      want = null;
    else continue;
    let have: unknown = actual[name];
    if (have === undefined || have === null) have = prop.default !== undefined ? referenceFill(prop, structuredClone(prop.default)) : have;
    else have = referenceFill(prop, have);
    if (deepEqual(want, have)) continue;
    result.fields.push(name);
    if (d.immutableFields.includes(name)) result.immutable.push(name);
    leafChanges([name], have ?? null, want, result.changes);
  }
  return result;
}

/** Live objects as the service could answer them for a declared body: the same, with server fields, and changed in various ways. */
function liveVariants(doc: ConfigDocument, body: Record<string, unknown>): Record<string, unknown>[] {
  const server = {
    id: 'id-1',
    project_id: 'prj-1',
    created_at: '2030-01-01T00:00:00Z',
    updated_at: '2030-01-01T00:00:00Z',
    status: 'active',
    last_sync_at: null,
  };
  const same: Record<string, unknown> = { ...structuredClone(body), ...server };
  for (const p of doc.descriptor.secretPaths) deleteAt(same, p);
  const variants: Record<string, unknown>[] = [
    same,
    { ...structuredClone(body), ...server },
    { id: 'id-2', [doc.descriptor.identity]: doc.name },
  ];
  for (const [field, value] of Object.entries(body)) {
    if (field === doc.descriptor.identity) continue;
    const changed = structuredClone(same);
    if (typeof value === 'string') changed[field] = `${value}-changed`;
    else if (typeof value === 'number') changed[field] = value + 1;
    else if (Array.isArray(value)) changed[field] = [...structuredClone(value), structuredClone(value[0] ?? 'extra')];
    else if (value && typeof value === 'object') changed[field] = { ...structuredClone(value), extra: 'x' };
    else changed[field] = null;
    variants.push(changed);
    const missing = structuredClone(same);
    delete missing[field];
    variants.push(missing);
  }
  if (typeof body.schedule === 'string') variants.push({ ...structuredClone(same), schedule: ` ${body.schedule.toUpperCase()} ` });
  if (typeof body.email === 'string') variants.push({ ...structuredClone(same), email: body.email.toUpperCase() });
  return variants;
}

describe('the diff reads bodies in place', () => {
  it('loads the fixture of every kind', () => {
    expect(errors).toEqual([]);
    expect(new Set(config.documents.map((d) => d.descriptor.kind)).size).toBeGreaterThan(10);
  });

  it('toApiBodyShared gives the same body as toApiBody, without changing the document', () => {
    for (const doc of config.documents) {
      const before = structuredClone(doc.body);
      const copied = toApiBody(doc, ids, secrets);
      const shared = toApiBodyShared(doc, ids, secrets);
      expect(shared, `${doc.yamlKind}/${doc.name}`).toEqual(copied);
      expect(shared).not.toBe(doc.body);
      // Filling references and secrets in the shared body never reached the document's.
      shared.extra = 1;
      expect(doc.body, `${doc.yamlKind}/${doc.name}`).toEqual(before);
    }
  });

  it.each([false, true])(
    'diffResource (clearUndeclared %s) answers as the copying diff did, and writes to neither side',
    (clearUndeclared) => {
      let compared = 0;
      for (const doc of config.documents) {
        const body = deepFreeze({
          ...toApiBodyShared(doc, ids, secrets),
          ...(doc.descriptor.schema.properties?.labels ? { labels: { ...doc.labels, 'dpctl.dev/managed-by': 'platform' } } : {}),
        });
        for (const live of liveVariants(doc, body).map(deepFreeze)) {
          const expected = referenceDiff(doc.descriptor, body, live, { clearUndeclared });
          expect(
            diffResource(doc.descriptor, body, live, { clearUndeclared }),
            `${doc.yamlKind}/${doc.name} against ${JSON.stringify(live)}`,
          ).toEqual(expected);
          compared++;
        }
      }
      expect(compared).toBeGreaterThan(50);
    },
  );

  it('fillDefaults fills what the old one filled, shares the rest, and never writes to its input', () => {
    let filled = 0;
    for (const doc of config.documents) {
      for (const [name, prop] of Object.entries(doc.descriptor.createSchema.properties ?? {})) {
        for (const value of [deepFreeze(structuredClone(doc.body[name])), deepFreeze({}), deepFreeze([{}]), undefined]) {
          const got = fillDefaults(prop, value);
          expect(got, `${doc.yamlKind}.${name}`).toEqual(referenceFill(prop, value));
          if (deepEqual(got, value)) expect(got).toBe(value);
          else filled++;
        }
      }
    }
    expect(filled).toBeGreaterThan(0);
  });

  it('deepEqual: a key holding undefined is the same as no key, on either side', () => {
    expect(deepEqual({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(deepEqual({ a: 1 }, { a: 1, b: undefined })).toBe(true);
    expect(deepEqual({ a: 1 }, { a: 1, b: null })).toBe(false);
    expect(deepEqual({ a: { b: [1, { c: 2 }] } }, { a: { b: [1, { c: 2 }] } })).toBe(true);
    expect(deepEqual({ a: { b: [1, { c: 2 }] } }, { a: { b: [1, { c: 3 }] } })).toBe(false);
    expect(deepEqual({}, { constructor: 1 })).toBe(false);
  });
});
