import { readFileSync } from 'node:fs';

/** The package's version (package.json sits one level above both src/ and dist/). */
export const PACKAGE_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
