import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { TestOidcIdp } from '../../support/oidc-idp.js';
import { TestBrowser } from '../../support/browser.js';
import { expectError, expectTokenResponse } from './helpers.js';
import { FAILURE_KEPT_MS } from '../../../src/service/sso/discovery-cache.js';

/**
 * OIDC single sign-on and Google sign-in against a real OpenID provider (oidc-provider) over
 * HTTPS with its own CA, driven like a browser: login -> IdP -> login form -> callback -> tokens.
 */

let svc: TestService;
let t: TestTenant;
let idp: TestOidcIdp;
let browser: TestBrowser;
const providers: Record<string, { id: string }> = {};
const CLIENT_SECRET = `idp-client-secret-${randomBytes(6).toString('hex')}`;

const uniq = () => randomBytes(4).toString('hex');
const base = () => t.base;

async function createProvider(name: string, body: Record<string, unknown>) {
  providers[name] = await svc.ok(t, 'POST', '/sso-providers', { body: { name, ...body } });
  return providers[name];
}

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  idp = await TestOidcIdp.start();
  const oidc = { protocol: 'oidc', issuer: idp.issuer, ca_certificate: idp.caPem };
  await createProvider('corp', { ...oidc, client_id: 'corp', client_secret: CLIENT_SECRET, scopes: ['email'] });
  await createProvider('corp-provisioning', {
    ...oidc,
    client_id: 'corp-provisioning',
    client_secret: CLIENT_SECRET,
    auto_provision: true,
    default_role: 'read-write',
  });
  await createProvider('public-client', { ...oidc, client_id: 'public-client' });
  await createProvider('no-ca', { protocol: 'oidc', issuer: idp.issuer, client_id: 'corp', client_secret: CLIENT_SECRET });
  await createProvider('off', { ...oidc, client_id: 'corp', client_secret: CLIENT_SECRET, enabled: false });
  await createProvider('google', {
    protocol: 'google',
    issuer: idp.issuer,
    ca_certificate: idp.caPem,
    client_id: 'google-client',
    client_secret: CLIENT_SECRET,
  });
  const callback = (name: string) => `${base()}/auth/sso/${providers[name].id}/callback`;
  idp.configure([
    { client_id: 'corp', client_secret: CLIENT_SECRET, redirect_uris: [callback('corp'), callback('no-ca'), callback('off')] },
    { client_id: 'corp-provisioning', client_secret: CLIENT_SECRET, redirect_uris: [callback('corp-provisioning')] },
    { client_id: 'public-client', redirect_uris: [callback('public-client')] },
    { client_id: 'google-client', client_secret: CLIENT_SECRET, redirect_uris: [`${base()}/auth/google/callback`] },
  ]);
  browser = TestBrowser.trusting([svc.service.tls.certPath], [idp.caPem]);
});
afterAll(async () => {
  await browser?.close();
  await idp?.close();
  await svc?.close();
});

const loginPath = (name: string) => `${base()}/auth/sso/${providers[name].id}/login`;
const toService = (url: string) => url.startsWith(base());

/**
 * Starts at a login URL and signs in at the IdP as `email`; returns the callback URL the IdP sends
 * the browser to (not yet fetched, so a test can replay or alter it).
 */
async function signInAtIdp(loginUrl: string, email: string): Promise<string> {
  browser.clearCookies();
  const start = await browser.fetch(loginUrl);
  expect(start.status, start.text).toBe(302);
  const form = await browser.follow(start.location!, toService);
  expect(form.status, form.text).toBe(200);
  expect(form.text).toContain('name="login"');
  const done = await browser.follow(form.url, toService, { form: { prompt: 'login', login: email, password: 'anything' } });
  expect(done.location, done.text).toBeDefined();
  expect(toService(done.location!)).toBe(true);
  return done.location!;
}

async function existingUser(role: 'read-only' | 'read-write' | 'admin' = 'read-only') {
  const email = `sso-${uniq()}@${t.slug}.test`;
  const user = await svc.ok(t, 'POST', '/users', { body: { email, role, password: 'a-password-1' } });
  return { email, id: user.id as string };
}

describe('OIDC sign-in (authorization code + PKCE)', () => {
  it('redirects to the IdP with PKCE S256, state and nonce, and keeps the flow in the database only hashed', async () => {
    const res = await browser.fetch(loginPath('corp'));
    expect(res.status, res.text).toBe(302);
    const url = new URL(res.location!);
    expect(url.origin).toBe(idp.issuer);
    const q = url.searchParams;
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe('corp');
    expect(q.get('redirect_uri')).toBe(`${base()}/auth/sso/${providers.corp.id}/callback`);
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('scope')!.split(' ').sort()).toEqual(['email', 'openid']);
    const state = q.get('state')!;
    expect(state.length).toBeGreaterThanOrEqual(32);
    expect(q.get('nonce')!.length).toBeGreaterThanOrEqual(32);
    const rows = await svc.service.ctx.db.all<Record<string, string>>('SELECT * FROM sso_flows WHERE provider_id = ?', [providers.corp.id]);
    expect(rows.length).toBeGreaterThanOrEqual(1);
    expect(JSON.stringify(rows)).not.toContain(state);
    expect(rows.some((r) => r.nonce === q.get('nonce'))).toBe(true);
  });

  it('signs an existing user in by email (case-insensitive): token response, usable on /projects, refreshable', async () => {
    const user = await existingUser();
    const callback = await signInAtIdp(loginPath('corp'), user.email.toUpperCase());
    expect(new URL(callback).pathname).toBe(`/api/v1/auth/sso/${providers.corp.id}/callback`);
    const res = await browser.fetch(callback);
    expect(res.status, res.text).toBe(200);
    expectTokenResponse(res.body);
    const projects = await svc.call(t, 'GET', '/projects', { token: res.body.access_token });
    expect(projects.status, projects.text).toBe(200);
    const me = await svc.call(t, 'POST', '/projects', { token: res.body.access_token, body: { name: `p-${uniq()}` } });
    expectError(me, 403, 'forbidden');
    const refreshed = await svc.call(t, 'POST', '/auth/refresh', { token: '', body: { refresh_token: res.body.refresh_token } });
    expect(refreshed.status, refreshed.text).toBe(200);
    expectTokenResponse(refreshed.body);
  });

  it('works for a public client (PKCE, no client secret)', async () => {
    const user = await existingUser();
    const res = await browser.fetch(await signInAtIdp(loginPath('public-client'), user.email));
    expect(res.status, res.text).toBe(200);
    expectTokenResponse(res.body);
  });

  it('refuses a replayed callback: the state is single-use', async () => {
    const user = await existingUser();
    const callback = await signInAtIdp(loginPath('corp'), user.email);
    expect((await browser.fetch(callback)).status).toBe(200);
    const again = await browser.fetch(callback);
    expectError(
      { ...again, headers: { 'content-type': 'application/json', 'x-request-id': 'x' } } as never,
      401,
      'unauthorized',
      /already used/,
    );
  });

  it('refuses an unknown state, a missing state and a state of another provider', async () => {
    const user = await existingUser();
    const callback = new URL(await signInAtIdp(loginPath('corp'), user.email));
    const forged = new URL(callback);
    forged.searchParams.set('state', randomBytes(32).toString('base64url'));
    expectError(
      await svc.call(t, 'GET', forged.href.slice(base().length), { token: '' }),
      401,
      'unauthorized',
      /Unknown, expired or already used sign-in state/,
    );
    const none = new URL(callback);
    none.searchParams.delete('state');
    expectError(await svc.call(t, 'GET', none.href.slice(base().length), { token: '' }), 400, 'validation_error', /state/);
    // The genuine state, presented at another provider's callback, is refused (and spent).
    const elsewhere = callback.href.replace(providers.corp.id, providers['corp-provisioning'].id);
    expectError(await svc.call(t, 'GET', elsewhere.slice(base().length), { token: '' }), 401, 'unauthorized', /sign-in state/);
  });

  it('binds the code to the PKCE verifier: a code exchanged with another verifier is refused by the IdP', async () => {
    const user = await existingUser();
    const callback = await signInAtIdp(loginPath('corp'), user.email);
    await svc.service.ctx.db.run('UPDATE sso_flows SET code_verifier = ? WHERE provider_id = ?', ['x'.repeat(43), providers.corp.id]);
    expectError(
      await svc.call(t, 'GET', callback.slice(base().length), { token: '' }),
      401,
      'unauthorized',
      /refused by the identity provider: invalid_grant/,
    );
  });

  it('refuses an expired flow (older than 10 minutes)', async () => {
    const user = await existingUser();
    const callback = await signInAtIdp(loginPath('corp'), user.email);
    await svc.service.ctx.db.run('UPDATE sso_flows SET expires_at = ? WHERE provider_id = ?', [
      new Date(Date.now() - 1000).toISOString(),
      providers.corp.id,
    ]);
    expectError(await svc.call(t, 'GET', callback.slice(base().length), { token: '' }), 401, 'unauthorized', /expired/);
  });

  describe('ID token checks (the token response is altered between IdP and service)', () => {
    const tampered = async (tamper: NonNullable<TestOidcIdp['tamper']>) => {
      const user = await existingUser();
      const callback = await signInAtIdp(loginPath('corp'), user.email);
      idp.tamper = tamper;
      try {
        return await svc.call(t, 'GET', callback.slice(base().length), { token: '' });
      } finally {
        idp.tamper = null;
      }
    };

    it('an untouched re-signed token passes (the tampering harness itself is sound)', async () => {
      const res = await tampered((_token, resign) => resign((c) => c));
      expect(res.status, res.text).toBe(200);
      expectTokenResponse(res.body);
    });

    it('a tampered signature', async () => {
      const res = await tampered((token) => {
        const [h, p, s] = token.split('.');
        const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
        return `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: 'someone-else' })).toString('base64url')}.${s}`;
      });
      expectError(res, 401, 'unauthorized', /signature/i);
    });

    it('a wrong audience', async () => {
      expectError(await tampered((_t, resign) => resign((c) => ({ ...c, aud: 'another-client' }))), 401, 'unauthorized', /"aud"/);
    });

    it('a wrong nonce', async () => {
      expectError(await tampered((_t, resign) => resign((c) => ({ ...c, nonce: 'not-the-nonce-we-sent' }))), 401, 'unauthorized', /nonce/);
    });

    it('an expired token', async () => {
      const now = Math.floor(Date.now() / 1000);
      expectError(
        await tampered((_t, resign) => resign((c) => ({ ...c, iat: now - 7200, exp: now - 3600 }))),
        401,
        'unauthorized',
        /"exp"/,
      );
    });

    it('a wrong issuer', async () => {
      expectError(await tampered((_t, resign) => resign((c) => ({ ...c, iss: 'https://evil.example' }))), 401, 'unauthorized', /"iss"/);
    });
  });

  it('refuses an unknown email when the provider does not provision users', async () => {
    const res = await browser.fetch(await signInAtIdp(loginPath('corp'), `stranger-${uniq()}@${t.slug}.test`));
    expectError(
      { ...res, headers: { 'content-type': 'application/json', 'x-request-id': 'x' } } as never,
      403,
      'forbidden',
      /No user with email .* does not create users/,
    );
  });

  it('provisions an unknown user when auto_provision is on: default role, active, audited, and stays active after a PATCH', async () => {
    const email = `new-${uniq()}@${t.slug}.test`;
    const res = await browser.fetch(await signInAtIdp(loginPath('corp-provisioning'), email));
    expect(res.status, res.text).toBe(200);
    expectTokenResponse(res.body);
    const users = (await svc.ok(t, 'GET', '/users', { query: { limit: 100 } })).data as {
      email: string;
      id: string;
      role: string;
      status: string;
    }[];
    const created = users.find((u) => u.email === email)!;
    expect(created).toMatchObject({ role: 'read-write', status: 'active' });
    const write = await svc.call(t, 'POST', '/projects', { token: res.body.access_token, body: { name: `p-${uniq()}` } });
    expectError(write, 403, 'forbidden'); // read-write users cannot create projects; reading works
    expect((await svc.call(t, 'GET', '/projects', { token: res.body.access_token })).status).toBe(200);
    const patched = await svc.ok(t, 'PATCH', `/users/${created.id}`, { body: { name: 'Provisioned Person' } });
    expect(patched.status).toBe('active');
    const audit = (await svc.ok(t, 'GET', '/audit-logs', { query: { limit: 100 } })).data as {
      action: string;
      resource_id: string;
      actor: unknown;
    }[];
    expect(audit.find((e) => e.action === 'user.create' && e.resource_id === created.id)).toBeDefined();
    expect(audit.find((e) => e.action === 'auth.sso_login' && e.resource_id === created.id)).toBeDefined();
    const auditText = JSON.stringify(audit);
    for (const secret of [res.body.access_token, res.body.refresh_token, CLIENT_SECRET]) expect(auditText).not.toContain(secret);
    // A second sign-in finds the same user.
    const again = await browser.fetch(await signInAtIdp(loginPath('corp-provisioning'), email));
    expect(again.status, again.text).toBe(200);
    expect(
      ((await svc.ok(t, 'GET', '/users', { query: { limit: 100 } })).data as { email: string }[]).filter((u) => u.email === email),
    ).toHaveLength(1);
  });

  it('activates an invited user who signs in (the IdP proved the invited address)', async () => {
    const email = `invited-${uniq()}@${t.slug}.test`;
    const invited = await svc.ok(t, 'POST', '/users', { body: { email, role: 'read-only' } });
    expect(invited.status).toBe('invited');
    const res = await browser.fetch(await signInAtIdp(loginPath('corp'), email));
    expect(res.status, res.text).toBe(200);
    expect((await svc.ok(t, 'GET', `/users/${invited.id}`)).status).toBe('active');
  });

  it('refuses a disabled user', async () => {
    const user = await existingUser();
    await svc.ok(t, 'PATCH', `/users/${user.id}`, { body: { disabled: true } });
    const res = await svc.call(t, 'GET', (await signInAtIdp(loginPath('corp'), user.email)).slice(base().length), { token: '' });
    expectError(res, 403, 'forbidden', /disabled/);
  });

  it('reports the IdP refusing the sign-in (the user aborts at the IdP)', async () => {
    browser.clearCookies();
    const start = await browser.fetch(loginPath('corp'));
    const form = await browser.follow(start.location!, toService);
    const aborted = await browser.follow(`${form.url}/abort`, toService);
    expect(toService(aborted.location!)).toBe(true);
    expectError(
      await svc.call(t, 'GET', aborted.location!.slice(base().length), { token: '' }),
      401,
      'unauthorized',
      /refused by the identity provider: access_denied/,
    );
  });

  it('a disabled provider, an unknown provider, and an IdP whose CA is not trusted', async () => {
    expectError(await svc.call(t, 'GET', `/auth/sso/${providers.off.id}/login`, { token: '' }), 403, 'forbidden', /disabled/);
    expectError(await svc.call(t, 'GET', '/auth/sso/sso_doesnotexist/login', { token: '' }), 404, 'resource_not_found', /SSO provider/);
    const untrusted = await svc.call(t, 'GET', `/auth/sso/${providers['no-ca'].id}/login`, { token: '' });
    expectError(untrusted, 422, 'unprocessable_entity', /cannot read the OpenID configuration .*certificate/i);
  });

  it('reads the discovery document once for many sign-in starts, again when the provider changes, and keeps a failure a while', async () => {
    const p = await createProvider(`cached-${uniq()}`, {
      protocol: 'oidc',
      issuer: idp.issuer,
      ca_certificate: idp.caPem,
      client_id: 'corp',
    });
    const discoveries = (under = '') => idp.requests.filter((path) => path.startsWith(`${under}/.well-known/openid-configuration`)).length;
    const start = () => svc.call(t, 'GET', `/auth/sso/${p.id}/login`, { token: '' });
    const before = discoveries();
    // Five at once share one fetch; five more find it kept.
    for (const res of await Promise.all(Array.from({ length: 5 }, start))) expect(res.status, res.text).toBe(302);
    expect(discoveries() - before).toBe(1);
    for (let i = 0; i < 5; i++) expect((await start()).status).toBe(302);
    expect(discoveries() - before).toBe(1);
    // An edited provider (here its secret) is discovered again at once.
    await svc.ok(t, 'PATCH', `/sso-providers/${p.id}`, { body: { client_secret: CLIENT_SECRET } });
    expect((await start()).status).toBe(302);
    expect(discoveries() - before).toBe(2);
    // So is a changed issuer. This one has no discovery document: the failure is kept (30 s), so a
    // flood of starts meanwhile, at once or one after another, asks the IdP once.
    const gone = `/gone-${uniq()}`;
    await svc.ok(t, 'PATCH', `/sso-providers/${p.id}`, { body: { issuer: `${idp.issuer}${gone}` } });
    const refused = (res: Awaited<ReturnType<typeof start>>) =>
      expectError(res, 422, 'unprocessable_entity', /cannot read the OpenID configuration/);
    for (const res of await Promise.all(Array.from({ length: 5 }, start))) refused(res);
    for (let i = 0; i < 5; i++) refused(await start());
    expect(discoveries(gone)).toBe(1);
  });

  it("fetches the IdP's signing keys once for several sign-ins (openid-client keeps them in the kept configuration)", async () => {
    const keyFetches = () => idp.requests.filter((path) => path.startsWith('/jwks')).length;
    const before = keyFetches();
    for (let i = 0; i < 3; i++) {
      const user = await existingUser();
      const res = await browser.fetch(await signInAtIdp(loginPath('corp'), user.email));
      expect(res.status, res.text).toBe(200);
    }
    // None when an earlier test's sign-in fetched them (they are kept 5 minutes), else one.
    expect(keyFetches() - before).toBeLessThanOrEqual(1);
  });

  it('the SAML callback of an OIDC provider is a clear validation error', async () => {
    const res = await svc.call(t, 'POST', `/auth/sso/${providers.corp.id}/callback`, {
      token: '',
      body: { SAMLResponse: 'eA==', RelayState: 'x' },
    });
    expectError(res, 400, 'validation_error', /uses oidc/);
  });
});

describe('Google sign-in (OIDC against the configured issuer)', () => {
  it('GET /auth/google/login -> IdP -> /auth/google/callback -> tokens', async () => {
    const user = await existingUser();
    const start = await browser.fetch(`${base()}/auth/google/login`);
    expect(start.status, start.text).toBe(302);
    expect(new URL(start.location!).searchParams.get('redirect_uri')).toBe(`${base()}/auth/google/callback`);
    const callback = await signInAtIdp(`${base()}/auth/google/login`, user.email);
    expect(new URL(callback).pathname).toBe('/api/v1/auth/google/callback');
    const res = await browser.fetch(callback);
    expect(res.status, res.text).toBe(200);
    expectTokenResponse(res.body);
    expect((await svc.call(t, 'GET', '/projects', { token: res.body.access_token })).status).toBe(200);
  });

  it('allowed_domains limits who may sign in (anyone has a Google account)', async () => {
    const user = await existingUser();
    await svc.ok(t, 'PATCH', `/sso-providers/${providers.google.id}`, {
      body: { allowed_domains: ['Corp.Example', `${t.slug}.test`.toUpperCase()] },
    });
    try {
      const ok = await browser.fetch(await signInAtIdp(`${base()}/auth/google/login`, user.email));
      expect(ok.status, ok.text).toBe(200);
      await svc.ok(t, 'PATCH', `/sso-providers/${providers.google.id}`, { body: { allowed_domains: ['corp.example'] } });
      const refused = await svc.call(t, 'GET', (await signInAtIdp(`${base()}/auth/google/login`, user.email)).slice(base().length), {
        token: '',
      });
      expectError(refused, 403, 'forbidden', /accepts only emails in corp\.example/);
    } finally {
      await svc.ok(t, 'PATCH', `/sso-providers/${providers.google.id}`, { body: { allowed_domains: null } });
    }
    const invalid = await svc.call(t, 'PATCH', `/sso-providers/${providers.google.id}`, { body: { allowed_domains: ['not a domain'] } });
    expectError(invalid, 400, 'validation_error', /allowed_domains/);
  });

  it('a tenant without a google provider gets a clear 404', async () => {
    const other = await svc.tenant();
    expectError(
      await svc.call(other, 'GET', '/auth/google/login', { token: '' }),
      404,
      'resource_not_found',
      /Google sign-in is not configured/,
    );
  });
});

describe('a failed discovery is kept FAILURE_KEPT_MS, then the IdP is asked again', () => {
  it('a dead IdP is asked once in 30 s however many sign-ins start, and again after', async () => {
    // The service's clock reads Date at each call: faking Date moves it and the real clock together,
    // so the clock skew (part of the cache key) stays 0 and only the time a failure is kept passes.
    const other = await startTestService({ clock: () => Date.now() });
    try {
      const tenant = await other.tenant();
      const dead = `/dead-${uniq()}`;
      const p = await other.ok(tenant, 'POST', '/sso-providers', {
        body: { name: 'dead', protocol: 'oidc', issuer: `${idp.issuer}${dead}`, ca_certificate: idp.caPem, client_id: 'corp' },
      });
      const asked = () => idp.requests.filter((path) => path.startsWith(`${dead}/.well-known/`)).length;
      const start = async () =>
        expectError(
          await other.call(tenant, 'GET', `/auth/sso/${p.id}/login`, { token: '' }),
          422,
          'unprocessable_entity',
          /cannot read the OpenID configuration/,
        );
      const t0 = Date.now();
      await start();
      await start();
      expect(asked()).toBe(1);
      vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
      vi.setSystemTime(t0 + FAILURE_KEPT_MS - 2_000);
      await start();
      expect(asked()).toBe(1);
      vi.setSystemTime(t0 + FAILURE_KEPT_MS + 2_000);
      await start();
      expect(asked()).toBe(2);
    } finally {
      vi.useRealTimers();
      await other.close();
    }
  });
});

describe('trusting the IdP through the service-wide --outbound-ca-file', () => {
  it('a provider without ca_certificate reaches an IdP whose CA is in the outbound CA file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-outbound-ca-'));
    writeFileSync(join(dir, 'ca.pem'), idp.caPem);
    const other = await startTestService({ outboundCaFile: join(dir, 'ca.pem') });
    try {
      const tenant = await other.tenant();
      const p = await other.ok(tenant, 'POST', '/sso-providers', {
        body: { name: 'corp', protocol: 'oidc', issuer: idp.issuer, client_id: 'corp', client_secret: CLIENT_SECRET },
      });
      const res = await other.call(tenant, 'GET', `/auth/sso/${p.id}/login`, { token: '' });
      expect(res.status, res.text).toBe(302);
      expect(String(res.headers.location).startsWith(`${idp.issuer}/`)).toBe(true);
    } finally {
      await other.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the sso_provider resource', () => {
  it('never returns or audits the client secret; anyone in the tenant reads it (like users), only admins write', async () => {
    const got = await svc.ok(t, 'GET', `/sso-providers/${providers.corp.id}`);
    expect(got).not.toHaveProperty('client_secret');
    expect(JSON.stringify(await svc.ok(t, 'GET', '/sso-providers'))).not.toContain(CLIENT_SECRET);
    const audit = JSON.stringify(await svc.ok(t, 'GET', '/audit-logs', { query: { limit: 100 } }));
    expect(audit).toContain('sso_provider.create');
    expect(audit).not.toContain(CLIENT_SECRET);
    const data = JSON.stringify(await svc.service.ctx.db.all("SELECT data FROM resources WHERE kind = 'sso_provider'"));
    expect(data).not.toContain(CLIENT_SECRET);
    const reader = await svc.user(t, 'read-write');
    expect((await svc.call(t, 'GET', '/sso-providers', { token: reader.token })).status).toBe(200);
    expectError(
      await svc.call(t, 'PATCH', `/sso-providers/${providers.corp.id}`, { token: reader.token, body: { enabled: false } }),
      403,
      'forbidden',
    );
    expectError(
      await svc.call(t, 'POST', '/sso-providers', { token: reader.token, body: { name: 'x', protocol: 'google', client_id: 'c' } }),
      403,
      'forbidden',
    );
  });

  it('checks the fields each protocol needs', async () => {
    const res = await svc.call(t, 'POST', '/sso-providers', { body: { name: `bad-${uniq()}`, protocol: 'oidc' } });
    expectError(res, 400, 'validation_error');
    expect(res.body.error.details.map((d: { field: string }) => d.field).sort()).toEqual(['client_id', 'issuer']);
    const saml = await svc.call(t, 'POST', '/sso-providers', {
      body: { name: `bad-${uniq()}`, protocol: 'saml', saml_sso_url: 'https://idp.example/sso' },
    });
    expectError(saml, 400, 'validation_error');
    expect(saml.body.error.details.map((d: { field: string }) => d.field).sort()).toEqual(['saml_entity_id', 'saml_idp_certificate']);
    const plainHttp = await svc.call(t, 'POST', '/sso-providers', {
      body: { name: `bad-${uniq()}`, protocol: 'oidc', issuer: 'http://idp.example', client_id: 'c' },
    });
    expectError(plainHttp, 400, 'validation_error', /issuer/);
  });
});
