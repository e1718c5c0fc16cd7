import type { JsonSchema } from './schema-types.js';

/** A location inside a resource: property names, with '*' for "every array item". */
export type FieldPath = string[];

/** Visits every property schema (nested objects and array items included) with its path. */
export function walkProperties(schema: JsonSchema, visit: (path: FieldPath, prop: JsonSchema) => void, prefix: FieldPath = []): void {
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const path = [...prefix, name];
    visit(path, prop);
    walkProperties(prop, visit, path);
    if (prop.items) {
      visit([...path, '*'], prop.items);
      walkProperties(prop.items, visit, [...path, '*']);
    }
  }
}

/** The schema of the field at a path (a concrete index or '*' is an array's items), if the schema has one. */
export function schemaAt(schema: JsonSchema, path: readonly (string | number)[]): JsonSchema | undefined {
  let node: JsonSchema | undefined = schema;
  for (const seg of path) node = typeof seg === 'number' || seg === '*' ? node?.items : node?.properties?.[seg];
  return node;
}

/** Dotted form used in error details and docs: steps[0].name, credentials.password. */
export function formatPath(path: (string | number)[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number' || /^\d+$/.test(part)) out += `[${part}]`;
    else out += out ? `.${part}` : part;
  }
  return out;
}

/** Every concrete value found at a path pattern ('*' fans out over arrays), with its concrete path. */
export function valuesAt(obj: unknown, path: FieldPath, prefix: (string | number)[] = []): { path: (string | number)[]; value: unknown }[] {
  if (path.length === 0) return [{ path: prefix, value: obj }];
  if (obj === null || typeof obj !== 'object') return [];
  const [head, ...rest] = path;
  if (head === '*') {
    if (!Array.isArray(obj)) return [];
    return obj.flatMap((item, i) => valuesAt(item, rest, [...prefix, i]));
  }
  const record = obj as Record<string, unknown>;
  if (!(head in record)) return [];
  return valuesAt(record[head], rest, [...prefix, head]);
}

/** Removes the value at a path pattern in place (fanning out over arrays). */
export function deleteAt(obj: unknown, path: FieldPath): void {
  if (obj === null || typeof obj !== 'object' || path.length === 0) return;
  const [head, ...rest] = path;
  if (head === '*') {
    if (Array.isArray(obj)) for (const item of obj) deleteAt(item, rest);
    return;
  }
  const record = obj as Record<string, unknown>;
  if (rest.length === 0) delete record[head];
  else deleteAt(record[head], rest);
}

/** Sets a value at a concrete path, creating objects on the way. */
export function setAt(obj: Record<string, unknown>, path: (string | number)[], value: unknown): void {
  let cur: Record<string | number, unknown> = obj;
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i];
    if (cur[key] === null || typeof cur[key] !== 'object') cur[key] = {};
    cur = cur[key] as Record<string | number, unknown>;
  }
  cur[path[path.length - 1]] = value;
}
