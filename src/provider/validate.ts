import type { ValidateFunction } from 'ajv/dist/2020.js';
import { createAjv, toFieldErrors, type FieldError } from '../kinds/validator.js';
import type { JsonSchema } from '../kinds/index.js';
import { injectWriteOnly } from './resource.js';
import { apiField, objectToApi, type ResourceSpec } from './schema.js';
import { hasUnknown, type TfObject } from './values.js';

let ajv: ReturnType<typeof createAjv> | undefined;
const compiled = new Map<string, ValidateFunction>();

/**
 * Checks a resource's config against the kind's create schema, as the API would, so mistakes
 * show at `terraform validate` / plan time. Fields still unknown (references to resources not
 * created yet) are left out, and so are the rules that need them.
 */
export function validateConfig(spec: ResourceSpec, config: TfObject | null): FieldError[] {
  if (!config) return [];
  const d = spec.descriptor;
  const unknownAttrs = spec.attrs.filter((a) => hasUnknown(config[a.name] ?? null));
  const unknown = unknownAttrs.map(apiField);
  const writable = spec.attrs.filter(
    (a) => !unknownAttrs.includes(a) && !(a.name === 'project_id' && d.scope === 'project') && !(a.computed && !a.optional && !a.required),
  );
  const body = objectToApi(writable, config);
  injectWriteOnly(writable, config, body);
  const key = `${d.kind}:${unknown.join(',')}`;
  let validate = compiled.get(key);
  if (!validate) {
    const schema = structuredClone(d.createSchema) as JsonSchema;
    for (const name of unknown) delete schema.properties?.[name];
    schema.required = schema.required?.filter((r) => !unknown.includes(r));
    schema.additionalProperties = true;
    if (unknown.length) delete schema.allOf;
    ajv ??= createAjv();
    validate = ajv.compile(schema);
    compiled.set(key, validate);
  }
  return validate(body) ? [] : toFieldErrors(validate.errors);
}
