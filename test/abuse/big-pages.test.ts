import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { LARGE_PAGES_PER_TENANT } from '../../src/service/tenant-limits.js';
import type { ResourceStore } from '../../src/service/store/resources.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Security audit: in a scope holding resources over 64 KiB a list page may hold up to PAGE_BYTES
 * (8 MiB), and nothing bounded how many a tenant read at once: 10 concurrent pages of 1 MB
 * connectors from one read-only key took another tenant's p99 from 22 ms to 1.9 s. Such pages now
 * take one tenant's turn at a time (LARGE_PAGES_PER_TENANT), each after an I/O phase of the event
 * loop, so other requests are read between them; ordinary pages do not wait for that turn.
 */
let svc: TestService;
let owner: TestTenant;
let bystander: TestTenant;
let big: string;
let small: string;
let bigProject: string;
let readOnly: string;

const tables = (bytes: number, tag: string) =>
  Array.from({ length: Math.ceil(bytes / 100) }, (_, i) => `public.t${tag}_${i}_${'x'.repeat(80)}`);

beforeAll(async () => {
  svc = await startTestService();
  [owner, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  const project = await svc.project(owner, 'big-pages');
  bigProject = project.id;
  big = `/projects/${project.id}/connectors`;
  small = `/projects/${(await svc.project(owner, 'small-pages')).id}/connectors`;
  readOnly = (await svc.apiKey(owner, project.id, 'read-only')).key;
  // 10 connectors of 900 KB: a page holds 9 of them (8 MiB).
  for (let i = 0; i < 10; i++)
    await svc.ok(owner, 'POST', big, { body: { name: `c${i}`, connector_type: 'salesforce', selected_tables: tables(900_000, `${i}`) } });
  for (let i = 0; i < 3; i++)
    await svc.ok(owner, 'POST', small, { body: { name: `s${i}`, connector_type: 'salesforce', selected_tables: ['public.a'] } });
}, 60_000);
afterAll(() => svc?.close());

/**
 * Records each call of the store's listPage in the large scope: when it started and ended, in turns of the event
 * loop (a setImmediate chain: work that never yields stays within one turn), and the most at once.
 */
function recordPages() {
  const store = svc.service.ctx.resources as ResourceStore & { listPage: ResourceStore['listPage'] };
  const listPage = store.listPage;
  let turn = 0;
  let counting = true;
  const count = () => {
    if (!counting) return;
    turn++;
    setImmediate(count);
  };
  setImmediate(count);
  const calls: { start: number; end: number }[] = [];
  const seen = { open: 0, most: 0 };
  store.listPage = async (...args) => {
    if (args[0].projectId !== bigProject) return listPage.apply(store, args);
    const call = { start: turn, end: -1 };
    calls.push(call);
    seen.most = Math.max(seen.most, ++seen.open);
    try {
      return await listPage.apply(store, args);
    } finally {
      seen.open--;
      call.end = turn;
    }
  };
  return {
    calls,
    seen,
    restore: () => {
      counting = false;
      store.listPage = listPage;
    },
  };
}

describe('pages of large resources', () => {
  it('are read one at a time per tenant, with the event loop turning between them, while another tenant is served', async () => {
    const pages = recordPages();
    try {
      const { result, probe } = await whileServingOther(svc, bystander, () =>
        Promise.all(Array.from({ length: 8 }, () => svc.call(owner, 'GET', `${big}?limit=100`, { token: readOnly }))),
      );
      for (const r of result) {
        expect(r.status).toBe(200);
        expect(r.body.data).toHaveLength(9);
        expect(r.body.has_more).toBe(true);
      }
      expect(pages.seen.most).toBeLessThanOrEqual(LARGE_PAGES_PER_TENANT);
      // Each page starts in a later turn than the one before ended (on SQLite a read holds the loop:
      // ten read in one turn held every other request for all ten).
      const sorted = [...pages.calls].sort((a, b) => a.start - b.start);
      expect(sorted).toHaveLength(8);
      for (let i = 1; i < sorted.length; i++) expect(sorted[i].start).toBeGreaterThan(sorted[i - 1].end);
      expect(probe.failures).toEqual([]);
      expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    } finally {
      pages.restore();
    }
  }, 30_000);

  it('do not hold up the tenant’s ordinary pages', async () => {
    const store = svc.service.ctx.resources as ResourceStore & { listPage: ResourceStore['listPage'] };
    const listPage = store.listPage;
    // A page of the large scope that does not end until released holds the tenant's turn.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let reading!: () => void;
    const isReading = new Promise<void>((resolve) => (reading = resolve));
    store.listPage = async (query, ...rest) => {
      if (query.projectId === bigProject) {
        reading();
        await held;
      }
      return listPage.call(store, query, ...rest);
    };
    try {
      const blocked = Array.from({ length: LARGE_PAGES_PER_TENANT }, () => svc.call(owner, 'GET', `${big}?limit=1`));
      await isReading;
      const started = performance.now();
      const ordinary = await svc.call(owner, 'GET', `${small}?limit=100`);
      expect(ordinary.status).toBe(200);
      expect(ordinary.body.data).toHaveLength(3);
      expect(performance.now() - started).toBeLessThan(BYSTANDER_MAX_MS);
      release();
      for (const r of await Promise.all(blocked)) expect(r.status).toBe(200);
    } finally {
      release();
      store.listPage = listPage;
    }
  }, 30_000);
});
