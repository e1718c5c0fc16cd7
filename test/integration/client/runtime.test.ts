import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { clientFor } from './helpers.js';
import type { DataPlatformClient } from '../../../src/client/index.js';

let svc: TestService;
let t: TestTenant;
let client: DataPlatformClient;
let projectId: string;
beforeAll(async () => {
  svc = await startTestService({ timeScale: 1000 });
  t = await svc.tenant();
  client = clientFor(svc, t, { email: t.adminEmail, password: t.adminPassword });
  projectId = (await client.projects.create({ name: 'runtime' })).id;
});
afterAll(async () => {
  await client?.close();
  await svc?.close();
});

/** A local port with nothing listening: connections to it are refused at once. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

async function waitForRun(get: () => Promise<{ status: string }>) {
  for (let i = 0; i < 200; i++) {
    const run = await get();
    if (run.status !== 'running') return run;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('run did not finish');
}

describe('typed runtime operations', () => {
  it('runs a dbt project and a pipeline, and reads their runs', async () => {
    const dbt = await client.resources('dbt_project', { projectId }).create({
      name: 'warehouse',
      repository: 'https://git.example.test/w.git',
      models: [{ name: 'stg' }, { name: 'orders', depends_on: ['stg'] }],
    });
    const trigger = await client.runDbtProject(projectId, dbt.id);
    expect(trigger).toMatchObject({ status: 'running', run_id: expect.any(String), started_at: expect.any(String) });
    // The pipeline's step runs the same dbt project, which fails while this run still runs: let it end first.
    const dbtRun = await waitForRun(
      async () =>
        (
          await client.request<{ status: string }>({
            method: 'GET',
            route: '/projects/{id}/dbt-projects/{dbtId}/runs/{runId}',
            params: { id: projectId, dbtId: dbt.id, runId: trigger.run_id },
          })
        ).body,
    );
    expect(dbtRun.status).toBe('succeeded');
    const pipeline = await client
      .resources('pipeline', { projectId })
      .create({ name: 'nightly', steps: [{ name: 'build', type: 'dbt_run', dbt_project_id: dbt.id }] });
    const run = await client.runPipeline(projectId, pipeline.id);
    const finished = await waitForRun(() => client.pipelineRun(projectId, pipeline.id, run.run_id));
    expect(finished.status).toBe('succeeded');
    const history = await client.runs(projectId, { dbtProjectId: dbt.id }).listAll();
    expect(history.map((r) => r.id)).toContain(trigger.run_id);
  });

  it('plans and applies infrastructure; a re-plan after the apply is empty', async () => {
    await client
      .resources('infrastructure_resource', { projectId })
      .create({ name: 'wh', resource_type: 'warehouse', provider: 'snowflake', region: 'eu-west-1' });
    const plan = await client.planInfrastructure(projectId);
    expect(plan.changes.map((c) => [c.action, c.name])).toEqual([['create', 'wh']]);
    const apply = await client.applyInfrastructure(projectId, plan.plan_id);
    await waitForRun(
      async () =>
        (
          await client.request<{ status: string }>({
            method: 'GET',
            route: '/projects/{id}/infrastructure/runs/{runId}',
            params: { id: projectId, runId: apply.run_id },
          })
        ).body,
    );
    expect((await client.planInfrastructure(projectId)).changes).toEqual([]);
  });

  it('tests a connection and a channel: failures are answers, not errors', async () => {
    const port = await closedPort();
    const connector = await client.resources('connector', { projectId }).create({
      name: 'nowhere',
      connector_type: 'postgresql',
      config: { host: '127.0.0.1', port, database: 'x' },
      credentials: { username: 'u', password: 'p' },
    });
    const test = await client.testConnection(projectId, connector.id);
    expect(test.success).toBe(false);
    expect(test.message).toMatch(/refused|connect/i);
    const channel = await client
      .resources('notification_channel', { projectId })
      .create({ name: 'hook', type: 'webhook', config: { url: `http://127.0.0.1:${port}/hook` } });
    const delivery = await client.testChannel(projectId, channel.id);
    expect(delivery.success).toBe(false);
  });

  it('reads the tenant audit log with filters', async () => {
    const entries = await client.tenantAuditLogs().listAll({ resource_type: 'project' });
    expect(entries.some((e) => e.action === 'project.create' && e.resource_name === 'runtime')).toBe(true);
  });
});
