import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { expectError, expectTokenResponse, requestIdOf, sleep } from './helpers.js';

let svc: TestService;
let t: TestTenant;
beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
});
afterAll(() => svc?.close());

const login = (email: string, password: string) => svc.call(t, 'POST', '/auth/login', { body: { email, password }, token: '' });
const refresh = (refresh_token: string) => svc.call(t, 'POST', '/auth/refresh', { body: { refresh_token }, token: '' });
const whoCanList = (token: string) => svc.call(t, 'GET', '/projects', { token });

describe('password login (spec 5.2)', () => {
  it('returns exactly the token response, and the access token works as a Bearer token', async () => {
    const res = await login(t.adminEmail, t.adminPassword);
    expect(res.status, res.text).toBe(200);
    expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
    // Tokens are never cached (RFC 6749, 5.1), after a refresh either.
    expect(res.headers['cache-control']).toBe('no-store');
    expectTokenResponse(res.body, 3600);
    expect((await whoCanList(res.body.access_token)).status).toBe(200);
    expect((await refresh(res.body.refresh_token)).headers['cache-control']).toBe('no-store');
    expect((await whoCanList(res.body.access_token)).headers['cache-control']).toBeUndefined();
  });

  it('answers 401 unauthorized with the error envelope for a wrong password and for an unknown email, with the same message', async () => {
    const wrong = await login(t.adminEmail, 'not-the-password');
    expectError(wrong, 401, 'unauthorized');
    const unknown = await login(`nobody@${t.slug}.test`, t.adminPassword);
    expectError(unknown, 401, 'unauthorized');
    // The answer must not reveal whether the email exists.
    expect(unknown.body.error.message).toBe(wrong.body.error.message);
    expect(wrong.text).not.toContain('access_token');
    // A disabled user with the right password gets the same answer.
    const u = await svc.user(t, 'read-only');
    await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { disabled: true } });
    const disabled = await login(u.email, u.password);
    expectError(disabled, 401, 'unauthorized');
    expect(disabled.body.error.message).toBe(wrong.body.error.message);
    // Attempted passwords never reach the audit log.
    const audit = JSON.stringify(await svc.service.ctx.db.all('SELECT * FROM audit_logs'));
    expect(audit).not.toContain('not-the-password');
    expect(audit).not.toContain(u.password);
  });

  it('a request without any Authorization header, or with a garbage token, is 401 unauthorized', async () => {
    expectError(await svc.call(t, 'GET', '/projects', { token: '' }), 401, 'unauthorized');
    expectError(await whoCanList('dpat_not-a-real-token'), 401, 'unauthorized');
    expectError(await whoCanList('dpk_not-a-real-key'), 401, 'unauthorized');
    expectError(
      await svc.call(t, 'GET', '/projects', {
        token: '',
        headers: { authorization: `Basic ${Buffer.from(`${t.adminEmail}:${t.adminPassword}`).toString('base64')}` },
      }),
      401,
      'unauthorized',
    );
    expectError(
      await svc.call(t, 'GET', '/projects', { token: '', headers: { authorization: `Token ${t.adminToken}` } }),
      401,
      'unauthorized',
    );
  });

  it('a refresh token is not an access token and an access token is not a refresh token', async () => {
    const pair = (await login(t.adminEmail, t.adminPassword)).body;
    expectError(await whoCanList(pair.refresh_token), 401, 'unauthorized');
    expectError(await refresh(pair.access_token), 401, 'unauthorized');
    // Neither misuse spent or revoked anything.
    expect((await whoCanList(pair.access_token)).status).toBe(200);
    expect((await refresh(pair.refresh_token)).status).toBe(200);
  });
});

describe('access token expiry (spec 5.4)', () => {
  let short: TestService;
  beforeAll(async () => {
    short = await startTestService({ accessTokenTtl: 1 });
  });
  afterAll(() => short?.close());

  it('an expired access token is 401 unauthorized with a message saying it expired; a refresh then gives a working token', async () => {
    const st = await short.tenant();
    const loginRes = await short.call(st, 'POST', '/auth/login', { body: { email: st.adminEmail, password: st.adminPassword }, token: '' });
    expectTokenResponse(loginRes.body, 1);
    expect((await short.call(st, 'GET', '/projects', { token: loginRes.body.access_token })).status).toBe(200);
    await sleep(1_200);
    const expired = await short.call(st, 'GET', '/projects', { token: loginRes.body.access_token });
    expectError(expired, 401, 'unauthorized', /expired/i);
    const renewed = await short.call(st, 'POST', '/auth/refresh', { body: { refresh_token: loginRes.body.refresh_token }, token: '' });
    expect(renewed.status, renewed.text).toBe(200);
    expectTokenResponse(renewed.body, 1);
    expect((await short.call(st, 'GET', '/projects', { token: renewed.body.access_token })).status).toBe(200);
  });

  it('an invalid (never issued) token does not claim to be expired', async () => {
    const st = await short.tenant();
    const res = await short.call(st, 'GET', '/projects', { token: 'dpat_never-issued' });
    expectError(res, 401, 'unauthorized');
    expect(res.body.error.message).not.toMatch(/expired/i);
  });
});

describe('lifetimes on the service clock', () => {
  let now = Date.UTC(2031, 0, 1, 9, 0, 0);
  let clocked: TestService;
  beforeAll(async () => {
    clocked = await startTestService({ clock: () => now });
  });
  afterAll(() => clocked?.close());

  it('an access token lives 3600 s: valid just before, 401 "expired" at the hour', async () => {
    const ct = await clocked.tenant();
    now += 3_599_000;
    expect((await clocked.call(ct, 'GET', '/projects')).status).toBe(200);
    now += 1_000;
    expectError(await clocked.call(ct, 'GET', '/projects'), 401, 'unauthorized', /expired/i);
  });

  it('a refresh token lives 30 days', async () => {
    const ct = await clocked.tenant();
    now += 30 * 24 * 3600 * 1000 - 1000;
    const fresh = await clocked.call(ct, 'POST', '/auth/refresh', { token: '', body: { refresh_token: ct.refreshToken } });
    expect(fresh.status, fresh.text).toBe(200);
    now += 30 * 24 * 3600 * 1000 + 1000;
    const stale = await clocked.call(ct, 'POST', '/auth/refresh', { token: '', body: { refresh_token: fresh.body.refresh_token } });
    expectError(stale, 401, 'unauthorized', /expired/i);
    // Logging in again works.
    expect(
      (await clocked.call(ct, 'POST', '/auth/login', { token: '', body: { email: ct.adminEmail, password: ct.adminPassword } })).status,
    ).toBe(200);
  });

  it('an invitation expires (after 7 days)', async () => {
    const ct = await clocked.tenant();
    const early = await clocked.ok(ct, 'POST', '/users', { body: { email: `early@${ct.slug}.test`, role: 'read-only' } });
    const late = await clocked.ok(ct, 'POST', '/users', { body: { email: `late@${ct.slug}.test`, role: 'read-only' } });
    now += 6 * 24 * 3600 * 1000;
    expect(
      (
        await clocked.call(ct, 'POST', '/auth/invitations/accept', {
          token: '',
          body: { invitation_token: early.invitation_token, password: 'in-time-password' },
        })
      ).status,
    ).toBe(200);
    now += 2 * 24 * 3600 * 1000;
    expectError(
      await clocked.call(ct, 'POST', '/auth/invitations/accept', {
        token: '',
        body: { invitation_token: late.invitation_token, password: 'too-late-password' },
      }),
      401,
      'unauthorized',
    );
  });
});

describe('refresh rotation (spec 5.5)', () => {
  it('returns a new pair; the old refresh token is single-use', async () => {
    const first = (await login(t.adminEmail, t.adminPassword)).body;
    const rotated = await refresh(first.refresh_token);
    expect(rotated.status, rotated.text).toBe(200);
    expectTokenResponse(rotated.body);
    expect(rotated.body.access_token).not.toBe(first.access_token);
    expect(rotated.body.refresh_token).not.toBe(first.refresh_token);
    expect((await whoCanList(rotated.body.access_token)).status).toBe(200);
    // The rotated refresh token is itself good for one more rotation.
    const again = await refresh(rotated.body.refresh_token);
    expect(again.status, again.text).toBe(200);
    expectTokenResponse(again.body);
  });

  it('a reused refresh token revokes every token of that session, but not the other sessions of the same user', async () => {
    const user = await svc.user(t, 'read-write');
    const sessionA = (await login(user.email, user.password)).body;
    const sessionB = (await login(user.email, user.password)).body;
    const rotatedA = (await refresh(sessionA.refresh_token)).body;
    expectTokenResponse(rotatedA);
    // Before the reuse, both access tokens of session A work.
    expect((await whoCanList(sessionA.access_token)).status).toBe(200);
    expect((await whoCanList(rotatedA.access_token)).status).toBe(200);

    const reuse = await refresh(sessionA.refresh_token);
    expectError(reuse, 401, 'unauthorized');

    expectError(await whoCanList(sessionA.access_token), 401, 'unauthorized');
    expectError(await whoCanList(rotatedA.access_token), 401, 'unauthorized');
    expectError(await refresh(rotatedA.refresh_token), 401, 'unauthorized');
    // Writes are refused too, not only reads.
    expectError(await svc.call(t, 'GET', '/users', { token: rotatedA.access_token }), 401, 'unauthorized');

    // The other session (and the harness's own login) of the same user are untouched.
    expect((await whoCanList(sessionB.access_token)).status).toBe(200);
    expect((await whoCanList(user.token)).status).toBe(200);
    const rotatedB = await refresh(sessionB.refresh_token);
    expect(rotatedB.status, rotatedB.text).toBe(200);
    expect((await whoCanList(rotatedB.body.access_token)).status).toBe(200);
    // The user can still log in afresh.
    expect((await login(user.email, user.password)).status).toBe(200);
  });

  it('two concurrent refreshes with the same token: at most one succeeds', async () => {
    const pair = (await login(t.adminEmail, t.adminPassword)).body;
    const results = await Promise.all([refresh(pair.refresh_token), refresh(pair.refresh_token), refresh(pair.refresh_token)]);
    const ok = results.filter((r) => r.status === 200);
    expect(ok.length).toBe(1);
    for (const r of results.filter((x) => x.status !== 200)) expectError(r, 401, 'unauthorized');
  });

  it('an unknown refresh token is 401; a missing one is a validation error', async () => {
    expectError(await refresh('dprt_unknown'), 401, 'unauthorized');
    expectError(await svc.call(t, 'POST', '/auth/refresh', { body: {}, token: '' }), 400, 'validation_error');
  });
});

describe('tokens only in the Authorization header (spec 5.1)', () => {
  it('a token in ?access_token= or ?token= does not authenticate REST', async () => {
    for (const name of ['access_token', 'token']) {
      const res = await svc.call(t, 'GET', '/projects', { token: '', query: { [name]: t.adminToken } });
      expectError(res, 401, 'unauthorized');
    }
  });

  it('an API key in the query string does not authenticate either', async () => {
    const project = await svc.project(t);
    const key = await svc.apiKey(t, project.id, 'admin');
    for (const name of ['access_token', 'token', 'api_key']) {
      expectError(
        await svc.call(t, 'GET', `/projects/${project.id}/connectors`, { token: '', query: { [name]: key.key } }),
        401,
        'unauthorized',
      );
    }
  });

  it('a token in the request body does not authenticate, and nothing is created', async () => {
    for (const field of ['access_token', 'token']) {
      const name = `body-token-${field}`;
      const res = await svc.call(t, 'POST', '/projects', { token: '', body: { name, [field]: t.adminToken } });
      expectError(res, 401, 'unauthorized');
    }
    const list = await svc.ok(t, 'GET', '/projects', { query: { limit: 100 } });
    expect(list.data.map((p: { name: string }) => p.name).filter((n: string) => n.startsWith('body-token-'))).toEqual([]);
  });

  it('a token in a cookie or a custom header does not authenticate', async () => {
    expectError(
      await svc.call(t, 'GET', '/projects', { token: '', headers: { cookie: `access_token=${t.adminToken}` } }),
      401,
      'unauthorized',
    );
    expectError(
      await svc.call(t, 'GET', '/projects', { token: '', headers: { 'x-access-token': t.adminToken, 'x-api-key': t.adminToken } }),
      401,
      'unauthorized',
    );
  });
});

describe('X-Request-Id on every response (spec 1)', () => {
  it('is present and unique across successes and failures of every kind', async () => {
    const responses = await Promise.all([
      svc.call(t, 'GET', '/projects'), // 200
      svc.call(t, 'POST', '/auth/login', { body: { email: t.adminEmail, password: t.adminPassword }, token: '' }), // 200, public
      svc.call(t, 'POST', '/auth/login', { body: { email: t.adminEmail, password: 'wrong-password' }, token: '' }), // 401
      svc.call(t, 'GET', '/projects', { token: '' }), // 401 missing
      svc.call(t, 'GET', '/projects', { token: 'dpat_garbage' }), // 401 invalid
      svc.call(t, 'GET', '/projects/prj_does-not-exist'), // 404 resource
      svc.call(t, 'GET', '/no/such/route'), // 404 route
      svc.call('no-such-tenant-here', 'GET', '/projects', { token: t.adminToken, anyHostCertificate: true }), // 404 tenant (default certificate: no key is made for a made-up name)
      svc.call(t, 'POST', '/projects', { body: {} }), // 400 validation
      svc.call(t, 'POST', '/projects', { raw: '{not json', headers: { 'content-type': 'application/json' } }), // 400 malformed
    ]);
    expect(responses.map((r) => r.status)).toEqual([200, 200, 401, 401, 401, 404, 404, 404, 400, 400]);
    const ids = responses.map(requestIdOf);
    expect(new Set(ids).size).toBe(ids.length);
    // And the same request twice gets two different ids.
    const [a, b] = await Promise.all([svc.call(t, 'GET', '/projects'), svc.call(t, 'GET', '/projects')]);
    expect(requestIdOf(a)).not.toBe(requestIdOf(b));
  });
});
