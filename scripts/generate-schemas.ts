/**
 * Writes schemas/document.schema.json, the JSON Schema of a YAML document, from the kind
 * schemas in schemas/kinds. Run with `npm run generate` after changing a kind;
 * test/unit/config/document-schema.test.ts fails while the checked-in file is stale.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SCHEMAS_DIR } from '../src/kinds/index.js';
import { DOCUMENT_SCHEMA_FILE, renderDocumentSchema } from '../src/config/document-schema.js';

const target = join(SCHEMAS_DIR, DOCUMENT_SCHEMA_FILE);
writeFileSync(target, renderDocumentSchema());
process.stdout.write(`wrote ${target}\n`);
