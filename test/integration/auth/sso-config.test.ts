import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { preparePlan, reconcile, MANAGED_BY_LABEL, SECRETS_SHA_LABEL, type EngineOptions } from '../../../src/engine/index.js';
import type { DataPlatformClient } from '../../../src/client/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { clientFor } from '../engine/helpers.js';

/** SSO providers declared in YAML and applied by the reconciler, like every other kind: no SSO-specific engine code. */

let svc: TestService;
let t: TestTenant;
let client: DataPlatformClient;
let dir: string;
const SECRET = 'okta-client-secret-1';

const YAML = `apiVersion: dataplatform/v1
kind: SsoProvider
metadata:
  name: okta
  labels: { team: identity }
spec:
  protocol: oidc
  issuer: https://corp.okta.example
  client_id: dataplatform
  client_secret:
    secretRef:
      env: OKTA_CLIENT_SECRET
  auto_provision: true
  default_role: read-only
---
apiVersion: dataplatform/v1
kind: SsoProvider
metadata:
  name: adfs
spec:
  protocol: saml
  saml_sso_url: https://adfs.corp.example/adfs/ls/
  saml_entity_id: https://dataplatform.corp.example/saml
  saml_idp_certificate: |
    -----BEGIN CERTIFICATE-----
    MIIBszCCAVmgAwIBAgIUJ0Examplecertificatebody0000000000wCgYIKoZIzj0EAwIw
    -----END CERTIFICATE-----
`;

const opts = (env: Record<string, string> = { OKTA_CLIENT_SECRET: SECRET }, extra: Partial<EngineOptions> = {}): EngineOptions => ({
  sourceId: 'identity',
  env,
  ...extra,
});
const active = <T extends { action: string }>(plan: { changes: T[] }) => plan.changes.filter((c) => c.action !== 'no-op');
/** The write-only secret as the service stores it (apart from the resource), to prove what apply sent. */
async function storedSecret(id: string) {
  const tenant = await svc.service.ctx.tenants.bySlug(t.slug);
  return (await svc.service.ctx.resources.get(tenant!.id, '', 'sso_provider', id))?.secrets?.client_secret;
}

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  client = clientFor(svc, t);
  dir = mkdtempSync(join(tmpdir(), 'dp-sso-config-'));
  writeFileSync(join(dir, 'sso.yaml'), YAML);
});
afterAll(async () => {
  await client?.close();
  await svc?.close();
});

describe('SsoProvider in YAML', () => {
  it('apply creates both providers with ownership labels; the secret is stored, never returned', async () => {
    const r = await reconcile(client, [dir], opts());
    expect(r.plan.errors).toEqual([]);
    expect(r.plan.summary.create).toBe(2);
    expect(r.result!.converged).toBe(true);
    const listed = (await svc.ok(t, 'GET', '/sso-providers')).data as Record<string, any>[];
    const okta = listed.find((p) => p.name === 'okta')!;
    expect(okta).toMatchObject({
      protocol: 'oidc',
      issuer: 'https://corp.okta.example',
      client_id: 'dataplatform',
      auto_provision: true,
      enabled: true,
    });
    expect(okta.labels).toMatchObject({ team: 'identity', [MANAGED_BY_LABEL]: 'identity' });
    expect(okta.labels[SECRETS_SHA_LABEL]).toMatch(/^[0-9a-f]{16}$/);
    expect(JSON.stringify(listed)).not.toContain(SECRET);
    expect(await storedSecret(okta.id)).toBe(SECRET);
    expect(listed.find((p) => p.name === 'adfs')).toMatchObject({
      protocol: 'saml',
      saml_entity_id: 'https://dataplatform.corp.example/saml',
    });
  });

  it('a second plan has zero changes; another secret value is a sensitive update that apply stores', async () => {
    expect(active((await preparePlan(client, [dir], opts())).plan)).toEqual([]);
    const env = { OKTA_CLIENT_SECRET: 'okta-client-secret-2' };
    const { plan } = await preparePlan(client, [dir], opts(env));
    const changes = active(plan);
    expect(changes.map((c) => c.name)).toEqual(['okta']);
    expect(changes[0].changes).toEqual([{ field: 'client_secret', before: '(sensitive)', after: '(sensitive)', sensitive: true }]);
    expect((await reconcile(client, [dir], opts(env))).result!.converged).toBe(true);
    const okta = ((await svc.ok(t, 'GET', '/sso-providers')).data as { id: string; name: string }[]).find((p) => p.name === 'okta')!;
    expect(await storedSecret(okta.id)).toBe('okta-client-secret-2');
  });

  it('changing the protocol replaces the provider (it is immutable)', async () => {
    writeFileSync(join(dir, 'sso.yaml'), YAML.replace('protocol: oidc', 'protocol: google'));
    const { plan } = await preparePlan(client, [dir], opts());
    expect(active(plan).map((c) => `${c.action} ${c.name}`)).toEqual(['replace okta']);
  });

  it('a provider missing what its protocol needs is an error with file:line:column', async () => {
    writeFileSync(join(dir, 'sso.yaml'), YAML.replace('  issuer: https://corp.okta.example\n', ''));
    await expect(preparePlan(client, [dir], opts({ OKTA_CLIENT_SECRET: SECRET }, { cwd: dir }))).rejects.toThrow(
      /sso\.yaml:\d+:\d+: SsoProvider\/okta: .*issuer/,
    );
  });
});
