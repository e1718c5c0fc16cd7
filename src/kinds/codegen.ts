/**
 * Generates src/kinds/generated/kinds.ts, the TypeScript types of the kinds, from the kind
 * descriptors (schemas/kinds/*.schema.json): for every writable kind the create body, the PATCH
 * body and the resource as returned, and for read-only kinds the resource. The client exports
 * them and the service's runtime uses them for the objects it builds (runs). No field list is
 * written by hand; a unit test fails when the file is stale.
 *
 *   npm run generate
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KINDS, type JsonSchema, type KindDescriptor } from './index.js';

export const GENERATED_TYPES_PATH = join(dirname(fileURLToPath(import.meta.url)), 'generated', 'kinds.ts');
/** The same file seen from the repository (dist/kinds runs this too). */
const SOURCE_PATH = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'kinds', 'generated', 'kinds.ts');

type Mode = 'create' | 'update' | 'response';

const pascal = (kind: string) =>
  kind
    .split(/[_-]/)
    .map((p) => p[0].toUpperCase() + p.slice(1))
    .join('');
const literal = (v: unknown) => JSON.stringify(v);
const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (name: string) => (IDENT.test(name) ? name : JSON.stringify(name));

function doc(prop: JsonSchema, indent: string): string {
  const notes: string[] = [];
  if (prop.description) notes.push(prop.description.replace(/\*\//g, '*\\/'));
  if (prop['x-immutable']) notes.push('Immutable: a change replaces the resource.');
  if (prop['x-secret']) notes.push('Write-only secret: never returned.');
  if (prop['x-sensitive'] && !prop['x-secret']) notes.push('Sensitive.');
  if (prop['x-computed']) notes.push('Set by the server.');
  if (prop['x-ref']) notes.push(`References a ${prop['x-ref']} of the same project, by id.`);
  if (prop.default !== undefined) notes.push(`Default: ${literal(prop.default)}.`);
  if (!notes.length) return '';
  return `${indent}/** ${notes.join(' ')} */\n`;
}

/** Whether a field is always present in a response (required, defaulted, or computed at creation). */
function presentInResponse(name: string, prop: JsonSchema, required: Set<string>): boolean {
  return required.has(name) || prop.default !== undefined || (!!prop['x-computed'] && !prop['x-once']);
}

function typeOf(schema: JsonSchema, mode: Mode, indent: string, required?: Set<string>): string {
  if (schema.const !== undefined) return literal(schema.const);
  if (schema.enum) return schema.enum.map(literal).join(' | ');
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : schema.properties ? ['object'] : [];
  if (!types.length) return 'unknown';
  const parts = types.map((t) => {
    switch (t) {
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'null':
        return 'null';
      case 'array':
        return schema.items ? `Array<${typeOf(schema.items, mode, indent)}>` : 'unknown[]';
      case 'object':
        return objectType(schema, mode, indent, required);
      default:
        return 'unknown';
    }
  });
  return parts.join(' | ');
}

function objectType(schema: JsonSchema, mode: Mode, indent: string, requiredOverride?: Set<string>): string {
  const props = Object.entries(schema.properties ?? {});
  const required = requiredOverride ?? new Set(schema.required ?? []);
  const inner = `${indent}  `;
  const lines: string[] = [];
  for (const [name, prop] of props) {
    const optional = mode === 'update' ? true : mode === 'create' ? !required.has(name) : !presentInResponse(name, prop, required);
    // A PATCH replaces whole top-level fields, so below the top a PATCH body follows the create rules.
    lines.push(
      `${doc(prop, inner)}${inner}${key(name)}${optional ? '?' : ''}: ${typeOf(prop, mode === 'update' ? 'create' : mode, inner)};`,
    );
  }
  const extra = schema.additionalProperties;
  if (extra !== false) {
    const valueType = typeof extra === 'object' && !props.length ? typeOf(extra, mode, inner) : 'unknown';
    lines.push(`${inner}[key: string]: ${valueType};`);
  }
  if (!lines.length) return 'Record<string, never>';
  return `{\n${lines.join('\n')}\n${indent}}`;
}

function declare(name: string, schema: JsonSchema, mode: Mode, d: KindDescriptor, required?: Set<string>): string {
  const what =
    mode === 'create'
      ? 'Create request body'
      : mode === 'update'
        ? 'PATCH body (fields given replace the stored ones)'
        : 'As the API returns it';
  const header = `/** ${d.title}: ${what}. */\n`;
  return `${header}export interface ${name} ${objectType(schema, mode, '', required)}\n`;
}

/** The whole generated module, deterministic for a given set of descriptors. */
export function generateKindTypes(kinds: Iterable<KindDescriptor> = KINDS.values()): string {
  const all = [...kinds].sort((a, b) => a.kind.localeCompare(b.kind));
  const writable = all.filter((d) => !d.readOnlyKind && d.collection);
  const readOnly = all.filter((d) => d.readOnlyKind);
  const out: string[] = [
    '// Generated by src/kinds/codegen.ts from the kind descriptors (schemas/kinds/*.schema.json).',
    '// Do not edit by hand: run `npm run generate`.',
    '/* eslint-disable */',
    '',
  ];
  for (const d of writable) {
    const base = pascal(d.kind);
    out.push(declare(base, d.responseSchema, 'response', d, new Set(d.schema.required ?? [])));
    out.push(declare(`${base}Create`, d.createSchema, 'create', d));
    out.push(declare(`${base}Update`, d.updateSchema, 'update', d));
  }
  for (const d of readOnly) {
    // Read-only kinds are whole server objects: every top-level field is present.
    out.push(declare(pascal(d.kind), d.responseSchema, 'response', d, new Set(Object.keys(d.responseSchema.properties ?? {}))));
  }
  const union = (items: string[]) => (items.length ? items.map(literal).join(' | ') : 'never');
  out.push('/** Every writable kind: its bodies, the resource returned, scope, identity field and operations served. */');
  out.push('export interface WritableKinds {');
  for (const d of writable) {
    const base = pascal(d.kind);
    out.push(
      `  ${d.kind}: { resource: ${base}; create: ${base}Create; update: ${base}Update; scope: ${literal(d.scope)}; identity: ${literal(d.identity)}; operations: ${union(d.operations)} };`,
    );
  }
  out.push('}', '');
  out.push('/** Kinds the API serves but nobody declares (runs, alerts, audit entries, models, lineage, discovered schemas). */');
  out.push('export interface ReadOnlyKinds {');
  for (const d of readOnly) out.push(`  ${d.kind}: ${pascal(d.kind)};`);
  out.push('}', '');
  out.push('export type WritableKindName = keyof WritableKinds;');
  out.push('export type ReadOnlyKindName = keyof ReadOnlyKinds;');
  out.push(`export const WRITABLE_KIND_NAMES = [${writable.map((d) => literal(d.kind)).join(', ')}] as const;`);
  out.push('');
  return out.join('\n');
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  writeFileSync(SOURCE_PATH, generateKindTypes());
  console.log(`wrote ${SOURCE_PATH}`);
}
