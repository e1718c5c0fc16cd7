/**
 * How Terraform attribute names become TypeScript names in the bindings. Shared by the
 * generator (scripts/generate-cdktf.ts) and the YAML bridge, which turns API bodies into
 * construct configs with the same names.
 */
import type { AttrSpec } from '../provider/schema.js';

export const pascal = (name: string) =>
  name
    .split(/[_-]/)
    .filter(Boolean)
    .map((p) => p[0].toUpperCase() + p.slice(1))
    .join('');

export const camel = (name: string) => {
  const p = pascal(name);
  return p[0].toLowerCase() + p.slice(1);
};

/**
 * Members an attribute must not shadow: like the cdktf generator, such an attribute gets the
 * suffix `Attribute` (`provider` -> `providerAttribute`). Nested objects only clash with the
 * members of ComplexObject (a step's `depends_on` stays `dependsOn`).
 */
const COMPLEX_OBJECT_MEMBERS = [
  'fqn',
  'toString',
  'resolve',
  'creationStack',
  'internalValue',
  'interpolationForAttribute',
  'interpolationAsList',
  'computeFqn',
  'terraformAttribute',
  'terraformResource',
  'complexObjectIndex',
  'complexObjectIsFromSet',
];
const RESOURCE_MEMBERS = new Set([
  ...COMPLEX_OBJECT_MEMBERS,
  'provider',
  'count',
  'dependsOn',
  'lifecycle',
  'forEach',
  'provisioners',
  'connection',
  'node',
  'friendlyUniqueId',
  'terraformResourceType',
  'terraformGeneratorMetadata',
  'terraformMetaArguments',
  'rawOverrides',
  'cdktfStack',
  'stack',
  'toTerraform',
  'toHclTerraform',
  'toMetadata',
  'importFrom',
  'moveTo',
  'moveToId',
  'moveFromId',
  'addOverride',
  'overrideLogicalId',
  'resetOverrideLogicalId',
  'hasResourceMove',
]);
const STRUCT_MEMBERS = new Set(COMPLEX_OBJECT_MEMBERS);

/** An attribute's property name; `nested` inside nested objects. */
export const propName = (attr: Pick<AttrSpec, 'name'>, nested = false) => {
  const c = camel(attr.name);
  return (nested ? STRUCT_MEMBERS : RESOURCE_MEMBERS).has(c) ? `${c}Attribute` : c;
};

/** The class name of a resource type (`dataplatform_alert_rule` -> `AlertRule`). */
export const className = (typeName: string, prefix = '') => prefix + pascal(typeName.slice(typeName.indexOf('_') + 1));

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * An API body (snake_case, as src/config builds it) as the config of the construct: attribute
 * names renamed like the generator names them; map keys (labels, extra) left alone.
 */
export function bodyToConfig(attrs: AttrSpec[], body: Record<string, unknown>, nested = false): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of attrs) {
    // An attribute renamed by the provider (`provider` -> `provider_name`, a meta-argument) reads its API field.
    const field = 'apiName' in a && typeof a.apiName === 'string' ? a.apiName : a.name;
    if (!(field in body)) continue;
    const v = body[field];
    if (a.shape === 'object' && isRecord(v)) out[propName(a, nested)] = bodyToConfig(a.attrs!, v, true);
    else if (a.shape === 'objects' && Array.isArray(v))
      out[propName(a, nested)] = v.map((item) => (isRecord(item) ? bodyToConfig(a.attrs!, item, true) : item));
    else out[propName(a, nested)] = v;
  }
  return out;
}
