import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { createAjv } from '../kinds/validator.js';
import { buildDocumentSchema } from './document-schema.js';

/**
 * The YAML document validator, generated at build time as ajv standalone code
 * (`npm run generate` writes src/config/generated/document-validator.ts, checked in; a test fails
 * when it is stale), so that `dpctl validate / plan / apply` never compile the schema at start-up.
 * Formats and the `x-format` keyword are imported by the generated module from src/kinds, so the
 * generated code runs exactly the checks that createAjv registers.
 */
export const DOCUMENT_VALIDATOR_FILE = 'src/config/generated/document-validator.ts';

export function renderDocumentValidator(): string {
  const require = createRequire(import.meta.url);
  const standaloneCode = (require('ajv/dist/standalone/index.js') as { default: (ajv: unknown, v: unknown) => string }).default;
  const ajv = createAjv({ standalone: { formats: '__formats', xFormat: '__xFormatError' } });
  // Ajv's standalone code calls require() for its runtime helpers (CommonJS modules): each
  // becomes an ESM import of the module.
  const imports: string[] = [];
  const code = standaloneCode(ajv, ajv.compile(buildDocumentSchema())).replace(/require\("([^"]+)"\)/g, (_m, specifier: string) => {
    const name = `__runtime${imports.length}`;
    // Node gives module.exports as the default; bundlers (vitest) give its `default` when __esModule is set.
    imports.push(`import ${name}Import from ${JSON.stringify(specifier.endsWith('.js') ? specifier : `${specifier}.js`)};`);
    imports.push(`const ${name} = typeof ${name}Import === 'function' ? { default: ${name}Import } : ${name}Import;`);
    return name;
  });
  const hash = createHash('sha256').update(code).digest('hex').slice(0, 32);
  return [
    '// @ts-nocheck',
    '/* eslint-disable */',
    '// Generated from the document schema (src/config/document-schema.ts) by `npm run generate`',
    '// (scripts/generate-validators.ts, src/config/validator-codegen.ts): do not edit.',
    "import { formats as __formats } from '../../kinds/formats.js';",
    "import { xFormatError as __xFormatError } from '../../kinds/x-format.js';",
    ...imports,
    '/** Changes whenever the generated validation code does: part of the persistent parse cache key. */',
    `export const DOCUMENT_VALIDATOR_HASH = ${JSON.stringify(hash)};`,
    code,
    '',
  ].join('\n');
}
