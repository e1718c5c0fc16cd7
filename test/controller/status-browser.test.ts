import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningController } from '../../src/controller/index.js';
import { ControllerMetrics } from '../../src/controller/metrics.js';
import { createStatusServer, listen } from '../../src/controller/server.js';
import type { ControllerStatus } from '../../src/controller/status.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor } from '../integration/engine/helpers.js';
import { gitSourceOf, startTestController, TestRepo, waitFor } from './helpers.js';
import { richStatus } from './status-fixture.js';

/** The controller's /status page in headless Chromium (launch options as in test/e2e/docs-browser.test.ts). */
const CHROMIUM = process.env.DP_E2E_CHROMIUM ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--ignore-certificate-errors',
];
const inCI = (() => {
  const v = process.env.CI;
  return v !== undefined && v !== '' && !/^(0|false)$/i.test(v);
})();
const haveChromium = existsSync(CHROMIUM);
const suite = haveChromium || inCI ? describe : describe.skip;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const HUMAN_TIME = /^(\d+ (s|min|h|d) ago|in \d+ (s|min|h|d))$/;

suite('controller status page in headless Chromium', () => {
  let svc: TestService;
  let t: TestTenant;
  let repo: TestRepo;
  let ctl: RunningController;
  let browser: Browser;
  let good: string;
  // Screenshots are kept (outside the repository) so a failing or suspicious run can be looked at.
  let shotDir: string;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    if (!haveChromium) return;
    shotDir = mkdtempSync(join(tmpdir(), 'dp-ctl-status-shot-'));
    svc = await startTestService();
    t = await svc.tenant();
    repo = new TestRepo();
    good = repo.addExample('platform').commit('the platform');
    // Runs only when the test says so (trigger): the page changes when the test expects it to.
    ctl = await startTestController({
      source: gitSourceOf(repo.remote),
      client: clientFor(svc, t),
      mode: 'apply',
      intervalMs: 600_000,
      listen: { host: '127.0.0.1', port: 0 },
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    await ctl?.stop();
    repo?.close();
    await svc?.close();
  });

  const newPage = async (options: { javaScriptEnabled?: boolean } = {}): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, ...options });
    contexts.push(context);
    return context.newPage();
  };

  /** A full-page screenshot for the record; it must be a real, non-empty PNG. */
  async function keepScreenshot(page: Page, name: string) {
    const shot = join(shotDir, name);
    await page.screenshot({ path: shot, fullPage: true });
    const png = readFileSync(shot);
    expect(statSync(shot).size).toBeGreaterThan(1_000);
    expect(png.subarray(0, 8).equals(PNG_SIGNATURE), 'PNG signature').toBe(true);
    console.info(`status-browser screenshot: ${shot}`);
  }

  /** What the page shows of each resource and group, without the times (which depend on when it was rendered). */
  const pageData = (page: Page) =>
    page.evaluate(() => ({
      groups: [...document.querySelectorAll('#resources section.group')].map((g) => ({
        name: g.querySelector('.group-name')!.textContent,
        counts: [...g.querySelectorAll('.counts .pill')].map((p) => p.textContent),
        rows: [...g.querySelectorAll('tbody tr')].map((tr) => [...tr.querySelectorAll('td')].slice(0, 4).map((td) => td.textContent)),
      })),
      conditions: [...document.querySelectorAll('#conditions li')].map(
        (li) => `${li.getAttribute('data-condition')}=${li.getAttribute('data-status')}`,
      ),
      revision: document.querySelector('#revision code')?.textContent,
      lastRun: document.querySelector('#last-run')?.textContent,
      runs: document.querySelectorAll('#runs tbody tr').length,
    }));

  test('page load: groups by project with state and health, conditions, recent runs and human times', { timeout: 120_000 }, async () => {
    expect(haveChromium, `${CHROMIUM} is missing (scripts/ensure-chromium.sh installs it)`).toBe(true);
    await waitFor(
      'a converged run',
      () => ctl.status().last_run?.result === 'converged' && ctl.status().last_run?.revision === good,
      90_000,
      () => ctl.status().last_run,
    );
    const page = await newPage();
    const cspErrors: string[] = [];
    page.on('console', (m) => /Content.Security.Policy/i.test(m.text()) && cspErrors.push(m.text()));
    // A browser asks for text/html first: /status answers the page.
    const res = await page.goto(`${ctl.url}/status`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-type']).toContain('text/html');
    expect(res?.headers()['content-security-policy']).toContain("default-src 'none'");
    expect(await page.title()).toBe('dpctl controller: platform');
    expect(await page.locator('#revision').innerText()).toContain(good.slice(0, 12));
    expect(await page.locator('#revision').innerText()).toContain('the platform');
    expect(await page.locator('#last-run').innerText()).toBe('converged');
    expect(await page.locator('#state').innerText()).toBe('active (leader)');
    expect(await page.locator('#overall').innerText()).toMatch(/^Ready\s+Succeeded/);

    // Groups: the tenant-level kinds first, then each project; 25 resources in all, with counts per state.
    const data = await pageData(page);
    expect(data.groups.map((g) => g.name)).toEqual(['Tenant-level', 'analytics', 'marketing']);
    expect(data.groups.flatMap((g) => g.rows)).toHaveLength(25);
    expect(data.groups[0].rows.map((r) => r[0]).sort()).toEqual(['Project', 'Project', 'User', 'User']);
    for (const g of data.groups) {
      const total = g.counts.reduce((n, c) => n + Number(c!.split(' ')[0]), 0);
      expect(total).toBe(g.rows.length);
    }
    const orders = page.locator('#resources section[data-project="analytics"] tr[data-name="orders-db"] td');
    expect(await orders.nth(0).innerText()).toBe('Connector');
    expect(['applied', 'in-sync']).toContain(await orders.nth(2).innerText());
    // Health, for kinds with a health rule.
    expect(await page.locator('#resources .pill[class*="health-"]').count()).toBeGreaterThan(0);
    expect(data.conditions).toEqual(['Ready=True', 'Reconciling=False', 'Stalled=False']);
    expect(data.runs).toBeGreaterThanOrEqual(1);
    expect(await page.locator('#errors').count()).toBe(0);

    // Human times, the exact ISO time on hover, kept current by the script.
    const times = page.locator('time[data-rel]');
    expect(await times.count()).toBeGreaterThan(3);
    for (const i of [0, 1, 2]) {
      const time = times.nth(i);
      expect(await time.getAttribute('title')).toBe(await time.getAttribute('datetime'));
      expect(await time.getAttribute('title')).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(await time.innerText()).toMatch(HUMAN_TIME);
    }
    const rendered = page.locator('.footer time');
    const before = await rendered.innerText();
    await page.waitForFunction((text) => document.querySelector('.footer time')!.textContent !== text, before, { timeout: 5_000 });
    expect(await rendered.innerText()).toMatch(/^[1-9]\d* s ago$/);
    await page.waitForFunction(() => document.getElementById('live-state')!.textContent === 'live', undefined, { timeout: 5_000 });
    expect(cspErrors).toEqual([]);
    await keepScreenshot(page, '1-loaded.png');
  });

  test(
    'a new commit arrives over server-sent events: the page changes without a reload, drift diff included',
    { timeout: 120_000 },
    async () => {
      const page = await newPage();
      await page.goto(`${ctl.url}/status.html`);
      await page.waitForFunction(() => document.getElementById('live-state')!.textContent === 'live', undefined, { timeout: 10_000 });
      let navigations = 0;
      page.on('framenavigated', (f) => f === page.mainFrame() && navigations++);
      await page.evaluate(() => ((window as unknown as { marker: string }).marker = 'same document'));
      const runsBefore = (await pageData(page)).runs;

      const sources = join(repo.work, 'platform/analytics/sources.yaml');
      repo.write(
        'platform/analytics/sources.yaml',
        readFileSync(sources, 'utf8').replace('schedule: "0 * * * *"', 'schedule: "*/30 * * * *"'),
      );
      const next = repo.commit('orders every 30 minutes');
      ctl.trigger('test');
      await page.waitForFunction((id) => document.querySelector('#revision')?.textContent?.includes(id), next.slice(0, 12), {
        timeout: 60_000,
        polling: 100,
      });
      // The run of that revision finished: it heads the recent runs.
      await page.waitForFunction((id) => document.querySelector('#runs tbody tr code')?.textContent === id, next.slice(0, 12), {
        timeout: 60_000,
        polling: 100,
      });
      expect(await page.locator('#last-run').innerText()).toBe('converged');

      expect(navigations).toBe(0);
      expect(await page.evaluate(() => (window as unknown as { marker?: string }).marker)).toBe('same document');
      expect(Number(await page.locator('#live').getAttribute('data-updates'))).toBeGreaterThanOrEqual(1);
      const data = await pageData(page);
      expect(data.revision).toBe(next.slice(0, 12));
      expect(data.runs).toBeGreaterThan(runsBefore);
      expect(await page.locator('#runs tbody tr').first().locator('code').innerText()).toBe(next.slice(0, 12));
      // The run found orders-db changed (before it applied it): before and after per field.
      const entry = page.locator('#drift .drift-entry[data-name="orders-db"]');
      expect(await entry.locator('.pill').innerText()).toBe('changed');
      const schedule = entry.locator('tr', { hasText: 'schedule' });
      expect(await schedule.locator('td.before').innerText()).toBe('"0 * * * *"');
      expect(await schedule.locator('td.after').innerText()).toBe('"*/30 * * * *"');
      await keepScreenshot(page, '2-live-update.png');
    },
  );

  test('with JavaScript off the page renders the same data, and offers a reload', { timeout: 60_000 }, async () => {
    const withJs = await newPage();
    await withJs.goto(`${ctl.url}/status.html`);
    const page = await newPage({ javaScriptEnabled: false });
    const requests: string[] = [];
    page.on('request', (r) => requests.push(new URL(r.url()).pathname));
    const res = await page.goto(`${ctl.url}/status`);
    expect(res?.headers()['content-type']).toContain('text/html');
    expect(await pageData(page)).toEqual(await pageData(withJs));
    // Nothing live: no event stream; the <noscript> refresh and the reload link instead.
    expect(requests).toContain('/status');
    expect(requests).not.toContain('/status/events');
    const note = page.locator('header noscript span.live');
    expect(await note.isVisible()).toBe(true);
    expect(await note.textContent()).toBe('JavaScript is off: reloads every 30 s');
    expect(await page.locator('#live-state').isVisible()).toBe(false);
    expect(await page.locator('a#reload').isVisible()).toBe(true);
    expect(await page.locator('time[data-rel]').first().innerText()).toMatch(HUMAN_TIME);
    await keepScreenshot(page, '3-no-javascript.png');
  });

  test(
    'an invalid commit: its errors first (file:line:column), live, while the good revision stays in force',
    { timeout: 90_000 },
    async () => {
      const page = await newPage();
      await page.goto(`${ctl.url}/status.html`);
      await page.waitForFunction(() => document.getElementById('live-state')!.textContent === 'live', undefined, { timeout: 10_000 });
      const inForce = ctl.status().revision.applied!.id;
      repo.write(
        'platform/analytics/broken.yaml',
        'apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: broken\n  project: analytics\nspec:\n  type: postgres\n  schedule: 12\n  nope: [\n',
      );
      const bad = repo.commit('broken');
      ctl.trigger('test');
      await page.waitForFunction(() => document.querySelector('#last-run')?.textContent === 'invalid', undefined, { timeout: 60_000 });
      expect(ctl.status().revision.invalid?.id).toBe(bad);
      const first = page.locator('#errors li').first();
      expect(await first.locator('.source').innerText()).toBe(`revision ${bad.slice(0, 12)} is invalid: not applied`);
      expect(await first.locator('code').innerText()).toMatch(/^platform\/analytics\/broken\.yaml:\d+:\d+: /);
      // Listed once, though both the revision and the run report it.
      const lines = await page.locator('#errors li code').allInnerTexts();
      expect(lines.length).toBe(new Set(lines).size);
      expect(await page.locator('#conditions li[data-condition="Stalled"]').getAttribute('data-status')).toBe('True');
      expect(await page.locator('#revision code').innerText()).toBe(inForce.slice(0, 12));
      await keepScreenshot(page, '4-invalid-revision.png');
    },
  );

  describe('a page with everything on it (a fixture status behind the real listener)', () => {
    let server: Server;
    let url: string;
    let fixture: ControllerStatus;
    beforeAll(async () => {
      if (!haveChromium) return;
      fixture = richStatus();
      server = createStatusServer({
        status: () => fixture,
        ready: () => true,
        metrics: new ControllerMetrics({ processMetrics: false }),
        trigger: () => undefined,
        suspend: () => undefined,
        resume: () => undefined,
        logger: pino({ level: 'silent' }),
        events: { watchMs: 100 },
      });
      url = await listen(server, '127.0.0.1', 0);
    });
    afterAll(async () => {
      if (!server) return;
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    test(
      'problems first, field diffs, folded errors that stay open across updates; hostile strings stay text',
      { timeout: 60_000 },
      async () => {
        const page = await newPage();
        const dialogs: string[] = [];
        page.on('dialog', (d) => {
          dialogs.push(d.message());
          void d.dismiss();
        });
        await page.goto(`${url}/status.html`);
        await page.waitForFunction(() => document.getElementById('live-state')!.textContent === 'live', undefined, { timeout: 10_000 });
        const data = await pageData(page);
        expect(data.groups.map((g) => g.name)).toEqual(['Tenant-level', 'analytics', 'marketing']);
        expect(data.groups[1].rows.map((r) => r[2])).toEqual(['failed', 'degraded', 'applied', 'in-sync']);
        expect(data.groups[1].counts).toEqual(['1 failed', '1 degraded', '1 applied', '1 in-sync']);
        expect(await page.locator('section[data-project="analytics"] tr[data-name="events"] td').nth(3).innerText()).toBe(
          'degraded last sync failed: timeout',
        );
        expect(await page.locator('#errors > ol > li').count()).toBe(5);
        expect(await page.locator('#errors-more').getAttribute('open')).toBeNull();
        const sensitive = page.locator('#drift tr.sensitive');
        expect(await sensitive.locator('td.before').innerText()).toBe('(sensitive)');
        expect(await sensitive.locator('td.after').innerText()).toBe('(sensitive)');
        await page.locator('#errors-more summary').click();
        await keepScreenshot(page, '5-fixture.png');

        // An update (with hostile strings in it) replaces the page's live part; the reader's open <details> stays open.
        fixture = richStatus(Date.now(), true);
        await page.waitForFunction(() => document.querySelector('#live')!.getAttribute('data-updates') === '1', undefined, {
          timeout: 5_000,
        });
        expect(await page.locator('#errors-more').getAttribute('open')).toBe('');
        expect(await page.locator('#live img, #live script').count()).toBe(0);
        expect(await page.locator('.group-name').nth(1).innerText()).toContain('<script>alert("x")</script>');
        expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
        expect(dialogs).toEqual([]);
      },
    );
  });
});
