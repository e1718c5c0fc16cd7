import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DPCTL } from './cli.js';

/**
 * Runs dpctl with a module resolve hook that reports each npm package it imports, for the tests
 * of what a command loads at start-up, and the same for each package it require()s (the config
 * loader requires `yaml` only when it needs it: ESM hooks do not see require in Node 20).
 * `close()` removes the hook files.
 */
export function packageImportTracer(): {
  run(args: string[], env?: NodeJS.ProcessEnv): { run: SpawnSyncReturns<string>; packages: Set<string> };
  close(): void;
} {
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
  writeFileSync(
    register,
    `import Module, { register } from 'node:module';
register(${JSON.stringify(pathToFileURL(hooks).href)});
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (...args) {
  const resolved = resolveFilename.apply(this, args);
  const m = /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(resolved);
  if (m) process.stderr.write('loaded-package ' + m[1] + '\\n');
  return resolved;
};
`,
  );
  return {
    run(args, env = {}) {
      const run = spawnSync(process.execPath, ['--import', register, DPCTL, ...args], {
        encoding: 'utf8',
        env: { ...process.env, ...env },
      });
      const packages = new Set(
        run.stderr.split('\n').flatMap((line) => (line.startsWith('loaded-package ') ? [line.slice('loaded-package '.length)] : [])),
      );
      return { run, packages };
    },
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}
