import type { ErrorObject } from 'ajv';
import { generatedValidator, toFieldErrors, type FieldError } from '../kinds/validator.js';
import * as CREATE_VALIDATORS from './generated/create-validators.js';
import { ENGINE_LABELS, LABELS_FIELD } from '../engine/diff.js';
import { injectWriteOnly } from './resource.js';
import { apiField, objectToApi, type ResourceSpec } from './schema.js';
import { hasUnknown, isTfObject, type TfObject } from './values.js';

/**
 * Rules that need a field still unknown are left out: that it is required, and, while anything is
 * unknown, the conditional rules (`allOf` of if/then: a webhook channel's url), which may be about
 * it. The unknown fields themselves are not in the body, so nothing else is said about them.
 */
function needsUnknown(e: ErrorObject, unknown: string[]): boolean {
  if (!unknown.length) return false;
  if (e.schemaPath.startsWith('#/allOf/')) return true;
  return e.keyword === 'required' && e.instancePath === '' && unknown.includes(String(e.params.missingProperty));
}

/**
 * Checks a resource's config against the kind's create schema, as the API would, so mistakes
 * show at `terraform validate` / plan time, with the validator generated at build time
 * (validator-codegen.ts). Fields still unknown (references to resources not created yet) are
 * left out, and so are the rules that need them.
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
  return checkCreateBody(d.kind, body, unknown);
}

/** The kind's create schema's errors in an API body, leaving out the rules that need the `unknown` fields (not in the body). */
export function checkCreateBody(kind: string, body: Record<string, unknown>, unknown: string[]): FieldError[] {
  const validate = generatedValidator(CREATE_VALIDATORS, kind);
  return validate(body) ? [] : toFieldErrors(validate.errors?.filter((e) => !needsUnknown(e, unknown)));
}

/**
 * dpctl's own labels (its ownership label, its secrets fingerprint) written in a Terraform
 * configuration. A resource that carries `dpctl.dev/managed-by` counts as that dpctl source's, and
 * `dpctl apply --prune` there deletes it once its YAML document goes, although Terraform manages
 * it. `terraform plan -generate-config-out` copies them from an imported resource.
 */
export function engineLabelsIn(config: TfObject | null): string[] {
  const labels = config?.[LABELS_FIELD];
  return isTfObject(labels) ? Object.keys(labels).filter((k) => ENGINE_LABELS.includes(k)) : [];
}
