import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { TestOidcIdp } from '../../support/oidc-idp.js';
import { TestBrowser } from '../../support/browser.js';
import { haveTerraform, PROVIDER_BLOCK, TerraformWorkspace } from './harness.js';

/**
 * A tenant's SSO provider managed with the real `terraform` binary (dataplatform_sso_provider,
 * generated like every resource from the kind schema), then used for a real OIDC sign-in.
 */
describe.skipIf(testStore() === 'postgres' || !haveTerraform)('dataplatform_sso_provider (real terraform)', () => {
  let svc: TestService;
  let t: TestTenant;
  let ws: TerraformWorkspace;
  let idp: TestOidcIdp;
  const SECRET = 'tf-oidc-client-secret-1';

  const config = (version: number) => `${PROVIDER_BLOCK}
variable "client_secret" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "dataplatform_sso_provider" "corp" {
  name                     = "corp"
  protocol                 = "oidc"
  issuer                   = "${'$'}{var.issuer}"
  client_id                = "corp"
  client_secret_wo         = var.client_secret
  client_secret_wo_version = ${version}
  ca_certificate           = file("${'$'}{path.module}/idp-ca.pem")
  auto_provision           = true
  default_role             = "read-only"
}

variable "issuer" {
  type = string
}

output "login_path" {
  value = "/auth/sso/${'$'}{dataplatform_sso_provider.corp.id}/login"
}
`;

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    idp = await TestOidcIdp.start();
    ws = await TerraformWorkspace.create(svc, t);
    writeFileSync(join(ws.work, 'idp-ca.pem'), idp.caPem);
    ws.write('main.tf', config(1));
    Object.assign(ws.vars, { client_secret: SECRET, issuer: idp.issuer });
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await idp?.close();
    await svc?.close();
    ws?.close();
  });

  it('applies the provider with a write-only client secret, then plans no changes', { timeout: 60_000 }, async () => {
    const out = await ws.apply();
    expect(out).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
    expect(out).not.toContain(SECRET);
    const listed = (await svc.ok(t, 'GET', '/sso-providers')).data as Record<string, any>[];
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ name: 'corp', protocol: 'oidc', issuer: idp.issuer, client_id: 'corp', auto_provision: true });
    const tenant = await svc.service.ctx.tenants.bySlug(t.slug);
    expect((await svc.service.ctx.resources.get(tenant!.id, '', 'sso_provider', listed[0].id))!.secrets).toEqual({ client_secret: SECRET });
    expect(JSON.stringify(await ws.show())).not.toContain(SECRET);
    expect((await ws.plan()).code).toBe(0);
  });

  it('signs a user in through the provider Terraform created', { timeout: 60_000 }, async () => {
    const provider = ((await svc.ok(t, 'GET', '/sso-providers')).data as { id: string }[])[0];
    idp.configure([{ client_id: 'corp', client_secret: SECRET, redirect_uris: [`${t.base}/auth/sso/${provider.id}/callback`] }]);
    const browser = TestBrowser.trusting([svc.service.tls.certPath], [idp.caPem]);
    try {
      const start = await browser.fetch(`${t.base}/auth/sso/${provider.id}/login`);
      const form = await browser.follow(start.location!);
      const email = `tf-user@${t.slug}.test`;
      const back = await browser.follow(form.url, (next) => next.startsWith(t.base), {
        form: { prompt: 'login', login: email, password: 'x' },
      });
      const tokens = await browser.fetch(back.location!);
      expect(tokens.status, tokens.text).toBe(200);
      expect((await svc.call(t, 'GET', '/projects', { token: tokens.body.access_token })).status).toBe(200);
    } finally {
      await browser.close();
    }
  });

  it('a new client_secret_wo_version sends the new secret', { timeout: 60_000 }, async () => {
    ws.write('main.tf', config(2));
    ws.vars.client_secret = 'tf-oidc-client-secret-2';
    expect((await ws.plan()).code).toBe(2);
    expect(await ws.apply()).toContain('Resources: 0 added, 1 changed, 0 destroyed.');
    const listed = (await svc.ok(t, 'GET', '/sso-providers')).data as { id: string }[];
    const tenant = await svc.service.ctx.tenants.bySlug(t.slug);
    expect((await svc.service.ctx.resources.get(tenant!.id, '', 'sso_provider', listed[0].id))!.secrets).toEqual({
      client_secret: 'tf-oidc-client-secret-2',
    });
  });
});
