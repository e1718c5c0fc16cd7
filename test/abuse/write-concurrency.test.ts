import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../support/service.js';
import { lockRow } from '../../src/service/writes.js';
import { WRITE_TX_PER_TENANT } from '../../src/service/tenant-limits.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Security audit: a write takes its pool connection, then waits for its project's row lock. The
 * pool (10 connections on PostgreSQL) was first come, first served, so one read-write key's 50
 * concurrent PATCHes held 9 of 10 connections waiting on one lock, and another tenant's GETs
 * waited for a connection (p50 2 ms to about 1 s). Now at most WRITE_TX_PER_TENANT write
 * transactions of a tenant are open at once; the rest wait before taking a connection.
 *
 * The project's lock is held here for the whole attack (as a long write would hold it), so every
 * write that opens its transaction stays open: without the limit all of them would.
 */
let svc: TestService;
let owner: TestTenant;
let bystander: TestTenant;
let projectId: string;
let tenantId: string;
let key: string;

beforeAll(async () => {
  svc = await startTestService();
  [owner, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  projectId = (await svc.project(owner, 'writes')).id;
  key = (await svc.apiKey(owner, projectId, 'read-write')).key;
  tenantId = (await svc.service.ctx.db.get<{ tenant_id: string }>('SELECT tenant_id FROM resources WHERE id = ?', [projectId]))!.tenant_id;
  // Rate-limit permits are reserved by a write, in batches that double (rate-limit.ts): on SQLite
  // that write would wait for the writer held below, so the owner's PATCHes and the bystander's
  // GETs reserve theirs before (1 + 2 + ... + 64 by 70 requests, 57 left unless the minute ends).
  const warm = await svc.ok<{ id: string }>(owner, 'POST', `/projects/${projectId}/connectors`, {
    body: { name: 'warm-up', connector_type: 'salesforce', selected_tables: ['public.a'] },
  });
  for (let i = 0; i < 70; i++) {
    await svc.ok(owner, 'PATCH', `/projects/${projectId}/connectors/${warm.id}`, {
      token: key,
      body: { selected_tables: [`public.w${i}`] },
    });
    await svc.ok(bystander, 'GET', '/projects?limit=1');
  }
}, 60_000);
afterAll(() => svc?.close());

/** Counts the store's open transactions (begun, not ended) and the most at once. */
function countTransactions() {
  const db = svc.service.ctx.db;
  const tx = db.tx.bind(db);
  const seen = { open: 0, most: 0 };
  db.tx = async (fn) => {
    seen.most = Math.max(seen.most, ++seen.open);
    try {
      return await tx(fn);
    } finally {
      seen.open--;
    }
  };
  return { seen, restore: () => (db.tx = tx) };
}

describe('concurrent writes of one tenant', () => {
  it('wait for a turn without holding a connection while the project is locked, and all land', async () => {
    const base = `/projects/${projectId}/connectors`;
    const c = await svc.ok<{ id: string }>(owner, 'POST', base, {
      body: { name: 'locked', connector_type: 'salesforce', selected_tables: ['public.a'] },
    });
    // A write of the project holds its lock (on PostgreSQL a row lock and one pool connection; on
    // SQLite the single writer) until released.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // Released after the checks below; at the latest after 5 s, so that a bystander stuck behind
    // the lock (without the limit) gets its answer late and the test fails instead of hanging.
    const latest = setTimeout(release, 5_000);
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = svc.service.ctx.db.tx(async (q) => {
      await lockRow(svc.service.ctx, q, tenantId, projectId);
      locked();
      await held;
    });
    await isLocked;
    const { seen, restore } = countTransactions();
    try {
      const writes = Array.from({ length: 30 }, (_, i) =>
        svc.call(owner, 'PATCH', `${base}/${c.id}`, { token: key, body: { selected_tables: [`public.t${i}`] } }),
      );
      const meanwhile = () => new Promise((r) => setTimeout(r, 1_500));
      if (testStore() === 'postgres') {
        // Meanwhile another tenant is served: its reads need a pool connection. (On SQLite the
        // single writer is held here, which some of its requests wait for whatever the limit.)
        const { probe } = await whileServingOther(svc, bystander, meanwhile);
        expect(probe.failures).toEqual([]);
        expect(probe.count).toBeGreaterThan(5);
        expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
      } else await meanwhile();
      // One more for a transaction of the service's own (its runtime) that may begin meanwhile.
      expect(seen.most).toBeLessThanOrEqual(WRITE_TX_PER_TENANT + 1);
      release();
      await holder;
      const results = await Promise.all(writes);
      expect(results.map((r) => r.status)).toEqual(Array(30).fill(200));
      const stored = await svc.ok<{ selected_tables: string[] }>(owner, 'GET', `${base}/${c.id}`);
      expect(stored.selected_tables).toHaveLength(1);
      expect(results.map((r) => r.body.selected_tables[0])).toContain(stored.selected_tables[0]);
    } finally {
      clearTimeout(latest);
      release();
      restore();
    }
  }, 30_000);

  it('of several projects, and another tenant writing meanwhile, all land', async () => {
    // Creates in two projects and deletes, interleaved: nothing waits for a turn it already holds.
    const other = (await svc.project(owner, 'writes-2')).id;
    const { result, probe } = await whileServingOther(svc, bystander, () =>
      Promise.all([
        ...Array.from({ length: 40 }, (_, i) =>
          svc.call(owner, 'POST', `/projects/${i % 2 ? projectId : other}/connectors`, {
            body: { name: `many-${i}`, connector_type: 'salesforce', selected_tables: ['public.a'] },
          }),
        ),
        ...Array.from({ length: 5 }, (_, i) => svc.call(bystander, 'POST', '/projects', { body: { name: `bystander-${i}` } })),
      ]),
    );
    expect(result.map((r) => r.status)).toEqual(Array(45).fill(201));
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    const deletes = await Promise.all(
      result.slice(0, 40).map((r) => svc.call(owner, 'DELETE', `/projects/${r.body.project_id}/connectors/${r.body.id}`)),
    );
    expect(deletes.map((r) => r.status)).toEqual(Array(40).fill(204));
  }, 30_000);
});
