import type { HealthRuleKeyword, JsonSchema, KindSchemaFile, Operation, PermissionLevel, ProvisioningKeyword } from './schema-types.js';
import { walkProperties, type FieldPath } from './walk.js';

export interface Reference {
  /** Path of the id (or of each id, with '*' for arrays). */
  path: FieldPath;
  /** The kind referenced. */
  kind: string;
}

/**
 * Everything a surface needs to know about a kind, derived from its schema file.
 * Generic layers (service routes, engine diff, provider, constructs) read only this.
 */
export interface KindDescriptor {
  kind: string;
  yamlKind?: string;
  title: string;
  description: string;
  collection?: string;
  scope: 'tenant' | 'project';
  /**
   * `x-scope-container`: its resources are the projects that project-scoped kinds live in. A
   * document of it names a project by its own name; deleting one deletes what is inside.
   */
  scopeContainer: boolean;
  identity: string;
  operations: Operation[];
  specOperations: Operation[];
  readPermission: PermissionLevel;
  writePermission: PermissionLevel;
  readOnlyKind: boolean;
  /** Stored under the resource that made it (a run under its connector) and deleted with it. */
  deletedWithParent: boolean;
  /** At most this many per project (per tenant for tenant-scoped kinds): `x-max-per-scope`. */
  maxPerScope?: number;
  /** The schema file as written. */
  schema: KindSchemaFile;
  /** Top-level field names by role. */
  computedFields: string[];
  immutableFields: string[];
  secretPaths: FieldPath[];
  sensitivePaths: FieldPath[];
  onceFields: string[];
  references: Reference[];
  /** Top-level arrays whose items (name + depends_on) must form a DAG, with the noun used in messages. */
  dags: { field: string; noun: string }[];
  normalizers: { path: FieldPath; rule: NonNullable<JsonSchema['x-normalize']> | 'cron' }[];
  /**
   * The top-level field holding the kind's cron schedule (`x-format: cron`), if any: the service
   * keeps the next due time of every such resource in its `schedules` table and starts its runs.
   */
  scheduleField?: string;
  /** How its state maps to health (`x-health`); kinds without one are healthy once they exist. */
  health?: HealthRuleKeyword;
  /** `x-test-action`: the item sub-path that tests its connection (dpctl apply --test-connections, the provider's run_setup_tests). */
  testAction?: string;
  /**
   * The value of the health field right after creation (its `x-initial`, `created` for a
   * connector): a resource still in it has never run, so nothing has shown that it works.
   */
  initialState?: unknown;
  /** `x-provisioning`: provisioned by a project-wide plan and apply, which dpctl and the provider run and wait for. */
  provisioning?: ProvisioningKeyword;
  /** Request body for create: computed fields removed. */
  createSchema: JsonSchema;
  /** Request body for PATCH: like create, nothing required, no top-level defaults. */
  updateSchema: JsonSchema;
  /** What the API returns: secrets removed. */
  responseSchema: JsonSchema;
}

const clone = <T>(value: T): T => structuredClone(value);

// The derivations below work in place on a copy made once per derived schema: copying again at
// each level (as they once did) copied nested parts once per level above them, and made describing
// the kinds ~30 ms of every process's start (CLI, provider, service).

/** Drops the keywords that only describe the kind file itself; the rest is a copy. */
function bodyOnly(schema: KindSchemaFile): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$schema' || key === '$id') continue;
    if (key.startsWith('x-')) continue;
    (out as Record<string, unknown>)[key] = value;
  }
  return clone(out);
}

/** Removes, in place, the properties `drop` picks (and their `required` entries), in nested objects and arrays of objects too. */
function dropProperties(schema: JsonSchema, drop: (prop: JsonSchema) => boolean): JsonSchema {
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    if (drop(prop)) {
      delete schema.properties![name];
      schema.required = schema.required?.filter((r) => r !== name);
    } else if (prop.properties) {
      dropProperties(prop, drop);
    } else if (prop.items?.properties) {
      dropProperties(prop.items, drop);
    }
  }
  return schema;
}

/** Lets the property be null too, in place. */
function allowNull(prop: JsonSchema): void {
  const types = Array.isArray(prop.type) ? prop.type : prop.type ? [prop.type] : [];
  if (types.length && !types.includes('null')) prop.type = [...types, 'null'];
  if (prop.enum && !prop.enum.includes(null)) prop.enum = [...prop.enum, null];
}

/** Drops if/then rules below the top level, in place: responses are never validated, and serialisers warn on them. */
function dropConditionals(schema: JsonSchema): JsonSchema {
  delete schema.allOf;
  delete schema.if;
  delete schema.then;
  for (const prop of Object.values(schema.properties ?? {})) dropConditionals(prop);
  if (schema.items) dropConditionals(schema.items);
  return schema;
}

/**
 * Mirrors our keywords into the standard ones (readOnly for computed, writeOnly for
 * secrets) so generic JSON Schema and OpenAPI tools see them; the x- keywords stay the source.
 */
function annotateStandard(schema: JsonSchema, source: JsonSchema): JsonSchema {
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const original = source.properties?.[name];
    if (!original) continue;
    if (original['x-computed']) (prop as Record<string, unknown>).readOnly = true;
    if (original['x-secret']) (prop as Record<string, unknown>).writeOnly = true;
    annotateStandard(prop, original);
    if (prop.items && original.items) annotateStandard(prop.items, original.items);
  }
  return schema;
}

export function describeKind(file: KindSchemaFile): KindDescriptor {
  const props = file.properties ?? {};
  const top = (pred: (p: JsonSchema) => boolean) => Object.keys(props).filter((n) => pred(props[n]));
  const secretPaths: FieldPath[] = [];
  const sensitivePaths: FieldPath[] = [];
  const references: Reference[] = [];
  const normalizers: KindDescriptor['normalizers'] = [];
  walkProperties(file, (path, prop) => {
    if (prop['x-secret']) secretPaths.push(path);
    if (prop['x-secret'] || prop['x-sensitive']) sensitivePaths.push(path);
    if (prop['x-ref']) references.push({ path, kind: prop['x-ref'] });
    if (prop['x-normalize']) normalizers.push({ path, rule: prop['x-normalize'] });
    if (prop['x-format'] === 'cron') normalizers.push({ path, rule: 'cron' });
  });

  const body = annotateStandard(bodyOnly(file), file);
  const createSchema = dropProperties(clone(body), (p) => !!p['x-computed']);
  const updateSchema = clone(createSchema);
  const required = new Set(createSchema.required ?? []);
  delete updateSchema.required;
  for (const [name, prop] of Object.entries(updateSchema.properties ?? {})) {
    delete prop.default;
    // In a PATCH, null clears an optional field (back to its default, if it has one).
    if (!required.has(name) && !prop['x-secret']) allowNull(prop);
  }
  // `body` is not used after this: the response schema is made from it in place.
  const responseSchema = dropConditionals(dropProperties(body, (p) => !!p['x-secret']));
  delete responseSchema.required;

  const operations = file['x-operations'] ?? [];
  return {
    kind: file['x-kind'],
    yamlKind: file['x-yaml-kind'],
    title: file.title ?? file['x-kind'],
    description: file.description ?? '',
    collection: file['x-collection'],
    scope: file['x-scope'],
    scopeContainer: !!file['x-scope-container'],
    identity: file['x-identity'] ?? 'id',
    operations,
    specOperations: file['x-spec-operations'] ?? operations,
    readPermission: file['x-read-permission'] ?? 'read-only',
    writePermission: file['x-write-permission'] ?? 'read-write',
    readOnlyKind: !!file['x-read-only-kind'],
    deletedWithParent: !!file['x-deleted-with-parent'],
    maxPerScope: file['x-max-per-scope'],
    schema: file,
    health: file['x-health'],
    testAction: file['x-test-action'],
    initialState: file['x-health'] ? props[file['x-health'].field]?.['x-initial'] : undefined,
    provisioning: file['x-provisioning'],
    scheduleField: Object.keys(props).find((n) => props[n]['x-format'] === 'cron'),
    dags: Object.entries(props)
      .filter(([, p]) => p['x-dag'])
      .map(([field, p]) => ({ field, noun: String(p['x-dag']) })),
    computedFields: top((p) => !!p['x-computed']),
    immutableFields: top((p) => !!p['x-immutable']),
    secretPaths,
    sensitivePaths,
    onceFields: top((p) => !!p['x-once']),
    references,
    normalizers,
    createSchema,
    updateSchema,
    responseSchema,
  };
}

/** The kind's title as a word in a sentence: "infrastructure resource", but "SSO provider". */
export const kindNoun = (d: Pick<KindDescriptor, 'title'>): string =>
  /^[A-Z]{2,}\b/.test(d.title) ? d.title : d.title.charAt(0).toLowerCase() + d.title.slice(1);

/** "infrastructure resources", "masking policies". */
export const kindPlural = (d: Pick<KindDescriptor, 'title'>): string => {
  const noun = kindNoun(d);
  return /[^aeiou]y$/.test(noun) ? `${noun.slice(0, -1)}ies` : `${noun}s`;
};

/** "a project holds at most 5,000 infrastructure resources" (`x-max-per-scope`); undefined when the kind has no cap. */
export function scopeCapSentence(d: Pick<KindDescriptor, 'title' | 'scope' | 'maxPerScope'>): string | undefined {
  if (d.maxPerScope === undefined) return undefined;
  return `a ${d.scope} holds at most ${d.maxPerScope.toLocaleString('en-US')} ${kindPlural(d)}`;
}
