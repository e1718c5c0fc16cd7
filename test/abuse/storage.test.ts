import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { AUDIT_DIFF_BYTES, storedDiff } from '../../src/service/audit.js';
import { tenantUsage } from '../../src/service/store/usage.js';
import { recountUsage } from '../support/usage.js';

/**
 * The disk is shared. Before, one read-write key could fill it: 1 MiB connectors created and
 * deleted at the rate limit wrote about 1.2 GB a minute (each create and delete also kept the
 * whole connector in its audit entry), and nothing bounded what a tenant stores. Now the
 * database counts each tenant's bytes (store/usage.ts, by triggers), creates and updates past
 * --max-tenant-storage are 409 while deletes pass, and an audit entry's diff is at most 64 KiB.
 */
const LIMIT = 3 * 1024 * 1024;
let svc: TestService;
let filler: TestTenant;
let other: TestTenant;

beforeAll(async () => {
  svc = await startTestService({ maxTenantStorage: LIMIT });
  [filler, other] = await Promise.all([svc.tenant(), svc.tenant()]);
});
afterAll(() => svc?.close());

/** A connector whose JSON is about `kb` KiB (at most about 700): `selected_tables` of 69-character names, under the cap of 10,000. */
const big = (name: string, kb: number) => ({
  name,
  connector_type: 'postgresql',
  selected_tables: Array.from(
    { length: Math.floor((kb * 1024) / 72) },
    (_, i) => `public.a_table_with_a_name_long_enough_to_fill_a_connector_${String(i).padStart(7, '0')}`,
  ),
});

const store = () => svc.service.ctx.db;
/** What the tenant stores, counted from scratch: what the triggers must agree with. */
async function recount(tenantSlug: string): Promise<number> {
  const tenant = await store().get<{ id: string }>('SELECT id FROM tenants WHERE slug = ?', [tenantSlug]);
  return recountUsage(store(), tenant!.id);
}
const usage = async (t: TestTenant) =>
  tenantUsage(store(), (await store().get<{ id: string }>('SELECT id FROM tenants WHERE slug = ?', [t.slug]))!.id);

describe('storage per tenant', () => {
  test('the count follows every write exactly: creates, updates that grow and shrink, secrets, deletes, a project delete', async () => {
    const p = await svc.project(other, 'counted');
    const path = `/projects/${p.id}/connectors`;
    const c = await svc.ok(other, 'POST', path, { body: big('a', 50) });
    await svc.ok(other, 'POST', path, {
      body: { name: 'b', connector_type: 'postgresql', credentials: { username: 'u', password: 'secret-pw' } },
    });
    expect(await usage(other)).toBe(await recount(other.slug));
    await svc.ok(other, 'PATCH', `${path}/${c.id}`, { body: { selected_tables: big('a', 80).selected_tables } });
    expect(await usage(other)).toBe(await recount(other.slug));
    await svc.ok(other, 'PATCH', `${path}/${c.id}`, { body: { selected_tables: ['public.one'] } });
    expect(await usage(other)).toBe(await recount(other.slug));
    await svc.ok(other, 'DELETE', `${path}/${c.id}`);
    expect(await usage(other)).toBe(await recount(other.slug));
    await svc.ok(other, 'DELETE', `/projects/${p.id}`);
    expect(await usage(other)).toBe(await recount(other.slug));
    // What is left is the tenant's users and the audit log.
    expect(await usage(other)).toBeGreaterThan(0);
  });

  test('past the limit a create or a growing update is 409 with the envelope, a shrinking update and a delete pass and make room; another tenant writes meanwhile', async () => {
    const p = await svc.project(filler, 'full');
    const path = `/projects/${p.id}/connectors`;
    const ids: string[] = [];
    let refused;
    for (let i = 0; i < 40 && !refused; i++) {
      const res = await svc.call(filler, 'POST', path, { body: big(`c${i}`, 200) });
      if (res.status === 201) ids.push(res.body.id);
      else refused = res;
    }
    expect(refused?.status).toBe(409);
    expect(refused!.body).toEqual({
      error: {
        code: 'conflict',
        message: expect.stringMatching(
          /^This write would take the tenant past its storage limit: \d+\.\d MiB of 3\.0 MiB used \(resources and audit log\), and it adds up to \d+ KiB; delete resources or make them smaller first$/,
        ),
      },
    });
    // Within the limit, give or take one body.
    expect(await usage(filler)).toBeLessThanOrEqual(LIMIT);
    expect(ids.length).toBeGreaterThan(3);
    // Another tenant is not affected.
    const q = await svc.project(other, 'unaffected');
    await svc.ok(other, 'POST', `/projects/${q.id}/connectors`, { body: big('x', 200) });
    // A growing update is refused too; a delete passes, and then there is room again.
    const grow = await svc.call(filler, 'PATCH', `${path}/${ids[0]}`, { body: { selected_tables: big('g', 400).selected_tables } });
    expect(grow.status).toBe(409);
    expect(grow.body.error.message).toMatch(/and it adds \d+ KiB;/); // what it adds, measured: not "up to"
    // An update that makes a connector smaller passes at the limit: it is a way out, as a delete is.
    await svc.ok(filler, 'PATCH', `${path}/${ids[3]}`, { body: { selected_tables: ['public.one'] } });
    await svc.ok(filler, 'DELETE', `${path}/${ids[1]}`);
    await svc.ok(filler, 'DELETE', `${path}/${ids[2]}`);
    await svc.ok(filler, 'POST', path, { body: big('again', 200) });
  });

  test('an audit entry keeps which fields changed, with values over its 64 KiB bound replaced by their size', async () => {
    const p = await svc.project(other, 'audited');
    const created = await svc.ok(other, 'POST', `/projects/${p.id}/connectors`, { body: big('wide', 300) });
    const entries = await svc.ok(other, 'GET', `/projects/${p.id}/audit-logs`, { query: { limit: 10 } });
    const entry = entries.data.find((e: { resource_id: string }) => e.resource_id === created.id);
    const stored = await store().get<{ n: number }>('SELECT octet_length(diff) AS n FROM audit_logs WHERE resource_id = ?', [created.id]);
    expect(Number(stored!.n)).toBeLessThanOrEqual(AUDIT_DIFF_BYTES);
    expect(JSON.stringify(entry.diff)).toMatch(/"selected_tables":\{"before":null,"after":"\(omitted: [\d,]+ bytes\)"\}/);
    expect(JSON.stringify(entry.diff)).toContain('"name":{"before":null,"after":"wide"}');
  });
});

describe('storedDiff', () => {
  test('whole while it fits; else the largest values go first, until it fits', () => {
    const small = { a: { before: 1, after: 2 } };
    expect(storedDiff(small)).toBe(JSON.stringify(small));
    const huge = 'x'.repeat(50_000);
    const out = JSON.parse(storedDiff({ a: { before: huge, after: `${huge}y` }, b: { before: 'keep', after: 'me' } }));
    expect(out.a.after).toBe('(omitted: 50,003 bytes)');
    expect(out.a.before).toBe(huge); // the larger one alone was enough
    expect(out.b).toEqual({ before: 'keep', after: 'me' });
  });
});
