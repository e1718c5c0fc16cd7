import { createHash } from 'node:crypto';
import { deleteAt, formatPath, valuesAt, setAt, type FieldPath, type JsonSchema, type KindDescriptor } from '../kinds/index.js';
import { normalizeCron } from '../kinds/cron.js';
import { layoutOf } from '../config/index.js';

/** Labels the engine owns on every resource it manages (kinds with a `labels` field). */
export const MANAGED_BY_LABEL = 'dpctl.dev/managed-by';
export const SECRETS_SHA_LABEL = 'dpctl.dev/secrets-sha';
export const ENGINE_LABELS = [MANAGED_BY_LABEL, SECRETS_SHA_LABEL];
export const LABELS_FIELD = 'labels';

/** One field-level difference, for display: `before` and `after` as the API shows them. */
export interface FieldChange {
  /** Dotted path (`config.port`, `steps[1].schedule`, `labels.team`). */
  field: string;
  before: unknown;
  after: unknown;
  /** A write-only secret: values never shown. */
  sensitive?: boolean;
}

export const SENSITIVE = '(sensitive)';

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export function hasLabels(d: KindDescriptor): boolean {
  return !!d.schema.properties?.[LABELS_FIELD];
}

/** Deep equality where a key holding `undefined` is the same as no key. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) if (!deepEqual(a[k], b[k])) return false;
    return true;
  }
  return false;
}

/** Fills schema defaults below a value (nested objects and array items), as the server does on create. */
export function fillDefaults(schema: JsonSchema | undefined, value: unknown): unknown {
  if (!schema) return value;
  if (Array.isArray(value)) return schema.items ? value.map((v) => fillDefaults(schema.items, v)) : value;
  if (isObject(value) && schema.properties) {
    const out: Record<string, unknown> = { ...value };
    for (const [name, prop] of Object.entries(schema.properties)) {
      if (prop['x-computed'] || prop['x-secret']) continue;
      if (out[name] === undefined && prop.default !== undefined) out[name] = structuredClone(prop.default);
      if (out[name] !== undefined) out[name] = fillDefaults(prop, out[name]);
    }
    return out;
  }
  return value;
}

/** Applies the server's normalisations (descriptor.normalizers) to a body, in place. */
export function normalize(d: KindDescriptor, body: Record<string, unknown>): void {
  for (const n of d.normalizers) {
    for (const { path, value } of valuesAt(body, n.path)) {
      if (typeof value !== 'string') continue;
      setAt(body, path, n.rule === 'cron' ? normalizeCron(value) : n.rule === 'lowercase' ? value.trim().toLowerCase() : value);
    }
  }
}

/** Removes write-only secrets and (nested) computed fields from a copy of a body. */
function stripped(d: KindDescriptor, body: Record<string, unknown>): Record<string, unknown> {
  const out = structuredClone(body);
  for (const p of d.secretPaths) deleteAt(out, p);
  for (const p of layoutOf(d).computedPaths) deleteAt(out, p);
  return out;
}

/**
 * Sha-256 of the resource's identity and its secret values, truncated: stored in a label at
 * apply time, so that a changed secret can be detected without ever reading it back.
 */
export function secretsFingerprint(identity: string, secrets: { field: string; value: string }[]): string {
  const h = createHash('sha256');
  h.update(identity);
  for (const s of [...secrets].sort((a, b) => a.field.localeCompare(b.field))) h.update(`\0${s.field}\0${s.value}`);
  return h.digest('hex').slice(0, 16);
}

/** Field-level differences between two values, for display (arrays are compared whole). */
export function leafChanges(prefix: (string | number)[], before: unknown, after: unknown, out: FieldChange[] = []): FieldChange[] {
  if (deepEqual(before, after)) return out;
  if (isObject(before) && isObject(after)) {
    for (const k of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()) leafChanges([...prefix, k], before[k], after[k], out);
    return out;
  }
  out.push({ field: formatPath(prefix), before, after });
  return out;
}

export interface ResourceDiff {
  /** Top-level fields that differ (to PATCH); labels included when they differ. */
  fields: string[];
  /** Top-level immutable fields that differ. */
  immutable: string[];
  /** For display. */
  changes: FieldChange[];
}

/**
 * Compares what a document declares (the toApiBody output, labels merged) with the live object,
 * by the descriptor's rules: only declared fields, plus undeclared fields that have a schema
 * default (absent = default); computed fields ignored; server normalisations applied first;
 * secrets left out (they are compared by fingerprint, see secretsFingerprint).
 * With `clearUndeclared` (resources this source owns, whose config is the whole truth), an
 * optional field with no default that the config no longer declares is cleared (PATCH null).
 */
export function diffResource(
  d: KindDescriptor,
  desiredBody: Record<string, unknown>,
  live: Record<string, unknown>,
  options: { clearUndeclared?: boolean } = {},
): ResourceDiff {
  const schema = d.createSchema;
  const desired = stripped(d, desiredBody);
  normalize(d, desired);
  const actual = stripped(d, live);
  const result: ResourceDiff = { fields: [], immutable: [], changes: [] };
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    if (d.computedFields.includes(name)) continue;
    let want: unknown;
    if (desired[name] !== undefined) want = fillDefaults(prop, desired[name]);
    else if (prop.default !== undefined) want = fillDefaults(prop, structuredClone(prop.default));
    else if (options.clearUndeclared && actual[name] !== undefined && actual[name] !== null && name !== d.identity && !(schema.required ?? []).includes(name)) want = null;
    else continue;
    let have: unknown = actual[name];
    if (have === undefined || have === null) have = prop.default !== undefined ? fillDefaults(prop, structuredClone(prop.default)) : have;
    else have = fillDefaults(prop, have);
    // An object whose only fields were secrets (credentials: {password}) reads back as {}.
    if (deepEqual(want, have)) continue;
    result.fields.push(name);
    if (d.immutableFields.includes(name)) result.immutable.push(name);
    leafChanges([name], have ?? null, want, result.changes);
  }
  return result;
}

/** Top-level fields that hold a secret path. */
export function secretTopFields(d: KindDescriptor): string[] {
  return [...new Set(d.secretPaths.map((p: FieldPath) => p[0]))];
}
