import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { DPCTL } from '../support/cli.js';

/**
 * bin/dpctl.js in a checkout that was never built (`npm ci` does not compile dist/): one line that
 * says what to run, not a module-not-found stack trace.
 */
const checkout = mkdtempSync(join(tmpdir(), 'dp-launcher-'));
afterAll(() => rmSync(checkout, { recursive: true, force: true }));

test('without dist/, dpctl says to build it and exits 1', () => {
  mkdirSync(join(checkout, 'bin'));
  copyFileSync(DPCTL, join(checkout, 'bin', 'dpctl.js'));
  const run = spawnSync(process.execPath, [join(checkout, 'bin', 'dpctl.js'), '--help'], { encoding: 'utf8' });
  expect(run.status).toBe(1);
  expect(run.stderr.trim()).toBe('dpctl: the compiled CLI (dist/) is missing. In a checkout of dpctl, run `npm run build` first.');
  expect(run.stdout).toBe('');
});

test('with dist/, it runs the CLI', () => {
  const run = spawnSync(process.execPath, [DPCTL, '--version'], { encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
  expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
});
