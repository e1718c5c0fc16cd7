import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DPCTL } from './cli.js';

/**
 * Runs dpctl with a module resolve hook that reports each npm package it imports, for the tests
 * of what a command loads at start-up. `close()` removes the hook files.
 */
export function packageImportTracer(): { run(args: string[], env?: NodeJS.ProcessEnv): { run: SpawnSyncReturns<string>; packages: Set<string> }; close(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'dp-imports-'));
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  const m = /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(result.url);
  if (m) process.stderr.write('loaded-package ' + m[1] + '\\n');
  return result;
}
`,
  );
  const register = join(dir, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  return {
    run(args, env = {}) {
      const run = spawnSync(process.execPath, ['--import', register, DPCTL, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
      const packages = new Set(run.stderr.split('\n').flatMap((line) => (line.startsWith('loaded-package ') ? [line.slice('loaded-package '.length)] : [])));
      return { run, packages };
    },
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}
