import type { KindDescriptor } from '../kinds/index.js';
import { renderStandaloneModule } from '../kinds/standalone.js';
import { resourceSpecs } from './schema.js';

/**
 * The provider's config validators, one per resource type, generated at build time as ajv
 * standalone code (`npm run generate` writes src/provider/generated/create-validators.ts, checked
 * in; a test fails when it is stale). Terraform starts the provider afresh for every phase of
 * every command (schema, validate, plan, apply), and compiling the kinds' schemas in each cost
 * about 0.2 s for the first kind and 20 ms for each further one.
 */
export const CREATE_VALIDATORS_FILE = 'src/provider/generated/create-validators.ts';

/**
 * What a resource's config is checked against: the kind's create schema as the API applies it,
 * other properties allowed (the attributes of the provider's own, such as `timeouts`, are not
 * sent and not the API's business).
 */
export function configSchema(d: KindDescriptor) {
  return { ...structuredClone(d.createSchema), additionalProperties: true };
}

export function renderCreateValidators(): string {
  const schemas = Object.fromEntries([...resourceSpecs().values()].map((s) => [s.descriptor.kind, configSchema(s.descriptor)]));
  return renderStandaloneModule(schemas, [
    "Generated from the kinds' create schemas (schemas/kinds) by `npm run generate`",
    '(scripts/generate-validators.ts, src/provider/validator-codegen.ts): do not edit.',
    'One validator per resource type, exported under its kind.',
  ]).text;
}
