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
