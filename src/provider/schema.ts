import type { JsonSchema, KindDescriptor } from '../kinds/index.js';
import { kind, writableKinds } from '../kinds/index.js';
import { fillDefaults } from '../engine/diff.js';
import { UNKNOWN, isTfObject, type TfObject, type TfValue } from './values.js';

import { PROVIDER_TYPE } from './address.js';
import { settingAttrs } from './settings.js';

export { PROVIDER_HOST, PROVIDER_NAMESPACE, PROVIDER_SOURCE, PROVIDER_TYPE } from './address.js';

export type Primitive = 'string' | 'number' | 'bool';

/**
 * One attribute of a resource, derived from the kind's JSON Schema:
 * - primitive: string / number (integer too) / bool;
 * - list: array of primitives; map: object with additionalProperties (map(string));
 * - object: object with properties (nested attribute, nesting SINGLE);
 * - objects: array of objects (nested attribute, nesting LIST).
 */
export interface AttrSpec {
  name: string;
  shape: 'primitive' | 'list' | 'map' | 'object' | 'objects';
  elem?: Primitive;
  attrs?: AttrSpec[];
  required: boolean;
  optional: boolean;
  computed: boolean;
  sensitive: boolean;
  /** Changing it replaces the resource (x-immutable, project_id). */
  replace: boolean;
  /** The schema default (API form), planned when the config leaves it null. */
  default?: unknown;
  description: string;
  json: JsonSchema;
  /** Write-only (protocol 6.8): only in config, always null in plan and state. */
  writeOnly?: boolean;
  /**
   * Not an API field: `<secret>_wo` (write-only twin of a secret), `<secret>_wo_version`, or a
   * provider-only `setting` (settings.ts: `timeouts`, `run_setup_tests`).
   */
  synthetic?: 'wo' | 'wo_version' | 'setting';
  /** Served as a nested block (`timeouts { ... }`, nesting single) instead of an attribute. */
  block?: boolean;
  /** For synthetic attributes: the secret field they stand for. */
  secretOf?: string;
  /** The API's field name when the attribute's differs (a field named like a Terraform meta-argument). */
  apiName?: string;
}

/** The API field an attribute stands for. */
export const apiField = (a: AttrSpec): string => a.apiName ?? a.name;

/**
 * Names Terraform reserves in a resource block (meta-arguments): an API field with one of
 * them cannot be written in HCL (`provider = "aws"` would pick a provider configuration), so
 * its attribute is renamed.
 */
const META_ARGUMENTS: Record<string, string> = {
  provider: 'provider_name',
  count: 'count_value',
  for_each: 'for_each_value',
  depends_on: 'depends_on_ids',
  lifecycle: 'lifecycle_value',
  connection: 'connection_value',
  provisioner: 'provisioner_value',
};

/** Top-level attributes named like a meta-argument get their Terraform name (nested ones are fine). */
function renameMetaArguments(attrs: AttrSpec[]): AttrSpec[] {
  return attrs.map((a) =>
    META_ARGUMENTS[a.name]
      ? {
          ...a,
          name: META_ARGUMENTS[a.name],
          apiName: a.name,
          description: `${a.description}${a.description ? ' ' : ''}(API field \`${a.name}\`, renamed: \`${a.name}\` is a Terraform meta-argument.)`,
        }
      : a,
  );
}

export interface ResourceSpec {
  typeName: string;
  descriptor: KindDescriptor;
  attrs: AttrSpec[];
}

function typeOf(s: JsonSchema): string | undefined {
  if (Array.isArray(s.type)) return s.type.find((t) => t !== 'null');
  return s.type;
}

function primitive(s: JsonSchema): Primitive {
  const t = typeOf(s);
  if (t === 'integer' || t === 'number') return 'number';
  if (t === 'boolean') return 'bool';
  return 'string';
}

function attrOf(name: string, s: JsonSchema, required: boolean): AttrSpec {
  const computed = !!s['x-computed'];
  const hasDefault = s.default !== undefined && !computed;
  const spec: AttrSpec = {
    name,
    shape: 'primitive',
    required: required && !computed,
    optional: !required && !computed,
    computed: computed || hasDefault,
    sensitive: !!(s['x-secret'] || s['x-sensitive']),
    replace: !!s['x-immutable'],
    default: hasDefault ? s.default : undefined,
    description: s.description ?? '',
    json: s,
  };
  const t = typeOf(s);
  if (t === 'object' && s.properties) {
    spec.shape = 'object';
    spec.attrs = attrsOf(s);
  } else if (t === 'object') {
    spec.shape = 'map';
    spec.elem = typeof s.additionalProperties === 'object' ? primitive(s.additionalProperties) : 'string';
  } else if (t === 'array' && s.items && typeOf(s.items) === 'object' && s.items.properties) {
    spec.shape = 'objects';
    spec.attrs = attrsOf(s.items);
  } else if (t === 'array') {
    spec.shape = 'list';
    spec.elem = s.items ? primitive(s.items) : 'string';
  } else {
    spec.elem = primitive(s);
  }
  return spec;
}

/**
 * Each secret scalar `x` also gets `x_wo` (write-only: never stored in plan or state) and
 * `x_wo_version` (changing it sends `x_wo` again). Give either `x` or the pair.
 */
export function withWriteOnlyTwins(attrs: AttrSpec[]): AttrSpec[] {
  const out: AttrSpec[] = [];
  for (const a of attrs) {
    out.push(a);
    if (a.shape !== 'primitive' || !a.json['x-secret'] || a.computed || a.required) continue;
    const base = {
      shape: 'primitive' as const,
      required: false,
      optional: true,
      computed: false,
      replace: false,
      json: {},
      secretOf: a.name,
    };
    out.push({
      ...base,
      name: `${a.name}_wo`,
      elem: a.elem,
      sensitive: true,
      writeOnly: true,
      synthetic: 'wo',
      description: `Write-only variant of ${a.name}: never kept in the plan or the state. Set ${a.name}_wo_version with it.`,
    });
    out.push({
      ...base,
      name: `${a.name}_wo_version`,
      elem: 'number',
      sensitive: false,
      synthetic: 'wo_version',
      description: `Change it to send ${a.name}_wo again.`,
    });
  }
  return out;
}

function attrsOf(s: JsonSchema): AttrSpec[] {
  const required = new Set(s.required ?? []);
  return withWriteOnlyTwins(Object.entries(s.properties ?? {}).map(([name, prop]) => attrOf(name, prop, required.has(name))));
}

export function resourceSpec(d: KindDescriptor): ResourceSpec {
  const required = new Set(d.createSchema.required ?? []);
  const attrs: AttrSpec[] = [];
  for (const [name, prop] of Object.entries(d.schema.properties ?? {})) {
    if (name === 'project_id' && d.scope === 'project') {
      attrs.push({
        name,
        shape: 'primitive',
        elem: 'string',
        required: true,
        optional: false,
        computed: false,
        sensitive: false,
        replace: true,
        description: 'Id of the project the resource lives in. Changing it replaces the resource.',
        json: prop,
      });
      continue;
    }
    const attr = attrOf(name, prop, required.has(name));
    // A kind the API cannot update (API keys) is replaced on any change.
    if (!d.operations.includes('update') && !attr.computed) attr.replace = true;
    attrs.push(attr);
  }
  return {
    typeName: `${PROVIDER_TYPE}_${d.kind}`,
    descriptor: d,
    attrs: [...renameMetaArguments(withWriteOnlyTwins(attrs)), ...settingAttrs(d)],
  };
}

let specs: Map<string, ResourceSpec> | undefined;
/** Every writable kind with create/get/delete, by Terraform type name. */
export function resourceSpecs(): Map<string, ResourceSpec> {
  if (!specs) {
    specs = new Map();
    for (const d of writableKinds()) {
      if (!['create', 'get', 'delete'].every((op) => d.operations.includes(op as never))) continue;
      const spec = resourceSpec(d);
      specs.set(spec.typeName, spec);
    }
  }
  return specs;
}

// ---- data sources ----

/**
 * A read-only view served as a data source: its attributes come from the view's read-only kind
 * (x-read-only-kind), its inputs are ids of the resources it belongs to.
 */
export interface ViewSpec {
  /** `dataplatform_<name>`. */
  name: string;
  /** The read-only kind describing what the view returns. */
  kind: string;
  description: string;
  /** `<kind>_id` inputs; with `oneOf`, exactly one of them is given. */
  owners: string[];
  oneOf?: boolean;
}

/**
 * The views the API serves beside CRUD (see src/client: discoveredSchema, lineage, runs). Only
 * how they are reached is listed here; their attributes are derived from the kinds' schemas.
 */
export const VIEWS: ViewSpec[] = [
  {
    name: 'connector_schema',
    kind: 'discovered_schema',
    owners: ['connector'],
    description: "Tables and columns discovered in a connector's source (GET .../connectors/{id}/schema; reading it discovers again).",
  },
  {
    name: 'dbt_lineage',
    kind: 'lineage_graph',
    owners: ['dbt_project'],
    description: 'The lineage graph of a dbt project: source tables and models as nodes, reads as edges.',
  },
  {
    name: 'latest_run',
    kind: 'run',
    owners: ['connector', 'pipeline', 'dbt_project'],
    oneOf: true,
    description: 'The most recent run of a connector, pipeline or dbt project (give exactly one of their ids).',
  },
];

export interface DataSourceSpec extends ResourceSpec {
  /** `lookup`: one object of a writable kind by its identity; `view`: a read-only view. */
  source: { type: 'lookup' } | { type: 'view'; view: ViewSpec };
  /** Names of the attributes the configuration gives (required unless a view's `oneOf`). */
  inputs: string[];
}

/** The attribute as a data source returns it: computed, with everything below computed too. */
function asComputed(a: AttrSpec): AttrSpec {
  const out: AttrSpec = { ...a, required: false, optional: false, computed: true, replace: false, default: undefined };
  if (a.attrs) out.attrs = a.attrs.filter((c) => !c.synthetic && !c.json['x-secret']).map(asComputed);
  return out;
}

function inputAttr(name: string, description: string, required: boolean): AttrSpec {
  return {
    name,
    shape: 'primitive',
    elem: 'string',
    required,
    optional: !required,
    computed: false,
    sensitive: false,
    replace: false,
    description,
    json: { type: 'string' },
  };
}

/** `data "dataplatform_<kind>"`: a resource looked up by project and identity, secrets left out. */
/** What a resource attribute's description says about changing it: nothing a data source does. */
const REPLACE_NOTE = /\s*(Changing it replaces the [a-z ]+\.|Immutable: a change replaces the resource\.)/g;

export function lookupSpec(d: KindDescriptor): DataSourceSpec {
  const resource = resourceSpec(d);
  const inputs = d.scope === 'project' ? ['project_id', d.identity] : [d.identity];
  const attrs = resource.attrs
    // Neither secrets nor what the API shows once, at creation (an API key's `key`: always empty in a read).
    .filter((a) => !a.synthetic && !a.json['x-secret'] && !d.onceFields.includes(apiField(a)))
    .map((a) => ({ ...a, description: a.description.replace(REPLACE_NOTE, '') }))
    .map((a) =>
      inputs.includes(a.name)
        ? { ...a, required: true, optional: false, computed: false, replace: false, default: undefined, attrs: undefined }
        : asComputed(a),
    );
  return { typeName: resource.typeName, descriptor: d, attrs, source: { type: 'lookup' }, inputs };
}

export function viewSpec(view: ViewSpec): DataSourceSpec {
  const d = kind(view.kind);
  const inputs = ['project_id', ...view.owners.map((o) => `${o}_id`)];
  const attrs: AttrSpec[] = [inputAttr('project_id', 'Id of the project.', true)];
  for (const owner of view.owners) {
    const title = kind(owner).title.toLowerCase();
    attrs.push(
      inputAttr(
        `${owner}_id`,
        view.oneOf ? `Id of the ${title} (give exactly one of ${view.owners.map((o) => `${o}_id`).join(', ')}).` : `Id of the ${title}.`,
        !view.oneOf,
      ),
    );
  }
  for (const [name, prop] of Object.entries(d.schema.properties ?? {})) {
    if (inputs.includes(name)) continue;
    attrs.push(asComputed(attrOf(name, prop, false)));
  }
  attrs.splice(0, attrs.length, ...renameMetaArguments(attrs));
  // Terraform's data sources are expected to carry an `id`; a view without one gets the owner's.
  if (!attrs.some((a) => a.name === 'id'))
    attrs.push(
      asComputed(
        attrOf('id', { type: 'string', description: `Id of the ${kind(view.owners[0]).title.toLowerCase()} the view belongs to.` }, false),
      ),
    );
  return {
    typeName: `${PROVIDER_TYPE}_${view.name}`,
    descriptor: { ...d, description: view.description },
    attrs,
    source: { type: 'view', view },
    inputs,
  };
}

let dataSpecs: Map<string, DataSourceSpec> | undefined;
/**
 * Every data source by Terraform type name: a lookup for each resource kind that can be listed
 * (same type names as the resources), then the read-only views.
 */
export function dataSourceSpecs(): Map<string, DataSourceSpec> {
  if (!dataSpecs) {
    dataSpecs = new Map();
    for (const spec of resourceSpecs().values()) {
      if (!spec.descriptor.operations.includes('list')) continue;
      dataSpecs.set(spec.typeName, lookupSpec(spec.descriptor));
    }
    for (const view of VIEWS) {
      const spec = viewSpec(view);
      if (dataSpecs.has(spec.typeName)) throw new Error(`data source ${spec.typeName} is both a kind and a view`);
      dataSpecs.set(spec.typeName, spec);
    }
  }
  return dataSpecs;
}

// ---- Terraform schema messages ----

function ctyType(a: AttrSpec): unknown {
  switch (a.shape) {
    case 'primitive':
      return a.elem;
    case 'list':
      return ['list', a.elem];
    case 'map':
      return ['map', a.elem];
    case 'object':
    case 'objects': {
      const obj = ['object', Object.fromEntries(a.attrs!.map((c) => [c.name, ctyType(c)]))];
      return a.shape === 'object' ? obj : ['list', obj];
    }
  }
}

function attributeMessage(a: AttrSpec): Record<string, unknown> {
  const msg: Record<string, unknown> = {
    name: a.name,
    description: a.description,
    required: a.required,
    optional: a.optional,
    computed: a.computed,
    sensitive: a.sensitive,
    write_only: !!a.writeOnly,
  };
  if (a.shape === 'object' || a.shape === 'objects') {
    msg.nested_type = { attributes: a.attrs!.map(attributeMessage), nesting: a.shape === 'object' ? 1 : 2 };
  } else {
    msg.type = Buffer.from(JSON.stringify(ctyType(a)));
  }
  return msg;
}

/** A nested block (nesting SINGLE: absent is null), as terraform-plugin-framework-timeouts serves `timeouts`. */
function blockMessage(a: AttrSpec): Record<string, unknown> {
  return {
    type_name: a.name,
    nesting: 1,
    block: { version: 0, description: a.description, attributes: a.attrs!.map(attributeMessage), block_types: [] },
  };
}

export function schemaMessage(spec: ResourceSpec): Record<string, unknown> {
  const d = spec.descriptor;
  return {
    version: 0,
    block: {
      version: 0,
      description: d.description || d.title,
      attributes: spec.attrs.filter((a) => !a.block).map(attributeMessage),
      block_types: spec.attrs.filter((a) => a.block).map(blockMessage),
    },
  };
}

const str = (name: string, description: string, sensitive = false) => ({
  name,
  type: Buffer.from('"string"'),
  description,
  optional: true,
  sensitive,
});

export function providerSchemaMessage(): Record<string, unknown> {
  return {
    version: 0,
    block: {
      version: 0,
      description: 'The data platform API.',
      attributes: [
        str('endpoint', 'Service URL, e.g. https://acme.localhost:8443 (env DATAPLATFORM_URL).'),
        str('api_key', 'API key (env DATAPLATFORM_API_KEY).', true),
        str('email', 'User login (env DATAPLATFORM_EMAIL), with password.'),
        str('password', 'User password (env DATAPLATFORM_PASSWORD).', true),
        str('ca_file', 'PEM file of a CA to trust (env DATAPLATFORM_CA_FILE).'),
        {
          name: 'insecure',
          type: Buffer.from('"bool"'),
          description: 'Skip TLS verification (env DATAPLATFORM_INSECURE).',
          optional: true,
        },
        {
          name: 'skip_credentials_validation',
          type: Buffer.from('"bool"'),
          description:
            'Do not check the credentials when the provider starts. By default one request (the first page of one project) checks them, so a wrong key fails terraform plan once, at the provider block, even when the plan only creates.',
          optional: true,
        },
      ],
      block_types: [],
    },
  };
}

// ---- value conversion ----

/** API value (JSON) -> Terraform value of the attribute's type (every nested attribute present). */
export function apiToTf(a: AttrSpec, v: unknown): TfValue {
  if (v === undefined || v === null || a.synthetic) return null;
  switch (a.shape) {
    case 'primitive':
      return v as TfValue;
    case 'list':
      return Array.isArray(v) ? (v as TfValue[]) : null;
    case 'map':
      return isTfObject(v) ? ({ ...(v as TfObject) } as TfObject) : null;
    case 'object':
      return isTfObject(v) ? objectToTf(a.attrs!, v as Record<string, unknown>) : null;
    case 'objects':
      return Array.isArray(v) ? v.map((item) => objectToTf(a.attrs!, item as Record<string, unknown>)) : null;
  }
}

export function objectToTf(attrs: AttrSpec[], v: Record<string, unknown>): TfObject {
  const out: TfObject = {};
  for (const a of attrs) out[a.name] = apiToTf(a, v[apiField(a)]);
  return out;
}

/** Terraform value -> API value: nulls inside objects dropped (the API has no nulls there). */
export function tfToApi(a: AttrSpec, v: TfValue): unknown {
  if (v === null || v === UNKNOWN) return undefined;
  switch (a.shape) {
    case 'object':
      return isTfObject(v) ? objectToApi(a.attrs!, v) : undefined;
    case 'objects':
      return Array.isArray(v) ? v.map((item) => (isTfObject(item) ? objectToApi(a.attrs!, item) : item)) : undefined;
    default:
      return v;
  }
}

export function objectToApi(attrs: AttrSpec[], v: TfObject): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of attrs) {
    if (a.synthetic) continue;
    const x = tfToApi(a, v[a.name] ?? null);
    if (x !== undefined) out[apiField(a)] = x;
  }
  return out;
}

/** The default as planned: schema defaults filled below it, in Terraform form. */
export function defaultTf(a: AttrSpec): TfValue {
  // A provider-only setting's default is already a Terraform value (apiToTf has none for it).
  if (a.synthetic === 'setting') return a.default as TfValue;
  return apiToTf(a, fillDefaults(a.json, structuredClone(a.default)));
}
