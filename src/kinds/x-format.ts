import { cronError } from './cron.js';
import { documentPatternError, safeRegexError } from './safe-regex.js';
import { nameError } from './names.js';

/**
 * The check behind our `x-format` keyword, in one importable function so that both the
 * schemas compiled at run time (createAjv) and the validators generated at build time
 * (ajv standalone code, src/config/generated/) call the same code. Returns the error message
 * (phrased to follow the field name) or null.
 *
 * `rootData` and `instancePath` identify the document and the pattern's place in it: the regex
 * check counts every pattern of one document against a shared compile budget.
 */
export function xFormatError(format: string, value: string, rootData: unknown, instancePath: string): string | null {
  if (format === 'cron') return cronError(value);
  if (format === 'name') return nameError(value);
  // Checked with the engine that will run it (RE2 semantics, bounded size), not V8's RegExp.
  if (format === 'regex')
    return typeof rootData === 'object' && rootData ? documentPatternError(value, rootData, instancePath) : safeRegexError(value);
  return null;
}
