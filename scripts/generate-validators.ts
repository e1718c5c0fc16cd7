/**
 * Writes the validators generated at build time (ajv standalone code): see
 * src/config/validator-codegen.ts. Run by `npm run generate`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DOCUMENT_VALIDATOR_FILE, renderDocumentValidator } from '../src/config/validator-codegen.js';

const root = join(import.meta.dirname, '..');
writeFileSync(join(root, DOCUMENT_VALIDATOR_FILE), renderDocumentValidator());
console.log(`wrote ${DOCUMENT_VALIDATOR_FILE}`);
