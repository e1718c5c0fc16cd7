import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { BYSTANDER_MAX_MS, whileServingOther } from '../../abuse/support.js';
import { walkPages, type ListPage } from '../../support/pages.js';
import { SCAN_WINDOW } from '../../../src/service/pagination.js';
import { newId } from '../../../src/service/ids.js';
import { bulkInsert, RESOURCE_COLUMNS } from '../../support/bulk.js';

/**
 * A status or severity filter on the alert list that matches little must not read a project's whole
 * alert history for one page: on SQLite that read holds the event loop of every tenant. Like the
 * audit log, a filtered page examines at most SCAN_WINDOW alerts and ends there, possibly short or
 * empty, with has_more and a cursor to go on.
 */
const ALERTS = 25_000;

describe(`the alert list with ${ALERTS.toLocaleString('en-US')} alerts`, () => {
  let svc: TestService;
  let owner: TestTenant;
  let bystander: TestTenant;
  let base: string;
  let rareId: string;

  beforeAll(async () => {
    svc = await startTestService({ rateLimit: 1_000_000 });
    [owner, bystander] = [await svc.tenant(), await svc.tenant()];
    const project = await svc.project(owner, 'alerted');
    base = `/projects/${project.id}`;
    const { db } = svc.service.ctx;
    const tenantId = (await db.get<{ id: string }>('SELECT id FROM tenants WHERE slug = ?', [owner.slug]))!.id;
    // Straight into the table; one resolved alert at the very end.
    await bulkInsert(svc.service.ctx.db, 'resources', RESOURCE_COLUMNS, ALERTS, (n) => {
      const id = newId('alert');
      const status = n === ALERTS - 1 ? 'resolved' : 'firing';
      if (status === 'resolved') rareId = id;
      const data = { id, rule_id: 'alr_x', status, severity: 'warning', message: `alert ${n}`, triggered_at: '2030-01-01T00:00:00Z' };
      return [id, tenantId, project.id, 'alert', '', id, JSON.stringify(data), '2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z'];
    });
  }, 120_000);
  afterAll(() => svc?.close());

  const page = (query: string) => svc.ok<ListPage>(owner, 'GET', `${base}/alerts?${query}`);

  it('a filter that matches one alert at the end pages through in windows, finds it, and ends', async () => {
    const { result: pages, probe } = await whileServingOther(svc, bystander, () =>
      walkPages((cursor) => page(`status=resolved&limit=100${cursor}`)),
    );
    expect(pages.found).toEqual([rareId]);
    expect(pages.seen.length).toBe(Math.ceil(ALERTS / SCAN_WINDOW));
    expect(pages.seen.slice(0, -1).every((p) => p.count === 0 && p.hasMore)).toBe(true);
    expect(pages.seen.at(-1)).toEqual({ count: 1, hasMore: false });
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  }, 60_000);

  it('a filter that matches within the window fills its page; without a filter a page is full', async () => {
    const firing = await page('status=firing&severity=warning&limit=100');
    expect(firing.data).toHaveLength(100);
    expect(firing.has_more).toBe(true);
    const all = await page('limit=100');
    expect(all.data).toHaveLength(100);
    expect(all.has_more).toBe(true);
  });
});
