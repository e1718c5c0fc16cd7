import { formatPath, valuesAt, setAt, type FieldPath, type JsonSchema, type KindDescriptor } from '../kinds/index.js';
import { normalizeCron } from '../kinds/cron.js';
import { layoutOf } from '../config/layout.js';

/** Labels the engine owns on every resource it manages (kinds with a `labels` field). */
export const MANAGED_BY_LABEL = 'dpctl.dev/managed-by';
export const SECRETS_SHA_LABEL = 'dpctl.dev/secrets-sha';
export const ENGINE_LABELS = [MANAGED_BY_LABEL, SECRETS_SHA_LABEL];
export const LABELS_FIELD = 'labels';

/** A label of a live resource (kinds with labels): one cast of the labels field, in one place. */
export const labelOf = (r: { object: Record<string, unknown> } | undefined, label: string): string | undefined =>
  (r?.object[LABELS_FIELD] as Record<string, string> | undefined)?.[label];

/** The source that manages a live resource: its dpctl.dev/managed-by label, undefined without one. */
export const ownerOf = (r: { object: Record<string, unknown> } | undefined): string | undefined => labelOf(r, MANAGED_BY_LABEL);

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

/** A schema default as a value of its own (objects and arrays copied; primitives as they are). */
const defaultValue = (v: unknown): unknown => (v !== null && typeof v === 'object' ? structuredClone(v) : v);

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
    // Every key of either side, without building their union (this runs for every field of every resource).
    for (const k of Object.keys(a)) if (!deepEqual(a[k], b[k])) return false;
    for (const k of Object.keys(b)) if (!Object.prototype.hasOwnProperty.call(a, k) && !deepEqual(a[k], b[k])) return false;
    return true;
  }
  return false;
}

/**
 * Fills schema defaults below a value (nested objects and array items), as the server does on
 * create. Never changes `value`: what has a default filled is a copy, the rest is shared, and a
 * value with nothing to fill is returned as it is.
 */
export function fillDefaults(schema: JsonSchema | undefined, value: unknown): unknown {
  if (!schema) return value;
  if (Array.isArray(value)) {
    if (!schema.items) return value;
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const filled = fillDefaults(schema.items, value[i]);
      if (filled !== value[i]) (copy ??= value.slice())[i] = filled;
    }
    return copy ?? value;
  }
  if (isObject(value) && schema.properties) {
    let copy: Record<string, unknown> | undefined;
    for (const [name, prop] of propertiesOf(schema)) {
      if (prop['x-computed'] || prop['x-secret']) continue;
      const current = value[name];
      let next = current === undefined && prop.default !== undefined ? defaultValue(prop.default) : current;
      if (next !== undefined) next = fillDefaults(prop, next);
      if (next !== current) (copy ??= { ...value })[name] = next;
    }
    return copy ?? value;
  }
  return value;
}

/** Object.entries of a schema's properties, once per schema (the diff asks for every field of every resource). */
const schemaProperties = new WeakMap<JsonSchema, [string, JsonSchema][]>();
function propertiesOf(schema: JsonSchema): [string, JsonSchema][] {
  let entries = schemaProperties.get(schema);
  if (!entries) {
    entries = Object.entries(schema.properties ?? {});
    schemaProperties.set(schema, entries);
  }
  return entries;
}

/** Applies the server's normalisations (descriptor.normalizers) to a body, in place. */
export function normalize(d: KindDescriptor, body: Record<string, unknown>): void {
  for (const n of d.normalizers) {
    for (const { path, value } of valuesAt(body, n.path)) {
      if (typeof value !== 'string') continue;
      setAt(body, path, normalizedValue(n.rule, value));
    }
  }
}

function normalizedValue(rule: KindDescriptor['normalizers'][number]['rule'], value: string): string {
  return rule === 'cron' ? normalizeCron(value) : rule === 'lowercase' ? value.trim().toLowerCase() : value;
}

/** The same as `normalize` on a copy, but only the objects on the way to a changed value are copied (the rest is shared). */
function normalized(d: KindDescriptor, body: Record<string, unknown>): Record<string, unknown> {
  let out = body;
  for (const n of d.normalizers) {
    for (const { path, value } of valuesAt(out, n.path)) {
      if (typeof value !== 'string') continue;
      const next = normalizedValue(n.rule, value);
      if (next !== value) out = withValueAt(out, path, next, 0) as Record<string, unknown>;
    }
  }
  return out;
}

/** `value` with `next` at a concrete path that exists: a copy of each object or array on the way, the rest shared. */
function withValueAt(value: unknown, path: (string | number)[], next: unknown, i: number): unknown {
  if (i === path.length) return next;
  const record = value as Record<string | number, unknown>;
  const copy = (Array.isArray(value) ? value.slice() : { ...record }) as Record<string | number, unknown>;
  copy[path[i]] = withValueAt(record[path[i]], path, next, i + 1);
  return copy;
}

/**
 * `value` without what a path pattern points to ('*' fans out over arrays), as deleteAt on a
 * copy would leave it: only the objects and arrays on the way to a removed value are copied, the
 * rest is shared (a structuredClone per body was most of a plan's garbage). Unchanged: `value` itself.
 */
function withoutAt(value: unknown, path: FieldPath, i: number): unknown {
  if (value === null || typeof value !== 'object' || i >= path.length) return value;
  const head = path[i];
  if (head === '*') {
    if (!Array.isArray(value)) return value;
    let out: unknown[] | undefined;
    for (let j = 0; j < value.length; j++) {
      const item = withoutAt(value[j], path, i + 1);
      if (item !== value[j]) (out ??= value.slice())[j] = item;
    }
    return out ?? value;
  }
  const record = value as Record<string, unknown>;
  if (!Object.prototype.hasOwnProperty.call(record, head)) return value;
  if (i === path.length - 1) return Array.isArray(value) ? arrayWithout(value, head) : omit(record, (k) => k === head);
  const inner = withoutAt(record[head], path, i + 1);
  if (inner === record[head]) return value;
  const copy = (Array.isArray(value) ? value.slice() : { ...record }) as Record<string, unknown>;
  copy[head] = inner;
  return copy;
}

function arrayWithout(value: unknown[], key: string): unknown[] {
  const copy = value.slice();
  delete (copy as unknown as Record<string, unknown>)[key];
  return copy;
}

/** A copy of an object without the keys `drop` picks, built key by key (a spread then `delete` leaves a slow dictionary object). */
function omit(record: Record<string, unknown>, drop: (key: string) => boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(record)) {
    if (drop(k)) continue;
    if (k === '__proto__') Object.defineProperty(out, k, { value: record[k], enumerable: true, writable: true, configurable: true });
    else out[k] = record[k];
  }
  return out;
}

/** A kind's secret and computed paths: top-level names (dropped in one copy) and deeper patterns. */
const strippedPaths = new WeakMap<KindDescriptor, { top: Set<string>; deep: FieldPath[] }>();
function pathsToStrip(d: KindDescriptor): { top: Set<string>; deep: FieldPath[] } {
  let paths = strippedPaths.get(d);
  if (!paths) {
    paths = { top: new Set(), deep: [] };
    for (const p of [...d.secretPaths, ...layoutOf(d).computedPaths]) {
      if (p.length === 1 && p[0] !== '*') paths.top.add(p[0]);
      else if (p.length) paths.deep.push(p);
    }
    strippedPaths.set(d, paths);
  }
  return paths;
}

/** The body without write-only secrets and (nested) computed fields; `body` itself is never changed. */
function stripped(d: KindDescriptor, body: Record<string, unknown>): Record<string, unknown> {
  const { top, deep } = pathsToStrip(d);
  let out: unknown = body;
  for (const k of top) {
    if (Object.prototype.hasOwnProperty.call(body, k)) {
      out = omit(body, (key) => top.has(key));
      break;
    }
  }
  for (const p of deep) out = withoutAt(out, p, 0);
  return out as Record<string, unknown>;
}

/** Field-level differences between two values, for display (arrays are compared whole). */
export function leafChanges(prefix: (string | number)[], before: unknown, after: unknown, out: FieldChange[] = []): FieldChange[] {
  if (deepEqual(before, after)) return out;
  if (isObject(before) && isObject(after)) {
    for (const k of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort())
      leafChanges([...prefix, k], before[k], after[k], out);
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
  const desired = normalized(d, stripped(d, desiredBody));
  const actual = stripped(d, live);
  const result: ResourceDiff = { fields: [], immutable: [], changes: [] };
  for (const [name, prop] of propertiesOf(schema)) {
    if (d.computedFields.includes(name)) continue;
    let want: unknown;
    if (desired[name] !== undefined) want = fillDefaults(prop, desired[name]);
    else if (prop.default !== undefined) want = fillDefaults(prop, defaultValue(prop.default));
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
    if (have === undefined || have === null) have = prop.default !== undefined ? fillDefaults(prop, defaultValue(prop.default)) : have;
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
