import 'reflect-metadata'; // @peculiar/x509 (the test IdP's certificate) needs it, as src/service/tls.ts
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiError } from '../../../src/service/errors.js';
import { SamlChecker } from '../../../src/service/sso/saml-worker.js';
import { expensiveSamlResponse, samlSigner } from '../../support/saml-idp.js';

/**
 * The worker thread that checks SAML responses (saml-worker.ts): at most so many wait, the next
 * is refused with 429 at once, and a check that takes too long ends its worker without stopping
 * the checks after it.
 */
const settings = async () => ({
  entryPoint: 'https://idp.example.test/sso',
  issuer: 'https://sp.example.test',
  audience: 'https://sp.example.test',
  callbackUrl: 'https://sp.example.test/acs',
  idpCert: (await samlSigner()).certPem,
  wantAssertionsSigned: true,
  validateInResponseTo: 'always',
  requestIdExpirationPeriodMs: 600_000,
});

describe('the SAML checking worker', () => {
  it('refuses with 429 past its queue, and checks what it took', async () => {
    const checker = new SamlChecker({ queueMax: 2, timeoutMs: 30_000 });
    const s = await settings();
    // The first starts at once (not waiting); two wait; the fourth is one too many.
    const taken = [1, 2, 3].map((i) => checker.check(s, `_r${i}`, expensiveSamlResponse(`_r${i}`)).catch((err: Error) => err.message));
    let refused: unknown;
    try {
      await checker.check(s, '_r4', expensiveSamlResponse('_r4'));
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).status).toBe(429);
    expect((refused as ApiError).headers).toEqual({ 'Retry-After': '5' });
    for (const message of await Promise.all(taken)) expect(message).toMatch(/Too many signatures/);
  }, 30_000);

  it('ends a check that takes too long, and checks the next one in a new worker', async () => {
    const checker = new SamlChecker({ queueMax: 2, timeoutMs: 1 });
    const s = await settings();
    await expect(checker.check(s, '_slow', expensiveSamlResponse('_slow'))).rejects.toThrow(/took over 0.001 s to check/);
    const patient = new SamlChecker({ queueMax: 2, timeoutMs: 30_000 });
    await expect(patient.check(s, '_next', expensiveSamlResponse('_next'))).rejects.toThrow(/Too many signatures/);
    // The same checker after its timeout: a new worker, given the time, answers.
    (checker as unknown as { limits: { timeoutMs: number } }).limits.timeoutMs = 30_000;
    await expect(checker.check(s, '_again', expensiveSamlResponse('_again'))).rejects.toThrow(/Too many signatures/);
  }, 30_000);

  it('lets a process that is done exit (the worker holds nothing open)', () => {
    const script = `
      const { samlChecker } = await import(${JSON.stringify(new URL('../../../src/service/sso/saml-worker.ts', import.meta.url).href)});
      await samlChecker.check({ idpCert: 'x', callbackUrl: 'https://sp.example.test/acs', validateInResponseTo: 'always' }, '_r', 'PHgvPg==').catch(() => undefined);
      console.log('checked');`;
    // A script file: under `-e` the process ended even with the port held.
    const file = join(mkdtempSync(join(tmpdir(), 'saml-exit-')), 'check.mjs');
    writeFileSync(file, script);
    const run = spawnSync(process.execPath, ['--import', 'tsx', file], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.stdout).toContain('checked');
    // Before, the worker's message port kept the process alive until killed (signal SIGTERM here).
    expect(run.signal).toBeNull();
    expect(run.status).toBe(0);
  }, 30_000);
});
