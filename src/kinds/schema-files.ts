import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KindSchemaFile } from './schema-types.js';

/**
 * Where the kind files come from. Everything that runs from the package reads them from
 * schemas/kinds; the Terraform provider's bundle replaces this module with the files inlined
 * (scripts/build-provider.mjs), so the provider is one self-contained release that points into
 * no checkout or node_modules. Keep the exports of this module and that replacement the same.
 */

/** schemas/ sits at the package root, two levels above both src/kinds and dist/kinds. */
export const SCHEMAS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'schemas');

/** The kind files, sorted by file name, with their names. */
export function kindSchemaFiles(): Array<{ file: string; text: string }> {
  const dir = join(SCHEMAS_DIR, 'kinds');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.schema.json'))
    .sort()
    .map((file) => ({ file, text: readFileSync(join(dir, file), 'utf8') }));
}

export function parseKindSchemaFile(text: string): KindSchemaFile {
  return JSON.parse(text) as KindSchemaFile;
}
