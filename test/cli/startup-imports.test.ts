import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageImportTracer } from '../support/package-imports.js';

/**
 * Every dpctl command loads what it needs when it runs (dynamic imports in the actions), so
 * `--help` and light commands start in ~0.15 s instead of ~1 s with the whole service loaded.
 * A module resolve hook in the spawned CLI reports each npm package it imports (test/support/package-imports.ts).
 */
const tracer = packageImportTracer();
afterAll(() => tracer.close());

function packagesLoadedBy(args: string[]): Set<string> {
  const { run, packages } = tracer.run(args, { DATAPLATFORM_URL: '' });
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
