import { readFileSync } from 'node:fs';

/** The package's own package.json (it sits one level above both src/ and dist/), read once. */
export const OWN_PACKAGE = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
  allowScripts: Record<string, boolean>;
};

/** The package's version. */
export const PACKAGE_VERSION: string = OWN_PACKAGE.version;
