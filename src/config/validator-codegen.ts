import { renderStandaloneModule } from '../kinds/standalone.js';
import { buildDocumentSchema } from './document-schema.js';

/**
 * The YAML document validator, generated at build time as ajv standalone code
 * (`npm run generate` writes src/config/generated/document-validator.ts, checked in; a test fails
 * when it is stale), so that `dpctl validate / plan / apply` never compile the schema at start-up.
 */
export const DOCUMENT_VALIDATOR_FILE = 'src/config/generated/document-validator.ts';

export function renderDocumentValidator(): string {
  return renderStandaloneModule(
    { validate: buildDocumentSchema() },
    [
      'Generated from the document schema (src/config/document-schema.ts) by `npm run generate`',
      '(scripts/generate-validators.ts, src/config/validator-codegen.ts): do not edit.',
    ],
    (hash) => [
      '/** Changes whenever the generated validation code does: part of the persistent parse cache key. */',
      `export const DOCUMENT_VALIDATOR_HASH = ${JSON.stringify(hash)};`,
    ],
  ).text;
}
