import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { connectorBody, expectValidation } from './fixtures.js';

let svc: TestService;
let t: TestTenant;
let projectId: string;
let connectors: string;
/** Ids of the 120 connectors, in creation order. */
const created: string[] = [];

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  projectId = (await svc.project(t, 'paging')).id;
  connectors = `/projects/${projectId}/connectors`;
  // Sequential, so creation order is known.
  for (let i = 0; i < 120; i++)
    created.push((await svc.ok(t, 'POST', connectors, { body: connectorBody(`c-${String(i).padStart(3, '0')}`) })).id);
});
afterAll(() => svc?.close());

interface Page {
  data: { id: string; name: string }[];
  next_cursor?: string;
  has_more: boolean;
}

async function walk(path: string, limit: number, between?: (page: number) => Promise<void>): Promise<{ ids: string[]; pages: Page[] }> {
  const ids: string[] = [];
  const pages: Page[] = [];
  let cursor: string | undefined;
  for (let n = 0; n < 1000; n++) {
    const page = await svc.ok<Page>(t, 'GET', path, { query: { limit, cursor } });
    pages.push(page);
    ids.push(...page.data.map((x) => x.id));
    if (!page.has_more) {
      expect(page).not.toHaveProperty('next_cursor');
      return { ids, pages };
    }
    expect(page.next_cursor).toEqual(expect.any(String));
    cursor = page.next_cursor;
    await between?.(n);
  }
  throw new Error('pagination did not end');
}

describe('page size', () => {
  it('defaults to 50 items', async () => {
    const page = await svc.ok<Page>(t, 'GET', connectors);
    expect(page.data).toHaveLength(50);
    expect(page.data.map((x) => x.id)).toEqual(created.slice(0, 50));
    expect(page.has_more).toBe(true);
    expect(page.next_cursor).toEqual(expect.any(String));
  });

  it('accepts 1 and 100', async () => {
    expect((await svc.ok<Page>(t, 'GET', connectors, { query: { limit: 1 } })).data.map((x) => x.id)).toEqual([created[0]]);
    expect((await svc.ok<Page>(t, 'GET', connectors, { query: { limit: 100 } })).data).toHaveLength(100);
  });

  it.each([['101'], ['0'], ['-1'], ['abc'], ['2.5'], ['1000000']])('rejects limit=%s with a validation_error on limit', async (limit) => {
    const error = expectValidation(await svc.call(t, 'GET', connectors, { query: { limit } }), ['limit']);
    expect(error.details![0].message.length).toBeGreaterThan(0);
  });

  it('rejects an unknown query parameter', async () => {
    expectValidation(await svc.call(t, 'GET', connectors, { query: { page: 2 } }), ['page']);
  });
});

describe('walking next_cursor', () => {
  it('yields 120 connectors exactly once, in creation order, with limit=25', async () => {
    const { ids, pages } = await walk(connectors, 25);
    expect(pages.map((p) => p.data.length)).toEqual([25, 25, 25, 25, 20]);
    expect(pages.map((p) => p.has_more)).toEqual([true, true, true, true, false]);
    expect(ids).toEqual(created);
    expect(new Set(ids).size).toBe(120);
  });

  it('ends with has_more false when the last page is exactly full', async () => {
    const { pages, ids } = await walk(connectors, 40);
    expect(pages.map((p) => p.data.length)).toEqual([40, 40, 40]);
    expect(pages[2].has_more).toBe(false);
    expect(ids).toEqual(created);
  });

  it('serves the same page again for the same cursor (cursors are stateless)', async () => {
    const first = await svc.ok<Page>(t, 'GET', connectors, { query: { limit: 10 } });
    const a = await svc.ok<Page>(t, 'GET', connectors, { query: { limit: 10, cursor: first.next_cursor } });
    const b = await svc.ok<Page>(t, 'GET', connectors, { query: { limit: 10, cursor: first.next_cursor } });
    expect(a).toEqual(b);
    expect(a.data.map((x) => x.id)).toEqual(created.slice(10, 20));
  });

  it('keeps creation order when items were updated in another order (the page is built by the database)', async () => {
    const project = await svc.project(t, 'paging-updated');
    const base = `/projects/${project.id}/connectors`;
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await svc.ok(t, 'POST', base, { body: connectorBody(`u${i}`) })).id);
    // Updated newest first: PostgreSQL writes each new row version after the others, so the
    // table's physical order is now the reverse of creation order for these.
    for (const id of [...ids].reverse()) await svc.ok(t, 'PATCH', `${base}/${id}`, { body: { credentials: { username: `u-${id}` } } });
    const { ids: walked, pages } = await walk(base, 5);
    expect(walked).toEqual(ids);
    expect(pages.map((p) => p.data.length)).toEqual([5, 5, 2]);
    const whole = await svc.ok<Page>(t, 'GET', base, { query: { limit: 12 } });
    expect(whole.data.map((x) => x.id)).toEqual(ids);
    expect(whole.has_more).toBe(false);
  });

  it('skips deleted items without losing its place', async () => {
    const project = await svc.project(t, 'paging-delete');
    const base = `/projects/${project.id}/connectors`;
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await svc.ok(t, 'POST', base, { body: connectorBody(`d${i}`) })).id);
    const first = await svc.ok<Page>(t, 'GET', base, { query: { limit: 4 } });
    // Delete the last item of the first page and the first item of the next one.
    await svc.ok(t, 'DELETE', `${base}/${ids[3]}`);
    await svc.ok(t, 'DELETE', `${base}/${ids[4]}`);
    const second = await svc.ok<Page>(t, 'GET', base, { query: { limit: 4, cursor: first.next_cursor } });
    expect(second.data.map((x) => x.id)).toEqual(ids.slice(5, 9));
  });
});

describe('bad cursors (400 validation_error on cursor)', () => {
  let cursor: string;
  beforeAll(async () => {
    cursor = (await svc.ok<Page>(t, 'GET', connectors, { query: { limit: 5 } })).next_cursor!;
  });

  it.each([['garbage'], ['a.b'], ['a.b.c'], [''], ['.'], ['eyJzIjoxLCJxIjoieCJ9']])('rejects the garbled cursor %j', async (bad) => {
    expectValidation(await svc.call(t, 'GET', connectors, { query: { cursor: bad } }), ['cursor']);
  });

  it('rejects the cursor with any one character changed', async () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const failures: string[] = [];
    for (let i = 0; i < cursor.length; i++) {
      if (cursor[i] === '.') continue;
      const replacement = alphabet[(alphabet.indexOf(cursor[i]) + 1) % alphabet.length];
      const tampered = cursor.slice(0, i) + replacement + cursor.slice(i + 1);
      const res = await svc.call(t, 'GET', connectors, { query: { cursor: tampered } });
      if (res.status !== 400 || res.body?.error?.details?.[0]?.field !== 'cursor') failures.push(`position ${i}: ${res.status}`);
    }
    expect(failures).toEqual([]);
  });

  it('rejects a cursor forged with a bigger position', async () => {
    const [payload, signature] = cursor.split('.');
    const decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    const forged = `${Buffer.from(JSON.stringify({ ...decoded, s: decoded.s + 50 })).toString('base64url')}.${signature}`;
    expectValidation(await svc.call(t, 'GET', connectors, { query: { cursor: forged } }), ['cursor']);
  });

  it('rejects a cursor from another list: pipelines, another project, another tenant', async () => {
    const pipelines = `/projects/${projectId}/pipelines`;
    for (let i = 0; i < 3; i++) {
      await svc.ok(t, 'POST', pipelines, {
        body: { name: `pl${i}`, steps: [{ name: 's', type: 'connector_sync', connector_id: created[0] }] },
      });
    }
    const pipelineCursor = (await svc.ok<Page>(t, 'GET', pipelines, { query: { limit: 1 } })).next_cursor!;
    expectValidation(await svc.call(t, 'GET', connectors, { query: { cursor: pipelineCursor } }), ['cursor']);
    expectValidation(await svc.call(t, 'GET', pipelines, { query: { cursor } }), ['cursor']);

    const other = await svc.project(t, 'paging-other');
    for (let i = 0; i < 3; i++) await svc.ok(t, 'POST', `/projects/${other.id}/connectors`, { body: connectorBody(`o${i}`) });
    const otherCursor = (await svc.ok<Page>(t, 'GET', `/projects/${other.id}/connectors`, { query: { limit: 1 } })).next_cursor!;
    expectValidation(await svc.call(t, 'GET', connectors, { query: { cursor: otherCursor } }), ['cursor']);
    expectValidation(await svc.call(t, 'GET', `/projects/${other.id}/connectors`, { query: { cursor } }), ['cursor']);

    // A list of another shape (projects, tenant level) rejects it too.
    expectValidation(await svc.call(t, 'GET', '/projects', { query: { cursor } }), ['cursor']);

    const t2 = await svc.tenant();
    const p2 = await svc.project(t2, 'paging');
    expectValidation(await svc.call(t2, 'GET', `/projects/${p2.id}/connectors`, { query: { cursor } }), ['cursor']);
  });
});

describe('stability under concurrent inserts', () => {
  it('never repeats an item and sees every item that existed before the walk started', async () => {
    const project = await svc.project(t, 'paging-concurrent');
    const base = `/projects/${project.id}/connectors`;
    const before: string[] = [];
    for (let i = 0; i < 60; i++) before.push((await svc.ok(t, 'POST', base, { body: connectorBody(`pre-${i}`) })).id);

    const inserted: string[] = [];
    let stop = false;
    const writer = (async () => {
      for (let i = 0; !stop && i < 200; i++) {
        const batch = await Promise.all(
          Array.from({ length: 3 }, (_, j) => svc.ok(t, 'POST', base, { body: connectorBody(`during-${i}-${j}`) })),
        );
        inserted.push(...batch.map((x) => x.id));
      }
    })();
    // Also insert between pages, so every page boundary races with writes.
    const { ids } = await walk(base, 7, async () => {
      inserted.push((await svc.ok(t, 'POST', base, { body: connectorBody(`between-${inserted.length}-${Math.random()}`) })).id);
    });
    stop = true;
    await writer;

    expect(new Set(ids).size, 'an item was seen twice').toBe(ids.length);
    for (const id of before) expect(ids, `pre-existing ${id} missed`).toContain(id);
    // The pre-existing items come first, in creation order.
    expect(ids.slice(0, 60)).toEqual(before);
    // Everything seen is a real connector of this project.
    const known = new Set([...before, ...inserted]);
    for (const id of ids) expect(known.has(id), `unknown ${id}`).toBe(true);
    expect(inserted.length).toBeGreaterThan(0);
  });
});

describe('other paginated lists', () => {
  const collect = async (tenant: TestTenant, path: string, limit: number) => {
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await svc.ok<Page>(tenant, 'GET', path, { query: { limit, cursor } });
      ids.push(...page.data.map((x) => x.id));
      cursor = page.next_cursor;
      expect(page.has_more).toBe(cursor !== undefined);
    } while (cursor);
    return ids;
  };

  it('paginates projects and users with the same envelope', async () => {
    const t3 = await svc.tenant();
    const projects: string[] = [];
    for (let i = 0; i < 7; i++) projects.push((await svc.project(t3, `pp${i}`)).id);
    expect(await collect(t3, '/projects', 3)).toEqual(projects);
    const users: string[] = [];
    for (let i = 0; i < 4; i++)
      users.push((await svc.ok(t3, 'POST', '/users', { body: { email: `u${i}@example.com`, role: 'read-only' } })).id);
    const listed = await collect(t3, '/users', 2);
    expect(listed).toHaveLength(5);
    expect(listed.slice(1)).toEqual(users);
  });
});
