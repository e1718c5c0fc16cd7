import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { startService } from '../../../src/service/server.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { newId } from '../../../src/service/ids.js';
import { TestService, testStore, type TestTenant } from '../../support/service.js';
import { TestHttp } from '../../support/http.js';
import { eventually, ms, waitForRun, type Run } from './helpers.js';

/**
 * Runs survive as records. A service stopped mid-run leaves its runs running; the next start
 * (same data dir or database) marks them failed, "interrupted by service restart", and puts
 * their connector, pipeline, dbt project and infrastructure resources right.
 */
const INTERRUPTED = 'interrupted by service restart';

let dataDir: string;
let databaseUrl: string | undefined;
let a: TestService;
let b: TestService;
let tA: TestTenant;
let t: TestTenant;
let projectId: string;
let base: string;
const ids: Record<string, string> = {};
const runs: Record<string, string> = {};

async function boot(timeScale: number): Promise<TestService> {
  const service = await startService({ port: 0, logLevel: 'silent', rateLimit: 100_000, dataDir, databaseUrl, timeScale });
  return new TestService(service, new TestHttp(service.tls.certPath), dataDir);
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'dp-restart-'));
  if (testStore() === 'postgres') {
    const name = `dp_restart_${randomBytes(5).toString('hex')}`;
    const c = new pg.Client({ connectionString: inject('pgUrl') });
    await c.connect();
    await c.query(`CREATE DATABASE ${name}`);
    await c.end();
    const url = new URL(inject('pgUrl'));
    url.pathname = `/${name}`;
    databaseUrl = url.toString();
  }
  // Time scale 1: simulated work takes its nominal seconds, so everything is mid-run when the service stops.
  a = await boot(1);
  tA = await a.tenant();
  projectId = (await a.project(tA, 'restart')).id;
  base = `/projects/${projectId}`;
  ids.done = (await a.ok(tA, 'POST', `${base}/connectors`, { body: { name: 'done', connector_type: 'mysql', selected_tables: [] } })).id;
  ids.sync = (
    await a.ok(tA, 'POST', `${base}/connectors`, {
      body: { name: 'erp', connector_type: 'sqlserver', selected_tables: ['dbo.orders', 'dbo.lines'] },
    })
  ).id;
  ids.stepSync = (
    await a.ok(tA, 'POST', `${base}/connectors`, { body: { name: 'crm', connector_type: 'salesforce', selected_tables: ['Account'] } })
  ).id;
  ids.dbt = (
    await a.ok(tA, 'POST', `${base}/dbt-projects`, {
      body: {
        name: 'models',
        repository: 'https://git.example.com/m.git',
        models: [
          { name: 'a', materialization: 'table' },
          { name: 'b', depends_on: ['a'] },
        ],
      },
    })
  ).id;
  ids.channel = (
    await a.ok(tA, 'POST', `${base}/notification-channels`, {
      body: { name: 'ops', type: 'email', config: { email_addresses: ['ops@example.com'] } },
    })
  ).id;
  ids.pipeline = (
    await a.ok(tA, 'POST', `${base}/pipelines`, {
      body: {
        name: 'nightly',
        steps: [
          { name: 'sync', type: 'connector_sync', connector_id: ids.stepSync },
          { name: 'notify', type: 'notification', channel_id: ids.channel, depends_on: ['sync'] },
        ],
      },
    })
  ).id;
  ids.wh = (
    await a.ok(tA, 'POST', `${base}/infrastructure`, {
      body: { name: 'wh', resource_type: 'warehouse', provider: 'snowflake', region: 'eu-west-1' },
    })
  ).id;

  // A run that ends before the stop (no tables: nothing to simulate) must stay as it ended.
  runs.done = (await a.ok(tA, 'POST', `${base}/connectors/${ids.done}/sync`)).run_id;
  await waitForRun(a, tA, `${base}/connectors/${ids.done}/runs/${runs.done}`);
  runs.sync = (await a.ok(tA, 'POST', `${base}/connectors/${ids.sync}/sync`)).run_id;
  runs.dbt = (await a.ok(tA, 'POST', `${base}/dbt-projects/${ids.dbt}/run`)).run_id;
  runs.pipeline = (await a.ok(tA, 'POST', `${base}/pipelines/${ids.pipeline}/run`)).run_id;
  runs.apply = (await a.ok(tA, 'POST', `${base}/infrastructure/apply`)).run_id;
  // Wait until the pipeline's sync step has started its connector run, so there is a child run too.
  runs.stepSync = await eventually(
    async () => (await a.ok<Run>(tA, 'GET', `${base}/pipelines/${ids.pipeline}/runs/${runs.pipeline}`)).steps[0].run_id,
  );
  expect((await a.ok<Run>(tA, 'GET', `${base}/dbt-projects/${ids.dbt}/runs/${runs.dbt}`)).models[0].status).toBe('running');
  // Progress is stored coalesced (at most every 50 ms): wait until the first table and change are stored running too.
  await eventually(
    async () => (await a.ok<Run>(tA, 'GET', `${base}/connectors/${ids.sync}/runs/${runs.sync}`)).tables[0].status === 'running',
  );
  await eventually(async () => (await a.ok<Run>(tA, 'GET', `${base}/infrastructure/runs/${runs.apply}`)).changes[0].status === 'running');
  expect(runtimeOf(a.service.ctx).active).toBe(5);

  // Stop mid-run, keeping the data, then start again on the same store.
  await a.service.close();
  await a.http.close();
  b = await boot(1000);
  t = { ...tA, base: b.url(tA.slug) };
});
afterAll(async () => {
  await b?.close();
});

describe('restart with runs in flight', () => {
  it('marks every run the stopped service left running as failed, interrupted by service restart', async () => {
    const paths = {
      sync: `${base}/connectors/${ids.sync}/runs/${runs.sync}`,
      stepSync: `${base}/connectors/${ids.stepSync}/runs/${runs.stepSync}`,
      dbt: `${base}/dbt-projects/${ids.dbt}/runs/${runs.dbt}`,
      pipeline: `${base}/pipelines/${ids.pipeline}/runs/${runs.pipeline}`,
      apply: `${base}/infrastructure/runs/${runs.apply}`,
    };
    for (const [what, path] of Object.entries(paths)) {
      const run = await b.ok<Run>(t, 'GET', path);
      expect(run.status, what).toBe('failed');
      expect(run.error, what).toBe(INTERRUPTED);
      expect(ms(run.finished_at), what).toBeGreaterThanOrEqual(ms(run.started_at));
      expect(run.duration_seconds, what).toBe((ms(run.finished_at) - ms(run.started_at)) / 1000);
    }
    const sync = await b.ok<Run>(t, 'GET', paths.sync);
    expect(sync.tables.map((x) => [x.table, x.status])).toEqual([
      ['dbo.orders', 'failed'],
      ['dbo.lines', 'skipped'],
    ]);
    expect(sync.tables[0].error).toBe(INTERRUPTED);
    const dbt = await b.ok<Run>(t, 'GET', paths.dbt);
    expect(dbt.models.map((m) => [m.name, m.status])).toEqual([
      ['a', 'failed'],
      ['b', 'skipped'],
    ]);
    const pipeline = await b.ok<Run>(t, 'GET', paths.pipeline);
    expect(pipeline.steps.map((s) => [s.step_name, s.status, s.error])).toEqual([
      ['sync', 'failed', INTERRUPTED],
      ['notify', 'skipped', null],
    ]);
    const apply = await b.ok<Run>(t, 'GET', paths.apply);
    expect(apply.changes.map((c) => [c.name, c.status])).toEqual([['wh', 'failed']]);
    // The run that had ended is untouched.
    expect((await b.ok<Run>(t, 'GET', `${base}/connectors/${ids.done}/runs/${runs.done}`)).status).toBe('succeeded');
  });

  it('puts the resources right: connectors error, last_run_status failed, infrastructure failed', async () => {
    const connector = await b.ok(t, 'GET', `${base}/connectors/${ids.sync}`);
    expect(connector.status).toBe('error');
    expect(connector.last_sync_at).toEqual(expect.any(String));
    expect((await b.ok(t, 'GET', `${base}/connectors/${ids.stepSync}`)).status).toBe('error');
    expect((await b.ok(t, 'GET', `${base}/connectors/${ids.done}`)).status).toBe('active');
    expect((await b.ok(t, 'GET', `${base}/dbt-projects/${ids.dbt}`)).last_run_status).toBe('failed');
    expect((await b.ok(t, 'GET', `${base}/pipelines/${ids.pipeline}`)).last_run_status).toBe('failed');
    expect((await b.ok(t, 'GET', `${base}/infrastructure/${ids.wh}`)).status).toBe('failed');
  });

  it('everything can run again after the restart', async () => {
    const sync = await b.ok(t, 'POST', `${base}/connectors/${ids.sync}/sync`);
    expect((await waitForRun(b, t, `${base}/connectors/${ids.sync}/runs/${sync.run_id}`)).status).toBe('succeeded');
    expect((await b.ok(t, 'GET', `${base}/connectors/${ids.sync}`)).status).toBe('active');
    const pipeline = await b.ok(t, 'POST', `${base}/pipelines/${ids.pipeline}/run`);
    expect((await waitForRun(b, t, `${base}/pipelines/${ids.pipeline}/runs/${pipeline.run_id}`)).status).toBe('succeeded');
    // The interrupted create was never recorded as provisioned, so the plan still creates it.
    const plan = await b.ok(t, 'POST', `${base}/infrastructure/plan`, {}, 200);
    expect(plan.changes.map((c: { action: string; name: string }) => [c.action, c.name])).toEqual([['create', 'wh']]);
    const apply = await b.ok(t, 'POST', `${base}/infrastructure/apply`, { body: { plan_id: plan.plan_id } });
    // Scaled-down provisioning may already be over on a busy machine: either state is right here.
    expect(['provisioning', 'provisioned']).toContain((await b.ok(t, 'GET', `${base}/infrastructure/${ids.wh}`)).status);
    expect((await waitForRun(b, t, `${base}/infrastructure/runs/${apply.run_id}`)).status).toBe('succeeded');
    expect((await b.ok(t, 'GET', `${base}/infrastructure/${ids.wh}`)).status).toBe('provisioned');
    expect((await b.ok(t, 'POST', `${base}/infrastructure/plan`, {}, 200)).changes).toEqual([]);
  });

  it('with replicas sharing a store, only runs of silent instances are taken over', async () => {
    const ctx = b.service.ctx;
    const tenantId = (await ctx.tenants.bySlug(t.slug))!.id;
    const now = ctx.options.clock();
    /** A running sync of connector `connectorId`, claimed by `instance` (as another replica would have it). */
    const orphan = async (instance: string, heartbeat: number | null, connectorId: string) => {
      const id = newId('run');
      const data = {
        id,
        project_id: projectId,
        run_type: 'connector_sync',
        resource_id: connectorId,
        status: 'running',
        trigger: 'manual',
        parent_run_id: null,
        simulated: true,
        started_at: new Date(now - 1000).toISOString(),
        finished_at: null,
        duration_seconds: null,
        error: null,
        plan_id: null,
        tables: [],
        steps: [],
        models: [],
        changes: [],
      };
      await ctx.resources.insert({ id, tenantId, projectId, kind: 'run', parentId: connectorId, name: id, data, secrets: null });
      await ctx.db.run('INSERT INTO meta (key, value) VALUES (?, ?)', [
        `runtime.run.${id}`,
        JSON.stringify({ instance, tenant_id: tenantId, project_id: projectId }),
      ]);
      if (heartbeat !== null)
        await ctx.db.run('INSERT INTO meta (key, value) VALUES (?, ?)', [`runtime.instance.${instance}`, String(heartbeat)]);
      return id;
    };
    const alive = await orphan('rti_alive', now, ids.done);
    const silent = await orphan('rti_silent', now - 60_000, ids.done);
    const gone = await orphan('rti_gone', null, ids.done);
    await runtimeOf(ctx).sweep(false);
    const status = async (id: string) => (await b.ok<Run>(t, 'GET', `${base}/connectors/${ids.done}/runs/${id}`)).status;
    expect(await status(alive)).toBe('running');
    expect(await status(silent)).toBe('failed');
    expect(await status(gone)).toBe('failed');
    // A silent instance's heartbeat is forgotten; a live one's stays.
    const keys = (await ctx.db.all<{ key: string }>("SELECT key FROM meta WHERE key LIKE 'runtime.instance.%'")).map((r) => r.key);
    expect(keys).toContain('runtime.instance.rti_alive');
    expect(keys).not.toContain('runtime.instance.rti_silent');
  });
});
