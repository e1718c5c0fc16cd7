import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatConfigError, type ConfigError } from '../../../src/config/index.js';

export const REPO = join(import.meta.dirname, '..', '..', '..');
export const FIXTURES = join(REPO, 'test', 'fixtures', 'config');

export const lines = (errors: ConfigError[]) => errors.map(formatConfigError);

/**
 * Compares with a golden file of expected lines. UPDATE_GOLDEN=1 rewrites the file instead
 * (review the diff before committing it).
 */
export function golden(file: string, actual: string[]): string[] {
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file, `${actual.join('\n')}\n`);
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
}
