import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningController } from '../../src/controller/index.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor } from '../integration/engine/helpers.js';
import { gitSourceOf, startTestController, TestRepo, waitFor } from './helpers.js';

/** The controller's /status page in headless Chromium (launch options as in test/e2e/docs-browser.test.ts). */
const CHROMIUM = process.env.DP_E2E_CHROMIUM ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--ignore-certificate-errors'];
const inCI = (() => {
  const v = process.env.CI;
  return v !== undefined && v !== '' && !/^(0|false)$/i.test(v);
})();
const haveChromium = existsSync(CHROMIUM);
const suite = haveChromium || inCI ? describe : describe.skip;

suite('controller status page in headless Chromium', () => {
  let svc: TestService;
  let t: TestTenant;
  let repo: TestRepo;
  let ctl: RunningController;
  let browser: Browser;
  let good: string;

  beforeAll(async () => {
    if (!haveChromium) return;
    svc = await startTestService();
    t = await svc.tenant();
    repo = new TestRepo();
    good = repo.addExample('platform').commit('the platform');
    ctl = await startTestController({
      source: gitSourceOf(repo.remote),
      client: clientFor(svc, t),
      mode: 'apply',
      intervalMs: 1_000,
      listen: { host: '127.0.0.1', port: 0 },
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await ctl?.stop();
    repo?.close();
    await svc?.close();
  });

  test('shows the revision, the last run, every resource; then an invalid commit\'s error with file:line:column', { timeout: 90_000 }, async () => {
    expect(haveChromium, `${CHROMIUM} is missing (scripts/ensure-chromium.sh installs it)`).toBe(true);
    await waitFor('a converged run', () => ctl.status().last_run?.result === 'converged' && ctl.status().last_run?.revision === good, 60_000);
    const page = await browser.newPage();
    // A browser asks for text/html first: /status answers the page.
    const res = await page.goto(`${ctl.url}/status`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-type']).toContain('text/html');
    expect(await page.title()).toBe('dpctl controller: platform');
    expect(await page.locator('#revision').innerText()).toContain(good.slice(0, 12));
    expect(await page.locator('#revision').innerText()).toContain('the platform');
    expect(await page.locator('#last-run').innerText()).toBe('converged');
    expect(await page.locator('#state').innerText()).toBe('active (leader)');
    const rows = page.locator('#resources tbody tr');
    expect(await rows.count()).toBe(25);
    const orders = rows.filter({ hasText: 'orders-db' });
    expect(await orders.locator('td').nth(0).innerText()).toBe('Connector');
    expect(await orders.locator('td').nth(1).innerText()).toBe('analytics');
    expect(['applied', 'in-sync']).toContain(await orders.locator('td').nth(3).innerText());
    expect(await page.locator('#errors').count()).toBe(0);
    const shot = await page.screenshot({ fullPage: true });
    expect(shot.subarray(1, 4).toString('ascii')).toBe('PNG');

    repo.write('platform/analytics/broken.yaml', 'apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: broken\n  project: analytics\nspec:\n  type: postgres\n  schedule: 12\n  nope: [\n');
    const bad = repo.commit('broken');
    await waitFor('a run of the invalid revision', () => ctl.status().revision.invalid?.id === bad && ctl.status().last_run?.result === 'invalid', 20_000);
    await page.goto(`${ctl.url}/status.html`);
    expect(await page.locator('#last-run').innerText()).toBe('invalid');
    expect(await page.locator('#errors').innerText()).toMatch(/^platform\/analytics\/broken\.yaml:\d+:\d+: /m);
    // Listed once, though both the revision and the run report it.
    const errorText = await page.locator('#errors').innerText();
    expect(errorText.split('\n').length).toBe(new Set(errorText.split('\n')).size);
    // The revision in force is still the good one.
    expect(await page.locator('#revision').innerText()).toContain(good.slice(0, 12));
    expect(readFileSync(join(repo.work, 'platform/analytics/broken.yaml'), 'utf8')).toContain('nope');
    await page.close();
  });
});
