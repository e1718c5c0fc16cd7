import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { MAX_DISCOVERED_COLUMNS, MAX_SOURCE_TABLES } from '../../../src/service/runtime/sources.js';
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
    // One table past the cap, and 64 tables of 1,600 columns (102,400 columns, past that cap).
    await c.query(
      `CREATE SCHEMA wide; DO $$ BEGIN FOR i IN 1..${MAX_SOURCE_TABLES + 1} LOOP EXECUTE format('CREATE TABLE wide.t%s (id int)', i); END LOOP; END $$;`,
    );
    const columns = Array.from({ length: 1_600 }, (_, i) => `c${i} int`).join(', ');
    await c.query(
      `CREATE SCHEMA deep; DO $$ BEGIN FOR i IN 1..64 LOOP EXECUTE format('CREATE TABLE deep.t%s (${columns})', i); END LOOP; END $$;`,
    );
  });
}, 180_000);
afterAll(() => svc?.close());

let n = 0;
const connector = (schema: string) =>
  svc.ok<{ id: string }>(t, 'POST', p, {
    body: {
      name: `src-${schema}-${++n}`,
      connector_type: 'postgresql',
      config: { host: src.host, port: src.port, database: src.database, schema, ssl_mode: 'prefer' },
      credentials: { username: src.admin.username, password: 'unused' },
      selected_tables: [],
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
    const c = await connector('deep');
    const schema = await svc.ok<{ error: string | null }>(t, 'GET', `${p}/${c.id}/schema`);
    expect(schema.error).toBe(
      'Schema "deep" holds more than 100,000 columns, the most a connector reads; keep the tables to discover in a schema of their own',
    );
  }, 60_000);
});
