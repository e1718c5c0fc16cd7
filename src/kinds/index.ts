import { describeKind, type KindDescriptor } from './descriptor.js';
import { kindSchemaFiles, parseKindSchemaFile } from './schema-files.js';

export type { KindDescriptor, Reference } from './descriptor.js';
export { kindNoun, kindPlural, scopeCapSentence } from './descriptor.js';
export type { HealthRuleKeyword, JsonSchema, Operation, PermissionLevel, ProvisioningKeyword } from './schema-types.js';
export * from './walk.js';
export * from './health.js';

export { SCHEMAS_DIR } from './schema-files.js';

function loadKinds(): Map<string, KindDescriptor> {
  const kinds = new Map<string, KindDescriptor>();
  for (const { text } of kindSchemaFiles()) {
    const descriptor = describeKind(parseKindSchemaFile(text));
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
