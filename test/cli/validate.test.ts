import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { runDpctl } from '../support/cli.js';

const FIX = 'test/fixtures/config';

describe('dpctl validate', () => {
  it('exits 0 with a one-line summary for a valid repository', async () => {
    const r = await runDpctl(['validate', 'examples/platform']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).toMatch(/^valid: 25 documents in 7 files, 2 projects \(.*3 Connector.*2 Pipeline.*2 User\)\n$/);
  });

  it('exits 1 and prints every error of every file at once', async () => {
    const r = await runDpctl(['validate', `${FIX}/invalid/two-files`]);
    expect(r.code).toBe(1);
    const expected = readFileSync(`${FIX}/invalid/two-files/expected.txt`, 'utf8').trim().split('\n').map((l) => `${FIX}/invalid/two-files/${l}`);
    expect(r.stderr.trim().split('\n')).toEqual([...expected, 'invalid: 9 errors in 2 files']);
    expect(r.stdout).toBe('');
  });

  it('takes several paths, and lets projects exist on the server with --allow-undeclared-projects', async () => {
    const strict = await runDpctl(['validate', `${FIX}/invalid/undeclared-project`, `${FIX}/valid/platform.yaml`]);
    expect(strict.code).toBe(1);
    expect(strict.stderr).toContain(`${FIX}/invalid/undeclared-project/connector.yaml:5:12: Connector/orders: metadata.project: no Project document named "live-only"`);
    const allowed = await runDpctl(['validate', '--allow-undeclared-projects', `${FIX}/invalid/undeclared-project`, `${FIX}/valid/platform.yaml`]);
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toMatch(/^valid: 14 documents in 2 files, 2 projects/);
  });

  it('reads every secretRef with --check-secrets', async () => {
    const env = { OPS_PASSWORD: 'ops-password-1', HOOK_SECRET: '' };
    const failed = await runDpctl(['validate', '--check-secrets', `${FIX}/valid`], { env });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain(`${FIX}/valid/platform.yaml:82:41: NotificationChannel/b: spec.config.signing_secret: environment variable HOOK_SECRET is not set (it is empty)`);
    const ok = await runDpctl(['validate', '--check-secrets', `${FIX}/valid`], { env: { ...env, HOOK_SECRET: 'hook-secret' } });
    expect(ok.code).toBe(0);
  });

  it('says so when a path does not exist', async () => {
    const r = await runDpctl(['validate', 'no/such/dir']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('no/such/dir: no such file or directory\ninvalid: 1 error in 1 file\n');
  });
});
