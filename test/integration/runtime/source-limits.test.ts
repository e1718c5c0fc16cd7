import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import pg from 'pg';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { DISCOVERY_BATCH_ROWS, MAX_DISCOVERED_COLUMNS, MAX_SOURCE_TABLES } from '../../../src/service/runtime/sources.js';
import { createSourceDb, waitForRun, withClient, type SourceDb } from './helpers.js';

/**
 * The source database belongs to the tenant, and so does the number of tables and columns in it.
 * A discovery, or a sync of every table, reads at most MAX_SOURCE_TABLES tables (and a discovery
 * MAX_DISCOVERED_COLUMNS columns); past that it fails with the reason instead of bringing millions
 * of rows into the service's memory, into one stored row and into every classification of them.
 */
let svc: TestService;
let t: TestTenant;
let p: string;
let src: SourceDb;

beforeAll(async () => {
  [svc, src] = await Promise.all([startTestService({ timeScale: 1000 }), createSourceDb(1)]);
  t = await svc.tenant();
  p = `/projects/${(await svc.project(t, 'big-sources')).id}/connectors`;
  await withClient(src.adminUrl, async (c) => {
    // One table past the cap.
    await c.query(
      `CREATE SCHEMA wide; DO $$ BEGIN FOR i IN 1..${MAX_SOURCE_TABLES + 1} LOOP EXECUTE format('CREATE TABLE wide.t%s (id int)', i); END LOOP; END $$;`,
    );
    // 62 tables of 1,600 columns and one of 800: exactly MAX_DISCOVERED_COLUMNS; one more in `deeper`.
    const columns = (n: number) => Array.from({ length: n }, (_, i) => `c${i} int`).join(', ');
    await c.query(
      `CREATE SCHEMA deep; DO $$ BEGIN FOR i IN 1..62 LOOP EXECUTE format('CREATE TABLE deep.t%s (${columns(1_600)})', i); END LOOP; END $$;
       CREATE TABLE deep.t63 (${columns(800)}); CREATE SCHEMA deeper; CREATE TABLE deeper.one (c0 int);`,
    );
  });
}, 180_000);
afterAll(() => svc?.close());

let n = 0;
const connector = (schema: string, selected_tables: string[] = []) =>
  svc.ok<{ id: string }>(t, 'POST', p, {
    body: {
      name: `src-${schema}-${++n}`,
      connector_type: 'postgresql',
      config: { host: src.host, port: src.port, database: src.database, schema, ssl_mode: 'prefer' },
      credentials: { username: src.admin.username, password: 'unused' },
      selected_tables,
    },
  });

describe('a source with more tables or columns than a connector reads', () => {
  it('a discovery of more than 10,000 tables fails with the reason and keeps nothing of them', async () => {
    expect(MAX_SOURCE_TABLES).toBe(10_000);
    const c = await connector('wide');
    const schema = await svc.ok<{ error: string | null; tables: unknown[] }>(t, 'GET', `${p}/${c.id}/schema`);
    expect(schema.error).toBe(
      'Schema "wide" holds more than 10,000 tables, the most a connector reads; keep the tables to discover in a schema of their own',
    );
    expect(schema.tables).toEqual([]);
  }, 60_000);

  it('a sync of every table of such a schema fails, asking for selected tables', async () => {
    const c = await connector('wide');
    const { run_id } = await svc.ok<{ run_id: string }>(t, 'POST', `${p}/${c.id}/sync`);
    const run = await waitForRun(svc, t, `${p}/${c.id}/runs/${run_id}`, 60_000);
    expect(run.status).toBe('failed');
    expect(run.error).toBe(
      'Schema "wide" holds more than 10,000 tables, the most a connector reads; select the tables to sync in selected_tables (at most 10,000)',
    );
  }, 90_000);

  it(`a discovery of more than ${MAX_DISCOVERED_COLUMNS.toLocaleString('en-US')} columns fails with the reason`, async () => {
    const c = await connector('deep', ['deeper.one']);
    const schema = await svc.ok<{ error: string | null }>(t, 'GET', `${p}/${c.id}/schema`);
    expect(schema.error).toBe(
      'Schemas "deep", "deeper" hold more than 100,000 columns, the most a connector reads; keep the tables to discover in a schema of their own',
    );
  }, 60_000);

  it(`a discovery of ${MAX_DISCOVERED_COLUMNS.toLocaleString('en-US')} columns is parsed, stored and answered in parts, and compared with the stored one as text`, async () => {
    const c = await connector('deep');
    // Every result node-postgres parses in one turn of the event loop (service and test share this process).
    const results: number[] = [];
    const query = pg.Client.prototype.query;
    const spy = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, ...args: unknown[]) {
      const answer = (query as (...a: unknown[]) => unknown).apply(this, args);
      if (answer instanceof Promise)
        void answer.then(
          (r: pg.QueryResult) => results.push(r.rows?.length ?? 0),
          () => undefined,
        );
      return answer;
    } as typeof query);
    try {
      const res = await svc.call(t, 'GET', `${p}/${c.id}/schema`);
      expect(res.status).toBe(200);
      // Written a chunk at a time, not serialized whole.
      expect(res.headers['transfer-encoding']).toBe('chunked');
      const schema = res.body as { error: string | null; discovered_at: string; tables: { columns: unknown[] }[] };
      expect(schema.error).toBeNull();
      expect(schema.tables.reduce((sum, table) => sum + table.columns.length, 0)).toBe(MAX_DISCOVERED_COLUMNS);
      expect(Math.max(...results)).toBe(DISCOVERY_BATCH_ROWS);
      expect(results.filter((rows) => rows === DISCOVERY_BATCH_ROWS)).toHaveLength(MAX_DISCOVERED_COLUMNS / DISCOVERY_BATCH_ROWS);
      // Found again within the minute: the same answer, and the stored row is not written again.
      const stored = () =>
        svc.service.ctx.db.get<{ updated_at: string; data: string }>('SELECT updated_at, data FROM resources WHERE id = ?', [
          `dsc_${c.id}`,
        ]);
      const before = (await stored())!;
      expect(JSON.parse(before.data)).toEqual({ connector_id: c.id, ...schema });
      const again = await svc.ok<typeof schema>(t, 'GET', `${p}/${c.id}/schema`);
      expect(again).toEqual(schema);
      expect((await stored())!.updated_at).toBe(before.updated_at);
    } finally {
      spy.mockRestore();
    }
  }, 120_000);
});
