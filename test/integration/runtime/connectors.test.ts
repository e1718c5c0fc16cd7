import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kind } from '../../../src/kinds/index.js';
import { createAjv } from '../../../src/kinds/validator.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import {
  closedPort,
  createSourceDb,
  ensurePasswordRole,
  expectError,
  ms,
  SECURE_PASSWORD,
  SECURE_ROLE,
  SHOP_ROWS,
  silentServer,
  waitForRun,
  type Run,
  type SourceDb,
} from './helpers.js';

/**
 * Connectors against a real PostgreSQL source: connection test, schema discovery, syncs with
 * real row counts, and the simulated types. On both stores.
 */
let svc: TestService;
let t: TestTenant;
let p: string;
let src: SourceDb;
let passwordAuth: boolean;

const runShape = createAjv().compile({
  ...kind('run').responseSchema,
  additionalProperties: false,
  required: Object.keys(kind('run').responseSchema.properties!),
});

beforeAll(async () => {
  [svc, src] = await Promise.all([startTestService({ timeScale: 1000, sourceTimeout: 1 }), createSourceDb(1)]);
  passwordAuth = await ensurePasswordRole(src);
  t = await svc.tenant();
  p = `/projects/${(await svc.project(t, 'runtime-connectors')).id}/connectors`;
});
afterAll(() => svc?.close());

let n = 0;
/** A postgresql connector on the source; the secure role when the server can demand passwords. */
async function pgConnector(
  over: { config?: Record<string, unknown>; credentials?: Record<string, unknown>; selected_tables?: string[] } = {},
) {
  const credentials = passwordAuth
    ? { username: SECURE_ROLE, password: SECURE_PASSWORD }
    : { username: src.admin.username, password: 'unused' };
  return svc.ok(t, 'POST', p, {
    body: {
      name: `pg-${++n}`,
      connector_type: 'postgresql',
      config: { host: src.host, port: src.port, database: src.database, schema: 'shop', ssl_mode: 'prefer', ...over.config },
      credentials: { ...credentials, ...over.credentials },
      selected_tables: over.selected_tables ?? ['shop.orders', 'customers'],
    },
  });
}

const test = (id: string) => svc.ok<{ success: boolean; message: string }>(t, 'POST', `${p}/${id}/test`, {}, 200);

describe('POST .../connectors/{id}/test', () => {
  it('connects with the stored credentials and counts the accessible tables of the schema', async () => {
    const c = await pgConnector();
    const res = await svc.call(t, 'POST', `${p}/${c.id}/test`);
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['message', 'success']);
    expect(res.body.success).toBe(true);
    // The password role sees the two tables granted to it; the superuser sees all three.
    expect(res.body.message).toMatch(passwordAuth ? /\b2 tables accessible in schema "shop"/ : /\b3 tables accessible in schema "shop"/);
    expect(res.body.message).not.toContain(SECURE_PASSWORD);
    // The test changes nothing about the connector.
    expect((await svc.ok(t, 'GET', `${p}/${c.id}`)).status).toBe('created');
  });

  it('a wrong password: success false, authentication failed (HTTP 200)', async (ctx) => {
    if (!passwordAuth) ctx.skip();
    const c = await pgConnector({ credentials: { password: 'wrong-password' } });
    const res = await test(c.id);
    expect(res.success).toBe(false);
    expect(res.message).toMatch(/^Authentication failed for user "dp_rt_secure"/);
    expect(res.message).not.toContain('wrong-password');
    // PATCHing the right password (write-only) makes it pass.
    await svc.ok(t, 'PATCH', `${p}/${c.id}`, { body: { credentials: { username: SECURE_ROLE, password: SECURE_PASSWORD } } }, 200);
    expect((await test(c.id)).success).toBe(true);
  });

  it('a closed port fails fast: host unreachable, connection refused', async () => {
    const c = await pgConnector({ config: { port: await closedPort() } });
    const started = Date.now();
    const res = await test(c.id);
    expect(Date.now() - started).toBeLessThan(900);
    expect(res).toEqual({ success: false, message: expect.stringMatching(/^Host unreachable: connection to 127\.0\.0\.1:\d+ refused/) });
  });

  it('a host that never answers times out after the source timeout', async () => {
    const silent = await silentServer();
    try {
      const c = await pgConnector({ config: { port: silent.port } });
      const started = Date.now();
      const res = await test(c.id);
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(900);
      expect(took).toBeLessThan(4000);
      expect(res.success).toBe(false);
      expect(res.message).toMatch(/^Host unreachable: no answer from 127\.0\.0\.1:\d+ within 1 s/);
    } finally {
      await silent.close();
    }
  });

  it('a missing database, a missing schema and a refused TLS are named', async () => {
    const noDb = await pgConnector({ config: { database: 'no_such_db' } });
    expect(await test(noDb.id)).toEqual({
      success: false,
      message: expect.stringMatching(/^Database "no_such_db" does not exist on 127\.0\.0\.1:\d+/),
    });
    const noSchema = await pgConnector({ config: { schema: 'nope' } });
    expect(await test(noSchema.id)).toEqual({ success: false, message: expect.stringMatching(/schema "nope" does not exist/) });
    // The test server has no TLS: prefer falls back to plain (the tests above), require does not.
    const tls = await pgConnector({ config: { ssl_mode: 'require' } });
    expect(await test(tls.id)).toEqual({ success: false, message: expect.stringMatching(/does not support SSL, but ssl_mode is require/) });
  });

  it('is 404 for an unknown connector and 403 for a read-only key, and is audited', async () => {
    const c = await pgConnector();
    await test(c.id);
    expectError(await svc.call(t, 'POST', `${p}/con_nope/test`), 404, 'resource_not_found');
    const projectId = p.split('/')[2];
    const key = await svc.apiKey(t, projectId, 'read-only');
    expectError(await svc.call(t, 'POST', `${p}/${c.id}/test`, { token: key.key }), 403, 'forbidden');
    const logs = await svc.ok(t, 'GET', `/projects/${projectId}/audit-logs`, { query: { action: 'connector.test' } });
    expect(logs.data.length).toBeGreaterThanOrEqual(1);
    expect(
      logs.data.find((e: { resource_id: string; outcome: string }) => e.resource_id === c.id && e.outcome === 'success'),
    ).toMatchObject({ status_code: 200, diff: { success: { before: null, after: true } } });
    expect(logs.data.find((e: { outcome: string; status_code: number }) => e.outcome === 'failure' && e.status_code === 403)).toBeTruthy();
  });
});

describe('GET .../connectors/{id}/schema', () => {
  it('introspects the source: tables, columns, types and nullability, and stores them', async () => {
    const c = await pgConnector();
    const before = Date.now();
    const schema = await svc.ok(t, 'GET', `${p}/${c.id}/schema`);
    expect(schema.connector_id).toBe(c.id);
    expect(schema.error).toBeNull();
    expect(ms(schema.discovered_at)).toBeGreaterThanOrEqual(before - 1000);
    const names = schema.tables.map((x: { schema: string; name: string }) => `${x.schema}.${x.name}`);
    expect(names).toEqual(passwordAuth ? ['shop.customers', 'shop.orders'] : ['shop.customers', 'shop.internal_notes', 'shop.orders']);
    const orders = schema.tables.find((x: { name: string }) => x.name === 'orders');
    expect(orders.columns).toEqual([
      { name: 'id', type: 'bigint', nullable: false },
      { name: 'customer_id', type: 'bigint', nullable: false },
      { name: 'amount', type: 'numeric', nullable: true },
      { name: 'note', type: 'text', nullable: true },
    ]);
    const customers = schema.tables.find((x: { name: string }) => x.name === 'customers');
    expect(customers.columns).toEqual([
      { name: 'id', type: 'bigint', nullable: false },
      { name: 'email', type: 'character varying', nullable: false },
      { name: 'tags', type: '_text', nullable: true },
    ]);
  });

  it('when the source is unreachable, keeps the tables found last and says why', async () => {
    const c = await pgConnector();
    const first = await svc.ok(t, 'GET', `${p}/${c.id}/schema`);
    expect(first.tables.length).toBeGreaterThan(0);
    await svc.ok(
      t,
      'PATCH',
      `${p}/${c.id}`,
      { body: { config: { host: src.host, port: await closedPort(), database: src.database, schema: 'shop' } } },
      200,
    );
    const again = await svc.ok(t, 'GET', `${p}/${c.id}/schema`);
    expect(again.error).toMatch(/^Host unreachable/);
    expect(again.tables).toEqual(first.tables);
    expect(again.discovered_at).toBe(first.discovered_at);
    // The connector's own view shows none of it.
    const connector = await svc.ok(t, 'GET', `${p}/${c.id}`);
    expect(JSON.stringify(connector)).not.toMatch(/discovered|tables":\[\{/);
  });

  it('a simulated type discovers its selected tables, the same every time', async () => {
    const c = await svc.ok(t, 'POST', p, {
      body: { name: 'sim-schema', connector_type: 'mysql', selected_tables: ['app.users', 'events'] },
    });
    const a = await svc.ok(t, 'GET', `${p}/${c.id}/schema`);
    const b = await svc.ok(t, 'GET', `${p}/${c.id}/schema`);
    expect(a.tables.map((x: { schema: string; name: string }) => `${x.schema}.${x.name}`)).toEqual(['app.users', 'public.events']);
    expect(a.tables[0].columns[0]).toEqual({ name: 'id', type: 'bigint', nullable: false });
    expect(b.tables).toEqual(a.tables);
  });
});

describe('POST .../connectors/{id}/sync', () => {
  it('answers 201 {run_id, status: running, started_at}, then counts the real rows: created -> syncing -> active', async () => {
    const c = await pgConnector();
    expect(c.status).toBe('created');
    expect(c.last_sync_at).toBeNull();
    expect(c.last_sync_started_at).toBeNull();
    const res = await svc.call(t, 'POST', `${p}/${c.id}/sync`);
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['run_id', 'started_at', 'status']);
    expect(res.body.status).toBe('running');
    const run = await waitForRun(svc, t, `${p}/${c.id}/runs/${res.body.run_id}`);
    expect(runShape(run), JSON.stringify(runShape.errors)).toBe(true);
    expect(run).toMatchObject({
      id: res.body.run_id,
      run_type: 'connector_sync',
      resource_id: c.id,
      status: 'succeeded',
      trigger: 'manual',
      simulated: false,
      error: null,
      started_at: res.body.started_at,
    });
    expect(run.tables.map((x) => [x.table, x.status, x.rows, x.error])).toEqual([
      ['shop.orders', 'completed', SHOP_ROWS.orders, null],
      ['customers', 'completed', SHOP_ROWS.customers, null],
    ]);
    for (const table of run.tables) expect(ms(table.finished_at)).toBeGreaterThanOrEqual(ms(table.started_at));
    expect(run.duration_seconds).toBe((ms(run.finished_at) - ms(run.started_at)) / 1000);
    const after = await svc.ok(t, 'GET', `${p}/${c.id}`);
    expect(after.status).toBe('active');
    expect(after.last_sync_at).toBe(run.finished_at);
    // Which settings the sync proved: those of when it started.
    expect(after.last_sync_started_at).toBe(run.started_at);
    // Run history lists it.
    const history = await svc.ok(t, 'GET', `${p}/${c.id}/runs`);
    expect(history.data.map((r: Run) => r.id)).toEqual([run.id]);
  });

  it('shows syncing while the sync runs, and a second sync meanwhile is 409', async () => {
    const c = await pgConnector({ selected_tables: ['slow.sleepy'], credentials: { username: src.admin.username } });
    // Three triggers at once: exactly one starts a run.
    const answers = await Promise.all([0, 1, 2].map(() => svc.call(t, 'POST', `${p}/${c.id}/sync`)));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409]);
    const started = answers.find((a) => a.status === 201)!.body;
    for (const a of answers.filter((x) => x.status === 409))
      expectError(a, 409, 'conflict', new RegExp(`already syncing \\(run ${started.run_id}\\)`));
    expect((await svc.ok(t, 'GET', `${p}/${c.id}`)).status).toBe('syncing');
    const run = await waitForRun(svc, t, `${p}/${c.id}/runs/${started.run_id}`);
    expect(run.status).toBe('succeeded');
    expect(run.tables).toMatchObject([{ table: 'slow.sleepy', rows: 1, status: 'completed' }]);
    expect(run.tables[0].duration_seconds).toBeGreaterThanOrEqual(0.95);
    // Once it has ended, a new sync is accepted.
    const next = await svc.call(t, 'POST', `${p}/${c.id}/sync`);
    expect(next.status, next.text).toBe(201);
    await waitForRun(svc, t, `${p}/${c.id}/runs/${next.body.run_id}`);
  });

  it('a row count that runs past the query timeout fails that table, not the whole service', async () => {
    const options = svc.service.ctx.options;
    const before = options.sourceQueryTimeout;
    options.sourceQueryTimeout = 0.3; // slow.sleepy takes 1 s to count
    try {
      const c = await pgConnector({ selected_tables: ['slow.sleepy', 'shop.orders'], credentials: { username: src.admin.username } });
      const { run_id } = await svc.ok(t, 'POST', `${p}/${c.id}/sync`);
      const run = await waitForRun(svc, t, `${p}/${c.id}/runs/${run_id}`);
      expect(run.status).toBe('failed');
      expect(run.tables.map((x) => [x.table, x.status, x.rows])).toEqual([
        ['slow.sleepy', 'failed', null],
        ['shop.orders', 'completed', 3],
      ]);
      expect(run.tables[0].error).toMatch(/^Query cancelled after 0.3 s: canceling statement due to statement timeout/);
    } finally {
      options.sourceQueryTimeout = before;
    }
  });

  it('a missing table fails that table and the run, with the error; the others still count: -> error', async () => {
    const c = await pgConnector({ selected_tables: ['shop.orders', 'shop.missing_table', 'customers'] });
    const { run_id } = await svc.ok(t, 'POST', `${p}/${c.id}/sync`);
    const run = await waitForRun(svc, t, `${p}/${c.id}/runs/${run_id}`);
    expect(run.status).toBe('failed');
    expect(run.tables.map((x) => [x.table, x.status, x.rows])).toEqual([
      ['shop.orders', 'completed', 3],
      ['shop.missing_table', 'failed', null],
      ['customers', 'completed', 2],
    ]);
    expect(run.tables[1].error).toMatch(/table "shop\.missing_table" does not exist/);
    expect(run.error).toMatch(/^1 of 3 tables failed: shop\.missing_table: table "shop\.missing_table" does not exist/);
    const after = await svc.ok(t, 'GET', `${p}/${c.id}`);
    expect(after.status).toBe('error');
    expect(after.last_error).toBe(run.error);
    expect(after.last_sync_at).toBe(run.finished_at);
    // error -> syncing -> active once the selection is fixed.
    await svc.ok(t, 'PATCH', `${p}/${c.id}`, { body: { selected_tables: ['shop.orders'] } }, 200);
    const fixed = await svc.ok(t, 'POST', `${p}/${c.id}/sync`);
    expect((await waitForRun(svc, t, `${p}/${c.id}/runs/${fixed.run_id}`)).status).toBe('succeeded');
    expect(await svc.ok(t, 'GET', `${p}/${c.id}`)).toMatchObject({ status: 'active', last_error: null });
  });

  it('an unreachable source fails the run, every table skipped', async () => {
    const c = await pgConnector({ config: { port: await closedPort() } });
    const { run_id } = await svc.ok(t, 'POST', `${p}/${c.id}/sync`);
    const run = await waitForRun(svc, t, `${p}/${c.id}/runs/${run_id}`);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/^Host unreachable: connection to 127\.0\.0\.1:\d+ refused/);
    expect(run.tables.map((x) => x.status)).toEqual(['skipped', 'skipped']);
    expect((await svc.ok(t, 'GET', `${p}/${c.id}`)).status).toBe('error');
  });

  it('with no table selected, syncs every table of the schema', async () => {
    const c = await pgConnector({ selected_tables: [] });
    const { run_id } = await svc.ok(t, 'POST', `${p}/${c.id}/sync`);
    const run = await waitForRun(svc, t, `${p}/${c.id}/runs/${run_id}`);
    expect(run.status).toBe('succeeded');
    const expected = passwordAuth
      ? [
          ['shop.customers', 2],
          ['shop.orders', 3],
        ]
      : [
          ['shop.customers', 2],
          ['shop.internal_notes', 1],
          ['shop.orders', 3],
        ];
    expect(run.tables.map((x) => [x.table, x.rows])).toEqual(expected);
  });

  it('simulates other types deterministically: the same row counts on every sync, from the table names', async () => {
    const body = (name: string) => ({ name, connector_type: 'snowflake', selected_tables: ['sales.orders', 'sales.refunds', 'events'] });
    const a = await svc.ok(t, 'POST', p, { body: body('sim-a') });
    const b = await svc.ok(t, 'POST', p, { body: body('sim-b') });
    expect(await test(a.id)).toEqual({
      success: true,
      message: expect.stringMatching(/^Simulated snowflake source .*: 3 tables accessible/),
    });
    const runs: Run[] = [];
    for (const c of [a, a, b]) {
      const { run_id } = await svc.ok(t, 'POST', `${p}/${c.id}/sync`);
      runs.push(await waitForRun(svc, t, `${p}/${c.id}/runs/${run_id}`));
    }
    for (const run of runs) {
      expect(run).toMatchObject({ status: 'succeeded', simulated: true, error: null });
      expect(runShape(run), JSON.stringify(runShape.errors)).toBe(true);
    }
    const counts = runs.map((r) => r.tables.map((x) => [x.table, x.rows, x.duration_seconds]));
    expect(counts[1]).toEqual(counts[0]);
    expect(counts[2]).toEqual(counts[0]);
    const rows = counts[0].map(([, r]) => r as number);
    expect(new Set(rows).size).toBe(3);
    for (const r of rows) expect(Number.isInteger(r) && r >= 0 && r < 100_000).toBe(true);
    expect((await svc.ok(t, 'GET', `${p}/${a.id}`)).status).toBe('active');
    // Run history in creation order, paginated.
    const page1 = await svc.ok(t, 'GET', `${p}/${a.id}/runs`, { query: { limit: 1 } });
    expect(page1.has_more).toBe(true);
    const page2 = await svc.ok(t, 'GET', `${p}/${a.id}/runs`, { query: { limit: 1, cursor: page1.next_cursor } });
    expect([page1.data[0].id, page2.data[0].id]).toEqual([runs[0].id, runs[1].id]);
    expect(page2.has_more).toBe(false);
  });

  it('needs read-write; a read-only key can read runs and the schema; the trigger is audited', async () => {
    const c = await svc.ok(t, 'POST', p, { body: { name: 'sim-perm', connector_type: 's3', selected_tables: ['x'] } });
    const projectId = p.split('/')[2];
    const ro = await svc.apiKey(t, projectId, 'read-only');
    const rw = await svc.apiKey(t, projectId, 'read-write');
    expectError(await svc.call(t, 'POST', `${p}/${c.id}/sync`, { token: ro.key }), 403, 'forbidden');
    const started = await svc.ok(t, 'POST', `${p}/${c.id}/sync`, { token: rw.key });
    await waitForRun(svc, t, `${p}/${c.id}/runs/${started.run_id}`);
    expect((await svc.call(t, 'GET', `${p}/${c.id}/runs`, { token: ro.key })).status).toBe(200);
    expect((await svc.call(t, 'GET', `${p}/${c.id}/runs/${started.run_id}`, { token: ro.key })).status).toBe(200);
    expect((await svc.call(t, 'GET', `${p}/${c.id}/schema`, { token: ro.key })).status).toBe(200);
    expectError(await svc.call(t, 'POST', `${p}/con_missing/sync`), 404, 'resource_not_found');
    const entries = (await svc.ok(t, 'GET', `/projects/${projectId}/audit-logs`, { query: { action: 'connector.sync', limit: 100 } })).data;
    const ok = entries.find((e: { resource_id: string; outcome: string }) => e.resource_id === c.id && e.outcome === 'success');
    expect(ok).toMatchObject({
      resource_type: 'connector',
      resource_name: 'sim-perm',
      status_code: 201,
      diff: { status: { before: 'created', after: 'syncing' }, run_id: { before: null, after: started.run_id } },
    });
    expect(entries.find((e: { outcome: string; status_code: number }) => e.outcome === 'failure' && e.status_code === 403)).toBeTruthy();
  });
});

describe('DELETE .../connectors/{id}', () => {
  it('deletes the runs and the discovered schema the connector made with it', async () => {
    const c = await pgConnector();
    await svc.ok(t, 'GET', `${p}/${c.id}/schema`);
    const { run_id } = await svc.ok(t, 'POST', `${p}/${c.id}/sync`);
    await waitForRun(svc, t, `${p}/${c.id}/runs/${run_id}`);
    const owned = () => svc.service.ctx.db.all<{ kind: string }>('SELECT kind FROM resources WHERE parent_id = ? ORDER BY kind', [c.id]);
    expect((await owned()).map((r) => r.kind)).toEqual(['discovered_schema', 'run']);
    await svc.ok(t, 'DELETE', `${p}/${c.id}`, {}, 204);
    expect(await owned()).toEqual([]);
    expectError(await svc.call(t, 'GET', `${p}/${c.id}/runs/${run_id}`), 404, 'resource_not_found');
  });
});
