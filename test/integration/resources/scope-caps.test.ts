import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { bulkInsert, RESOURCE_COLUMNS } from '../../support/bulk.js';
import { countRowsRead } from '../../support/db-counters.js';
import { expectError } from './fixtures.js';
import { newId } from '../../../src/service/ids.js';
import { kind } from '../../../src/kinds/index.js';
import type { Db } from '../../../src/service/store/db.js';

/**
 * Kinds whose every resource one request or event reads together (an infrastructure plan, a
 * schema's classification, Google sign-in's providers) cap their count per project or tenant
 * (`x-max-per-scope`), so that work stays bounded whatever a tenant stores. The rows below the cap
 * go straight into the table: the test is about the last place, not about 5,000 creates.
 */
const INFRA_CAP = kind('infrastructure_resource').maxPerScope!;
const SSO_CAP = kind('sso_provider').maxPerScope!;
const bucket = (name: string) => ({ name, resource_type: 'bucket', provider: 'aws', region: 'eu-west-1' });

describe('per-scope caps (x-max-per-scope)', () => {
  let svc: TestService;
  let t: TestTenant;
  let tenantId: string;

  beforeAll(async () => {
    svc = await startTestService({ rateLimit: 1_000_000 });
    t = await svc.tenant();
    tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
  });
  afterAll(() => svc?.close());

  /** Stores `count` resources of a kind in a scope, as if created earlier. */
  const fill = (projectId: string, kindName: string, count: number, data: (n: number) => Record<string, unknown>) =>
    bulkInsert(svc.service.ctx.db, 'resources', RESOURCE_COLUMNS, count, (n) => {
      const id = newId(kindName);
      const at = '2030-01-01T00:00:00Z';
      return [id, tenantId, projectId, kindName, '', `filled-${n}`, JSON.stringify({ id, ...data(n) }), at, at];
    });

  it(`a project holds ${INFRA_CAP.toLocaleString('en-US')} infrastructure resources: the next create is 409 and stores nothing, another project is not affected`, async () => {
    expect(INFRA_CAP).toBe(5_000);
    const projectId = (await svc.project(t, 'full-infra')).id;
    const base = `/projects/${projectId}/infrastructure`;
    await fill(projectId, 'infrastructure_resource', INFRA_CAP - 1, (n) => ({ ...bucket(`filled-${n}`), status: 'pending' }));
    const lastPlace = await svc.ok<{ id: string }>(t, 'POST', base, { body: bucket('last-place') }, 201);
    const error = expectError(await svc.call(t, 'POST', base, { body: bucket('one-too-many') }), 409, 'conflict');
    expect(error.message).toBe('This project is full: a project holds at most 5,000 infrastructure resources; delete one first');
    const { n } = (await svc.service.ctx.db.get<{ n: number }>(
      "SELECT count(*) AS n FROM resources WHERE tenant_id = ? AND project_id = ? AND kind = 'infrastructure_resource'",
      [tenantId, projectId],
    ))!;
    expect(Number(n)).toBe(INFRA_CAP);

    // Another project has its own places; a delete frees one here.
    const other = (await svc.project(t, 'other-infra')).id;
    await svc.ok(t, 'POST', `/projects/${other}/infrastructure`, { body: bucket('one-too-many') }, 201);
    await svc.ok(t, 'DELETE', `${base}/${lastPlace.id}`, {}, 204);
    await svc.ok(t, 'POST', base, { body: bucket('one-too-many') }, 201);
  }, 60_000);

  it('concurrent creates for the last place: exactly one is stored', async () => {
    const projectId = (await svc.project(t, 'race-infra')).id;
    const base = `/projects/${projectId}/infrastructure`;
    await fill(projectId, 'infrastructure_resource', INFRA_CAP - 1, (n) => ({ ...bucket(`filled-${n}`), status: 'pending' }));
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => svc.call(t, 'POST', base, { body: bucket(`racer-${i}`) })));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
  }, 60_000);

  it(`a tenant holds ${SSO_CAP} SSO providers`, async () => {
    await fill('', 'sso_provider', SSO_CAP - 1, (n) => ({ name: `filled-${n}`, protocol: 'google', client_id: 'c', enabled: true }));
    await svc.ok(t, 'POST', '/sso-providers', { body: { name: 'last-place', protocol: 'google', client_id: 'c' } }, 201);
    const error = expectError(
      await svc.call(t, 'POST', '/sso-providers', { body: { name: 'one-too-many', protocol: 'google', client_id: 'c' } }),
      409,
      'conflict',
    );
    expect(error.message).toBe('This tenant is full: a tenant holds at most 100 SSO providers; delete one first');
  }, 60_000);
});

describe('the last-admin check beside 20,000 users', () => {
  let svc: TestService;
  afterAll(() => svc?.close());

  it("reads the tenant's admins, not its users", async () => {
    svc = await startTestService({ rateLimit: 1_000_000 });
    const t = await svc.tenant();
    const tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
    await bulkInsert(svc.service.ctx.db, 'resources', RESOURCE_COLUMNS, 20_000, (n) => {
      const id = newId('user');
      const email = `user-${n}@${t.slug}.test`;
      const data = { id, email, role: 'read-only', status: 'active', disabled: false };
      return [id, tenantId, '', 'user', '', email, JSON.stringify(data), '2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z'];
    });
    const admin = ((await svc.ok(t, 'GET', '/users?limit=1')) as { data: { id: string }[] }).data[0];
    const counter = countRowsRead(svc.service.ctx.db as Db);
    expectError(await svc.call(t, 'PATCH', `/users/${admin.id}`, { body: { role: 'read-write' } }), 409, 'conflict');
    // The credential, the user, the tenant's lock and at most two admins (all 20,000 users before).
    expect(counter.rows).toBeLessThan(20);
    // With a second active admin (created last, so the filter walks past all 20,000), the first can step down.
    await svc.ok(t, 'POST', '/users', { body: { email: `second@${t.slug}.test`, role: 'admin', password: 'second-admin-pw' } });
    expect((await svc.call(t, 'PATCH', `/users/${admin.id}`, { body: { role: 'read-write' } })).status).toBe(200);
  }, 120_000);
});
