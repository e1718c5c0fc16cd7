import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { recountUsage as recount } from '../../support/usage.js';
import { migrate } from '../../../src/service/store/migrations.js';
import { installUsageAccounting, tenantUsage } from '../../../src/service/store/usage.js';
import { logStartState } from '../../../src/service/start-report.js';

/**
 * What an upgrade meets (found by installing the previous package, filling it with 100,000
 * resources and upgrading in place): another replica of the older version writing while this one
 * migrates, cursors the older version issued, and an operator who needs to hear what happened.
 */
describe('upgrades', () => {
  let svc: TestService;
  let t: TestTenant;
  let tenantId: string;
  let projectId: string;

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    const project = await svc.project(t, 'upgraded');
    projectId = project.id;
    for (let i = 0; i < 3; i++)
      await svc.ok(t, 'POST', `/projects/${project.id}/connectors`, {
        body: {
          name: `c${i}`,
          connector_type: 'salesforce',
          selected_tables: ['Account'],
          credentials: { username: 'u', password: `secret-${i}-pw` },
        },
      });
    tenantId = (await svc.service.ctx.db.get<{ id: string }>('SELECT id FROM tenants WHERE slug = ?', [t.slug]))!.id;
  });
  afterAll(() => svc?.close());

  it('migration 16 counts every tenant again: a count migration 14 got wrong is repaired', async () => {
    const { db } = svc.service.ctx;
    const right = await recount(db, tenantId);
    await db.run('UPDATE tenant_usage SET bytes = bytes + 26000000 WHERE tenant_id = ?', [tenantId]);
    await db.run('DELETE FROM schema_migrations WHERE id = 16');
    const report = await migrate(db);
    expect(report.applied.map((m) => m.id)).toEqual([16]);
    expect(await tenantUsage(db, tenantId)).toBe(right);
    // The triggers still count from there.
    await svc.ok(t, 'POST', `/projects/${projectId}/connectors`, {
      body: { name: 'after', connector_type: 'salesforce', selected_tables: ['Account'] },
    });
    expect(await tenantUsage(db, tenantId)).toBe(await recount(db, tenantId));
  });

  it.skipIf(testStore() !== 'postgres')(
    'PostgreSQL: the count waits for a write another replica has in flight, so that write is counted once',
    async () => {
      const { db } = svc.service.ctx;
      // The database as an older version left it: no usage table, no triggers.
      for (const trigger of ['resources_insert', 'resources_update', 'resources_delete', 'audit_insert', 'audit_delete'])
        await db.run(`DROP TRIGGER tenant_usage_${trigger} ON ${trigger.startsWith('audit') ? 'audit_logs' : 'resources'}`);
      await db.run('DROP TABLE tenant_usage');
      await db.run('CREATE TABLE tenant_usage (tenant_id TEXT PRIMARY KEY, bytes BIGINT NOT NULL)');
      for (const fn of ['added', 'removed', 'changed']) await db.run(`DROP FUNCTION tenant_usage_${fn}`);
      // An older replica deletes a connector, and has not committed when the count starts.
      const older = new pg.Client({ connectionString: svc.service.ctx.options.databaseUrl });
      await older.connect();
      try {
        await older.query('BEGIN');
        await older.query(`DELETE FROM resources WHERE tenant_id = $1 AND kind = 'connector' AND name = 'c0'`, [tenantId]);
        const counting = db.tx((q) => installUsageAccounting(q, 'postgres'));
        await new Promise((r) => setTimeout(r, 300));
        await older.query('COMMIT');
        await counting;
      } finally {
        await older.end();
      }
      // Without the lock the count saw c0 (not yet deleted) and no trigger saw its deletion: counted for ever.
      expect(await tenantUsage(db, tenantId)).toBe(await recount(db, tenantId));
    },
  );

  it.skipIf(testStore() !== 'postgres')(
    "PostgreSQL: an index migration builds CONCURRENTLY, so an older replica's writes go on meanwhile; an interrupted build is built again",
    async () => {
      const { db } = svc.service.ctx;
      const url = svc.service.ctx.options.databaseUrl!;
      const index = () =>
        db.get<{ tablename: string; indexdef: string; valid: boolean }>(
          `SELECT x.tablename, x.indexdef, i.indisvalid AS valid FROM pg_indexes x
           JOIN pg_class c ON c.relname = x.indexname JOIN pg_index i ON i.indexrelid = c.oid WHERE x.indexname = 'schedules_tenant_due'`,
        );
      const unapply17 = async () => {
        await db.run('DROP INDEX IF EXISTS schedules_tenant_due');
        await db.run('DELETE FROM schema_migrations WHERE id = 17');
      };
      // A statement that holds the table as any write does (ROW EXCLUSIVE), whatever the rows.
      const write = 'UPDATE schedules SET next_due_at = next_due_at WHERE false';
      const [older, other] = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })];
      await Promise.all([older.connect(), other.connect()]);
      try {
        // An older replica is inside a write transaction on the table when the migration starts.
        await unapply17();
        await older.query('BEGIN');
        await older.query(write);
        const migrating = migrate(db);
        const deadline = Date.now() + 10_000;
        while (!(await db.get(`SELECT 1 FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX%' AND wait_event_type IS NOT NULL`))) {
          if (Date.now() > deadline) throw new Error('the index build never started waiting for the open transaction');
          await new Promise((r) => setTimeout(r, 20));
        }
        // The build waits for that transaction; another writer does not wait for the build. A plain
        // CREATE INDEX queues for a SHARE lock, and every later write to the table queues behind it.
        await other.query('SET statement_timeout = 2000');
        await expect(other.query(write)).resolves.toBeDefined();
        await older.query('COMMIT');
        expect((await migrating).applied.map((m) => m.id)).toEqual([17]);
        expect(await index()).toEqual({
          tablename: 'schedules',
          indexdef: expect.stringContaining('(tenant_id, next_due_at)'),
          valid: true,
        });

        // A build interrupted half-way leaves an invalid index of that name (here, on another table,
        // a build that fails at its first row): the next start drops it and builds the right one.
        await unapply17();
        await expect(db.run('CREATE INDEX CONCURRENTLY schedules_tenant_due ON tenants ((1 / (length(id) - length(id))))')).rejects.toThrow(
          /division by zero/,
        );
        expect(await index()).toMatchObject({ tablename: 'tenants', valid: false });
        expect((await migrate(db)).applied.map((m) => m.id)).toEqual([17]);
        expect(await index()).toMatchObject({ tablename: 'schedules', valid: true });

        // Built, but the start stopped before recording it: kept, and recorded.
        await db.run('DELETE FROM schema_migrations WHERE id = 17');
        expect((await migrate(db)).applied.map((m) => m.id)).toEqual([17]);
        expect(await index()).toMatchObject({ tablename: 'schedules', valid: true });
      } finally {
        await older.query('ROLLBACK').catch(() => undefined);
        await Promise.all([older.end(), other.end()]);
      }
    },
  );

  it('an audit cursor of an older release reads on this one (rolling upgrades behind one address)', async () => {
    const { cursors } = svc.service.ctx;
    const path = `/projects/${projectId}/audit-logs`;
    const first = await svc.ok(t, 'GET', path, { query: { limit: 1 } });
    expect(first.has_more).toBe(true);
    const after = first.data[0];
    const seqOf = async (id: string) =>
      Number((await svc.service.ctx.db.get<{ seq: number }>('SELECT seq FROM audit_logs WHERE id = ?', [id]))!.seq);
    const afterSeq = await seqOf(after.id);
    const scope = (filters: (string | null)[]) => `${tenantId}:${projectId}:audit:${JSON.stringify(filters)}`;
    const layouts = {
      // Before `resource_id`: six filters by position.
      before: scope([null, null, null, null, null, null]),
      // The release that added it: seven, `resource_id` fourth.
      byPosition: scope([null, null, null, null, null, null, null]),
    };
    for (const layout of Object.values(layouts)) {
      const next = await svc.ok(t, 'GET', path, { query: { limit: 1, cursor: cursors.encode(layout, afterSeq) } });
      expect(next.data[0].id).toBe((await svc.ok(t, 'GET', path, { query: { limit: 1, cursor: first.next_cursor } })).data[0].id);
    }
    // This release's cursors are the older layout when no filter added since is set ...
    expect(JSON.parse(Buffer.from(first.next_cursor.split('.')[0], 'base64url').toString()).q).toBe(layouts.before);
    // ... and stay bound to their filters: one resource's cursor does not read for another.
    const [a, b] = (await svc.ok(t, 'GET', `/projects/${projectId}/connectors`)).data;
    await svc.ok(t, 'PATCH', `/projects/${projectId}/connectors/${a.id}`, { body: { labels: { x: '1' } } });
    const ofA = await svc.ok(t, 'GET', path, { query: { limit: 1, resource_id: a.id } });
    expect(ofA.has_more).toBe(true);
    const wrong = await svc.call(t, 'GET', path, { query: { limit: 1, resource_id: b.id, cursor: ofA.next_cursor } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error.message).toMatch(/not a cursor returned by this list/);
  });

  it('says at start which migrations ran and how long, a newer schema (a rollback), and tenants near their storage limit', async () => {
    const lines: { level: string; msg: string }[] = [];
    const record = (level: string) => (_o: object, msg: string) => void lines.push({ level, msg });
    const log = { info: record('info'), warn: record('warn') } as unknown as Parameters<typeof logStartState>[0];
    const { ctx } = svc.service;
    const used = await tenantUsage(ctx.db, tenantId);
    await logStartState(log, {
      ...ctx,
      migrations: {
        applied: [
          { id: 14, ms: 610 },
          { id: 15, ms: 20 },
          { id: 16, ms: 580 },
        ],
        unknown: [17, 18],
      },
      // The limit a little above what the tenant stores: over 80 % of it.
      options: { ...ctx.options, maxTenantStorage: Math.ceil(used * 1.1) },
    });
    expect(lines[0]).toEqual({ level: 'info', msg: 'database migrated to schema 16 in 1.2 s (14: 610 ms, 15: 20 ms, 16: 580 ms)' });
    expect(lines[1].level).toBe('warn');
    expect(lines[1].msg).toMatch(/^this database was migrated by a newer dpctl \(migrations 17, 18 are unknown to this version\)/);
    expect(lines.slice(2).map((l) => l.msg)).toContainEqual(
      expect.stringMatching(new RegExp(`^tenant ${t.slug} stores .* of its .* limit \\(--max-tenant-storage\\): near it$`)),
    );
  });
});
