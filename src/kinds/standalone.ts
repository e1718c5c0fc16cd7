import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { JsonSchema } from './index.js';
import { createAjv } from './validator.js';

export interface StandaloneModule {
  /** The module's text, for a file under src/<layer>/generated/. */
  text: string;
  /** A hash of the generated validation code: changes whenever the checks do. */
  hash: string;
}

/**
 * Validators generated at build time as ajv standalone code, one ES module exporting one function
 * per entry of `schemas` (under the entry's name), so that short-lived processes never load Ajv
 * or compile a schema. Formats and the `x-format` keyword are imported by the generated module
 * from src/kinds, so the generated code runs exactly the checks that createAjv registers.
 *
 * @param header comment lines naming the source and the generator
 * @param options.extra lines after the imports, given the code's hash
 * @param options.ajv the Ajv options the validators work with (defaults filled in, types coerced)
 */
export function renderStandaloneModule(
  schemas: Record<string, JsonSchema>,
  header: string[],
  options: { extra?: (hash: string) => string[]; ajv?: { coerceTypes?: boolean; useDefaults?: boolean } } = {},
): StandaloneModule {
  const require = createRequire(import.meta.url);
  const standaloneCode = (require('ajv/dist/standalone/index.js') as { default: (ajv: unknown, refs: unknown) => string }).default;
  const ajv = createAjv({ ...options.ajv, standalone: { formats: '__formats', xFormat: '__xFormatError' } });
  const refs: Record<string, string> = {};
  for (const [name, schema] of Object.entries(schemas)) {
    const id = schema.$id ?? `urn:dataplatform:validator:${name}`;
    ajv.addSchema({ ...schema, $id: id });
    refs[name] = id;
  }
  // Ajv's standalone code calls require() for its runtime helpers (CommonJS modules): each
  // becomes an ESM import of the module.
  const imports: string[] = [];
  const code = standaloneCode(ajv, refs).replace(/require\("([^"]+)"\)/g, (_m, specifier: string) => {
    const name = `__runtime${imports.length}`;
    // Node gives module.exports as the default; bundlers (vitest) give its `default` when __esModule is set.
    imports.push(`import ${name}Import from ${JSON.stringify(specifier.endsWith('.js') ? specifier : `${specifier}.js`)};`);
    imports.push(`const ${name} = typeof ${name}Import === 'function' ? { default: ${name}Import } : ${name}Import;`);
    return name;
  });
  const hash = createHash('sha256').update(code).digest('hex').slice(0, 32);
  const text = [
    '// @ts-nocheck',
    '/* eslint-disable */',
    ...header.map((line) => `// ${line}`),
    "import { formats as __formats } from '../../kinds/formats.js';",
    "import { xFormatError as __xFormatError } from '../../kinds/x-format.js';",
    ...imports,
    ...(options.extra?.(hash) ?? []),
    code,
    '',
  ].join('\n');
  return { text, hash };
}
