import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DPCTL } from '../support/cli.js';

/**
 * Every dpctl command loads what it needs when it runs (dynamic imports in the actions), so
 * `--help` and light commands start in ~0.15 s instead of ~1 s with the whole service loaded.
 * A module resolve hook in the spawned CLI reports each npm package it imports.
 */
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
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function packagesLoadedBy(args: string[]): Set<string> {
  const run = spawnSync(process.execPath, ['--import', register, DPCTL, ...args], { encoding: 'utf8', env: { ...process.env, DATAPLATFORM_URL: '' } });
  const packages = new Set(run.stderr.split('\n').flatMap((line) => (line.startsWith('loaded-package ') ? [line.slice('loaded-package '.length)] : [])));
  // The hook must have run, or an empty set would prove nothing.
  expect(packages.has('commander'), run.stderr).toBe(true);
  return packages;
}

/** Packages only `dpctl serve`, `dpctl controller`, or commands that talk to the API need. */
const HEAVY = ['fastify', 'pg', 'better-sqlite3', 'nodemailer', 'openid-client', 'ws', 'pino', 'undici', '@grpc/grpc-js'];

describe('CLI start-up loads only what the command needs', () => {
  it.each([['--help'], ['plan', '--help'], ['serve', '--help'], ['controller', '--help'], ['provider', '--help']])('dpctl %s loads commander only', (...args) => {
    expect([...packagesLoadedBy(args)]).toEqual(['commander']);
  });

  it('dpctl validate loads the config packages (yaml, ajv), not the service, the client or the controller', () => {
    const packages = packagesLoadedBy(['validate', join(import.meta.dirname, '..', '..', 'examples', 'platform')]);
    expect(packages.has('yaml') && packages.has('ajv')).toBe(true);
    expect(HEAVY.filter((p) => packages.has(p))).toEqual([]);
  });
});
