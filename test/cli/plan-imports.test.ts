import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageImportTracer } from '../support/package-imports.js';

/**
 * What `dpctl plan` loads at start-up (issue 18: a plan of 10,100 resources in < 1 s with the
 * cache): the client (undici's Agent and request API) and the engine, not the WebSocket library
 * (streams load it when they open), nor the service. And a config error still exits at once, with
 * the login that was started before the parse abandoned, even against a service that does not answer.
 */
const tracer = packageImportTracer();
const dir = mkdtempSync(join(tmpdir(), 'dp-plan-imports-'));
const config = join(dir, 'platform');
mkdirSync(config);
writeFileSync(join(config, 'p.yaml'), 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: p1\nspec:\n  nope: 1\n');
afterAll(() => {
  tracer.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('dpctl plan start-up', () => {
  it('loads the client and the engine, not ws or the service; a config error exits at once though the service is unreachable', () => {
    const started = Date.now();
    // Nothing listens on port 1: a login left running would retry for seconds.
    const { run, packages } = tracer.run(['plan', '--no-cache', config], {
      DATAPLATFORM_URL: 'https://acme.localhost:1',
      DATAPLATFORM_EMAIL: 'a@example.com',
      DATAPLATFORM_PASSWORD: 'correct-horse',
      DATAPLATFORM_API_KEY: '',
      DATAPLATFORM_CA_FILE: '',
      DATAPLATFORM_INSECURE: '',
    });
    const elapsed = Date.now() - started;
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr).toContain('p.yaml:6:3: Project/p1: spec.nope: is not a known field');
    expect(packages.has('undici') && packages.has('yaml') && packages.has('commander'), run.stderr).toBe(true);
    expect(
      ['ws', 'fastify', 'pg', 'better-sqlite3', 'nodemailer', 'openid-client', 'pino', '@grpc/grpc-js'].filter((p) => packages.has(p)),
    ).toEqual([]);
    // A login left running would retry 4 times, waiting at least 0.25 + 0.5 + 1 + 2 s.
    expect(elapsed).toBeLessThan(3_500);
  });
});
