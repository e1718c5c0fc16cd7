import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { BYSTANDER_MAX_MS, whileServingOther } from '../../abuse/support.js';
import { walkPages, type ListPage } from '../../support/pages.js';
import { SCAN_WINDOW } from '../../../src/service/pagination.js';
import { newId } from '../../../src/service/ids.js';
import { bulkInsert } from '../../support/bulk.js';

/**
 * Issue 18: a filter that matches little must not read a tenant's whole audit history to fill a
 * page. A filtered page examines at most SCAN_WINDOW entries and ends there, possibly short or
 * empty, with has_more and a cursor to go on.
 */
const ENTRIES = 25_000;

describe(`the audit log with ${ENTRIES.toLocaleString('en-US')} entries`, () => {
  let svc: TestService;
  let owner: TestTenant;
  let bystander: TestTenant;
  let base: string;
  let rareId: string;

  beforeAll(async () => {
    svc = await startTestService({ rateLimit: 1_000_000 });
    [owner, bystander] = [await svc.tenant(), await svc.tenant()];
    const project = await svc.project(owner, 'audited');
    base = `/projects/${project.id}`;
    const { db } = svc.service.ctx;
    const tenantId = (await db.get<{ id: string }>('SELECT id FROM tenants WHERE slug = ?', [owner.slug]))!.id;
    // Straight into the table; one rare entry at the very end.
    const columns =
      'id tenant_id project_id ts actor_type actor_id actor_name action resource_type resource_id resource_name request_id outcome status_code diff';
    await bulkInsert(db, 'audit_logs', columns.split(' '), ENTRIES, (n) => {
      const rare = n === ENTRIES - 1;
      const id = newId('audit');
      if (rare) rareId = id;
      const ts = new Date(Date.UTC(2030, 0, 1) + n * 1000).toISOString();
      const action = rare ? 'connector.delete' : 'connector.update';
      return [
        id,
        tenantId,
        project.id,
        ts,
        'user',
        'usr_x',
        owner.adminEmail,
        action,
        'connector',
        `con_${n}`,
        `c${n}`,
        `req-${n}`,
        'success',
        200,
        null,
      ];
    });
  }, 120_000);
  afterAll(() => svc?.close());

  const page = (query: string) => svc.ok<ListPage>(owner, 'GET', `${base}/audit-logs?${query}`);

  it('a filter that matches one entry at the end pages through in windows, finds it, and ends', async () => {
    const { result: pages, probe } = await whileServingOther(svc, bystander, () =>
      walkPages((cursor) => page(`action=connector.delete&limit=100${cursor}`)),
    );
    expect(pages.found).toEqual([rareId]);
    // One page per window of entries the project holds (the project's own create entry included), the last one short.
    expect(pages.seen.length).toBe(Math.ceil((ENTRIES + 1) / SCAN_WINDOW));
    expect(pages.seen.slice(0, -1).every((p) => p.count === 0 && p.hasMore)).toBe(true);
    expect(pages.seen.at(-1)).toEqual({ count: 1, hasMore: false });
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  }, 60_000);

  it("resource_id: one resource's entries in one page, on the project and tenant logs", async () => {
    // The last entry's resource (con_<ENTRIES - 1>) has one entry, the rare one at the end of 25,000.
    const one = await page(`resource_id=con_${ENTRIES - 1}&limit=100`);
    expect(one.data.map((e) => e.id)).toEqual([rareId]);
    expect(one.has_more).toBe(false);
    const tenantWide = await svc.ok<ListPage>(owner, 'GET', `/audit-logs?resource_id=con_${ENTRIES - 1}&limit=100`);
    expect(tenantWide.data.map((e) => e.id)).toEqual([rareId]);
    // Another project's log does not show it.
    const other = await svc.project(owner, 'elsewhere');
    expect((await svc.ok<ListPage>(owner, 'GET', `/projects/${other.id}/audit-logs?resource_id=con_${ENTRIES - 1}`)).data).toEqual([]);
  });

  it('without a filter a page is full, as before; the tenant-wide log pages the same way', async () => {
    const first = await page('limit=100');
    expect(first.data).toHaveLength(100);
    expect(first.has_more).toBe(true);
    const tenantWide = await svc.ok<{ data: unknown[]; has_more: boolean }>(owner, 'GET', '/audit-logs?action=connector.delete&limit=10');
    expect(tenantWide.data).toHaveLength(0);
    expect(tenantWide.has_more).toBe(true);
  });
});
