import { KINDS, SCOPE_CONTAINER, walkProperties, type FieldPath, type JsonSchema, type KindDescriptor } from '../kinds/index.js';

/** The only apiVersion of the document format. */
export const API_VERSION = 'dataplatform/v1';

/**
 * The YAML name of a reference field, derived from its API name: `connector_id` -> `connector`,
 * `channel_ids` -> `channels` (the stem pluralised: `policy_ids` -> `policies`).
 */
export function yamlReferenceName(apiName: string): string {
  if (apiName.endsWith('_ids')) return plural(apiName.slice(0, -'_ids'.length));
  if (apiName.endsWith('_id')) return apiName.slice(0, -'_id'.length);
  throw new Error(`reference field "${apiName}" must end in _id or _ids to be named in YAML`);
}

function plural(stem: string): string {
  if (/[^aeiou]y$/.test(stem)) return `${stem.slice(0, -1)}ies`;
  if (/(s|x|z|ch|sh)$/.test(stem)) return `${stem}es`;
  return `${stem}s`;
}

/** A reference field renamed for YAML: at `parent` (an API path pattern), `api` is written `yaml`. */
export interface FieldRename {
  parent: FieldPath;
  api: string;
  yaml: string;
  /** Kind referenced (descriptor kind, e.g. `connector`). */
  refKind: string;
  /** An array of references (`channel_ids`) rather than one. */
  many: boolean;
}

/**
 * How one kind is written as a YAML document, derived from its descriptor only:
 * metadata.name is the identity field, metadata.project the project's name (project-scoped
 * kinds), metadata.labels the `labels` field (kinds that have one); spec is every other
 * writable field, with references renamed and holding names, and secrets as secretRefs.
 */
export interface KindLayout {
  descriptor: KindDescriptor;
  yamlKind: string;
  projectScoped: boolean;
  /** The kind has a `labels` field, written as metadata.labels. */
  hasLabels: boolean;
  renames: FieldRename[];
  /** API path patterns of write-only secrets (same in YAML, under spec). */
  secretPaths: FieldPath[];
  /** API path patterns of computed fields (never accepted in YAML). */
  computedPaths: FieldPath[];
}

export const LABELS_FIELD = 'labels';

const samePattern = (a: FieldPath, b: FieldPath) => a.length === b.length && a.every((s, i) => s === b[i]);

/**
 * Kinds that can be declared: they have an x-yaml-kind, are not read-only, and the API can
 * create, update and delete them, so a reconciler can converge them in place. API keys are
 * not (no update, and their value is shown once at creation).
 */
export function declarableKinds(): KindDescriptor[] {
  return [...KINDS.values()].filter(
    (d) =>
      d.yamlKind && d.collection && !d.readOnlyKind && (['create', 'update', 'delete'] as const).every((op) => d.operations.includes(op)),
  );
}

const layouts = new Map<string, KindLayout>();

export function layoutOf(descriptor: KindDescriptor): KindLayout {
  const known = layouts.get(descriptor.kind);
  if (known) return known;
  const renames: FieldRename[] = descriptor.references.map((ref) => {
    const many = ref.path[ref.path.length - 1] === '*';
    const fieldPath = many ? ref.path.slice(0, -1) : ref.path;
    const api = fieldPath[fieldPath.length - 1];
    return { parent: fieldPath.slice(0, -1), api, yaml: yamlReferenceName(api), refKind: ref.kind, many };
  });
  const computedPaths: FieldPath[] = [];
  walkProperties(descriptor.schema, (path, prop) => {
    if (prop['x-computed']) computedPaths.push(path);
  });
  const layout: KindLayout = {
    descriptor,
    yamlKind: descriptor.yamlKind!,
    projectScoped: descriptor.scope === 'project',
    hasLabels: !!descriptor.createSchema.properties?.[LABELS_FIELD],
    renames,
    secretPaths: descriptor.secretPaths,
    computedPaths,
  };
  layouts.set(descriptor.kind, layout);
  return layout;
}

export function declarableLayouts(): KindLayout[] {
  return declarableKinds().map(layoutOf);
}

let byYamlKind: Map<string, KindLayout> | undefined;

/** Asked once per document: the layouts by YAML kind are built once (the kinds are fixed at build time). */
export function layoutByYamlKind(yamlKind: string): KindLayout | undefined {
  byYamlKind ??= new Map(declarableLayouts().map((l) => [l.yamlKind, l]));
  return byYamlKind.get(yamlKind);
}

/** The kind that holds projects (what metadata.project names). */
export function projectLayout(): KindLayout {
  return layoutOf(SCOPE_CONTAINER);
}

/** Pattern of a concrete path: array indexes become '*'. */
export function patternOf(path: (string | number)[]): FieldPath {
  return path.map((p) => (typeof p === 'number' ? '*' : p));
}

export function renameAt(layout: KindLayout, parent: FieldPath, name: string, from: 'api' | 'yaml'): FieldRename | undefined {
  return layout.renames.find((r) => samePattern(r.parent, parent) && (from === 'api' ? r.api : r.yaml) === name);
}

/** API path (relative to the resource) -> YAML path relative to spec. */
export function apiToYamlPath(layout: KindLayout, path: (string | number)[]): (string | number)[] {
  return path.map((seg, i) => {
    if (typeof seg === 'number') return seg;
    return renameAt(layout, patternOf(path.slice(0, i)), seg, 'api')?.yaml ?? seg;
  });
}

/** YAML path relative to spec -> API path. */
export function yamlToApiPath(layout: KindLayout, path: (string | number)[]): (string | number)[] {
  const out: (string | number)[] = [];
  for (const seg of path) {
    if (typeof seg === 'number') out.push(seg);
    else out.push(renameAt(layout, patternOf(out), seg, 'yaml')?.api ?? seg);
  }
  return out;
}

/** Renames the keys of a YAML spec value into API field names (a deep copy; values unchanged). */
export function specToApi(layout: KindLayout, value: unknown, path: (string | number)[] = []): unknown {
  // Nothing to rename (most kinds): the same copy, without a path and three rename lookups per key.
  if (!layout.renames.length) return copyJson(value);
  if (Array.isArray(value)) return value.map((item, i) => specToApi(layout, item, [...path, i]));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
    // An API name written in YAML (`connector_id`) is invalid there; never let it shadow the renamed field.
    if (renameAt(layout, patternOf(path), key, 'api') && !renameAt(layout, patternOf(path), key, 'yaml')) continue;
    const api = renameAt(layout, patternOf(path), key, 'yaml')?.api ?? key;
    out[api] = specToApi(layout, child, [...path, api]);
  }
  return out;
}

/** A deep copy of parsed YAML or JSON data (objects, arrays, scalars), key by key as specToApi copies. */
function copyJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyJson);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) out[key] = copyJson((value as Record<string, unknown>)[key]);
  return out;
}

export function matchesPattern(path: (string | number)[], pattern: FieldPath): boolean {
  return samePattern(patternOf(path), pattern);
}

export function isUnder(path: (string | number)[], prefix: (string | number)[]): boolean {
  return prefix.length <= path.length && prefix.every((p, i) => String(p) === String(path[i]));
}

export type { JsonSchema };
