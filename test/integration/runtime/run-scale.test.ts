import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import type { Db } from '../../../src/service/store/db.js';
import { countBytesWritten, countRowsRead } from '../../support/db-counters.js';
import { waitForRun } from './helpers.js';
import { bulkInsert, RESOURCE_COLUMNS } from '../../support/bulk.js';
import { walkPages } from '../../support/pages.js';
import { newId } from '../../../src/service/ids.js';
import { PROGRESS_MIN_MS } from '../../../src/service/runtime/runs.js';

/**
 * A run of N units (an apply's changes, a sync's tables) must cost N, not N^2. Before, every unit
 * rewrote the run's record with every unit in it (and an apply, one row holding the whole
 * project's snapshot): 1,000 buckets wrote 810 MB and took 4.5 s of CPU, a sync of 1,000 tables
 * 3.4 s. Progress is now coalesced and the snapshot is one row per resource.
 */
const BUCKETS = 1_000;

describe(`an infrastructure apply of ${BUCKETS.toLocaleString('en-US')} buckets`, () => {
  let svc: TestService;
  let t: TestTenant;
  let base: string;
  let projectId: string;

  beforeAll(async () => {
    svc = await startTestService({ timeScale: 1_000_000 });
    t = await svc.tenant();
    projectId = (await svc.project(t, 'many-buckets')).id;
    base = `/projects/${projectId}/infrastructure`;
    for (let i = 0; i < BUCKETS; i++)
      await svc.ok(t, 'POST', base, { body: { name: `b${i}`, resource_type: 'bucket', provider: 'aws', region: 'eu-west-1' } });
  }, 120_000);
  afterAll(() => svc?.close());

  it('writes about as much as it provisions, and the next plan finds nothing to do', async () => {
    const counter = countBytesWritten(svc.service.ctx.db as Db);
    const applyStarted = performance.now();
    const started = await svc.ok<{ run_id: string }>(t, 'POST', `${base}/apply`, {}, 201);
    // 1,000 buckets took over 15 s on PostgreSQL on a slow, loaded day (2026-11-27): the test's own time, not the helper's default.
    const run = await waitForRun(svc, t, `${base}/runs/${started.run_id}`, 50_000);
    expect(run.status).toBe('succeeded');
    const runMs = performance.now() - applyStarted;
    // Each bucket's snapshot row and status (~1 KB), and the run's coalesced progress (~200 KB a write,
    // at most one per PROGRESS_MIN_MS, so more on a slow machine): 2-8 MB in my runs. Rewriting the
    // snapshot on each change wrote 810 MB; the bound leaves a loaded machine 10 times the writes, or
    // 300 KB per 50 ms of a run that took longer (a slow day), which the old writes exceed either way.
    expect(counter.bytes).toBeLessThan(Math.max(80_000_000, (runMs / PROGRESS_MIN_MS) * 300_000));
    const plan = await svc.ok<{ summary: Record<string, number> }>(t, 'POST', `${base}/plan`, {}, 200);
    expect(plan.summary).toEqual({ create: 0, update: 0, delete: 0, unchanged: BUCKETS });
  }, 60_000);

  it('plans reading at most 500 rows per statement (one read of the whole project held the event loop)', async () => {
    const counter = countRowsRead(svc.service.ctx.db as Db);
    const plan = await svc.ok<{ summary: Record<string, number> }>(t, 'POST', `${base}/plan`, {}, 200);
    expect(plan.summary.create + plan.summary.unchanged).toBe(BUCKETS);
    // The buckets (and their snapshot rows once applied), in pages.
    expect(counter.rows).toBeGreaterThanOrEqual(BUCKETS);
    expect(counter.largest).toBeLessThanOrEqual(500);
  });

  it("reads a project's snapshot stored as one row, and splits it on the next applied change", async () => {
    const other = (await svc.project(t, 'legacy-snapshot')).id;
    const at = `/projects/${other}/infrastructure`;
    const kept = await svc.ok<{ id: string }>(t, 'POST', at, {
      body: { name: 'kept', resource_type: 'bucket', provider: 'aws', region: 'eu-west-1' },
    });
    const gone = await svc.ok<{ id: string }>(t, 'POST', at, {
      body: { name: 'gone', resource_type: 'bucket', provider: 'aws', region: 'eu-west-1' },
    });
    const first = await svc.ok<{ run_id: string }>(t, 'POST', `${at}/apply`, {}, 201);
    await waitForRun(svc, t, `${at}/runs/${first.run_id}`);
    // Rewrite what the apply recorded as the single row earlier versions stored.
    const { db } = svc.service.ctx;
    const tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
    const rows = await db.all<{ name: string; data: string }>(
      'SELECT name, data FROM resources WHERE tenant_id = ? AND project_id = ? AND kind = ?',
      [tenantId, other, 'infrastructure_state'],
    );
    expect(rows.map((r) => r.name).sort()).toEqual([gone.id, kept.id].sort());
    const resources = Object.fromEntries(rows.map((r) => [r.name, JSON.parse(r.data) as unknown]));
    await db.run('DELETE FROM resources WHERE tenant_id = ? AND project_id = ? AND kind = ?', [tenantId, other, 'infrastructure_state']);
    const legacy = JSON.stringify({ resources, applied_at: '2026-01-01T00:00:00Z' });
    await db.run(
      `INSERT INTO resources (id, tenant_id, project_id, kind, parent_id, name, data, created_at, updated_at) VALUES (?, ?, ?, 'infrastructure_state', '', 'provisioned', ?, ?, ?)`,
      [`ifs_${other}`, tenantId, other, legacy, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'],
    );
    expect((await svc.ok<{ summary: Record<string, number> }>(t, 'POST', `${at}/plan`, {}, 200)).summary.unchanged).toBe(2);

    await svc.ok(t, 'DELETE', `${at}/${gone.id}`, {}, 204);
    const second = await svc.ok<{ run_id: string }>(t, 'POST', `${at}/apply`, {}, 201);
    expect((await waitForRun(svc, t, `${at}/runs/${second.run_id}`)).status).toBe('succeeded');
    const after = await db.all<{ name: string }>('SELECT name FROM resources WHERE tenant_id = ? AND project_id = ? AND kind = ?', [
      tenantId,
      other,
      'infrastructure_state',
    ]);
    expect(after.map((r) => r.name)).toEqual([kept.id]);
    expect((await svc.ok<{ summary: Record<string, number> }>(t, 'POST', `${at}/plan`, {}, 200)).summary).toEqual({
      create: 0,
      update: 0,
      delete: 0,
      unchanged: 1,
    });
  });
});

describe('a connector sync of 2,000 tables', () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startTestService({ timeScale: 1_000_000 });
  });
  afterAll(() => svc?.close());

  it("writes each table's progress without rewriting the others each time, and records every table", async () => {
    const t = await svc.tenant();
    const base = `/projects/${(await svc.project(t, 'wide-source')).id}/connectors`;
    const tables = Array.from({ length: 2_000 }, (_, i) => `public.table_${i}`);
    const connector = await svc.ok<{ id: string }>(t, 'POST', base, {
      body: { name: 'wide', connector_type: 'salesforce', selected_tables: tables },
    });
    const counter = countBytesWritten(svc.service.ctx.db as Db);
    const started = await svc.ok<{ run_id: string }>(t, 'POST', `${base}/${connector.id}/sync`, {}, 201);
    const run = await waitForRun(svc, t, `${base}/${connector.id}/runs/${started.run_id}`, 60_000);
    expect(run.status).toBe('succeeded');
    const recorded = (run as unknown as { tables: { table: string; status: string }[] }).tables;
    expect(recorded.map((r) => r.table)).toEqual(tables);
    expect(recorded.every((r) => r.status === 'completed')).toBe(true);
    // A write of the run is ~200 KB at the end, at most one per 50 ms (so more on a slow machine):
    // 43 MB on a loaded CI run. One per table, twice, wrote 2.5 GB (30 s); the bound leaves room.
    expect(counter.bytes).toBeLessThan(250_000_000);
  }, 90_000);
});

describe('an infrastructure apply of 40 buckets', () => {
  let svc: TestService;
  afterAll(() => svc?.close());

  it('runs at most 10 changes at once, as Terraform does by default', async () => {
    // Nominal 1-1.9 s per bucket at 20x: 50-95 ms each, about 0.4 s for the apply.
    svc = await startTestService({ timeScale: 20 });
    const t = await svc.tenant();
    const base = `/projects/${(await svc.project(t, 'parallel')).id}/infrastructure`;
    for (let i = 0; i < 40; i++)
      await svc.ok(t, 'POST', base, { body: { name: `b${i}`, resource_type: 'bucket', provider: 'aws', region: 'eu-west-1' } });
    const started = await svc.ok<{ run_id: string }>(t, 'POST', `${base}/apply`, {}, 201);
    let most = 0;
    for (;;) {
      const run = await svc.ok<{ status: string; changes: { status: string }[] }>(t, 'GET', `${base}/runs/${started.run_id}`);
      most = Math.max(most, run.changes.filter((c) => c.status === 'running').length);
      if (run.status !== 'running') break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(10);
  }, 60_000);
});

describe('a run history of large runs', () => {
  let svc: TestService;
  afterAll(() => svc?.close());

  it('pages end at 8 MB of runs, so a page of 100 is not hundreds of MB, and every run is listed once', async () => {
    svc = await startTestService({ timeScale: 1_000_000 });
    const t = await svc.tenant();
    const projectId = (await svc.project(t, 'big-runs')).id;
    const base = `/projects/${projectId}/connectors`;
    const c = await svc.ok<{ id: string }>(t, 'POST', base, {
      body: { name: 'wide', connector_type: 'snowflake', selected_tables: ['a.b'] },
    });
    const { run_id } = await svc.ok<{ run_id: string }>(t, 'POST', `${base}/${c.id}/sync`);
    const run = await waitForRun(svc, t, `${base}/${c.id}/runs/${run_id}`);
    // Ten runs of about 1.7 MB each (10,000 tables, as a sync of that many records), stored as a sync writes them.
    const tables = Array.from({ length: 10_000 }, (_, i) => ({ ...run.tables[0], table: `schema_${i}.table_${i}` }));
    const tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
    const ids = Array.from({ length: 10 }, () => newId('run'));
    await bulkInsert(svc.service.ctx.db, 'resources', RESOURCE_COLUMNS, 10, (n) => {
      const data = { ...run, id: ids[n], tables };
      return [ids[n], tenantId, projectId, 'run', c.id, ids[n], JSON.stringify(data), run.started_at, run.started_at];
    });
    const { seen, found } = await walkPages(async (cursor) => svc.ok(t, 'GET', `${base}/${c.id}/runs?limit=100${cursor}`));
    expect(found).toEqual([run_id, ...ids]);
    expect(seen.length).toBeGreaterThan(1);
    expect(Math.max(...seen.map((p) => p.count))).toBeLessThanOrEqual(5);
    // Each is the run as a GET gives it.
    const page = await svc.ok<{ data: unknown[] }>(t, 'GET', `${base}/${c.id}/runs?limit=1`);
    expect(page.data).toEqual([await svc.ok(t, 'GET', `${base}/${c.id}/runs/${run_id}`)]);
  }, 120_000);
});
