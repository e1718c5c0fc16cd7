import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kind } from '../../../src/kinds/index.js';
import { createAjv } from '../../../src/kinds/validator.js';
import { modelSeconds } from '../../../src/service/runtime/dbt.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { createSourceDb, expectError, ms, waitForRun, type Run, type SourceDb } from './helpers.js';

/**
 * Pipelines run their steps as a DAG (real connector syncs, dbt runs); dbt runs build models in
 * topological order. Simulated work runs 1000 times faster than nominal (timeScale).
 */
let svc: TestService;
let t: TestTenant;
let base: string;
let src: SourceDb;
let projectId: string;
const ids: Record<string, string> = {};

const runShape = createAjv().compile({
  ...kind('run').responseSchema,
  additionalProperties: false,
  required: Object.keys(kind('run').responseSchema.properties!),
});
const SLOW = 0.6;

beforeAll(async () => {
  [svc, src] = await Promise.all([startTestService({ timeScale: 1000 }), createSourceDb(SLOW)]);
  t = await svc.tenant();
  projectId = (await svc.project(t, 'runtime-pipelines')).id;
  base = `/projects/${projectId}`;
  const pg = (name: string, selected_tables: string[]) =>
    svc.ok(t, 'POST', `${base}/connectors`, {
      body: {
        name,
        connector_type: 'postgresql',
        config: { host: src.host, port: src.port, database: src.database, schema: 'shop', ssl_mode: 'disable' },
        credentials: { username: src.admin.username },
        selected_tables,
      },
    });
  ids.pg = (await pg('shop-slow', ['slow.sleepy', 'shop.orders'])).id;
  ids.broken = (await pg('shop-broken', ['shop.orders', 'shop.gone'])).id;
  ids.sim = (
    await svc.ok(t, 'POST', `${base}/connectors`, {
      body: { name: 'crm', connector_type: 'salesforce', selected_tables: ['Account', 'Opportunity'] },
    })
  ).id;
  ids.channel = (
    await svc.ok(t, 'POST', `${base}/notification-channels`, {
      body: { name: 'ops', type: 'email', config: { email_addresses: ['ops@example.com'] } },
    })
  ).id;
  ids.dbt = (
    await svc.ok(t, 'POST', `${base}/dbt-projects`, {
      body: {
        name: 'analytics',
        repository: 'https://git.example.com/analytics.git',
        models: [
          { name: 'fct_orders', materialization: 'table', depends_on: ['stg_orders', 'stg_accounts'] },
          { name: 'stg_accounts', materialization: 'view', sources: [{ connector_id: ids.sim, table: 'Account' }] },
          { name: 'stg_orders', materialization: 'view', sources: [{ connector_id: ids.pg, table: 'shop.orders' }] },
          { name: 'dim_customers', materialization: 'incremental', depends_on: ['fct_orders'] },
          { name: 'helper', materialization: 'ephemeral' },
        ],
      },
    })
  ).id;
});
afterAll(() => svc?.close());

const runPath = (pipelineId: string, runId: string) => `${base}/pipelines/${pipelineId}/runs/${runId}`;
const step = (run: Run, name: string) => run.steps.find((s) => s.step_name === name)!;

describe('POST .../pipelines/{id}/run', () => {
  let pipelineId: string;
  let run: Run;

  beforeAll(async () => {
    pipelineId = (
      await svc.ok(t, 'POST', `${base}/pipelines`, {
        body: {
          name: 'nightly',
          steps: [
            { name: 'notify', type: 'notification', channel_id: ids.channel, depends_on: ['transform'] },
            { name: 'transform', type: 'dbt_run', dbt_project_id: ids.dbt, depends_on: ['sync_shop', 'sync_crm'] },
            { name: 'sync_shop', type: 'connector_sync', connector_id: ids.pg },
            { name: 'sync_crm', type: 'connector_sync', connector_id: ids.sim },
          ],
        },
      })
    ).id;
  });

  it('answers 201 with the run; a second run while it runs is 409; it shows running', async () => {
    const res = await svc.call(t, 'POST', `${base}/pipelines/${pipelineId}/run`);
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['run_id', 'started_at', 'status']);
    expect(res.body.status).toBe('running');
    expectError(await svc.call(t, 'POST', `${base}/pipelines/${pipelineId}/run`), 409, 'conflict', /already running/);
    expect((await svc.ok(t, 'GET', `${base}/pipelines/${pipelineId}`)).last_run_status).toBe('running');
    const live = await svc.ok<Run>(t, 'GET', runPath(pipelineId, res.body.run_id));
    expect(live.status).toBe('running');
    run = await waitForRun(svc, t, runPath(pipelineId, res.body.run_id));
  });

  it('runs the steps in dependency order, the independent syncs concurrently, and succeeds', async () => {
    expect(runShape(run), JSON.stringify(runShape.errors)).toBe(true);
    expect(run).toMatchObject({ run_type: 'pipeline', resource_id: pipelineId, status: 'succeeded', trigger: 'manual', error: null });
    // Steps listed in declaration order, with their ids and types.
    expect(run.steps.map((s) => [s.step_id, s.step_name, s.step_type, s.status])).toEqual([
      ['step_1', 'notify', 'notification', 'completed'],
      ['step_2', 'transform', 'dbt_run', 'completed'],
      ['step_3', 'sync_shop', 'connector_sync', 'completed'],
      ['step_4', 'sync_crm', 'connector_sync', 'completed'],
    ]);
    const [shop, crm, transform, notify] = ['sync_shop', 'sync_crm', 'transform', 'notify'].map((n) => step(run, n));
    // The two syncs overlap: each started before the other finished.
    expect(ms(shop.started_at)).toBeLessThan(ms(crm.finished_at));
    expect(ms(crm.started_at)).toBeLessThan(ms(shop.finished_at));
    // The dbt run waits for both; the notification for the dbt run.
    expect(ms(transform.started_at)).toBeGreaterThanOrEqual(Math.max(ms(shop.finished_at), ms(crm.finished_at)));
    expect(ms(notify.started_at)).toBeGreaterThanOrEqual(ms(transform.finished_at));
    expect(shop.duration_seconds).toBeGreaterThanOrEqual(SLOW - 0.05);
    for (const s of run.steps) expect(s.duration_seconds).toBe((ms(s.finished_at) - ms(s.started_at)) / 1000);
    expect(ms(run.finished_at)).toBeGreaterThanOrEqual(ms(notify.finished_at));
    expect(notify.run_id).toBeNull();
    expect((await svc.ok(t, 'GET', `${base}/pipelines/${pipelineId}`)).last_run_status).toBe('succeeded');
  });

  it('each sync or dbt step started a real run of its own, triggered by the pipeline', async () => {
    const shopRun = await svc.ok<Run>(t, 'GET', `${base}/connectors/${ids.pg}/runs/${step(run, 'sync_shop').run_id}`);
    expect(shopRun).toMatchObject({ status: 'succeeded', trigger: 'pipeline', parent_run_id: run.id, simulated: false });
    expect(shopRun.tables.map((x) => [x.table, x.rows])).toEqual([
      ['slow.sleepy', 1],
      ['shop.orders', 3],
    ]);
    const crmRun = await svc.ok<Run>(t, 'GET', `${base}/connectors/${ids.sim}/runs/${step(run, 'sync_crm').run_id}`);
    expect(crmRun).toMatchObject({ status: 'succeeded', trigger: 'pipeline', parent_run_id: run.id, simulated: true });
    const dbtRun = await svc.ok<Run>(t, 'GET', `${base}/dbt-projects/${ids.dbt}/runs/${step(run, 'transform').run_id}`);
    expect(dbtRun).toMatchObject({ run_type: 'dbt_run', status: 'succeeded', trigger: 'pipeline', parent_run_id: run.id });
    expect((await svc.ok(t, 'GET', `${base}/connectors/${ids.pg}`)).status).toBe('active');
    // The pipeline's run history.
    const history = await svc.ok(t, 'GET', `${base}/pipelines/${pipelineId}/runs`);
    expect(history.data.map((r: Run) => r.id)).toEqual([run.id]);
  });

  it('a failed step fails the run and skips everything downstream of it, not the rest', async () => {
    const failing = await svc.ok(t, 'POST', `${base}/pipelines`, {
      body: {
        name: 'fragile',
        steps: [
          { name: 'sync_broken', type: 'connector_sync', connector_id: ids.broken },
          { name: 'sync_crm', type: 'connector_sync', connector_id: ids.sim },
          { name: 'transform', type: 'dbt_run', dbt_project_id: ids.dbt, depends_on: ['sync_broken'] },
          { name: 'notify_done', type: 'notification', channel_id: ids.channel, depends_on: ['transform'] },
          { name: 'notify_crm', type: 'notification', channel_id: ids.channel, depends_on: ['sync_crm'] },
        ],
      },
    });
    const { run_id } = await svc.ok(t, 'POST', `${base}/pipelines/${failing.id}/run`);
    const failed = await waitForRun(svc, t, runPath(failing.id, run_id));
    expect(failed.status).toBe('failed');
    expect(failed.steps.map((s) => [s.step_name, s.status])).toEqual([
      ['sync_broken', 'failed'],
      ['sync_crm', 'completed'],
      ['transform', 'skipped'],
      ['notify_done', 'skipped'],
      ['notify_crm', 'completed'],
    ]);
    const broken = step(failed, 'sync_broken');
    expect(broken.error).toMatch(
      new RegExp(`^connector sync ${broken.run_id} failed: 1 of 2 tables failed: shop\\.gone: table "shop\\.gone" does not exist`),
    );
    expect(failed.error).toMatch(/^step sync_broken failed: connector sync/);
    for (const name of ['transform', 'notify_done']) {
      expect(step(failed, name)).toMatchObject({ started_at: null, finished_at: null, duration_seconds: null, run_id: null });
    }
    expect(step(failed, 'transform').error).toBe('step sync_broken failed');
    expect(step(failed, 'notify_done').error).toBe('step transform skipped');
    expect(await svc.ok(t, 'GET', `${base}/pipelines/${failing.id}`)).toMatchObject({
      last_run_status: 'failed',
      last_error: failed.error,
    });
    expect((await svc.ok(t, 'GET', `${base}/connectors/${ids.broken}`)).status).toBe('error');
  });

  it('a disabled pipeline cannot be run (409) until enabled again', async () => {
    const p = await svc.ok(t, 'POST', `${base}/pipelines`, {
      body: { name: 'paused', enabled: false, steps: [{ name: 'only', type: 'notification', channel_id: ids.channel }] },
    });
    expectError(await svc.call(t, 'POST', `${base}/pipelines/${p.id}/run`), 409, 'conflict', /disabled/);
    expect((await svc.ok(t, 'GET', `${base}/pipelines/${p.id}/runs`)).data).toEqual([]);
    await svc.ok(t, 'PATCH', `${base}/pipelines/${p.id}`, { body: { enabled: true } }, 200);
    const { run_id } = await svc.ok(t, 'POST', `${base}/pipelines/${p.id}/run`);
    expect((await waitForRun(svc, t, runPath(p.id, run_id))).status).toBe('succeeded');
  });

  it('404 for unknown pipelines and runs, 403 below read-write, and audited as pipeline.run', async () => {
    expectError(await svc.call(t, 'POST', `${base}/pipelines/pip_nope/run`), 404, 'resource_not_found');
    expectError(await svc.call(t, 'GET', runPath(pipelineId, 'run_nope')), 404, 'resource_not_found');
    const ro = await svc.apiKey(t, projectId, 'read-only');
    expectError(await svc.call(t, 'POST', `${base}/pipelines/${pipelineId}/run`, { token: ro.key }), 403, 'forbidden');
    expect((await svc.call(t, 'GET', runPath(pipelineId, run.id), { token: ro.key })).status).toBe(200);
    const logs = (await svc.ok(t, 'GET', `${base}/audit-logs`, { query: { action: 'pipeline.run', limit: 100 } })).data;
    expect(
      logs.find((e: { resource_id: string; outcome: string }) => e.resource_id === pipelineId && e.outcome === 'success'),
    ).toMatchObject({ status_code: 201, resource_type: 'pipeline' });
    expect(
      logs.find((e: { resource_id: string; status_code: number }) => e.resource_id === pipelineId && e.status_code === 409),
    ).toMatchObject({ outcome: 'failure' });
  });
});

describe('POST .../dbt-projects/{id}/run', () => {
  const order = ['stg_orders', 'stg_accounts', 'fct_orders', 'dim_customers', 'helper'];

  it('builds the declared models one at a time in topological order, with deterministic durations', async () => {
    const res = await svc.call(t, 'POST', `${base}/dbt-projects/${ids.dbt}/run`);
    expect(res.status, res.text).toBe(201);
    expect(res.body.status).toBe('running');
    const run = await waitForRun(svc, t, `${base}/dbt-projects/${ids.dbt}/runs/${res.body.run_id}`);
    expect(runShape(run), JSON.stringify(runShape.errors)).toBe(true);
    expect(run).toMatchObject({
      run_type: 'dbt_run',
      resource_id: ids.dbt,
      status: 'succeeded',
      simulated: true,
      error: null,
      trigger: 'manual',
    });
    // Topological order (dependencies first, ties in declaration order), as GET .../models lists them.
    expect(run.models.map((m) => m.name)).toEqual(order);
    const listed = await svc.ok(t, 'GET', `${base}/dbt-projects/${ids.dbt}/models`);
    expect(listed.data.map((m: { name: string }) => m.name)).toEqual(order);
    for (let i = 1; i < run.models.length; i++)
      expect(ms(run.models[i].started_at)).toBeGreaterThanOrEqual(ms(run.models[i - 1].finished_at));
    expect(run.models.map((m) => [m.name, m.materialization, m.status])).toEqual([
      ['stg_orders', 'view', 'completed'],
      ['stg_accounts', 'view', 'completed'],
      ['fct_orders', 'table', 'completed'],
      ['dim_customers', 'incremental', 'completed'],
      ['helper', 'ephemeral', 'completed'],
    ]);
    // Durations are the simulated (nominal) ones: e.g. a table model takes 2-2.9 s at time scale 1.
    for (const m of run.models) expect(m.duration_seconds).toBe(modelSeconds({ name: m.name, materialization: m.materialization }));
    expect(run.models[2].duration_seconds).toBeGreaterThanOrEqual(2);
    expect(run.models[4].duration_seconds).toBe(0);
    // ... but at time scale 1000 the whole run takes milliseconds.
    expect(run.duration_seconds).toBeLessThan(1);
    expect((await svc.ok(t, 'GET', `${base}/dbt-projects/${ids.dbt}`)).last_run_status).toBe('succeeded');
  });

  it('a model whose source connector is in error fails; the models downstream are skipped', async () => {
    const dbt = await svc.ok(t, 'POST', `${base}/dbt-projects`, {
      body: {
        name: 'on-broken-source',
        repository: 'https://git.example.com/b.git',
        models: [
          { name: 'stg_bad', sources: [{ connector_id: ids.broken, table: 'shop.orders' }] },
          { name: 'stg_ok' },
          { name: 'fct', depends_on: ['stg_bad', 'stg_ok'] },
        ],
      },
    });
    // The broken connector's last sync failed (previous test), so its status is error.
    expect((await svc.ok(t, 'GET', `${base}/connectors/${ids.broken}`)).status).toBe('error');
    const { run_id } = await svc.ok(t, 'POST', `${base}/dbt-projects/${dbt.id}/run`);
    const run = await waitForRun(svc, t, `${base}/dbt-projects/${dbt.id}/runs/${run_id}`);
    expect(run.status).toBe('failed');
    expect(run.models.map((m) => [m.name, m.status])).toEqual([
      ['stg_bad', 'failed'],
      ['stg_ok', 'completed'],
      ['fct', 'skipped'],
    ]);
    expect(run.models[0].error).toBe('source shop.orders: connector "shop-broken" is in error (its last sync failed)');
    expect(run.models[2].error).toBe('upstream model stg_bad failed');
    expect(run.error).toBe('1 of 3 models failed: stg_bad: source shop.orders: connector "shop-broken" is in error (its last sync failed)');
    expect(await svc.ok(t, 'GET', `${base}/dbt-projects/${dbt.id}`)).toMatchObject({ last_run_status: 'failed', last_error: run.error });
  });

  it('one run at a time (409), run history paginated, reads for read-only, triggers for read-write', async () => {
    const big = await svc.ok(t, 'POST', `${base}/dbt-projects`, {
      body: {
        name: 'big',
        repository: 'https://git.example.com/big.git',
        models: Array.from({ length: 100 }, (_, i) => ({ name: `m${i}`, materialization: 'table', depends_on: i ? [`m${i - 1}`] : [] })),
      },
    });
    const answers = await Promise.all([0, 1].map(() => svc.call(t, 'POST', `${base}/dbt-projects/${big.id}/run`)));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    expect((await svc.ok(t, 'GET', `${base}/dbt-projects/${big.id}`)).last_run_status).toBe('running');
    const first = answers.find((a) => a.status === 201)!.body.run_id;
    await waitForRun(svc, t, `${base}/dbt-projects/${big.id}/runs/${first}`);
    const second = (await svc.ok(t, 'POST', `${base}/dbt-projects/${big.id}/run`)).run_id;
    await waitForRun(svc, t, `${base}/dbt-projects/${big.id}/runs/${second}`);
    const ro = await svc.apiKey(t, projectId, 'read-only');
    const page1 = await svc.ok(t, 'GET', `${base}/dbt-projects/${big.id}/runs`, { query: { limit: 1 }, token: ro.key });
    expect(page1).toMatchObject({ has_more: true, data: [{ id: first }] });
    const page2 = await svc.ok(t, 'GET', `${base}/dbt-projects/${big.id}/runs`, {
      query: { limit: 1, cursor: page1.next_cursor },
      token: ro.key,
    });
    expect(page2).toMatchObject({ has_more: false, data: [{ id: second }] });
    expectError(await svc.call(t, 'POST', `${base}/dbt-projects/${big.id}/run`, { token: ro.key }), 403, 'forbidden');
    expectError(await svc.call(t, 'POST', `${base}/dbt-projects/dbt_nope/run`), 404, 'resource_not_found');
  });
});
