import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { startTestService, testStore, type TestService } from '../../support/service.js';
import type { Db, SqlValue } from '../../../src/service/store/db.js';

/**
 * One tenant must not slow another down (issue 18). A list's page statement is prepared once per
 * connection, and PostgreSQL may then run it with a generic plan, chosen without the tenant's
 * values. That plan must still walk the tenant's own rows (the index on tenant, project, kind and
 * seq), never the whole table in `seq` order filtering by tenant: for a small tenant beside a large
 * one that would read the large tenant's rows on every list.
 */
const BIG = 20_000;
let svc: TestService;
let listSql: { sql: string; params: SqlValue[] } | undefined;
let big: { tenantId: string; projectId: string };

/** EXPLAIN ANALYZE of the captured list statement, prepared, under each plan_cache_mode. */
async function plansOf(captured: { sql: string; params: SqlValue[] }, tag: string): Promise<Record<string, string>> {
  let n = 0;
  const text = captured.sql.replace(/\?/g, () => `$${++n}`);
  const client = new pg.Client({ connectionString: svc.service.ctx.options.databaseUrl });
  await client.connect();
  try {
    const plans: Record<string, string> = {};
    for (const mode of ['force_generic_plan', 'force_custom_plan']) {
      await client.query(`SET plan_cache_mode = ${mode}`);
      const name = `${tag}_${mode.replace(/[^a-z]/g, '')}`;
      await client.query(`PREPARE ${name} AS ${text}`);
      const args = captured.params.map((p) => (typeof p === 'number' ? String(p) : `'${String(p).replace(/'/g, "''")}'`)).join(', ');
      const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT TEXT) EXECUTE ${name}(${args})`);
      plans[mode] = rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
    }
    return plans;
  } finally {
    await client.end();
  }
}

/** The plan walks the tenant's own index range: no sequential scan, no primary-key walk, few rows filtered out. */
function expectOwnRange(plans: Record<string, string>) {
  for (const [mode, plan] of Object.entries(plans)) {
    expect(plan, `${mode}:\n${plan}`).toMatch(/resources_kind_seq/);
    expect(plan, `${mode}:\n${plan}`).not.toMatch(/Seq Scan|resources_pkey/);
    const removed = [...plan.matchAll(/Rows Removed by Filter: (\d+)/g)].map((m) => Number(m[1]));
    expect(Math.max(0, ...removed), `${mode}:\n${plan}`).toBeLessThan(100);
  }
}

beforeAll(async () => {
  if (testStore() !== 'postgres') return;
  svc = await startTestService();
  const bigTenant = await svc.tenant();
  const bigProject = (await svc.project(bigTenant, 'big')).id;
  const bigTenantId = (await svc.service.ctx.tenants.bySlug(bigTenant.slug))!.id;
  big = { tenantId: bigTenantId, projectId: bigProject };
  await svc.service.ctx.db.run(
    `INSERT INTO resources (id, tenant_id, project_id, kind, parent_id, name, data, secrets, created_at, updated_at)
     SELECT 'con_big' || g, ?, ?, 'connector', '', 'big-' || g, '{}', NULL, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'
     FROM generate_series(1, ${BIG}) g`,
    [bigTenantId, bigProject],
  );
  const db = svc.service.ctx.db as Db;
  const rows = db.rows;
  db.rows = (sql: string, params?: SqlValue[]) => {
    if (/string_agg/.test(sql)) listSql = { sql, params: params ?? [] };
    return rows.call(db, sql, params);
  };
  await db.run('ANALYZE');
});
afterAll(() => svc?.close());

describe.skipIf(testStore() !== 'postgres')("a small tenant's list beside a large one (PostgreSQL plans)", () => {
  it('uses the tenant index in the generic plan as in the custom one, and reads only its own rows', async () => {
    const small = await svc.tenant();
    const project = (await svc.project(small, 'small')).id;
    for (let i = 0; i < 10; i++)
      await svc.ok(small, 'POST', `/projects/${project}/connectors`, {
        body: { name: `c${i}`, connector_type: 'salesforce', selected_tables: ['Account'] },
      });
    const page = await svc.ok<{ data: unknown[]; has_more: boolean }>(small, 'GET', `/projects/${project}/connectors`, {
      query: { limit: 100 },
    });
    expect(page.data).toHaveLength(10);
    expect(listSql).toBeDefined();

    expectOwnRange(await plansOf(listSql!, 'small'));
  }, 60_000);

  it('reads a late page of the large tenant through the same range (seq bounds the index scan, not a filter)', async () => {
    const last = (await svc.service.ctx.db.get<{ seq: number }>('SELECT max(seq) AS seq FROM resources WHERE tenant_id = ?', [
      big.tenantId,
    ]))!;
    listSql = undefined;
    const page = await svc.service.ctx.resources.listPage({ ...big, kind: 'connector', afterSeq: Number(last.seq) - 50 }, 100);
    expect(page.count).toBe(50);
    expect(page.lastSeq).toBe(Number(last.seq));
    expectOwnRange(await plansOf(listSql!, 'late'));
  });
});
