import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { TestOidcIdp } from '../../support/oidc-idp.js';
import { TestBrowser } from '../../support/browser.js';
import { expectTokenResponse } from './helpers.js';

/**
 * Behind a load balancer the IdP's callback may reach another replica than the one that started
 * the sign-in: the flow lives in the shared PostgreSQL database, not in a replica's memory.
 */
describe.skipIf(testStore() !== 'postgres')('SSO across two replicas on one PostgreSQL database', () => {
  let a: TestService;
  let b: TestService;
  let t: TestTenant;
  let idp: TestOidcIdp;
  let browser: TestBrowser;
  let providerId: string;

  beforeAll(async () => {
    a = await startTestService();
    b = await startTestService({ databaseUrl: a.service.ctx.options.databaseUrl });
    t = await a.tenant();
    idp = await TestOidcIdp.start();
    const provider = await a.ok(t, 'POST', '/sso-providers', {
      body: {
        name: 'corp',
        protocol: 'oidc',
        issuer: idp.issuer,
        ca_certificate: idp.caPem,
        client_id: 'corp',
        client_secret: 'replica-secret',
        auto_provision: true,
      },
    });
    providerId = provider.id;
    idp.configure([
      { client_id: 'corp', client_secret: 'replica-secret', redirect_uris: [`${a.url(t.slug)}/auth/sso/${providerId}/callback`] },
    ]);
    browser = TestBrowser.trusting([a.service.tls.certPath, b.service.tls.certPath], [idp.caPem]);
  });
  afterAll(async () => {
    await browser?.close();
    await idp?.close();
    await b?.close();
    await a?.close();
  });

  it('a flow started on replica A finishes on replica B, once', async () => {
    const start = await browser.fetch(`${a.url(t.slug)}/auth/sso/${providerId}/login`);
    expect(start.status, start.text).toBe(302);
    const form = await browser.follow(start.location!);
    const back = await browser.follow(form.url, (next) => next.startsWith(a.url(t.slug)), {
      form: { prompt: 'login', login: `replica@${t.slug}.test`, password: 'x' },
    });
    const onB = back.location!.replace(a.url(t.slug), b.url(t.slug));
    const res = await browser.fetch(onB);
    expect(res.status, res.text).toBe(200);
    expectTokenResponse(res.body);
    expect((await a.call(t, 'GET', '/projects', { token: res.body.access_token })).status).toBe(200);
    // The same callback replayed on A: the flow was spent on B.
    const replay = await browser.fetch(back.location!);
    expect(replay.status).toBe(401);
    expect(replay.body.error.message).toMatch(/already used/);
  });
});
