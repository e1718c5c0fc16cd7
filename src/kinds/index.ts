import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeKind, type KindDescriptor } from './descriptor.js';
import type { KindSchemaFile } from './schema-types.js';

export type { KindDescriptor, Reference } from './descriptor.js';
export type { JsonSchema, Operation, PermissionLevel } from './schema-types.js';
export * from './walk.js';

/** schemas/ sits at the package root, two levels above both src/kinds and dist/kinds. */
export const SCHEMAS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'schemas');

function loadKinds(): Map<string, KindDescriptor> {
  const dir = join(SCHEMAS_DIR, 'kinds');
  const kinds = new Map<string, KindDescriptor>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.schema.json')).sort()) {
    const parsed = JSON.parse(readFileSync(join(dir, file), 'utf8')) as KindSchemaFile;
    const descriptor = describeKind(parsed);
    kinds.set(descriptor.kind, descriptor);
  }
  return kinds;
}

export const KINDS: ReadonlyMap<string, KindDescriptor> = loadKinds();

export function kind(name: string): KindDescriptor {
  const found = KINDS.get(name);
  if (!found) throw new Error(`unknown kind ${name}`);
  return found;
}

/** Kinds a user declares and manages (everything with a collection that is not read-only). */
export function writableKinds(): KindDescriptor[] {
  return [...KINDS.values()].filter((k) => !k.readOnlyKind && k.collection);
}

export const PERMISSION_RANK = { 'read-only': 0, 'read-write': 1, admin: 2 } as const;
