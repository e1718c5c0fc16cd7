/**
 * Writes the provider's reference documentation in the Terraform Registry layout (as
 * tfplugindocs lays it out): docs/index.md, docs/resources/<name>.md and
 * docs/data-sources/<name>.md. docs/guides/ is written by hand and left alone.
 *
 * Nothing here lists a field or a kind. Attributes come from the specs the provider serves
 * (`resourceSpecs()`, `dataSourceSpecs()`, `providerSchemaMessage()` in src/provider/schema.ts),
 * so a page cannot disagree with `terraform providers schema -json`; the YAML form from the
 * config layouts `dpctl validate` uses; class names from the generated cdktf registry; API paths
 * from the kind descriptors. Examples are derived from the kind schemas (see ExampleBuilder).
 * test/unit/docs-generated.test.ts fails while the checked-in pages are stale.
 *
 *   node --import tsx scripts/generate-docs.ts
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Document } from 'yaml';
import { DATA_SOURCE_CONSTRUCTS, DataplatformProvider, RESOURCE_CONSTRUCTS } from '../src/cdktf/generated/index.js';
import { camel, propName } from '../src/cdktf/naming.js';
import { kindRoutes } from '../src/client/resources.js';
import { API_VERSION, declarableKinds, layoutOf, type KindLayout } from '../src/config/index.js';
import { patternOf, renameAt } from '../src/config/layout.js';
import { suggestedEnvName } from '../src/engine/export.js';
import {
  kind as kindNamed,
  kindNoun as noun,
  kindPlural as plural,
  scopeCapSentence,
  type JsonSchema,
  type KindDescriptor,
  type Operation,
} from '../src/kinds/index.js';
import {
  apiField,
  dataSourceSpecs,
  PROVIDER_SOURCE,
  PROVIDER_TYPE,
  providerSchemaMessage,
  resourceSpecs,
  type AttrSpec,
  type DataSourceSpec,
  type ResourceSpec,
} from '../src/provider/schema.js';
import { TIMEOUT_DEFAULTS, type TimeoutOp } from '../src/provider/settings.js';

const ROOT = join(import.meta.dirname, '..');
export const DOCS_DIR = join(ROOT, 'docs');
/** The folders under docs/ whose every file the generator owns (docs/guides is not one). */
export const GENERATED_DIRS = ['resources', 'data-sources'] as const;
export const INDEX_PAGE = 'index.md';

const WRITE_ONLY_LINK = '[Write-only](https://developer.hashicorp.com/terraform/language/resources/ephemeral#write-only-arguments)';

function packageVersion(): string {
  return (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
/** The page name of a Terraform type: `dataplatform_alert_rule` -> `alert_rule`. */
export const pageName = (typeName: string) => typeName.slice(PROVIDER_TYPE.length + 1);
const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();
const sentence = (text: string) => {
  const t = oneLine(text);
  return !t || /[.!?:)]$/.test(t) ? t : `${t}.`;
};
/** `a` or `an` before a kind's title: acronyms by their letters' sound (an SSO provider, an API key), `a user`. */
function article(phrase: string): string {
  const word = phrase.split(/\s/)[0];
  if (/^[A-Z]{2,}$/.test(word)) return /^[AEFHILMNORSX]/.test(word) ? 'an' : 'a';
  if (/^u[^aeiou][aeiou]/i.test(word)) return 'a';
  return /^[aeiou]/i.test(word) ? 'an' : 'a';
}
/** A kind's title inside a sentence: `Alert rule` -> `alert rule`, acronyms kept (`API key`, `SSO provider`). */
const capital = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

// ---------------------------------------------------------------------------------------------
// Examples: one model per page, rendered as HCL, cdktf TypeScript and YAML
// ---------------------------------------------------------------------------------------------

/** A reference to another resource of the example: an id in the API, a name in YAML. */
export class Ref {
  constructor(readonly target: ExampleResource) {}
}

/** A write-only secret: a secretRef to `env` in YAML, a sensitive variable in Terraform. */
export class Secret {
  constructor(readonly env: string) {}
}

export type ExampleValue = string | number | boolean | null | Ref | Secret | ExampleValue[] | { [key: string]: ExampleValue };

/** One resource of an example, API-shaped (identity and labels in the body, no project_id). */
export interface ExampleResource {
  descriptor: KindDescriptor;
  name: string;
  project?: ExampleResource;
  body: Record<string, ExampleValue>;
}

export interface Example {
  /** Dependencies first (the project, referenced resources), the page's resource last. */
  resources: ExampleResource[];
  subject: ExampleResource;
}

const typeOf = (s: JsonSchema) => (Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type);
/** The first value of the JSON Schema `examples` keyword (our kind files give some). */
const exampleOf = (s: JsonSchema): unknown => (s as { examples?: unknown[] }).examples?.[0];
/** A reference or a secret: each drags in another resource or a variable, so an example shows one per object. */
const isLink = (s: JsonSchema) => !!(s['x-ref'] || s['x-secret'] || s.items?.['x-ref']);

/** Whether an optional field is worth showing: it, or something below it, has an example value or a link. */
function shows(s: JsonSchema): boolean {
  if (exampleOf(s) !== undefined) return true;
  const below = { ...(s.properties ?? {}), ...(s.items?.properties ?? {}) };
  return Object.values(below).some((p) => !p['x-computed'] && (isLink(p) || shows(p)));
}

/** Whether a conditional's `if` holds for a value (the subset our kind files use: const, enum, required). */
function holds(cond: JsonSchema, value: Record<string, unknown>): boolean {
  if (!(cond.required ?? []).every((r) => r in value)) return false;
  return Object.entries(cond.properties ?? {}).every(([name, p]) => {
    if (!(name in value)) return true;
    if ('const' in p && value[name] !== p.const) return false;
    return !p.enum || p.enum.includes(value[name]);
  });
}

/** A string value from the schema alone, when it gives no example. */
function derivedString(s: JsonSchema): string {
  if (s['x-format'] === 'cron') return '0 2 * * *';
  if (s['x-format'] === 'regex') return '.*';
  if (s.format === 'email') return 'data-team@example.com';
  if (s.format === 'uri') return 'https://example.com';
  if (s.format === 'date-time') return '2025-01-01T00:00:00Z';
  if (typeof s.default === 'string' && s.default) return s.default;
  return 'example';
}

interface At {
  resource: ExampleResource;
  /** API path inside the resource. */
  path: (string | number)[];
  /** The page's own resource: optional fields with examples are shown; dependencies get only what they require. */
  full: boolean;
}

/**
 * Builds an example from a kind's schema: every required field (including what an if/then
 * requires for the values chosen), and on the page's own resource also the optional fields
 * that have an `examples` value, plus one optional reference or secret per object. Values are
 * the schema's `examples`, else its first enum value, default, minimum or a value of its format.
 * A reference brings in the referenced resource (built the same way, required fields only),
 * a project-scoped kind its project: the example is complete, so `dpctl validate` accepts it.
 */
export class ExampleBuilder {
  private readonly made = new Map<string, ExampleResource>();
  private readonly order: ExampleResource[] = [];

  static build(d: KindDescriptor): Example {
    const b = new ExampleBuilder();
    const subject = b.resource(d, true);
    // A rebuild for a conditional may drop a reference an earlier pass made: keep what is used.
    const used = new Set<ExampleResource>();
    const visitResource = (r: ExampleResource | undefined): void => {
      if (!r || used.has(r)) return;
      used.add(r);
      visitResource(r.project);
      visitValue(r.body);
    };
    const visitValue = (v: ExampleValue): void => {
      if (v instanceof Ref) visitResource(v.target);
      else if (Array.isArray(v)) v.forEach(visitValue);
      else if (isRecord(v)) Object.values(v).forEach((x) => visitValue(x as ExampleValue));
    };
    visitResource(subject);
    return { resources: b.order.filter((r) => used.has(r)), subject };
  }

  private resource(d: KindDescriptor, full: boolean): ExampleResource {
    const name = identityExample(d);
    const key = `${d.kind}/${name}`;
    const known = this.made.get(key);
    if (known) return known;
    const project = d.scope === 'project' ? this.resource(kindNamed('project'), false) : undefined;
    const r: ExampleResource = { descriptor: d, name, project, body: {} };
    this.made.set(key, r);
    r.body = this.object(d.schema, { resource: r, path: [], full });
    this.order.push(r);
    return r;
  }

  /**
   * An object: rebuilt while the conditionals that hold for it add requirements (a value chosen
   * for `type` makes its `then` require more). Each pass can only add rules, so it settles.
   */
  private object(schema: JsonSchema, at: At, extra: JsonSchema[] = []): Record<string, ExampleValue> {
    const conditionals = (schema.allOf ?? []).filter((r) => r.if && r.then);
    let rules: JsonSchema[] = [];
    let out = this.members(schema, [schema, ...extra], at);
    for (let pass = 0; pass < conditionals.length; pass++) {
      const next = conditionals.filter((r) => holds(r.if!, out)).map((r) => r.then!);
      if (next.length === rules.length) break;
      rules = next;
      out = this.members(schema, [schema, ...extra, ...rules], at);
    }
    return out;
  }

  private members(schema: JsonSchema, parts: JsonSchema[], at: At): Record<string, ExampleValue> {
    const required = new Set(parts.flatMap((p) => p.required ?? []));
    const out: Record<string, ExampleValue> = {};
    const props = Object.entries(schema.properties ?? {});
    // A required link already shows how references (or secrets) are written here.
    let linked = props.some(([name, prop]) => required.has(name) && isLink(prop));
    for (const [name, prop] of props) {
      if (prop['x-computed']) continue;
      if (!required.has(name)) {
        if (!at.full) continue;
        if (isLink(prop)) {
          if (linked) continue;
          linked = true;
        } else if (!shows(prop)) continue;
      }
      const nested = parts.slice(1).flatMap((p) => (p.properties?.[name] ? [p.properties[name]] : []));
      out[name] = this.value(prop, { ...at, path: [...at.path, name] }, nested);
    }
    return out;
  }

  private value(s: JsonSchema, at: At, extra: JsonSchema[]): ExampleValue {
    if (s['x-ref']) return new Ref(this.resource(kindNamed(s['x-ref']), false));
    if (s['x-secret']) return new Secret(suggestedEnvName(undefined, at.resource.name, at.path));
    if (at.path.length === 1 && at.path[0] === at.resource.descriptor.identity) return at.resource.name;
    const given = exampleOf(s);
    if (given !== undefined) return structuredClone(given) as ExampleValue;
    if ('const' in s) return s.const as ExampleValue;
    const choice = s.enum?.find((v) => v !== null);
    if (choice !== undefined) return choice as ExampleValue;
    switch (typeOf(s)) {
      case 'object':
        return s.properties ? this.object(s, at, extra) : ((structuredClone(s.default) ?? {}) as ExampleValue);
      case 'array': {
        const items = s.items ?? { type: 'string' };
        const nested = extra.flatMap((e) => (e.items ? [e.items] : []));
        return Array.from({ length: Math.max(1, s.minItems ?? 0) }, (_, i) => this.value(items, { ...at, path: [...at.path, i] }, nested));
      }
      case 'integer':
      case 'number':
        return (s.default as number | undefined) ?? s.minimum ?? 1;
      case 'boolean':
        return (s.default as boolean | undefined) ?? true;
      default:
        return derivedString(s);
    }
  }
}

/** The identity value examples use for a kind (its `examples`, else one derived from the schema). */
function identityExample(d: KindDescriptor): string {
  const prop = d.schema.properties?.[d.identity] ?? {};
  const given = exampleOf(prop);
  return typeof given === 'string' ? given : derivedString(prop);
}

/** A Terraform block label / construct id from a name: `orders-db` -> `orders_db`. */
export function labelOf(name: string): string {
  const label = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  return /^[a-z_]/.test(label) ? label : `_${label}`;
}

// ---------------------------------------------------------------------------------------------
// The Terraform form of an example (shared by the HCL and the cdktf renderings)
// ---------------------------------------------------------------------------------------------

/** An expression, as HCL and as TypeScript: a reference to another block, or a variable. */
export class Expr {
  constructor(
    readonly hcl: string,
    readonly ts: string,
  ) {}
}

export type TfExample = string | number | boolean | null | Expr | TfExample[] | { [key: string]: TfExample };

/** A sensitive input variable the example reads a secret from. */
export interface Variable {
  name: string;
  env: string;
  /** Only used in write-only arguments, so it can be ephemeral (never in plan or state). */
  ephemeral: boolean;
}

/** One `resource` or `data` block: arguments by Terraform attribute name. */
export interface TfBlock {
  block: 'resource' | 'data';
  typeName: string;
  label: string;
  spec: ResourceSpec;
  args: Record<string, TfExample>;
}

export interface TfModel {
  variables: Variable[];
  blocks: TfBlock[];
}

const resourceRef = (typeName: string, label: string) => new Expr(`${typeName}.${label}.id`, `${camel(label)}.id`);
const dataRef = (b: TfBlock) => new Expr(`data.${b.typeName}.${b.label}.id`, `${camel(b.label)}.id`);

function specOfKind(d: KindDescriptor): ResourceSpec {
  const spec = resourceSpecs().get(`${PROVIDER_TYPE}_${d.kind}`);
  if (!spec) throw new Error(`kind ${d.kind} has no Terraform resource`);
  return spec;
}

/** The example's resources as Terraform blocks: references become `<type>.<label>.id`, secrets variables. */
export function resourceModel(example: Example): TfModel {
  const variables = new Map<string, Variable>();
  const blocks = example.resources.map((r): TfBlock => {
    const spec = specOfKind(r.descriptor);
    const body: Record<string, ExampleValue> = r.project ? { ...r.body, project_id: new Ref(r.project) } : r.body;
    return { block: 'resource', typeName: spec.typeName, label: labelOf(r.name), spec, args: tfArgs(spec.attrs, body, variables) };
  });
  assertUniqueLabels(blocks);
  return { variables: [...variables.values()], blocks };
}

/** cdktf construct ids share one scope, so labels must differ even across types. */
function assertUniqueLabels(blocks: TfBlock[]) {
  const seen = new Set<string>();
  for (const b of blocks) {
    if (seen.has(b.label)) throw new Error(`example label ${b.label} is used twice (${b.typeName})`);
    seen.add(b.label);
  }
}

function tfArgs(attrs: AttrSpec[], body: Record<string, ExampleValue>, variables: Map<string, Variable>): Record<string, TfExample> {
  const out: Record<string, TfExample> = {};
  for (const a of attrs) {
    const v = body[apiField(a)];
    if (a.synthetic || v === undefined) continue;
    if (v instanceof Secret) secretArgs(a, attrs, v, out, variables);
    else out[a.name] = tfValue(a, v, variables);
  }
  return out;
}

/** A secret goes to its write-only twin when the provider has one (never kept in plan or state). */
function secretArgs(a: AttrSpec, attrs: AttrSpec[], secret: Secret, out: Record<string, TfExample>, variables: Map<string, Variable>) {
  const twin = attrs.find((t) => t.synthetic === 'wo' && t.secretOf === a.name);
  const version = attrs.find((t) => t.synthetic === 'wo_version' && t.secretOf === a.name);
  const name = secret.env.toLowerCase();
  const known = variables.get(name);
  variables.set(name, { name, env: secret.env, ephemeral: !!twin && (known?.ephemeral ?? true) });
  const value = new Expr(`var.${name}`, `secret(this, '${secret.env}')`);
  if (twin && version) {
    out[twin.name] = value;
    out[version.name] = 1;
  } else out[a.name] = value;
}

function tfValue(a: AttrSpec, v: ExampleValue, variables: Map<string, Variable>): TfExample {
  if (v instanceof Ref) return resourceRef(specOfKind(v.target.descriptor).typeName, labelOf(v.target.name));
  if (v instanceof Secret) throw new Error(`secret below ${a.name} is not a primitive attribute`);
  if (a.shape === 'object' && isRecord(v)) return tfArgs(a.attrs!, v as Record<string, ExampleValue>, variables);
  if (a.shape === 'objects' && Array.isArray(v)) return v.map((item) => tfArgs(a.attrs!, item as Record<string, ExampleValue>, variables));
  if (Array.isArray(v)) return v.map((item) => (item instanceof Ref ? tfValue(a, item, variables) : (item as TfExample)));
  return structuredClone(v) as TfExample;
}

/**
 * A data source example: the lookup (or view) itself and the lookups it takes ids from, so it
 * reads existing objects only (`data.dataplatform_project.analytics.id`).
 */
export function dataModel(spec: DataSourceSpec): TfModel {
  const blocks: TfBlock[] = [];
  const lookup = (d: KindDescriptor): TfBlock => {
    const typeName = `${PROVIDER_TYPE}_${d.kind}`;
    const known = blocks.find((b) => b.typeName === typeName);
    if (known) return known;
    const args: Record<string, TfExample> = {};
    if (d.scope === 'project') args.project_id = dataRef(lookup(kindNamed('project')));
    args[d.identity] = identityExample(d);
    const block: TfBlock = { block: 'data', typeName, label: labelOf(identityExample(d)), spec: dataSourceSpecs().get(typeName)!, args };
    blocks.push(block);
    return block;
  };
  if (spec.source.type === 'lookup') lookup(spec.descriptor);
  else {
    const view = spec.source.view;
    const args: Record<string, TfExample> = { project_id: dataRef(lookup(kindNamed('project'))) };
    // With `oneOf`, exactly one owner id is given: the first.
    for (const owner of view.oneOf ? view.owners.slice(0, 1) : view.owners) args[`${owner}_id`] = dataRef(lookup(kindNamed(owner)));
    blocks.push({ block: 'data', typeName: spec.typeName, label: view.name, spec, args });
  }
  assertUniqueLabels(blocks);
  return { variables: [], blocks };
}

// ---------------------------------------------------------------------------------------------
// HCL, formatted as `terraform fmt` formats it
// ---------------------------------------------------------------------------------------------

const hclString = (s: string) => JSON.stringify(s).replace(/\$\{/g, '$${').replace(/%\{/g, '%%{');
const hclKey = (k: string) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? k : hclString(k));

/** A value that fits on one line (scalars, expressions, lists of them, empty collections). */
function hclInline(v: TfExample): string | undefined {
  if (v === null) return 'null';
  if (v instanceof Expr) return v.hcl;
  if (typeof v === 'string') return hclString(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) {
    const items = v.map(hclInline);
    return items.every((i) => i !== undefined && !i.startsWith('{')) ? `[${items.join(', ')}]` : undefined;
  }
  return Object.keys(v).length ? undefined : '{}';
}

function hclValue(v: TfExample, indent: string): string {
  const inline = hclInline(v);
  if (inline !== undefined) return inline;
  const inner = `${indent}  `;
  if (Array.isArray(v)) return `[\n${v.map((item) => `${inner}${hclValue(item, inner)},\n`).join('')}${indent}]`;
  return `{\n${hclBody(v as Record<string, TfExample>, inner).join('\n')}\n${indent}}`;
}

/** Arguments of a body: consecutive one-line arguments have their `=` aligned, as terraform fmt does. */
function hclBody(args: Record<string, TfExample>, indent: string): string[] {
  const lines: string[] = [];
  let group: [string, string][] = [];
  const flush = () => {
    const width = Math.max(...group.map(([k]) => k.length));
    for (const [k, v] of group) lines.push(`${indent}${k.padEnd(width)} = ${v}`);
    group = [];
  };
  for (const [key, value] of Object.entries(args)) {
    const inline = hclInline(value);
    if (inline !== undefined) {
      group.push([hclKey(key), inline]);
      continue;
    }
    flush();
    lines.push(`${indent}${hclKey(key)} = ${hclValue(value, indent)}`);
  }
  flush();
  return lines;
}

function hclVariable(v: Variable): string {
  const args: Record<string, TfExample> = { type: new Expr('string', ''), sensitive: true };
  if (v.ephemeral) args.ephemeral = true;
  return `variable "${v.name}" {\n${hclBody(args, '  ').join('\n')}\n}`;
}

export function renderHcl(model: TfModel): string {
  const blocks = model.blocks.map((b) => `${b.block} "${b.typeName}" "${b.label}" {\n${hclBody(b.args, '  ').join('\n')}\n}`);
  return `${[...model.variables.map(hclVariable), ...blocks].join('\n\n')}\n`;
}

// ---------------------------------------------------------------------------------------------
// cdktf TypeScript
// ---------------------------------------------------------------------------------------------

/** The package subpath the construct library is published under. */
export const CDKTF_MODULE = 'dataplatform-as-code/cdktf';

const tsString = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const tsKey = (k: string) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? k : tsString(k));

function classOf(b: TfBlock): string {
  const registry = (b.block === 'resource' ? RESOURCE_CONSTRUCTS : DATA_SOURCE_CONSTRUCTS) as Record<string, { name: string }>;
  const cls = registry[b.typeName];
  if (!cls) throw new Error(`no cdktf construct for ${b.block} ${b.typeName}`);
  return cls.name;
}

/** A value as TypeScript; `attrs` names the properties of an attribute object (maps keep their keys). */
function tsValue(v: TfExample, indent: string, attrs?: AttrSpec[], nested = false): string {
  if (v === null) return 'undefined';
  if (v instanceof Expr) return v.ts;
  if (typeof v === 'string') return tsString(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  const inner = `${indent}  `;
  if (Array.isArray(v)) {
    if (!attrs) return `[${v.map((item) => tsValue(item, indent)).join(', ')}]`;
    return `[\n${v.map((item) => `${inner}${tsValue(item, inner, attrs, true)},\n`).join('')}${indent}]`;
  }
  const entries = Object.entries(v);
  if (!entries.length) return '{}';
  const lines = entries.map(([key, value]) => {
    const attr = attrs?.find((a) => a.name === key);
    const name = attr ? propName(attr, nested) : tsKey(key);
    const below = attr && (attr.shape === 'object' || attr.shape === 'objects') ? attr.attrs : undefined;
    return `${inner}${name}: ${tsValue(value, inner, below, true)},`;
  });
  return `{\n${lines.join('\n')}\n${indent}}`;
}

/** A stack class with the provider and one construct per block; a block another one refers to is kept in a const. */
export function renderCdktf(model: TfModel, stackName: string): string {
  const referenced = new Set<string>();
  const collect = (v: TfExample): void => {
    if (v instanceof Expr) referenced.add(v.ts.split('.')[0]);
    else if (Array.isArray(v)) v.forEach(collect);
    else if (isRecord(v)) Object.values(v).forEach(collect);
  };
  for (const b of model.blocks) collect(b.args);
  const names = new Set([DataplatformProvider.name, ...model.blocks.map(classOf)]);
  if (model.variables.length) names.add('secret');
  const body = model.blocks.map((b) => {
    const target = referenced.has(camel(b.label)) ? `const ${camel(b.label)} = ` : '';
    return `    ${target}new ${classOf(b)}(this, '${b.label}', ${tsValue(b.args, '    ', b.spec.attrs)});`;
  });
  return [
    "import { App, TerraformStack } from 'cdktf';",
    "import type { Construct } from 'constructs';",
    `import { ${[...names].sort().join(', ')} } from '${CDKTF_MODULE}';`,
    '',
    `class ${stackName} extends TerraformStack {`,
    '  constructor(scope: Construct, id: string) {',
    '    super(scope, id);',
    `    new ${DataplatformProvider.name}(this, '${PROVIDER_TYPE}');`,
    ...body,
    '  }',
    '}',
    '',
    'const app = new App();',
    `new ${stackName}(app, '${stackName.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase()}');`,
    'app.synth();',
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// YAML documents (the `dpctl` form)
// ---------------------------------------------------------------------------------------------

/** API values -> YAML values: references by name, secrets as secretRefs. */
function yamlValue(v: ExampleValue): unknown {
  if (v instanceof Ref) return v.target.name;
  if (v instanceof Secret) return { secretRef: { env: v.env } };
  if (Array.isArray(v)) return v.map(yamlValue);
  if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, yamlValue(x as ExampleValue)]));
  return v;
}

/** API field names -> YAML names (`connector_id` -> `connector`), as the layout renames them. */
function yamlNames(layout: KindLayout, value: unknown, path: (string | number)[] = []): unknown {
  if (Array.isArray(value)) return value.map((item, i) => yamlNames(layout, item, [...path, i]));
  if (!isRecord(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value))
    out[renameAt(layout, patternOf(path), key, 'api')?.yaml ?? key] = yamlNames(layout, child, [...path, key]);
  return out;
}

export function yamlDocument(r: ExampleResource): Record<string, unknown> {
  const d = r.descriptor;
  const layout = layoutOf(d);
  const body = yamlValue(r.body) as Record<string, unknown>;
  const metadata: Record<string, unknown> = { name: r.name };
  if (r.project) metadata.project = r.project.name;
  if (layout.hasLabels && body.labels !== undefined) metadata.labels = body.labels;
  delete body[d.identity];
  if (layout.hasLabels) delete body.labels;
  const spec = yamlNames(layout, body) as Record<string, unknown>;
  return { apiVersion: API_VERSION, kind: layout.yamlKind, metadata, ...(Object.keys(spec).length ? { spec } : {}) };
}

/** Whether a kind can be written as a YAML document (the same rule `dpctl validate` applies). */
export const declarable = (d: KindDescriptor) => declarableKinds().some((k) => k.kind === d.kind);

export function renderYaml(example: Example): string {
  return example.resources.map((r) => new Document(yamlDocument(r)).toString({ lineWidth: 0 })).join('---\n');
}

// ---------------------------------------------------------------------------------------------
// Markdown: schema, import and API sections
// ---------------------------------------------------------------------------------------------

/** A value in code style; an empty string shows as `""`, not as an empty span. */
const code = (v: unknown) => `\`${typeof v === 'string' && v !== '' ? v : JSON.stringify(v)}\``;
const fence = (lang: string, text: string) => ['```' + lang, text.replace(/\n$/, ''), '```', ''];

function frontMatter(title: string, description: string): string[] {
  return ['---', `page_title: "${title}"`, 'subcategory: ""', 'description: |-', `  ${oneLine(description)}`, '---', ''];
}

const PRIMITIVE_LABEL = { string: 'String', number: 'Number', bool: 'Boolean' } as const;

/** The type as tfplugindocs names it. */
function typeLabel(a: AttrSpec): string {
  if (a.block) return a.optional ? 'Block, Optional' : 'Block';
  const elem = PRIMITIVE_LABEL[a.elem ?? 'string'];
  switch (a.shape) {
    case 'primitive':
      return elem;
    case 'list':
      return `List of ${elem}`;
    case 'map':
      return `Map of ${elem}`;
    case 'object':
      return 'Attributes';
    case 'objects':
      return 'Attributes List';
  }
}

/** tfplugindocs' anchors: `nestedblock--timeouts` for a block, `nestedatt--config` for a nested attribute. */
const anchor = (path: string[], block = false) => `nested${block ? 'block' : 'att'}--${path.join('--')}`;
/** Link from a page to the resource page of a kind (`base`: '' from resources/, '../resources/' from elsewhere). */
function kindLink(kind: string, base: string): string {
  const typeName = `${PROVIDER_TYPE}_${kind}`;
  return resourceSpecs().has(typeName) ? `[${typeName}](${base}${pageName(typeName)}.md)` : code(typeName);
}

/** What the model says about an attribute beyond its description: values, default, reference, write-only twin. */
function attrNotes(a: AttrSpec, siblings: AttrSpec[], linkBase: string): string[] {
  const notes: string[] = [];
  const values = (a.shape === 'list' ? a.json.items?.enum : a.json.enum)?.filter((v) => v !== null);
  if (values?.length) notes.push(`${a.shape === 'list' ? 'Each element must be' : 'Must be'} one of: ${values.map(code).join(', ')}.`);
  if (a.default !== undefined) notes.push(`Defaults to ${code(a.default)}.`);
  const ref = a.json['x-ref'] ?? a.json.items?.['x-ref'];
  if (ref)
    notes.push(
      a.shape === 'list'
        ? `Ids of ${kindLink(ref, linkBase)} resources in the same project.`
        : `The id of ${article(kindNamed(ref).title)} ${kindLink(ref, linkBase)} in the same project.`,
    );
  const twin = siblings.find((t) => t.synthetic === 'wo' && t.secretOf === a.name);
  const version = siblings.find((t) => t.synthetic === 'wo_version' && t.secretOf === a.name);
  if (twin && version)
    notes.push(
      `Or give the write-only \`${twin.name}\` with \`${version.name}\` (Terraform 1.11+), which is never kept in the plan or the state.`,
    );
  return notes;
}

function attrLine(a: AttrSpec, siblings: AttrSpec[], path: string[], linkBase: string): string {
  const flags = [typeLabel(a)];
  if (a.sensitive) flags.push('Sensitive');
  if (a.writeOnly) flags.push(WRITE_ONLY_LINK);
  if (a.replace) flags.push('Forces replacement');
  const text = [sentence(a.description), ...attrNotes(a, siblings, linkBase)];
  if (a.attrs) text.push(`(see [below for nested schema](#${anchor([...path, a.name], a.block)}))`);
  return `- \`${a.name}\` (${flags.join(', ')}) ${text.filter(Boolean).join(' ')}`.trimEnd();
}

const GROUPS: [string, (a: AttrSpec) => boolean][] = [
  ['Required', (a) => a.required],
  ['Optional', (a) => a.optional],
  ['Read-Only', (a) => a.computed && !a.optional && !a.required],
];

/** One level of attributes in tfplugindocs' groups, alphabetically; nested objects are queued for later. */
function attrGroups(
  attrs: AttrSpec[],
  path: string[],
  queue: { path: string[]; attrs: AttrSpec[]; block?: boolean }[],
  linkBase: string,
): string[] {
  const lines: string[] = [];
  const byName = [...attrs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const [title, member] of GROUPS) {
    const members = byName.filter(member);
    if (!members.length) continue;
    lines.push(path.length ? `${title}:` : `### ${title}`, '');
    for (const a of members) {
      lines.push(attrLine(a, attrs, path, linkBase));
      if (a.attrs) queue.push({ path: [...path, a.name], attrs: a.attrs, block: a.block });
    }
    lines.push('');
  }
  return lines;
}

export function schemaMarkdown(attrs: AttrSpec[], linkBase: string): string[] {
  const queue: { path: string[]; attrs: AttrSpec[]; block?: boolean }[] = [];
  const lines = ['## Schema', '', ...attrGroups(attrs, [], queue, linkBase)];
  for (let next = queue.shift(); next; next = queue.shift()) {
    lines.push(
      `<a id="${anchor(next.path, next.block)}"></a>`,
      `### Nested Schema for \`${next.path.join('.')}\``,
      '',
      ...attrGroups(next.attrs, next.path, queue, linkBase),
    );
  }
  return lines;
}

const displayPath = (path: string[]) => path.join('.').replace(/\.\*/g, '[]');

/** Import: the forms ResourceHandler.import accepts (by id, then by identity), and what cannot come back. */
function importSection(spec: ResourceSpec, subject: TfBlock, example: Example): string[] {
  const d = spec.descriptor;
  const prefix = d.scope === 'project' ? '<project_id>/' : '';
  const byName = `${prefix}${example.subject.name}`;
  const address = `${spec.typeName}.${subject.label}`;
  const lines = [
    '## Import',
    '',
    `Import is supported using the following syntax. The id is \`${prefix}<id>\` or \`${prefix}<${d.identity}>\`: the provider looks the ${noun(d)} up by id first, then by ${d.identity}.`,
    '',
    'In Terraform v1.5.0 and later, use an [`import` block](https://developer.hashicorp.com/terraform/language/import):',
    '',
    ...fence('terraform', `import {\n  to = ${address}\n  id = ${hclString(byName)}\n}`),
    'The [`terraform import` command](https://developer.hashicorp.com/terraform/cli/commands/import) can also be used:',
    '',
    ...fence('shell', `terraform import ${address} ${prefix}<id>\nterraform import ${address} ${shellWord(byName)}`),
    `With CDK for Terraform: \`${camel(subject.label)}.importFrom(${tsString(byName)})\` on the construct, or \`${classOf(subject)}.generateConfigForImport(this, ${tsString(subject.label)}, ${tsString(byName)})\`.`,
    '',
  ];
  const secrets = d.secretPaths.map((p) => code(displayPath(p)));
  if (secrets.length)
    lines.push(
      `Write-only fields are never returned, so an import cannot restore them: ${secrets.join(', ')}. Set them in the configuration; the next apply sends them.`,
      '',
    );
  if (d.onceFields.length)
    lines.push(
      `${d.onceFields.map(code).join(', ')} ${d.onceFields.length === 1 ? 'is' : 'are'} returned only when the ${noun(d)} is created, so an imported one has ${d.onceFields.length === 1 ? 'it' : 'them'} empty.`,
      '',
    );
  return lines;
}

/** Placeholders (`<project_id>`) are left for the reader to replace; anything else unusual is quoted. */
const shellWord = (s: string) => (/^[A-Za-z0-9_@%+=:,./<>-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`);

const OPERATION_ROUTES: Record<Operation, { method: string; item: boolean; title: string }> = {
  list: { method: 'GET', item: false, title: 'List' },
  create: { method: 'POST', item: false, title: 'Create' },
  get: { method: 'GET', item: true, title: 'Read' },
  update: { method: 'PATCH', item: true, title: 'Update' },
  delete: { method: 'DELETE', item: true, title: 'Delete' },
};

/** The API operations of a kind, from its descriptor and the client's route patterns. */
function apiSection(d: KindDescriptor): string[] {
  const routes = kindRoutes(d);
  const lines = [
    '## API',
    '',
    `The ${noun(d)} is served by the Data Platform Management API (paths relative to the tenant host):`,
    '',
    '| Operation | Request | Needs role |',
    '|---|---|---|',
  ];
  for (const op of d.operations) {
    const r = OPERATION_ROUTES[op];
    const path = `/api/v1${r.item ? routes.item : routes.collection}`;
    const extension = d.specOperations.includes(op) ? '' : ' (extension)';
    lines.push(`| ${r.title}${extension} | \`${r.method} ${path}\` | ${r.method === 'GET' ? d.readPermission : d.writePermission} |`);
  }
  lines.push('');
  if (d.operations.some((op) => !d.specOperations.includes(op))) {
    lines.push(
      'An *extension* is an operation the API specification does not list; the service serves it unless started with `--strict-spec`.',
      '',
    );
  }
  if (d.scope === 'project') {
    lines.push(
      `With an API key, the same operations are also served without the project prefix (\`/api/v1/${d.collection}\`), for the key's own project (an extension).`,
      '',
    );
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Pages
// ---------------------------------------------------------------------------------------------

const identityCaseInsensitive = (d: KindDescriptor) =>
  d.normalizers.some((n) => n.rule === 'lowercase' && n.path.length === 1 && n.path[0] === d.identity);

const WRITE_VERBS = { create: 'creating', update: 'changing', delete: 'deleting' } as const;
/** `a`, `a and b`, `a, b and c`. */
const listed = (words: string[]) => (words.length < 2 ? words.join('') : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`);

/** What the descriptor says about a kind beyond its fields: scope, identity, roles, graphs. */
function aboutKind(d: KindDescriptor): string[] {
  const title = noun(d);
  const lines: string[] = [];
  const identity = `it is identified by its \`${d.identity}\`${identityCaseInsensitive(d) ? ' (compared case-insensitively)' : ''}`;
  lines.push(
    d.scope === 'project'
      ? `${capital(article(d.title))} ${title} lives in a project (\`project_id\`), where ${identity}.`
      : `${capital(article(d.title))} ${title} belongs to the tenant, not to a project; ${identity}.`,
  );
  if (!d.operations.includes('update')) lines.push(`The API cannot change ${article(d.title)} ${title}: every change replaces it.`);
  const cap = scopeCapSentence(d);
  if (cap)
    lines.push(
      `${capital(cap)}: creating one more is refused (\`409 conflict\`)${d.yamlKind ? ', and `dpctl validate` refuses a configuration that declares more' : ''}.`,
    );
  for (const dag of d.dags)
    lines.push(
      `The \`${dag.field}\` must form a graph: each ${dag.noun}'s \`depends_on\` names other ${dag.noun}s of the same ${title}, and cycles are refused.`,
    );
  const writes = (['create', 'update', 'delete'] as const).filter((op) => d.operations.includes(op)).map((op) => WRITE_VERBS[op]);
  if (d.provisioning) {
    lines.push(
      `The platform provisions ${plural(d)} through its project's infrastructure plan and apply: after each create, update and delete the provider runs that plan and apply and waits for the result (up to \`timeouts\`; defaults ${listed((Object.keys(TIMEOUT_DEFAULTS) as TimeoutOp[]).map((op) => `${op} ${TIMEOUT_DEFAULTS[op]}`))}). A change the platform fails (an unknown region, for example) fails the apply with the platform's message; ${article(d.title)} ${title} whose create failed stays in the state, tainted, and the next apply replaces it.`,
    );
  }
  if (d.testAction)
    lines.push(
      `With \`run_setup_tests = true\` the provider tests the ${title}'s connection after each create and update; a failed test fails the apply with the test's message (the ${title} is saved all the same).`,
    );
  if (d.health)
    lines.push(
      `When the platform reports ${article(d.title)} ${title} degraded (\`${d.health.field}\` ${listed((d.health.degraded ?? []).map((v) => code(v)))}), ${d.provisioning ? "a refresh shows a warning with its reason, and the next plan updates it, so that the apply runs the platform's plan and apply again" : 'refresh and apply show a warning with its reason'}.`,
    );
  lines.push(
    `Reading ${plural(d)} needs the \`${d.readPermission}\` role${writes.length ? `; ${listed(writes)} them \`${d.writePermission}\`` : ''}.`,
  );
  return [lines.join(' '), ''];
}

function yamlNotes(layout: KindLayout): string[] {
  const d = layout.descriptor;
  const notes = [`\`metadata.name\` is the \`${d.identity}\`.`];
  if (layout.projectScoped) notes.push('`metadata.project` is the **name** of the project (Terraform takes its id, `project_id`).');
  if (layout.hasLabels) notes.push('`metadata.labels` is `labels`.');
  for (const r of layout.renames) {
    const target = kindNamed(r.refKind);
    notes.push(
      `\`${displayPath([...r.parent, r.api])}\` is written \`spec.${displayPath([...r.parent, r.yaml])}\` and holds ${r.many ? `names of ${plural(target)}, not their ids` : `the name of ${article(target.title)} ${noun(target)}, not its id`}.`,
    );
  }
  for (const p of layout.secretPaths)
    notes.push(
      `\`spec.${displayPath(p)}\` is a secret: \`{ secretRef: { env: NAME } }\` or \`{ secretRef: { file: path } }\`, never the value.`,
    );
  return ['In YAML, unlike Terraform:', '', ...notes.map((n) => `- ${n}`), ''];
}

function yamlSection(example: Example): string[] {
  const d = example.subject.descriptor;
  const heading = ['### YAML (`dpctl`)', ''];
  if (!declarable(d)) {
    const missing = (['create', 'update', 'delete'] as const).filter((op) => !d.operations.includes(op));
    const reason = missing.length ? `the API cannot ${missing.join(' or ')} them` : 'the kind has no YAML form';
    return [
      ...heading,
      `${d.title}s cannot be declared in YAML: a reconciler must create, update and delete what it declares, and ${reason}. Manage them with Terraform or the API.`,
      '',
    ];
  }
  return [
    ...heading,
    `Documents for \`dpctl validate\`, \`dpctl plan\` and \`dpctl apply\`, with the project and the resources it refers to:`,
    '',
    ...fence('yaml', renderYaml(example)),
    ...yamlNotes(layoutOf(d)),
  ];
}

function terraformNotes(model: TfModel): string[] {
  if (!model.variables.length) return [];
  const names = model.variables.map((v) => `\`TF_VAR_${v.name}\``).join(', ');
  const lines = [`Secrets come from sensitive variables (${names}), never from the configuration.`];
  if (model.variables.some((v) => v.ephemeral)) {
    lines.push(
      'Write-only arguments (`*_wo`, with `*_wo_version`) keep them out of the plan and the state; they need Terraform 1.11 or later (with an older one, set the plain argument instead).',
    );
  }
  return [lines.join(' '), ''];
}

function cdktfNotes(model: TfModel): string[] {
  if (!model.variables.length) return [];
  return [
    `\`secret(this, NAME)\` declares a sensitive variable that Terraform reads from \`TF_VAR_NAME\`; the value never enters the synthesized JSON.`,
    '',
  ];
}

function exampleSection(model: TfModel, stackName: string, example?: Example): string[] {
  const deps = model.blocks.slice(0, -1).map((b) => `\`${b.block === 'data' ? 'data.' : ''}${b.typeName}\``);
  const intro = deps.length ? [`With the ${deps.join(', ')} it refers to, so that the example works as it is.`, ''] : [];
  return [
    '## Example Usage',
    '',
    ...intro,
    '### Terraform',
    '',
    ...fence('terraform', renderHcl(model)),
    ...terraformNotes(model),
    '### CDK for Terraform (TypeScript)',
    '',
    ...fence('typescript', renderCdktf(model, stackName)),
    ...cdktfNotes(model),
    ...(example ? yamlSection(example) : []),
  ];
}

function resourcePage(spec: ResourceSpec): string {
  const d = spec.descriptor;
  const example = ExampleBuilder.build(d);
  const model = resourceModel(example);
  const subject = model.blocks[model.blocks.length - 1];
  return [
    ...frontMatter(`${spec.typeName} Resource - ${PROVIDER_TYPE}`, d.description || d.title),
    `# ${spec.typeName} (Resource)`,
    '',
    sentence(d.description || d.title),
    '',
    ...aboutKind(d),
    ...exampleSection(model, `${classOf(subject)}Example`, example),
    ...schemaMarkdown(spec.attrs, ''),
    ...importSection(spec, subject, example),
    ...apiSection(d),
  ].join('\n');
}

/** How a data source finds what it reads: a lookup by identity in the list, or a view of its owner. */
function aboutDataSource(spec: DataSourceSpec): string[] {
  const d = spec.descriptor;
  if (spec.source.type === 'lookup') {
    const routes = kindRoutes(d);
    const match = `whose \`${d.identity}\` matches${identityCaseInsensitive(d) ? ' (case-insensitively)' : ''}`;
    return [
      `Reads the ${plural(d)}${d.scope === 'project' ? ' of the project' : ''} (\`GET /api/v1${routes.collection}\`, once per Terraform run for all lookups of the kind) and returns the one ${match}; an error names what was looked for when none does. Write-only fields are never returned. To manage ${article(d.title)} ${noun(d)}, use the ${kindLink(d.kind, '../resources/')} resource.`,
      '',
    ];
  }
  const view = spec.source.view;
  const owners = view.owners.map((o) => kindLink(o, '../resources/'));
  const given = view.oneOf
    ? `exactly one of ${view.owners.map((o) => `\`${o}_id\``).join(', ')}`
    : view.owners.map((o) => `\`${o}_id\``).join(', ');
  return [
    `A read-only view of ${owners.join(', ')}: give \`project_id\` and ${given}. Its attributes are the ${noun(kindNamed(view.kind))} the API returns.`,
    '',
  ];
}

function dataSourcePage(spec: DataSourceSpec): string {
  const d = spec.descriptor;
  const model = dataModel(spec);
  const subject = model.blocks[model.blocks.length - 1];
  const description =
    spec.source.type === 'lookup'
      ? `Looks up ${article(d.title)} ${noun(d)} by ${d.identity}. ${sentence(d.description)}`
      : sentence(d.description);
  return [
    ...frontMatter(`${spec.typeName} Data Source - ${PROVIDER_TYPE}`, description),
    `# ${spec.typeName} (Data Source)`,
    '',
    description,
    '',
    ...aboutDataSource(spec),
    ...exampleSection(model, `${classOf(subject)}Example`),
    ...schemaMarkdown(spec.attrs, '../resources/'),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// The provider page
// ---------------------------------------------------------------------------------------------

interface ProviderAttribute {
  name: string;
  type: Buffer;
  description: string;
  required?: boolean;
  optional?: boolean;
  sensitive?: boolean;
}

/** The provider block's attributes, from the message the provider answers GetProviderSchema with. */
export function providerAttributes(): ProviderAttribute[] {
  const block = (providerSchemaMessage() as { block: { attributes: ProviderAttribute[] } }).block;
  return block.attributes;
}

/** A provider attribute as an AttrSpec, so it is listed like any other. */
function providerAttrSpec(p: ProviderAttribute): AttrSpec {
  const cty = JSON.parse(Buffer.from(p.type).toString('utf8')) as string;
  return {
    name: p.name,
    shape: 'primitive',
    elem: cty === 'bool' ? 'bool' : cty === 'number' ? 'number' : 'string',
    required: !!p.required,
    optional: !!p.optional,
    computed: false,
    sensitive: !!p.sensitive,
    replace: false,
    description: p.description,
    json: {},
  };
}

/** The provider block of the example: arguments whose description gives an example value (`e.g. ...`). */
function providerExampleArgs(): Record<string, TfExample> {
  const args: Record<string, TfExample> = {};
  for (const p of providerAttributes()) {
    const given = /\be\.g\. (\S+?)[,;)]?(\s|$)/.exec(p.description)?.[1];
    if (given && !p.sensitive) args[p.name] = given;
  }
  return args;
}

const envOf = (description: string) => /\benv (DATAPLATFORM_[A-Z_]+)/.exec(description)?.[1];

function providerExample(): string {
  const required = {
    [PROVIDER_TYPE]: { source: PROVIDER_SOURCE, version: packageVersion() },
  };
  const terraform = `terraform {\n  required_providers ${hclValue(required, '  ')}\n}`;
  const provider = `provider "${PROVIDER_TYPE}" {\n${hclBody(providerExampleArgs(), '  ').join('\n')}\n}`;
  return `${terraform}\n\n${provider}\n`;
}

function pageTable(rows: { typeName: string; dir: string; description: string; yaml?: string }[], withYaml: boolean): string[] {
  const head = withYaml ? ['| Name | YAML kind | Description |', '|---|---|---|'] : ['| Name | Description |', '|---|---|'];
  const body = rows.map((r) => {
    const cells = [
      `[${r.typeName}](${r.dir}/${pageName(r.typeName)}.md)`,
      ...(withYaml ? [r.yaml ? `\`${r.yaml}\`` : '-'] : []),
      oneLine(r.description).replace(/\|/g, '\\|'),
    ];
    return `| ${cells.join(' | ')} |`;
  });
  return [...head, ...body, ''];
}

export function indexPage(): string {
  const block = (providerSchemaMessage() as { block: { description: string } }).block;
  const attrs = providerAttributes().map(providerAttrSpec);
  const envs = providerAttributes().flatMap((p) => (envOf(p.description) ? [`\`${envOf(p.description)}\``] : []));
  const resources = [...resourceSpecs().values()].sort((a, b) => compare(a.typeName, b.typeName));
  const dataSources = [...dataSourceSpecs().values()].sort((a, b) => compare(a.typeName, b.typeName));
  const notDeclarable = resources.filter((s) => !declarable(s.descriptor)).map((s) => `\`${s.typeName}\``);
  return [
    ...frontMatter(`${PROVIDER_TYPE} Provider`, block.description),
    `# ${PROVIDER_TYPE} Provider`,
    '',
    `The \`${PROVIDER_SOURCE}\` provider manages the resources of the Data Platform Management API (a native Terraform provider, plugin protocol 6). Its resources and data sources are derived from the same kind schemas (\`schemas/kinds\`) as the \`dpctl\` YAML format, the reference service and the CDK for Terraform constructs, so the three ways of declaring a platform agree field by field.`,
    '',
    'It is not served by a public registry: `npx dpctl provider install` installs it into a provider mirror that `terraform init` and `cdktf deploy` use (see [Install](guides/terraform.md#install) in the Terraform guide; the [CDK for Terraform guide](guides/cdktf.md) covers the construct library).',
    '',
    '## Example Usage',
    '',
    ...fence('terraform', providerExample()),
    `Every argument can also come from the environment (${envs.join(', ')}); arguments in the provider block win. Keep credentials in the environment. Give either \`api_key\` or \`email\` with \`password\`.`,
    '',
    ...schemaMarkdown(attrs, 'resources/'),
    '## Resources',
    '',
    ...pageTable(
      resources.map((s) => ({
        typeName: s.typeName,
        dir: 'resources',
        description: s.descriptor.description,
        yaml: declarable(s.descriptor) ? layoutOf(s.descriptor).yamlKind : undefined,
      })),
      true,
    ),
    '## Data Sources',
    '',
    ...pageTable(
      dataSources.map((s) => ({
        typeName: s.typeName,
        dir: 'data-sources',
        description:
          s.source.type === 'lookup'
            ? `Looks up ${article(s.descriptor.title)} ${noun(s.descriptor)} by ${s.descriptor.identity}.`
            : s.descriptor.description,
      })),
      false,
    ),
    '## YAML reference',
    '',
    `The same resources can be declared as Kubernetes-style YAML documents (\`apiVersion: ${API_VERSION}\`) and applied with \`dpctl plan\` / \`dpctl apply\` or kept true by \`dpctl controller\`${notDeclarable.length ? `; all but ${notDeclarable.join(', ')}` : ''}. Each resource page above shows its kind's document and how its fields are written in YAML. The format is described in the [YAML guide](guides/yaml.md#the-format), and [\`schemas/document.schema.json\`](../schemas/document.schema.json) is its JSON Schema, for editors.`,
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// All pages, and writing them
// ---------------------------------------------------------------------------------------------

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Every generated page by path relative to docs/, sorted: a pure function of the model. */
export function renderDocs(): Map<string, string> {
  const pages: [string, string][] = [[INDEX_PAGE, indexPage()]];
  for (const spec of resourceSpecs().values()) pages.push([`resources/${pageName(spec.typeName)}.md`, resourcePage(spec)]);
  for (const spec of dataSourceSpecs().values()) pages.push([`data-sources/${pageName(spec.typeName)}.md`, dataSourcePage(spec)]);
  return new Map(pages.sort(([a], [b]) => compare(a, b)));
}

/** Files under a folder of docs/, as paths relative to docs/. */
export function listGenerated(dir = DOCS_DIR): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    let entries;
    try {
      entries = readdirSync(join(dir, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const path = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(path);
      else out.push(path);
    }
  };
  for (const sub of GENERATED_DIRS) walk(sub);
  return out.sort(compare);
}

/** Writes the pages and removes files in the generated folders that are no longer produced. */
export function writeDocs(dir = DOCS_DIR): { written: string[]; removed: string[] } {
  const pages = renderDocs();
  const removed = listGenerated(dir).filter((f) => !pages.has(f));
  for (const f of removed) rmSync(join(dir, f));
  for (const [path, text] of pages) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return { written: [...pages.keys()], removed };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { written, removed } = writeDocs();
  process.stdout.write(`wrote ${written.length} pages to ${DOCS_DIR}${removed.length ? `, removed ${removed.join(', ')}` : ''}\n`);
}
