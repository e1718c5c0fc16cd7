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
const service = await renderServiceValidators();
const files: [string, string][] = [
  [DOCUMENT_VALIDATOR_FILE, renderDocumentValidator()],
  [CREATE_VALIDATORS_FILE, renderCreateValidators()],
  ...Object.entries(SERVICE_VALIDATOR_FILES).map(([part, file]): [string, string] => [file, service[part as keyof typeof service]]),
];
for (const [file, text] of files) {
  writeFileSync(join(root, file), text);
  console.log(`wrote ${file}`);
}
