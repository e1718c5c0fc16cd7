import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { chromium, type BrowserContext, type Locator, type Page, type Response } from 'playwright-core';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';

/**
 * The interactive reference (spec section 1: served at /api/docs on the tenant host, with
 * try-it-out and a pasted token) driven in headless Chromium against the real HTTPS service:
 * it is the product's page (title, intro, no Fastify logo or Explore bar), and both ways to
 * authorize work (the sign-in form and a token pasted into Authorize).
 *
 * Needs /usr/bin/chromium (scripts/ensure-chromium.sh installs it). Without it the test fails
 * in CI and is skipped only on a developer machine.
 */
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
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const TITLE = 'Data Platform Management API';
// The logo @fastify/swagger-ui puts in Swagger UI's top bar unless told otherwise, as its initializer embeds it.
const FASTIFY_LOGO_BASE64 = readFileSync(
  join(dirname(createRequire(import.meta.url).resolve('@fastify/swagger-ui/package.json')), 'static', 'logo.svg'),
).toString('base64');

const suite = haveChromium || inCI ? describe : describe.skip;

suite('interactive API reference in headless Chromium', () => {
  let svc: TestService | undefined;
  let t: TestTenant;
  let project: { id: string; name: string };
  const contexts: BrowserContext[] = [];
  let workDir: string;
  let shotDir: string;

  beforeAll(async () => {
    if (!haveChromium) return; // each test fails with the explanation
    workDir = mkdtempSync(join(tmpdir(), 'dp-e2e-docs-'));
    // The screenshots are kept (small) so a failing or suspicious run can be looked at.
    shotDir = mkdtempSync(join(tmpdir(), 'dp-e2e-docs-shot-'));
    svc = await startTestService();
    t = await svc.tenant();
    project = await svc.project(t, `browser-visible-${Date.now().toString(36)}`);
  });

  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await svc?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  const docsOrigin = () => `https://${t.slug}.localhost:${svc!.port}`;

  function requireChromium() {
    if (haveChromium) return;
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}; the interactive reference cannot be tested. ` +
        'Run scripts/ensure-chromium.sh (apt-get install chromium) on this machine. ' +
        '(CI is set, so this is a failure, not a skip.)',
    );
  }

  /**
   * A fresh browser profile per test: Swagger UI persists an authorization in localStorage,
   * so one test's sign-in would otherwise authorize the next one's page.
   */
  async function openDocs(profile: string): Promise<{ page: Page; pageErrors: string[] }> {
    const context = await chromium.launchPersistentContext(join(workDir, profile), {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      ignoreHTTPSErrors: true,
      viewport: { width: 1280, height: 900 },
    });
    contexts.push(context);
    const page = context.pages()[0] ?? (await context.newPage());
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    // Chromium resolves *.localhost to loopback by itself: no host mapping needed.
    const loaded = await page.goto(`${docsOrigin()}/api/docs`, { waitUntil: 'domcontentloaded' });
    expect(loaded?.status()).toBe(200);
    await page.locator('.swagger-ui .opblock').first().waitFor({ timeout: 20_000 });
    await expect.poll(() => page.locator('.swagger-ui .info .title').innerText()).toContain(TITLE);
    // Swagger UI shows resolver/parser problems of the document in an errors box.
    expect(await page.locator('.swagger-ui .errors-wrapper').count(), 'Swagger UI reported errors in the document').toBe(0);
    return { page, pageErrors };
  }

  /** GET /projects expanded, with try-it-out on (the service enables it by default: the button then reads "Cancel"). */
  async function tryOutListProjects(page: Page): Promise<Locator> {
    const op = page.locator('.opblock.opblock-get').filter({ has: page.locator('.opblock-summary-path[data-path="/projects"]') });
    expect(await op.count()).toBe(1);
    await op.locator('.opblock-summary-control').click();
    await op.locator('.opblock-body').waitFor();
    const tryOut = op.locator('.try-out button');
    if ((await tryOut.innerText()).trim() === 'Try it out') await tryOut.click();
    await expect.poll(() => tryOut.innerText()).toBe('Cancel');
    return op;
  }

  /** Executes, returning the request the page really sent; its response panel must show 200 and the project. */
  async function executeListProjects(page: Page, op: Locator): Promise<Response> {
    const apiResponse = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/projects' && r.request().method() === 'GET');
    await op.locator('button.execute').click();
    const sent = await apiResponse;
    expect(new URL(sent.url()).host).toBe(`${t.slug}.localhost:${svc!.port}`);
    expect(sent.status()).toBe(200);
    const live = op.locator('.responses-wrapper .live-responses-table');
    await live.waitFor({ timeout: 15_000 });
    expect((await live.locator('tbody .response .response-col_status').first().innerText()).trim()).toBe('200');
    const body = await live.locator('.response-col_description .microlight, .response-col_description pre').first().innerText();
    expect(body).toContain(project.name);
    expect(body).toContain(project.id);
    expect(await live.innerText()).toMatch(/x-request-id/i);
    expect(await op.locator('.request-url').innerText()).toContain(`${docsOrigin()}/api/v1/projects`);
    return sent;
  }

  /** A screenshot for the record; it must be a real, non-empty PNG. */
  async function keepScreenshot(page: Page, name: string) {
    const shot = join(shotDir, name);
    await page.screenshot({ path: shot, fullPage: false });
    expect(statSync(shot).size).toBeGreaterThan(1_000);
    const png = readFileSync(shot);
    expect(png.subarray(0, 8).equals(PNG_SIGNATURE), 'PNG signature').toBe(true);
    expect(png.subarray(12, 16).toString('ascii')).toBe('IHDR');
    expect(png.readUInt32BE(16)).toBeGreaterThan(0); // width
    expect(png.readUInt32BE(20)).toBeGreaterThan(0); // height
    console.info(`docs-browser screenshot: ${shot}`);
  }

  const authorizeButton = (page: Page) => page.locator('.auth-wrapper button.authorize');
  // Swagger UI marks the button "locked" or "unlocked" (so a substring test cannot tell them apart).
  const authorized = async (page: Page) => ((await authorizeButton(page).getAttribute('class')) ?? '').split(/\s+/).includes('locked');

  /** A GET from inside the page (Node cannot resolve *.localhost, Chromium can). */
  const fetchInPage = (page: Page, path: string) =>
    page.evaluate(async (url) => {
      const r = await fetch(url);
      return { status: r.status, contentType: r.headers.get('content-type') ?? '', text: await r.text() };
    }, path);

  it('is the product page: its title and intro, its icon, no Fastify logo and no Explore bar', { timeout: 90_000 }, async () => {
    requireChromium();
    const { page, pageErrors } = await openDocs('branding');

    // The tab names the product and the tenant (the page's document carries the tenant's name).
    await expect.poll(() => page.title()).toBe(`${TITLE} \u2014 ${t.slug}`);
    expect(await page.locator('.swagger-ui .info .title').innerText()).toContain(t.slug);
    expect(await page.locator('#dp-docs-header').innerText()).toContain(TITLE);

    // Swagger UI's top bar (Fastify logo, "Explore" and the URL box) is not there at all.
    expect(await page.locator('.topbar, .topbar-wrapper, .download-url-wrapper').count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Explore' }).count()).toBe(0);
    expect(await page.locator(`img[src*="${FASTIFY_LOGO_BASE64.slice(0, 40)}"]`).count()).toBe(0);
    const initializer = await fetchInPage(page, '/api/docs/static/swagger-initializer.js');
    expect(initializer.status).toBe(200);
    expect(initializer.text).not.toContain(FASTIFY_LOGO_BASE64);
    const icon = page.locator('link[rel=icon]');
    expect(await icon.count()).toBe(1);
    expect(await icon.getAttribute('type')).toBe('image/svg+xml');

    // The intro: what the API is, the bearer token and how to get one, the OpenAPI document.
    const intro = await page.locator('.swagger-ui .info .description').innerText();
    expect(intro).toContain('Authorization: Bearer <token>');
    expect(intro).toContain('POST /api/v1/auth/login');
    expect(intro).toMatch(/API key/);
    const openapiLink = page.locator('.swagger-ui .info .description a', { hasText: 'OpenAPI document' });
    const href = await openapiLink.getAttribute('href');
    expect(href).toBe('/api/docs/openapi.json');
    const openapi = await fetchInPage(page, href!);
    expect(openapi.status).toBe(200);
    expect(JSON.parse(openapi.text).info.title).toBe(TITLE);
    // The page's own document names the tenant; it is served as JSON text kept per title (asked
    // again, the same bytes), and the YAML one names it too.
    const own = await fetchInPage(page, '/api/docs/json');
    expect(own.contentType).toMatch(/^application\/json/);
    expect(JSON.parse(own.text).info.title).toBe(`${TITLE} \u2014 ${t.slug}`);
    expect(JSON.parse(own.text).paths).toEqual(JSON.parse(openapi.text).paths);
    expect((await fetchInPage(page, '/api/docs/json')).text).toBe(own.text);
    expect((await fetchInPage(page, '/api/docs/yaml')).text).toContain(`title: ${TITLE} \u2014 ${t.slug}`);

    // The sign-in script is served from this origin as JavaScript (so a script-src 'self' policy allows it).
    const script = await fetchInPage(page, '/api/docs/static/theme/dataplatform-login.js');
    expect(script.status).toBe(200);
    expect(script.contentType).toMatch(/^application\/javascript/);

    expect(pageErrors, 'uncaught errors in the page').toEqual([]);
  });

  it('authorizes with a pasted token and lists the projects with try-it-out', { timeout: 90_000 }, async () => {
    requireChromium();
    const { page, pageErrors } = await openDocs('pasted-token');

    // Authorize: paste the admin access token into the bearer field.
    await authorizeButton(page).click();
    const dialog = page.locator('.modal-ux');
    await dialog.waitFor();
    const tokenField = dialog.locator('input#auth-bearer-value');
    await tokenField.fill(t.adminToken);
    await dialog.locator('button[type=submit]', { hasText: 'Authorize' }).click();
    await dialog.locator('button', { hasText: 'Logout' }).waitFor();
    expect(await dialog.locator('.auth-container').innerText()).toContain('Authorized');
    await dialog.locator('button.btn-done', { hasText: 'Close' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await authorized(page)).toBe(true);

    const op = await tryOutListProjects(page);
    const sent = await executeListProjects(page, op);
    expect(sent.request().headers()['authorization']).toBe(`Bearer ${t.adminToken}`);

    await op.scrollIntoViewIfNeeded();
    await keepScreenshot(page, 'docs-try-it-out.png');
    expect(pageErrors, 'uncaught errors in the page').toEqual([]);
  });

  it(
    'signs in with the form (a wrong password is refused in the form), then try-it-out sends the new token',
    { timeout: 90_000 },
    async () => {
      requireChromium();
      const { page, pageErrors } = await openDocs('sign-in-form');
      const form = page.locator('#dp-docs-header form');
      const status = form.locator('.dp-status');
      const submit = form.getByRole('button', { name: 'Sign in' });
      expect(await authorized(page)).toBe(false);

      // A wrong password: the service's 401 message, in the form, and nothing authorized.
      await form.getByLabel('Email').fill(t.adminEmail);
      await form.getByLabel('Password').fill('not-the-password');
      const refused = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/auth/login');
      await submit.click();
      expect((await refused).status()).toBe(401);
      await expect.poll(() => status.getAttribute('data-kind')).toBe('error');
      const refusal = await status.innerText();
      expect(refusal).toBe('Invalid email or password (HTTP 401)');
      expect(refusal).not.toMatch(/\bat\s|Error:|stack/);
      expect(await authorized(page)).toBe(false);

      // The right one: the form hands the access token to Swagger UI, as Authorize would.
      await form.getByLabel('Password').fill(t.adminPassword);
      const accepted = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/auth/login');
      await submit.click();
      const login = await accepted;
      expect(login.status()).toBe(200);
      expect(login.request().headers()['content-type']).toBe('application/json');
      const accessToken = ((await login.json()) as { access_token: string }).access_token;
      await expect.poll(() => status.getAttribute('data-kind')).toBe('ok');
      expect(await status.innerText()).toContain(`Signed in as ${t.adminEmail}`);
      expect(await form.getByLabel('Password').inputValue(), 'the password is not left in the form').toBe('');
      await expect.poll(() => authorized(page)).toBe(true);

      // The Authorize dialog shows the bearer scheme authorized, as after a paste.
      await authorizeButton(page).click();
      const dialog = page.locator('.modal-ux');
      await dialog.waitFor();
      expect(await dialog.locator('.auth-container').first().innerText()).toContain('Authorized');
      await dialog.locator('button.btn-done', { hasText: 'Close' }).click();
      await dialog.waitFor({ state: 'detached' });

      const op = await tryOutListProjects(page);
      const sent = await executeListProjects(page, op);
      expect(sent.request().headers()['authorization']).toBe(`Bearer ${accessToken}`);
      expect(accessToken).not.toBe(t.adminToken);

      await page.evaluate(() => window.scrollTo(0, 0));
      await keepScreenshot(page, 'docs-sign-in.png');
      expect(pageErrors, 'uncaught errors in the page').toEqual([]);
    },
  );
});
