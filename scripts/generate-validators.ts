/**
 * Writes the validators generated at build time (ajv standalone code): see
 * src/kinds/standalone.ts. Run by `npm run generate`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DOCUMENT_VALIDATOR_FILE, renderDocumentValidator } from '../src/config/validator-codegen.js';
import { CREATE_VALIDATORS_FILE, renderCreateValidators } from '../src/provider/validator-codegen.js';
import { SERVICE_VALIDATOR_FILES, renderServiceValidators } from '../src/service/validator-codegen.js';

const root = join(import.meta.dirname, '..');
for (const [file, render] of [
  [DOCUMENT_VALIDATOR_FILE, renderDocumentValidator],
  [CREATE_VALIDATORS_FILE, renderCreateValidators],
] as const) {
  writeFileSync(join(root, file), render());
  console.log(`wrote ${file}`);
}
const service = await renderServiceValidators();
for (const [part, file] of Object.entries(SERVICE_VALIDATOR_FILES)) {
  writeFileSync(join(root, file), service[part as keyof typeof service]);
  console.log(`wrote ${file}`);
}
