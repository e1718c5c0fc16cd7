import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageImportTracer } from '../support/package-imports.js';

/**
 * Every dpctl command loads what it needs when it runs (dynamic imports in the actions), so
 * `--help` and light commands start in ~0.15 s instead of ~1 s with the whole service loaded.
 * A module resolve hook in the spawned CLI reports each npm package it imports (test/support/package-imports.ts).
 */
const tracer = packageImportTracer();
const invalid = mkdtempSync(join(tmpdir(), 'dp-startup-imports-'));
writeFileSync(join(invalid, 'p.yaml'), 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: p1\nspec:\n  nope: 1\n');
afterAll(() => {
  tracer.close();
  rmSync(invalid, { recursive: true, force: true });
});

function packagesLoadedBy(args: string[]): Set<string> {
  const { run, packages } = tracer.run(args, { DATAPLATFORM_URL: '' });
  // The hook must have run, or an empty set would prove nothing.
  expect(packages.has('commander'), run.stderr).toBe(true);
  return packages;
}

/** Packages only `dpctl serve`, `dpctl controller`, or commands that talk to the API need. */
const HEAVY = ['fastify', 'pg', 'better-sqlite3', 'nodemailer', 'openid-client', 'ws', 'pino', 'undici', '@grpc/grpc-js'];

describe('CLI start-up loads only what the command needs', () => {
  it.each([['--help'], ['plan', '--help'], ['serve', '--help'], ['controller', '--help'], ['provider', '--help']])(
    'dpctl %s loads commander only',
    (...args) => {
      expect([...packagesLoadedBy(args)]).toEqual(['commander']);
    },
  );

  it("dpctl validate of a valid config loads the fast path (js-yaml, the generated validator's ajv runtime), not yaml, the service, the client or the controller", () => {
    const packages = packagesLoadedBy(['validate', '--no-cache', join(import.meta.dirname, '..', '..', 'examples', 'platform')]);
    expect(packages.has('js-yaml') && packages.has('ajv')).toBe(true);
    // `yaml` (~40 ms of CPU to load) is for positions: only a config with an error needs one.
    expect(packages.has('yaml')).toBe(false);
    expect(HEAVY.filter((p) => packages.has(p))).toEqual([]);
  });

  it('dpctl validate of an invalid config loads yaml for the positions of its errors', () => {
    const { run, packages } = tracer.run(['validate', '--no-cache', invalid], { DATAPLATFORM_URL: '' });
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr).toContain('p.yaml:6:3: Project/p1: spec.nope: is not a known field');
    expect(packages.has('yaml')).toBe(true);
    expect(HEAVY.filter((p) => packages.has(p))).toEqual([]);
  });
});
