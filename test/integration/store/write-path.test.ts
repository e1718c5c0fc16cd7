import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { insertRows, insertRowsReturning, type Queryable, type SqlValue } from '../../../src/service/store/db.js';

/**
 * Issue 18, the create path on PostgreSQL: a create is one transaction of three round trips (BEGIN with
 * the credential check and a shared project lock, one insert that also writes the schedule row, COMMIT).
 * Creates of a kind without references run side by side in one project; these are the answers that
 * must not change because of it, on both stores.
 */
let svc: TestService;
let t: TestTenant;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
});
afterAll(() => svc?.close());

const connector = (name: string, schedule?: string) => ({
  name,
  connector_type: 'salesforce',
  selected_tables: ['Account'],
  ...(schedule ? { schedule } : {}),
});

describe('the create path', () => {
  it('of 20 concurrent creates with one name, one is created and 19 are 409 with the usual message; no orphan schedule rows', async () => {
    const { id: projectId } = await svc.project(t);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => svc.call(t, 'POST', `/projects/${projectId}/connectors`, { body: connector('same', '0 * * * *') })),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    const conflicts = answers.filter((a) => a.status === 409);
    expect(conflicts).toHaveLength(19);
    for (const c of conflicts)
      expect(c.body.error).toMatchObject({ code: 'conflict', message: 'A connector with name "same" already exists in this project' });
    const created = answers.find((a) => a.status === 201)!.body;
    const rows = await svc.service.ctx.db.all<{ resource_id: string }>('SELECT resource_id FROM schedules WHERE project_id = ?', [
      projectId,
    ]);
    expect(rows.map((r) => r.resource_id)).toEqual([created.id]);
  });

  it('many concurrent creates with distinct names all land, each with its schedule row, listed in creation order', async () => {
    const { id: projectId } = await svc.project(t);
    const names = Array.from({ length: 40 }, (_, i) => `c${i}`);
    const answers = await Promise.all(
      names.map((n, i) =>
        svc.call(t, 'POST', `/projects/${projectId}/connectors`, { body: connector(n, i % 2 ? '*/15 * * * *' : undefined) }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(names.map(() => 201));
    const page = await svc.ok(t, 'GET', `/projects/${projectId}/connectors?limit=100`);
    expect(page.data.map((c: { name: string }) => c.name).sort()).toEqual([...names].sort());
    const scheduled = await svc.service.ctx.db.all<{ resource_id: string; expression: string }>(
      'SELECT resource_id, expression FROM schedules WHERE project_id = ?',
      [projectId],
    );
    expect(scheduled.map((r) => r.resource_id).sort()).toEqual(
      answers
        .filter((_, i) => i % 2)
        .map((a) => a.body.id)
        .sort(),
    );
    expect(new Set(scheduled.map((r) => r.expression))).toEqual(new Set(['*/15 * * * *']));
  });

  it('insertMany writes 100 resources in statements of 64, 32 and 4 rows, each with its schedule row; getMany reads them back among 1,100 absent ids', async () => {
    const { id: projectId } = await svc.project(t);
    const { ctx } = svc.service;
    const tenantId = (await ctx.db.get<{ id: string }>('SELECT id FROM tenants WHERE slug = ?', [t.slug]))!.id;
    const rows = Array.from({ length: 100 }, (_, i) => {
      const id = `connector_many${i}`;
      return {
        id,
        tenantId,
        projectId,
        kind: 'connector',
        parentId: '',
        name: `many${i}`,
        data: { id, ...connector(`many${i}`, i % 2 ? '0 * * * *' : undefined) },
        secrets: null,
      };
    });
    const statements: string[] = [];
    await ctx.db.tx((q) => {
      // The transaction's own handle, with its INSERTs into resources noted.
      const noted: Queryable = Object.assign(Object.create(q) as Queryable, {
        run: (sql: string, params?: SqlValue[]) => {
          if (sql.startsWith('INSERT INTO resources')) statements.push(sql);
          return q.run(sql, params);
        },
      });
      return ctx.resources.insertMany(rows, noted);
    });
    expect(statements.map((sql) => sql.split('(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').length - 1)).toEqual([64, 32, 4]);
    // Past GET_MANY_IDS (1,024) ids the read takes more than one statement.
    const absent = Array.from({ length: 1_100 }, (_, i) => `connector_none${i}`);
    const found = await ctx.resources.getMany(tenantId, projectId, 'connector', [...absent, ...rows.map((r) => r.id)]);
    expect([...found.keys()].sort()).toEqual(rows.map((r) => r.id).sort());
    expect(found.get('connector_many7')!.data.name).toBe('many7');
    const scheduled = await ctx.db.all<{ resource_id: string }>('SELECT resource_id FROM schedules WHERE project_id = ?', [projectId]);
    expect(scheduled.map((r) => r.resource_id).sort()).toEqual(
      rows
        .filter((_, i) => i % 2)
        .map((r) => r.id)
        .sort(),
    );
  });

  it('insertRows splits 2,500 rows into statements of 1,024, 1,024 and 452 padded to 512; a padded or repeated row is not inserted twice', async () => {
    const { db } = svc.service.ctx;
    await db.run('CREATE TABLE insert_rows_probe (k TEXT PRIMARY KEY, v INTEGER NOT NULL)');
    try {
      const rows: SqlValue[][] = Array.from({ length: 2_500 }, (_, i) => [`k${i}`, i]);
      const sizes: number[] = [];
      const noted: Queryable = Object.assign(Object.create(db) as Queryable, {
        run: (sql: string, params?: SqlValue[]) => {
          sizes.push(params!.length / 2);
          return db.run(sql, params);
        },
      });
      const insert = (values: string) => `INSERT INTO insert_rows_probe (k, v) VALUES ${values} ON CONFLICT (k) DO NOTHING`;
      expect(await insertRows(noted, rows, insert)).toBe(2_500);
      expect(sizes).toEqual([1_024, 1_024, 512]);
      // Two new rows among ones already there (one named twice): RETURNING gives each new row once.
      const returned = await insertRowsReturning<{ k: string }>(
        db,
        [
          ['k7', 0],
          ['new1', 1],
          ['new2', 2],
          ['new1', 3],
        ],
        (values) => `${insert(values)} RETURNING k`,
      );
      expect(returned.map((r) => r.k).sort()).toEqual(['new1', 'new2']);
      expect(await insertRows(db, [], insert)).toBe(0);
      const count = await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM insert_rows_probe');
      expect(Number(count!.n)).toBe(2_502);
    } finally {
      await db.run('DROP TABLE insert_rows_probe');
    }
  });

  it('a name conflict on a kind with a create behaviour (API keys) does no work: 409, and no second key hash', async () => {
    const { id: projectId } = await svc.project(t);
    await svc.ok(t, 'POST', `/projects/${projectId}/api-keys`, { body: { name: 'ci', permission_level: 'read-only' } });
    const again = await svc.call(t, 'POST', `/projects/${projectId}/api-keys`, { body: { name: 'ci', permission_level: 'admin' } });
    expect(again.status).toBe(409);
    expect(again.body.error.message).toBe('An api key with name "ci" already exists in this project');
    const hashes = await svc.service.ctx.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM api_key_hashes WHERE project_id = ?', [
      projectId,
    ]);
    expect(Number(hashes!.n)).toBe(1);
  });

  it('creates racing a project delete leave nothing behind: every create is 201 (then deleted with the project) or 404', async () => {
    const { id: projectId } = await svc.project(t);
    await svc.ok(t, 'POST', `/projects/${projectId}/connectors`, { body: connector('first', '0 * * * *') });
    const creates = Array.from({ length: 30 }, (_, i) =>
      svc.call(t, 'POST', `/projects/${projectId}/connectors`, { body: connector(`r${i}`, '0 * * * *') }),
    );
    const deletion = svc.call(t, 'DELETE', `/projects/${projectId}`);
    const answers = await Promise.all(creates);
    expect((await deletion).status).toBe(204);
    for (const a of answers) expect([201, 404]).toContain(a.status);
    const left = await svc.service.ctx.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM resources WHERE project_id = ?', [projectId]);
    const schedules = await svc.service.ctx.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM schedules WHERE project_id = ?', [projectId]);
    expect([Number(left!.n), Number(schedules!.n)]).toEqual([0, 0]);
  });

  it('a create that references another resource still waits for a delete of it: never a dangling reference', async () => {
    const { id: projectId } = await svc.project(t);
    const base = `/projects/${projectId}`;
    for (let round = 0; round < 5; round++) {
      const c = await svc.ok(t, 'POST', `${base}/classifications`, { body: { name: `pii-${round}`, sensitivity: 'internal' } });
      const create = svc.call(t, 'POST', `${base}/masking-policies`, {
        body: { name: `mask-${round}`, classification_id: c.id, method: 'hash' },
      });
      const remove = svc.call(t, 'DELETE', `${base}/classifications/${c.id}`);
      const [created, removed] = await Promise.all([create, remove]);
      // Either order is fine (201 then 409, or 204 then 422), but never both: a policy on a deleted classification.
      expect([created.status, removed.status]).toContainEqual(created.status === 201 ? 409 : 422);
      expect(created.status === 201 && removed.status === 204).toBe(false);
    }
  });
});
