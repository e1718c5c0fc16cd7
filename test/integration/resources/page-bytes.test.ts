import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { walkPages, type ListPage } from '../../support/pages.js';
import { PAGE_BYTES } from '../../../src/service/pagination.js';
import { LARGE_ITEM_BYTES } from '../../../src/service/store/large-scopes.js';

/**
 * Issue 18: a resource's JSON can be close to the 1 MiB body limit, so a page of 100 was up to
 * 100 MB, read, joined and sent in one request by any read-only key (on SQLite the event loop of
 * every tenant waited 170 ms for one such page). In a scope holding resources over 64 KiB a page
 * now also ends at PAGE_BYTES (8 MiB) of items; the cursor goes on from there.
 */
describe('list pages of large resources', () => {
  let svc: TestService;
  let t: TestTenant;
  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
  });
  afterAll(() => svc?.close());

  /** Table names of about `bytes` of JSON in all: a connector may name 10,000 tables, of any length. */
  const tables = (bytes: number, tag: string) =>
    Array.from({ length: Math.ceil(bytes / 100) }, (_, i) => `public.t${tag}_${i}_${'x'.repeat(80)}`);

  async function project(name: string, count: number, bytes: number) {
    const base = `/projects/${(await svc.project(t, name)).id}/connectors`;
    const created: string[] = [];
    for (let i = 0; i < count; i++) {
      const body = { name: `c${i}`, connector_type: 'salesforce', selected_tables: tables(bytes, '') };
      created.push((await svc.ok(t, 'POST', base, { body })).id);
    }
    return { base, created };
  }

  it('end at 8 MiB of items in a scope that holds large resources, and the cursor walk returns each once, in order', async () => {
    // 300 KB each: 30 are 9 MB.
    const { base, created } = await project('large', 30, 300_000);
    const sizes: number[] = [];
    const { seen, found } = await walkPages(async (cursor) => {
      const res = await svc.call<ListPage>(t, 'GET', `${base}?limit=100${cursor}`);
      expect(res.status, res.text).toBe(200);
      sizes.push(Buffer.byteLength(res.text));
      return res.body;
    });
    expect(found).toEqual(created);
    expect(seen.length).toBe(2);
    expect(seen[0].hasMore).toBe(true);
    expect(seen[0].count).toBeGreaterThan(20);
    expect(seen[0].count).toBeLessThan(30);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(PAGE_BYTES + 1_000);
  }, 60_000);

  it('stay full in a scope whose resources are all under 64 KiB', async () => {
    const { base, created } = await project('small', 30, LARGE_ITEM_BYTES * 0.9);
    const page = await svc.ok<ListPage>(t, 'GET', `${base}?limit=20`);
    expect(page.data.map((c) => c.id)).toEqual(created.slice(0, 20));
    expect(page.has_more).toBe(true);
  }, 60_000);

  it('count a resource as large from the PATCH that makes it so', async () => {
    const { base, created } = await project('grows', 30, 1_000);
    for (const id of created) await svc.ok(t, 'PATCH', `${base}/${id}`, { body: { selected_tables: tables(300_000, 'p') } });
    const page = await svc.ok<ListPage>(t, 'GET', `${base}?limit=100`);
    expect(page.has_more).toBe(true);
    expect(page.data.length).toBeLessThan(30);
  }, 60_000);
});

/**
 * Security audit: audit-log pages had no byte limit. An entry's diff holds whole before and after
 * values, so 100 connectors of 1 MB made a page of 97 MB (1.7 s; four readers stalled the event
 * loop 2 s). An audit page now ends at PAGE_BYTES of entries too, with at least one, through the
 * same byte bound as lists; the cursor goes on from the last entry returned.
 */
describe('audit-log pages of large entries', () => {
  let svc: TestService;
  let t: TestTenant;
  let projectId: string;
  /** Every entry of the project's log, in order, from the table. */
  const stored = async () =>
    (await svc.service.ctx.db.all<{ id: string }>('SELECT id FROM audit_logs WHERE project_id = ? ORDER BY seq', [projectId])).map(
      (r) => r.id,
    );

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    projectId = (await svc.project(t, 'audited')).id;
    // 30 creates of 300 KB: 30 entries whose diffs are 9 MB in all. A diff is stored with at most
    // 64 KiB now (audit.ts storedDiff); entries written before that bound hold the whole connector,
    // as these are made to.
    const tables = Array.from({ length: 3_000 }, (_, i) => `public.t${i}_${'x'.repeat(90)}`);
    for (let i = 0; i < 30; i++) {
      await svc.ok(t, 'POST', `/projects/${projectId}/connectors`, {
        body: { name: `c${i}`, connector_type: 'salesforce', selected_tables: tables },
      });
    }
    const whole = JSON.stringify({ selected_tables: { before: null, after: tables } });
    await svc.service.ctx.db.run("UPDATE audit_logs SET diff = ? WHERE project_id = ? AND action = 'connector.create'", [whole, projectId]);
  }, 120_000);
  afterAll(() => svc?.close());

  /** Walks a log with `query` (limit 100), checking each page's bytes; the ids found and each page's size. */
  async function walk(path: string, query = '') {
    const sizes: number[] = [];
    const walked = await walkPages(async (cursor) => {
      const res = await svc.call<ListPage>(t, 'GET', `${path}?limit=100${query}${cursor}`);
      expect(res.status, res.text.slice(0, 500)).toBe(200);
      sizes.push(Buffer.byteLength(res.text));
      return res.body;
    });
    for (const size of sizes) expect(size).toBeLessThanOrEqual(PAGE_BYTES + 100_000);
    return walked;
  }

  it('end at 8 MiB of entries, and the cursor walk returns each entry once, in order', async () => {
    const { seen, found } = await walk(`/projects/${projectId}/audit-logs`);
    expect(found).toEqual(await stored());
    expect(seen.length).toBe(2);
    expect(seen[0].hasMore).toBe(true);
    expect(seen[0].count).toBeGreaterThan(20);
    expect(seen[0].count).toBeLessThan(31);
  }, 60_000);

  it('end at 8 MiB when filtered and on the tenant-wide log too', async () => {
    const filtered = await walk(`/projects/${projectId}/audit-logs`, '&action=connector.create');
    expect(filtered.found).toEqual((await stored()).slice(1)); // all but project.create
    expect(filtered.seen[0].hasMore).toBe(true);
    expect(filtered.seen[0].count).toBeLessThan(30);
    const tenantWide = await walk('/audit-logs');
    const own = new Set(await stored());
    expect(tenantWide.found.filter((id) => own.has(id))).toEqual([...own]);
    expect(tenantWide.seen[0].hasMore).toBe(true);
  }, 60_000);

  it('hold one entry larger than the whole budget alone, then go on after it', async () => {
    const path = `/projects/${projectId}/audit-logs`;
    const before = await stored();
    const { tenantId } = (await svc.service.ctx.db.get<{ tenantId: string }>(
      'SELECT tenant_id AS "tenantId" FROM audit_logs WHERE project_id = ? LIMIT 1',
      [projectId],
    ))!;
    const event = (name: string, diff: Record<string, { before: unknown; after: unknown }> | null) => ({
      tenantId,
      projectId,
      actor: { type: 'user' as const, id: 'usr_x', name: 'x@example.com' },
      action: 'connector.update',
      resourceType: 'connector',
      resourceId: `con_${name}`,
      resourceName: name,
      requestId: `req-${name}`,
      statusCode: 200,
      diff,
      timestamp: new Date().toISOString(),
    });
    // Written straight to the log, then made huge as an entry from before the 64 KiB bound could be
    // (the API takes bodies of 1 MiB at most; a bulk write's entry could hold more).
    await svc.service.ctx.audit.record(event('huge', null));
    await svc.service.ctx.audit.record(event('small', null));
    const huge = JSON.stringify({ description: { before: null, after: 'x'.repeat(PAGE_BYTES + 1_000) } });
    await svc.service.ctx.db.run("UPDATE audit_logs SET diff = ? WHERE resource_id = 'con_huge'", [huge]);
    const all = await stored();
    expect(all.length).toBe(before.length + 2);
    const [hugeId, small] = all.slice(-2);
    // From just before the huge one: a page of it alone, then the small one after it.
    const start = await svc.ok<ListPage>(t, 'GET', `${path}?limit=100`);
    let cursor = start.next_cursor;
    const pages: string[][] = [start.data.map((e) => e.id)];
    while (cursor) {
      const page = await svc.ok<ListPage>(t, 'GET', `${path}?limit=100&cursor=${encodeURIComponent(cursor)}`);
      pages.push(page.data.map((e) => e.id));
      cursor = page.next_cursor;
    }
    expect(pages.flat()).toEqual(all);
    expect(pages).toContainEqual([hugeId]);
    expect(pages[pages.length - 1]).toEqual([small]);
  }, 60_000);
});
