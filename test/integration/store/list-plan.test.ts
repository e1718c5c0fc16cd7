import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { PLAN_EACH_TIME, type Db, type SqlValue } from '../../../src/service/store/db.js';
import { PAGE_BYTES } from '../../../src/service/pagination.js';

/**
 * One tenant must not slow another down (issue 18). A statement's plan must walk its scope's own
 * index range and end where the scope does: never the whole table in `seq` order filtering by
 * tenant (for a small tenant beside a large one that read the large tenant's rows on every call),
 * never on through the tenant's other rows after the scope (a last page, an empty list). Each case
 * below puts a small tenant beside one with BIG rows of the same table, captures the real statement
 * the service runs, and EXPLAINs it with its values; a prepared statement (not planEachTime) also
 * under the generic plan PostgreSQL may switch to, chosen without the values. The pages a plan
 * touches are bounded too: a scan that runs past its scope filters nothing out.
 */
const BIG = 20_000;
let svc: TestService;
let big: { tenantId: string; projectId: string };
const captured: { sql: string; params: SqlValue[] }[] = [];

/** The last statement the service ran that matches `pattern` (statements are captured from here on). */
function last(pattern: RegExp): { sql: string; params: SqlValue[] } {
  const found = [...captured].reverse().find((c) => pattern.test(c.sql));
  expect(found, `no statement matching ${pattern}`).toBeDefined();
  return found!;
}

/**
 * EXPLAIN ANALYZE of a captured statement, prepared, under each plan_cache_mode (inside a
 * transaction rolled back); a statement marked planEachTime is only ever planned with its values.
 */
async function plansOf(statement: { sql: string; params: SqlValue[] }, tag: string): Promise<Record<string, string>> {
  let n = 0;
  const text = statement.sql.replace(/\?/g, () => `$${++n}`);
  const client = new pg.Client({ connectionString: svc.service.ctx.options.databaseUrl });
  await client.connect();
  try {
    const plans: Record<string, string> = {};
    const modes = statement.sql.startsWith(PLAN_EACH_TIME) ? ['force_custom_plan'] : ['force_generic_plan', 'force_custom_plan'];
    for (const mode of modes) {
      await client.query('BEGIN');
      await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
      const name = `${tag}_${mode.replace(/[^a-z]/g, '')}`;
      await client.query(`PREPARE ${name} AS ${text}`);
      const args = statement.params.map((p) => (typeof p === 'number' ? String(p) : `'${String(p).replace(/'/g, "''")}'`)).join(', ');
      const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) EXECUTE ${name}(${args})`);
      plans[mode] = rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
      if (process.env.SHOW_PLANS) console.log(tag, mode, text, '\n', plans[mode]);
      await client.query('ROLLBACK');
    }
    return plans;
  } finally {
    await client.end();
  }
}

/** The plan walks the tenant's own index range: no sequential scan, no primary-key walk, few rows filtered out. */
function expectOwnRange(plans: Record<string, string>, index: RegExp) {
  for (const [mode, plan] of Object.entries(plans)) {
    expect(plan, `${mode}:\n${plan}`).toMatch(index);
    expect(plan, `${mode}:\n${plan}`).not.toMatch(/Seq Scan|_pkey/);
    const removed = [...plan.matchAll(/Rows Removed by Filter: (\d+)/g)].map((m) => Number(m[1]));
    expect(Math.max(0, ...removed), `${mode}:\n${plan}`).toBeLessThan(100);
    // Pages the whole statement touched (its top node's count): a scan that does not end where its
    // scope does reads on through the tenant's other rows in the index without filtering any out.
    const touched = Number(/Buffers: shared hit=(\d+)/.exec(plan)?.[1] ?? 0);
    expect(touched, `${mode}:\n${plan}`).toBeLessThan(MAX_BUFFERS);
  }
}

/** Pages a statement over one small scope (or one page) may touch; the big tenant's rows span hundreds. */
const MAX_BUFFERS = 40;

/** Captures every statement the service's database runs outside transactions. */
function captureStatements(db: Db) {
  for (const method of ['all', 'get', 'rows', 'run'] as const) {
    const original = db[method] as (sql: string, params?: SqlValue[]) => Promise<unknown>;
    (db as unknown as Record<string, unknown>)[method] = (sql: string, params?: SqlValue[]) => {
      captured.push({ sql, params: params ?? [] });
      return original.call(db, sql, params);
    };
  }
}

async function seedBigTenant(db: Db) {
  const [tenantId, projectId] = [big.tenantId, big.projectId];
  const stamp = "'2026-01-01T00:00:00Z'";
  await db.run(
    `INSERT INTO resources (id, tenant_id, project_id, kind, parent_id, name, data, secrets, created_at, updated_at)
     SELECT 'con_big' || g, ?, ?, 'connector', '', 'big-' || g, '{}', NULL, ${stamp}, ${stamp} FROM generate_series(1, ${BIG}) g`,
    [tenantId, projectId],
  );
  await db.run(
    `INSERT INTO resources (id, tenant_id, project_id, kind, parent_id, name, data, secrets, created_at, updated_at)
     SELECT 'run_big' || g, ?, ?, 'run', 'pip_big', 'run_big' || g, '{"status":"succeeded"}', NULL, ${stamp}, ${stamp}
     FROM generate_series(1, ${BIG}) g`,
    [tenantId, projectId],
  );
  await db.run(
    `INSERT INTO audit_logs (id, tenant_id, project_id, ts, actor_type, actor_id, actor_name, action, resource_type, resource_id, resource_name, request_id, outcome, status_code, diff)
     SELECT 'aud_big' || g, ?, ?, ${stamp}, 'user', NULL, 'big', 'connector.update', 'connector', NULL, NULL, 'req_big', 'success', 200, NULL
     FROM generate_series(1, ${BIG}) g`,
    [tenantId, projectId],
  );
  await db.run(
    `INSERT INTO notification_deliveries (id, tenant_id, project_id, channel_id, event_type, alert_id, status, status_code, attempts, message, created_at)
     SELECT 'dlv_big' || g, ?, ?, 'nch_big', 'alert_fired', NULL, 'delivered', 200, 1, 'ok', ${stamp} FROM generate_series(1, ${BIG}) g`,
    [tenantId, projectId],
  );
}

beforeAll(async () => {
  if (testStore() !== 'postgres') return;
  svc = await startTestService();
  const bigTenant = await svc.tenant();
  big = {
    tenantId: (await svc.service.ctx.tenants.bySlug(bigTenant.slug))!.id,
    projectId: (await svc.project(bigTenant, 'big')).id,
  };
  const db = svc.service.ctx.db as Db;
  await seedBigTenant(db);
  await db.run('ANALYZE');
  captureStatements(db);
}, 60_000);
afterAll(() => svc?.close());

/** A new small tenant and project, with `connectors` connectors made through the API. */
async function smallTenant(connectors: number): Promise<{ tenant: TestTenant; tenantId: string; projectId: string }> {
  const tenant = await svc.tenant();
  const projectId = (await svc.project(tenant, 'small')).id;
  for (let i = 0; i < connectors; i++)
    await svc.ok(tenant, 'POST', `/projects/${projectId}/connectors`, {
      body: { name: `c${i}`, connector_type: 'salesforce', selected_tables: ['Account'] },
    });
  return { tenant, tenantId: (await svc.service.ctx.tenants.bySlug(tenant.slug))!.id, projectId };
}

describe.skipIf(testStore() !== 'postgres')('a small tenant beside a large one (PostgreSQL plans)', () => {
  it('lists its resources through the tenant index', async () => {
    const small = await smallTenant(10);
    const page = await svc.ok<{ data: unknown[] }>(small.tenant, 'GET', `/projects/${small.projectId}/connectors`, {
      query: { limit: 100 },
    });
    expect(page.data).toHaveLength(10);
    expectOwnRange(await plansOf(last(/string_agg/), 'small'), /resources_kind_seq/);
  }, 60_000);

  it('reads a late page of the large tenant through the same range (seq bounds the index scan, not a filter)', async () => {
    const end = (await svc.service.ctx.db.get<{ seq: number }>('SELECT max(seq) AS seq FROM resources WHERE tenant_id = ? AND kind = ?', [
      big.tenantId,
      'connector',
    ]))!;
    const { page } = await svc.service.ctx.resources.listPage(
      { ...big, kind: 'connector', afterSeq: Number(end.seq) - 50 },
      100,
      PAGE_BYTES,
    );
    expect(page.count).toBe(50);
    expect(page.lastSeq).toBe(Number(end.seq));
    expectOwnRange(await plansOf(last(/string_agg/), 'late'), /resources_kind_seq/);
  });

  it('ends the last page and an empty list of the large tenant at their scope: the rest of the tenant is not read', async () => {
    const end = (await svc.service.ctx.db.get<{ seq: number }>('SELECT max(seq) AS seq FROM resources WHERE tenant_id = ? AND kind = ?', [
      big.tenantId,
      'connector',
    ]))!;
    // The last 50 connectors: after them in the index come the project's 20,000 runs.
    const last50 = await svc.service.ctx.resources.listPage({ ...big, kind: 'connector', afterSeq: Number(end.seq) - 50 }, 100, PAGE_BYTES);
    expect(last50.page.count).toBe(50);
    expectOwnRange(await plansOf(last(/string_agg/), 'lastpage'), /resources_kind_seq/);
    // No alert rules: after them come the 20,000 connectors and the 20,000 runs.
    const none = await svc.service.ctx.resources.listPage({ ...big, kind: 'alert_rule', afterSeq: 0 }, 100, PAGE_BYTES);
    expect(none.page.count).toBe(0);
    // With no alert rule in the table, the kind's own index (kind, seq) finds none at once.
    expectOwnRange(await plansOf(last(/string_agg/), 'empty'), /resources_kind_seq|resources_kind /);
    // The newest run of a pipeline with none, below the 20,000 runs of another.
    expect(await svc.service.ctx.resources.newestChild({ ...big, kind: 'run', parentId: 'pip_aaa' })).toBeUndefined();
    expectOwnRange(await plansOf(last(/seq DESC LIMIT 1$/), 'nonewest'), /resources_listing/);
  });

  it("lists a small pipeline's runs in the large project, beside the 20,000 runs of another, through the listing index", async () => {
    const resources = svc.service.ctx.resources;
    const scope = { ...big, kind: 'run', parentId: 'pip_other' };
    for (let i = 0; i < 3; i++)
      await resources.insert({ ...scope, id: `run_other${i}`, name: `run_other${i}`, data: { status: 'succeeded' }, secrets: null });
    expect((await resources.listPage(scope, 100, PAGE_BYTES)).page.count).toBe(3);
    expectOwnRange(await plansOf(last(/string_agg/), 'otherruns'), /resources_listing/);
  });

  it("lists a parent's runs, finds its running run and prunes its history through its project's indexes", async () => {
    const small = await smallTenant(0);
    const resources = svc.service.ctx.resources;
    const scope = { tenantId: small.tenantId, projectId: small.projectId, kind: 'run', parentId: 'pip_small' };
    for (let i = 0; i < 3; i++)
      await resources.insert({ ...scope, id: `run_small${i}`, name: `run_small${i}`, data: { status: 'succeeded' }, secrets: null });
    expect((await resources.listPage(scope, 100, PAGE_BYTES)).page.count).toBe(3);
    // The small tenant's project holds these 3 runs only: its kind index serves as well as the listing one.
    expectOwnRange(await plansOf(last(/string_agg/), 'runs'), /resources_listing|resources_kind_seq/);
    expect(await resources.list({ ...scope, where: { status: 'running' }, limit: 1 })).toEqual([]);
    expectOwnRange(await plansOf(last(/SELECT seq, id/), 'running'), /resources_listing|resources_kind_seq/);
    await resources.pruneChildren(scope, 1, 'running');
    expect((await resources.listPage(scope, 100, PAGE_BYTES)).page.count).toBe(1);
    expectOwnRange(await plansOf(last(/seq DESC LIMIT 1 OFFSET/), 'cut'), /resources_listing|resources_kind_seq/);
    // Planned with its values (planEachTime): either index of the tenant's project, as its statistics say.
    expectOwnRange(await plansOf(last(/DELETE FROM resources WHERE .*status/), 'prune'), /resources_listing|resources_kind_seq/);
  }, 60_000);

  it('deletes a resource with what it owns through the listing index', async () => {
    const small = await smallTenant(1);
    const connectors = await svc.ok<{ data: { id: string }[] }>(small.tenant, 'GET', `/projects/${small.projectId}/connectors`);
    await svc.ok(small.tenant, 'DELETE', `/projects/${small.projectId}/connectors/${connectors.data[0].id}`);
    // The service deletes inside a transaction, which is not captured: EXPLAIN the same store call made outside one.
    await svc.service.ctx.resources.deleteChildren({ tenantId: small.tenantId, projectId: small.projectId, parentId: 'nothing' }, ['run']);
    expectOwnRange(await plansOf(last(/^DELETE FROM resources/), 'children'), /resources_listing|resources_kind_seq/);
  }, 60_000);

  it('lists its audit log through its own index range', async () => {
    const small = await smallTenant(3);
    const page = await svc.ok<{ data: unknown[] }>(small.tenant, 'GET', `/projects/${small.projectId}/audit-logs`, {
      query: { limit: 100 },
    });
    expect(page.data.length).toBeGreaterThanOrEqual(3);
    // Its tenant has one project: the tenant's index serves as well as the project's.
    expectOwnRange(await plansOf(last(/SELECT \*, .* FROM audit_logs WHERE/), 'audit'), /audit_logs_listing|audit_logs_tenant/);
    // A filtered page: the scan window's end, then the page bounded by it.
    const filtered = await svc.ok<{ data: unknown[] }>(small.tenant, 'GET', `/projects/${small.projectId}/audit-logs`, {
      query: { limit: 100, action: 'connector.create' },
    });
    expect(filtered.data).toHaveLength(3);
    // (Anchored: the page's statement holds a `SELECT seq FROM audit_logs` too, the probe for an entry after the page.)
    expectOwnRange(
      await plansOf(last(/^(\/\* planned each time \*\/ )?SELECT seq FROM audit_logs/), 'window'),
      /audit_logs_listing|audit_logs_tenant/,
    );
    expectOwnRange(await plansOf(last(/SELECT \*, .* FROM audit_logs WHERE/), 'filtered'), /audit_logs_listing|audit_logs_tenant/);
    const tenantWide = await svc.ok<{ data: unknown[] }>(small.tenant, 'GET', '/audit-logs', { query: { limit: 100 } });
    expect(tenantWide.data.length).toBeGreaterThanOrEqual(3);
    expectOwnRange(await plansOf(last(/SELECT \*, .* FROM audit_logs WHERE/), 'tenantwide'), /audit_logs_tenant/);
  }, 60_000);

  it("lists a channel's deliveries through its own index range", async () => {
    const small = await smallTenant(0);
    const channel = await svc.ok<{ id: string }>(small.tenant, 'POST', `/projects/${small.projectId}/notification-channels`, {
      body: { name: 'mail', type: 'email', config: { email_addresses: ['ops@example.com'] } },
    });
    const page = await svc.ok<{ data: unknown[] }>(
      small.tenant,
      'GET',
      `/projects/${small.projectId}/notification-channels/${channel.id}/deliveries`,
    );
    expect(page.data).toEqual([]);
    expectOwnRange(await plansOf(last(/FROM notification_deliveries/), 'deliveries'), /notification_deliveries_channel/);
  }, 60_000);
});
