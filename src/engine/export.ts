/**
 * `dpctl export`: the live resources of projects as declarative YAML, in the format
 * `dpctl validate` accepts (see src/config/layout.ts), derived from the kinds' descriptors
 * only: references by name, computed fields and dpctl.dev/* labels dropped, schema
 * defaults omitted, write-only secrets as `{ secretRef: { env } }` (they cannot be read back).
 */
import { maxOf } from '../collections.js';
import type { DataPlatformClient } from '../client/index.js';
import { API_VERSION, CONFIG_FILE_MAX_BYTES, declarableKinds, layoutOf, type KindLayout } from '../config/index.js';
import { patternOf, renameAt } from '../config/layout.js';
// The yaml package loads on the first export: plan and apply (which load this module too) never need it.
import { yaml } from '../config/positions.js';
import {
  deleteAt,
  formatPath,
  SCOPE_CONTAINER,
  setAt,
  valuesAt,
  type FieldPath,
  type JsonSchema,
  type KindDescriptor,
} from '../kinds/index.js';
import { deepEqual, ENGINE_LABELS, fillDefaults, hasLabels, LABELS_FIELD } from './diff.js';
import { mapLimit, type LiveObject } from './observe.js';

export interface ExportOptions {
  /** Names of the projects to export. */
  projects?: string[];
  /** Every project of the tenant. */
  allProjects?: boolean;
  /** Tenant-level kinds to export too, by kind name (`dpctl export --users`: `['user']`). */
  tenantKinds?: string[];
  concurrency?: number;
  /** Most bytes of documents one file holds (EXPORT_FILE_MAX_BYTES unless a test says less). */
  maxFileBytes?: number;
}

/**
 * Most bytes of documents one exported file holds: half of what a config file may hold
 * (CONFIG_FILE_MAX_BYTES; the other half leaves room for the header of secrets), so that a project
 * of 100,000 connectors is exported as files `dpctl plan` reads (`connectors.yaml`,
 * `connectors-2.yaml`, ...), not as one it refuses.
 */
export const EXPORT_FILE_MAX_BYTES = CONFIG_FILE_MAX_BYTES / 2;

/** A secret the exported YAML refers to: set this variable before plan or apply. */
export interface ExportedSecret {
  env: string;
  yamlKind: string;
  project?: string;
  name: string;
  /** API field (`credentials.password`). */
  field: string;
  /** As written in the document (`spec.credentials.password`). */
  yamlField: string;
}

export interface ExportedDocument {
  descriptor: KindDescriptor;
  project?: string;
  name: string;
  /** apiVersion, kind, metadata, spec. */
  document: Record<string, unknown>;
  secrets: ExportedSecret[];
}

export interface ExportedFile {
  /** Relative path (`analytics/connectors.yaml`, `users.yaml`). */
  path: string;
  /** The file's text (its header of secrets, then its documents), built on first read. */
  readonly content: string;
  documents: ExportedDocument[];
}

export interface ExportResult {
  files: ExportedFile[];
  secrets: ExportedSecret[];
  warnings: string[];
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * `ANALYTICS_ORDERS_DB_PASSWORD`: project, name and the secret's field name, upper snake case, a
 * word repeated where two parts meet said once (project `sales`, channel `sales-slack`, field
 * `slack_webhook_url`: `SALES_SLACK_WEBHOOK_URL`, not `SALES_SALES_SLACK_SLACK_WEBHOOK_URL`).
 * exportResources makes them unique.
 */
export function suggestedEnvName(project: string | undefined, name: string, path: (string | number)[]): string {
  const field = String([...path].reverse().find((p) => typeof p === 'string') ?? 'secret');
  return [project, name, field]
    .filter((p): p is string => !!p)
    .join('_')
    .toUpperCase()
    .replace(/[^A-Z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .split('_')
    .filter((word, i, words) => word !== words[i - 1])
    .join('_')
    .replace(/^(\d)/, '_$1');
}

/**
 * Removes values equal to their schema default (recursively inside objects, not inside arrays,
 * whose items the diff fills with defaults anyway), keeps required fields.
 */
function withoutDefaults(schema: JsonSchema | undefined, value: unknown): unknown {
  if (!schema || !isObject(value) || !schema.properties) return value;
  const out: Record<string, unknown> = {};
  const required = new Set(schema.required ?? []);
  for (const [k, v] of Object.entries(value)) {
    const prop = schema.properties[k];
    if (v === null || v === undefined) continue;
    if (
      prop &&
      !required.has(k) &&
      prop.default !== undefined &&
      deepEqual(fillDefaults(prop, v), fillDefaults(prop, structuredClone(prop.default)))
    )
      continue;
    out[k] = Array.isArray(v) && prop?.items ? v.map((item) => withoutDefaults(prop.items, item)) : withoutDefaults(prop, v);
  }
  return out;
}

/** Orders keys as the schema lists its properties (then any others, sorted): stable output. */
function ordered(schema: JsonSchema | undefined, value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => ordered(schema?.items, v));
  if (!isObject(value)) return value;
  const known = Object.keys(schema?.properties ?? {});
  const keys = [
    ...known.filter((k) => k in value),
    ...Object.keys(value)
      .filter((k) => !known.includes(k))
      .sort(),
  ];
  return Object.fromEntries(keys.map((k) => [k, ordered(schema?.properties?.[k], value[k])]));
}

/** API field names -> YAML names (reference fields renamed: `connector_id` -> `connector`). */
function apiToSpec(layout: KindLayout, value: unknown, path: (string | number)[] = []): unknown {
  if (Array.isArray(value)) return value.map((item, i) => apiToSpec(layout, item, [...path, i]));
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value))
    out[renameAt(layout, patternOf(path), key, 'api')?.yaml ?? key] = apiToSpec(layout, child, [...path, key]);
  return out;
}

/**
 * Which write-only secrets a live resource has cannot be read back. A secret is written when
 * the kind has labels (so the engine can fingerprint it) and its parent object is on the
 * resource, and then: a secret named after a value of one of the kind's enum fields
 * (`slack_webhook_url` for `type: slack`) only when the resource has that value; any other
 * secret only when its parent holds a field that is not named after such a value (`signing_secret`
 * next to a webhook's `url`, a connector's `password` next to its `username`).
 */
function secretsOf(d: KindDescriptor, object: Record<string, unknown>): (string | number)[][] {
  if (!hasLabels(d)) return [];
  const discriminators: { field: string; values: string[] }[] = [];
  for (const [field, prop] of Object.entries(d.schema.properties ?? {})) {
    if (!prop['x-computed'] && Array.isArray(prop.enum) && prop.enum.every((v) => typeof v === 'string'))
      discriminators.push({ field, values: prop.enum as string[] });
  }
  const claimedBy = (name: string) => discriminators.find((x) => x.values.some((v) => name.startsWith(`${v}_`)));
  const secretNames = new Set(d.secretPaths.map((p) => String(p[p.length - 1])));
  const out: (string | number)[][] = [];
  for (const pattern of d.secretPaths) {
    const parentPattern = pattern.slice(0, -1) as FieldPath;
    const name = String(pattern[pattern.length - 1]);
    for (const { path, value } of valuesAt(object, parentPattern)) {
      if (!isObject(value)) continue;
      const owner = claimedBy(name);
      if (owner) {
        if (name.startsWith(`${String(object[owner.field])}_`)) out.push([...path, name]);
        continue;
      }
      const siblings = Object.keys(value).filter((k) => !secretNames.has(k) && value[k] !== null && value[k] !== undefined);
      if (siblings.some((k) => !claimedBy(k))) out.push([...path, name]);
    }
  }
  return out;
}

/** One live resource as a YAML document (plain object). */
export function exportDocument(
  d: KindDescriptor,
  project: string | undefined,
  live: LiveObject,
  nameOfId: (id: string) => string | undefined,
  warn: (message: string) => void,
): ExportedDocument {
  const layout = layoutOf(d);
  const name = String(live[d.identity]);
  const subject = `${layout.yamlKind} ${project ? `${project}/` : ''}${name}`;
  const body = structuredClone(live) as Record<string, unknown>;
  const secretPaths = secretsOf(d, body);
  for (const p of layout.computedPaths) deleteAt(body, p);
  for (const p of d.secretPaths) deleteAt(body, p);
  for (const field of d.computedFields) delete body[field];
  delete body.id;
  // Only what a create accepts.
  for (const k of Object.keys(body)) if (!d.createSchema.properties?.[k]) delete body[k];
  for (const ref of d.references) {
    for (const { path, value } of valuesAt(body, ref.path)) {
      if (typeof value !== 'string') continue;
      const target = nameOfId(value);
      if (target === undefined)
        warn(`${subject}: ${formatPath(path)} refers to ${value}, which is not among the exported resources; left as the id`);
      else setAt(body, path, target);
    }
  }
  const labels = Object.fromEntries(
    Object.entries((body[LABELS_FIELD] as Record<string, string> | undefined) ?? {})
      .filter(([k]) => !ENGINE_LABELS.includes(k) && !k.startsWith('dpctl.dev/'))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  delete body[LABELS_FIELD];
  delete body[d.identity];
  let spec = withoutDefaults(d.createSchema, body) as Record<string, unknown>;
  spec = ordered(d.createSchema, spec) as Record<string, unknown>;
  const secrets: ExportedSecret[] = [];
  for (const path of secretPaths) {
    const env = suggestedEnvName(project, name, path);
    setAt(spec, path, { secretRef: { env } });
    secrets.push({ env, yamlKind: layout.yamlKind, project, name, field: formatPath(path), yamlField: formatPath(['spec', ...path]) });
  }
  const yamlSpec = apiToSpec(layout, spec) as Record<string, unknown>;
  for (const s of secrets) s.yamlField = formatPath(['spec', ...yamlPathOf(layout, s.field)]);
  const metadata: Record<string, unknown> = { name };
  if (layout.projectScoped) metadata.project = project;
  if (layout.hasLabels && Object.keys(labels).length) metadata.labels = labels;
  const document: Record<string, unknown> = { apiVersion: API_VERSION, kind: layout.yamlKind, metadata };
  if (Object.keys(yamlSpec).length) document.spec = yamlSpec;
  return { descriptor: d, project, name, document, secrets };
}

function yamlPathOf(layout: KindLayout, field: string): (string | number)[] {
  const parts = field.split(/\.|\[(\d+)\]/).filter((p) => p !== undefined && p !== '');
  const path = parts.map((p) => (/^\d+$/.test(p) ? Number(p) : p));
  return path.map((seg, i) => (typeof seg === 'number' ? seg : (renameAt(layout, patternOf(path.slice(0, i)), seg, 'api')?.yaml ?? seg)));
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export const EXPORT_HEADER = 'Exported by dpctl export from the live platform.';

/** YAML text of documents, with a header listing the environment variables their secretRefs name. */
export function renderDocuments(documents: ExportedDocument[], header: string[] = []): string {
  const secrets = documents.flatMap((d) => d.secrets);
  const lines = [...header];
  if (secrets.length) {
    lines.push('Secrets are write-only and cannot be read back: set these environment variables before plan or apply:');
    const width = maxOf(secrets.map((s) => s.env.length));
    for (const s of secrets)
      lines.push(`  ${s.env.padEnd(width)}  ${s.yamlKind} ${s.project ? `${s.project}/` : ''}${s.name} ${s.yamlField}`);
  }
  const head = lines.map((l) => `# ${l}`.trimEnd()).join('\n');
  const body = documents.map(documentText).join('---\n');
  return `${head ? `${head}\n` : ''}${body}`;
}

/** Each document's YAML, rendered once (about 0.1 ms a document): the files and stdout both use it. */
const rendered = new WeakMap<ExportedDocument, string>();

function documentText(d: ExportedDocument): string {
  let text = rendered.get(d);
  if (text === undefined) rendered.set(d, (text = new (yaml().Document)(d.document).toString({ lineWidth: 0 })));
  return text;
}

/** `documents` in runs of at most `maxBytes` of YAML each (a document larger than that is a run of its own). */
function partsOf(documents: ExportedDocument[], maxBytes: number): ExportedDocument[][] {
  const parts: ExportedDocument[][] = [];
  let part: ExportedDocument[] = [];
  let bytes = 0;
  for (const d of documents) {
    const size = Buffer.byteLength(documentText(d));
    if (part.length && bytes + size > maxBytes) {
      parts.push(part);
      [part, bytes] = [[], 0];
    }
    part.push(d);
    bytes += size;
  }
  if (part.length) parts.push(part);
  return parts;
}

/** The path of part `n` (from 1) of a file: `connectors.yaml`, then `connectors-2.yaml`, ... */
const partPath = (path: string, n: number) => (n === 1 ? path : path.replace(/\.yaml$/, `-${n}.yaml`));

/** The file a document goes to: `<project>/project.yaml`, `<project>/<collection>.yaml`, `users.yaml`. */
function fileOf(d: KindDescriptor, project: string | undefined, name: string): string {
  if (d.scopeContainer) return `${name}/project.yaml`;
  if (d.scope === 'project') return `${project}/${d.collection ?? d.kind}.yaml`;
  return `${d.collection ?? d.kind}.yaml`;
}

/**
 * Lists the live resources of the chosen projects (list calls only: every declarable kind in
 * each project; the tenant-level kinds of `tenantKinds`) and writes them as documents, one file per kind and project.
 */
export async function exportResources(client: DataPlatformClient, options: ExportOptions): Promise<ExportResult> {
  const warnings: string[] = [];
  const kinds = declarableKinds();
  const projects = (await client.resourcesOf(SCOPE_CONTAINER.kind).listAll()) as LiveObject[];
  const wanted = options.allProjects ? projects : projects.filter((p) => options.projects?.includes(String(p.name)));
  for (const name of options.projects ?? []) if (!projects.some((p) => p.name === name)) throw new Error(`no project named "${name}"`);
  const docs: { d: KindDescriptor; project?: string; object: LiveObject }[] = wanted.map((p) => ({ d: SCOPE_CONTAINER, object: p }));
  const jobs: { d: KindDescriptor; project?: LiveObject }[] = [];
  for (const d of kinds) {
    if (d.scopeContainer || !d.operations.includes('list')) continue;
    if (d.scope === 'project') for (const p of wanted) jobs.push({ d, project: p });
    else if (options.tenantKinds?.includes(d.kind)) jobs.push({ d });
  }
  const listed = await mapLimit(
    jobs,
    options.concurrency ?? 4,
    async (job) => (await client.resourcesOf(job.d.kind, { projectId: job.project?.id }).listAll()) as LiveObject[],
  );
  jobs.forEach((job, i) => {
    for (const object of listed[i]) docs.push({ d: job.d, project: job.project ? String(job.project.name) : undefined, object });
  });
  const names = new Map<string, string>();
  for (const x of docs) names.set(x.object.id, String(x.object[x.d.identity]));
  const exported = docs.map((x) =>
    exportDocument(
      x.d,
      x.project,
      x.object,
      (id) => names.get(id),
      (w) => warnings.push(w),
    ),
  );
  // Unique variable names, whatever the names held.
  const used = new Map<string, number>();
  for (const doc of exported) {
    for (const s of doc.secrets) {
      const n = (used.get(s.env) ?? 0) + 1;
      used.set(s.env, n);
      if (n > 1) {
        const env = `${s.env}_${n}`;
        const path = s.field;
        const at = valuesAt(doc.document.spec, [...yamlPathOf(layoutOf(doc.descriptor), path).map(String), 'secretRef'] as FieldPath);
        for (const { value } of at) if (isObject(value)) value.env = env;
        s.env = env;
      }
    }
  }
  const byFile = new Map<string, ExportedDocument[]>();
  for (const doc of exported) {
    const file = fileOf(doc.descriptor, doc.project, doc.name);
    if (!byFile.has(file)) byFile.set(file, []);
    byFile.get(file)!.push(doc);
  }
  const files: ExportedFile[] = [];
  for (const path of [...byFile.keys()].sort(compare)) {
    const documents = byFile.get(path)!.sort((a, b) => compare(a.name, b.name));
    partsOf(documents, options.maxFileBytes ?? EXPORT_FILE_MAX_BYTES).forEach((part, i) => {
      // Built when read: the stdout stream renders all documents under one header instead.
      let content: string | undefined;
      files.push({
        path: partPath(path, i + 1),
        documents: part,
        get content() {
          return (content ??= renderDocuments(part, [EXPORT_HEADER]));
        },
      });
    });
  }
  return { files, secrets: files.flatMap((f) => f.documents.flatMap((d) => d.secrets)), warnings };
}
