import { KINDS, type JsonSchema } from '../kinds/index.js';
import { renderStandaloneModule } from '../kinds/standalone.js';
import { schemaAt } from '../kinds/walk.js';
import { buildDocumentSchema } from './document-schema.js';
import { secretValidatorName } from './secrets.js';

/**
 * The YAML document validator and the validators of the secret fields (what a secretRef's value
 * is checked against), generated at build time as ajv standalone code (`npm run generate` writes
 * src/config/generated/document-validator.ts, checked in; a test fails when it is stale), so that
 * `dpctl validate / plan / apply` never load Ajv or compile a schema.
 */
export const DOCUMENT_VALIDATOR_FILE = 'src/config/generated/document-validator.ts';

/** Every kind's secret fields' schemas, by the name secrets.ts looks them up with. */
function secretSchemas(): Record<string, JsonSchema> {
  const out: Record<string, JsonSchema> = {};
  for (const d of KINDS.values())
    for (const path of d.secretPaths) {
      const schema = schemaAt(d.createSchema, path);
      if (schema) out[secretValidatorName(d.kind, path)] = schema;
    }
  return out;
}

export function renderDocumentValidator(): string {
  return renderStandaloneModule(
    { validate: buildDocumentSchema(), ...secretSchemas() },
    [
      'Generated from the document schema (src/config/document-schema.ts) by `npm run generate`',
      '(scripts/generate-validators.ts, src/config/validator-codegen.ts): do not edit.',
    ],
    {
      extra: (hash) => [
        '/** Changes whenever the generated validation code does: part of the persistent parse cache key. */',
        `export const DOCUMENT_VALIDATOR_HASH = ${JSON.stringify(hash)};`,
      ],
    },
  ).text;
}
