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

/** The kind whose resources are the projects (`x-scope-container`): exactly one. */
export const SCOPE_CONTAINER: KindDescriptor = onlyOne([...KINDS.values()].filter((k) => k.scopeContainer));

function onlyOne(containers: KindDescriptor[]): KindDescriptor {
  if (containers.length !== 1) throw new Error(`exactly one kind must have x-scope-container, found ${containers.length}`);
  return containers[0];
}

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
