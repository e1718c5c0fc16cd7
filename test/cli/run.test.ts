import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { DataPlatformClient, Run } from '../../src/client/index.js';
import { runDpctl } from '../support/cli.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor, cliEnvFor } from '../integration/engine/helpers.js';
import { closedPort, eventually } from '../integration/runtime/helpers.js';

/**
 * `dpctl run sync|pipeline|dbt`, the built binary against a real service over HTTPS: triggers,
 * --follow with its exit code from the run's outcome (simulated work at 100x speed; a
 * postgresql connector on a closed port makes a real sync fail), the pipeline step stream and
 * its fallback, names that do not resolve, --timeout and --output json.
 */

let svc: TestService;
let t: TestTenant;
let env: Record<string, string>;
let client: DataPlatformClient;
let projectId: string;
const ids: Record<string, string> = {};

beforeAll(async () => {
  svc = await startTestService({ timeScale: 100 });
  t = await svc.tenant();
  env = cliEnvFor(svc, t);
  client = clientFor(svc, t);
  projectId = (await svc.project(t, 'analytics')).id;
  const base = `/projects/${projectId}`;
  const post = (path: string, body: object) => svc.ok<{ id: string }>(t, 'POST', `${base}${path}`, { body });
  const port = await closedPort();
  // One connector per test that syncs it: a connector already syncing answers 409.
  for (const name of ['crm', 'crm-follow', 'crm-json', 'crm-pipeline', 'crm-key']) {
    ids[name] = (await post('/connectors', { name, connector_type: 'salesforce', selected_tables: ['Account', 'Opportunity'] })).id;
  }
  for (const name of ['broken', 'broken-pipeline']) {
    const config = { host: '127.0.0.1', port, database: 'shop', ssl_mode: 'disable' };
    ids[name] = (
      await post('/connectors', {
        name,
        connector_type: 'postgresql',
        config,
        credentials: { username: 'loader', password: 'pw' },
        selected_tables: ['public.orders'],
      })
    ).id;
  }
  const models = [
    { name: 'fct_orders', materialization: 'table', depends_on: ['stg_orders'] },
    { name: 'stg_orders', materialization: 'view' },
  ];
  ids.models = (await post('/dbt-projects', { name: 'models', repository: 'https://git.example.com/models.git', models })).id;
  ids.transform = (await post('/dbt-projects', { name: 'transform', repository: 'https://git.example.com/transform.git', models })).id;
  // ~150 s of nominal build time: 1.5 s at 100x, far longer than the --timeout of its test.
  const many = Array.from({ length: 60 }, (_, i) => ({ name: `m${i}`, materialization: 'table' }));
  ids.big = (await post('/dbt-projects', { name: 'big', repository: 'https://git.example.com/big.git', models: many })).id;
  const pipeline = (name: string, connector: string) =>
    post('/pipelines', {
      name,
      steps: [
        { name: 'sync_source', type: 'connector_sync', connector_id: ids[connector] },
        { name: 'transform', type: 'dbt_run', dbt_project_id: ids.transform, depends_on: ['sync_source'] },
      ],
    });
  ids.nightly = (await pipeline('nightly', 'crm-pipeline')).id;
  ids.brokenNightly = (await pipeline('broken-nightly', 'broken-pipeline')).id;
});
afterAll(async () => {
  await client?.close();
  await svc?.close();
});

const dpctl = (args: string[], extraEnv: Record<string, string> = {}) => runDpctl(args, { env: { ...env, ...extraEnv } });

/** The run's outcome as the service records it, once it has ended. */
const endedRun = (owner: Parameters<DataPlatformClient['runs']>[1], runId: string) =>
  eventually(async () => {
    const run = (await client.runs(projectId, owner).listAll()).find((r) => r.id === runId);
    return run && run.status !== 'running' ? run : undefined;
  });

describe('dpctl run sync', () => {
  test('without --follow: prints the run id and status, exit 0; the run goes on in the service', async () => {
    const r = await dpctl(['run', 'sync', 'crm', '--project', 'analytics']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // The status read back after the trigger: running, or already over when the machine is slow (at
    // 100x speed this sync takes a fraction of a second; a loaded CI run printed "succeeded").
    const runId = /^connector "crm": run (\S+) (?:running|succeeded) \(started \S+\)$/m.exec(r.stdout)?.[1];
    expect(runId, r.stdout).toBeDefined();
    expect((await endedRun({ connectorId: ids.crm }, runId!)).status).toBe('succeeded');
  });

  test('--follow: one line per table as it ends, then the outcome; exit 0', async () => {
    const r = await dpctl(['run', 'sync', 'crm-follow', '--project', 'analytics', '--follow']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^connector "crm-follow": run \S+ started$/m);
    expect(r.stdout).toMatch(/^ {2}table Account: completed in [\d.]+ s \(\d+ rows\)$/m);
    expect(r.stdout).toMatch(/^ {2}table Opportunity: completed in [\d.]+ s \(\d+ rows\)$/m);
    expect(r.stdout).toMatch(/^connector "crm-follow": run \S+ succeeded in [\d.]+ s$/m);
  });

  test('--follow --output json: only the final run object on stdout', async () => {
    const r = await dpctl(['run', 'sync', 'crm-json', '--project', 'analytics', '--follow', '--output', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout) as Run;
    expect(run).toMatchObject({
      run_type: 'connector_sync',
      resource_id: ids['crm-json'],
      status: 'succeeded',
      error: null,
      trigger: 'manual',
    });
    expect(run.tables.map((x) => [x.table, x.status])).toEqual([
      ['Account', 'completed'],
      ['Opportunity', 'completed'],
    ]);
    // Progress goes to stderr, where it does not break the JSON.
    expect(r.stderr).toContain('table Account: completed');
  });

  test('a failing sync (postgresql, nothing listening): exit 1 with the run error', async () => {
    const r = await dpctl(['run', 'sync', 'broken', '--project', 'analytics', '--follow']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^connector "broken": run \S+ failed in [\d.]+ s$/m);
    expect(r.stderr).toMatch(/^dpctl: run \S+ failed: Host unreachable: connection to .* refused/m);
  });

  test('an API key and the connection flags instead of the environment', async () => {
    const key = await svc.apiKey(t, projectId, 'read-write');
    const noEnv = {
      DATAPLATFORM_URL: '',
      DATAPLATFORM_EMAIL: '',
      DATAPLATFORM_PASSWORD: '',
      DATAPLATFORM_CA_FILE: '',
      DATAPLATFORM_API_KEY: '',
    };
    const flags = ['--url', `https://${t.slug}.localhost:${svc.port}`, '--api-key', key.key, '--ca-file', svc.service.tls.certPath];
    const r = await dpctl(['run', 'sync', 'crm-key', '--project', 'analytics', '--follow', ...flags], noEnv);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/run \S+ succeeded/);
  });
});

describe('dpctl run pipeline --follow', () => {
  test('prints each step update from the stream and exits 0 when the run succeeded', async () => {
    const r = await dpctl(['run', 'pipeline', 'nightly', '--project', 'analytics', '--follow']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const steps = r.stdout.split('\n').filter((l) => l.startsWith('  step '));
    expect(steps.map((l) => l.replace(/ in [\d.]+ s$/, ''))).toEqual([
      '  step sync_source: running',
      '  step sync_source: completed',
      '  step transform: running',
      '  step transform: completed',
    ]);
    expect(r.stdout).toMatch(/^pipeline "nightly": run \S+ succeeded in [\d.]+ s$/m);
  });

  test('a failing step: the step lines, exit 1 and the run error', async () => {
    const r = await dpctl(['run', 'pipeline', 'broken-nightly', '--project', 'analytics', '--follow']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^ {2}step sync_source: failed/m);
    expect(r.stdout).toMatch(/^ {2}step transform: skipped/m);
    expect(r.stdout).toMatch(/^pipeline "broken-nightly": run \S+ failed/m);
    expect(r.stderr).toMatch(/^dpctl: run \S+ failed: step sync_source failed: connector sync \S+ failed: Host unreachable/m);
  });

  test('a stream that cannot open (a proxy that does not pass WebSocket upgrades): the steps and the outcome come from the run', async () => {
    const proxy = await FaultProxy.start(svc);
    try {
      const url = { DATAPLATFORM_URL: `https://${t.slug}.localhost:${proxy.port}` };
      const ok = await dpctl(['run', 'pipeline', 'nightly', '--project', 'analytics', '--follow'], url);
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stderr).toMatch(/^dpctl: the step stream ended \(.*426.*\); reading the run instead$/m);
      expect(ok.stdout).toMatch(/^ {2}step sync_source: completed/m);
      expect(ok.stdout).toMatch(/^ {2}step transform: completed/m);
      expect(ok.stdout).toMatch(/run \S+ succeeded/);
      const failed = await dpctl(['run', 'pipeline', 'broken-nightly', '--project', 'analytics', '--follow', '--output', 'json'], url);
      expect(failed.code).toBe(1);
      expect(JSON.parse(failed.stdout)).toMatchObject({
        run_type: 'pipeline',
        status: 'failed',
        error: expect.stringMatching(/^step sync_source failed/),
      });
    } finally {
      await proxy.close();
    }
  });
});

describe('dpctl run dbt', () => {
  test('--follow prints each model as it is built, in build order; exit 0', async () => {
    const r = await dpctl(['run', 'dbt', 'models', '--project', 'analytics', '--follow']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const models = r.stdout.split('\n').filter((l) => l.startsWith('  model ') && !l.endsWith(': running'));
    expect(models.map((l) => l.replace(/ in [\d.]+ s$/, ''))).toEqual(['  model stg_orders: completed', '  model fct_orders: completed']);
  });

  test('--timeout exceeded: exit 1 naming the run, which goes on in the service', async () => {
    const r = await dpctl(['run', 'dbt', 'big', '--project', 'analytics', '--follow', '--timeout', '300ms']);
    expect(r.code).toBe(1);
    const runId = /^dpctl: timed out after 300ms waiting for run (\S+) to end \(it goes on in the service\)$/m.exec(r.stderr)?.[1];
    expect(runId, r.stderr).toBeDefined();
    expect((await endedRun({ dbtProjectId: ids.big }, runId!)).status).toBe('succeeded');
  });

  test('--output json without --follow: the run as it is now', async () => {
    const r = await dpctl(['run', 'dbt', 'models', '--project', 'analytics', '--output', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout) as Run;
    expect(run).toMatchObject({ run_type: 'dbt_run', resource_id: ids.models, trigger: 'manual' });
    await endedRun({ dbtProjectId: ids.models }, run.id);
  });
});

describe("a service with only the spec's operations (--strict-spec)", () => {
  test('a sync is followed through the run history list (no GET of one sync run in the spec)', async () => {
    const strict = await startTestService({ timeScale: 100, strictSpec: true });
    try {
      const st = await strict.tenant();
      const p = await strict.project(st, 'analytics');
      await strict.ok(st, 'POST', `/projects/${p.id}/connectors`, {
        body: { name: 'crm', connector_type: 'salesforce', selected_tables: ['Account'] },
      });
      const r = await runDpctl(['run', 'sync', 'crm', '--project', 'analytics', '--follow'], { env: cliEnvFor(strict, st) });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^ {2}table Account: completed/m);
      expect(r.stdout).toMatch(/^connector "crm": run \S+ succeeded/m);
    } finally {
      await strict.close();
    }
  });
});

describe('names and options', () => {
  test('an unknown project or name: exit 1 naming what was not found, nothing triggered', async () => {
    const [project, pipeline, connector, dbt] = await Promise.all([
      dpctl(['run', 'pipeline', 'nightly', '--project', 'nope']),
      dpctl(['run', 'pipeline', 'weekly', '--project', 'analytics', '--follow']),
      dpctl(['run', 'sync', 'nightly', '--project', 'analytics']),
      dpctl(['run', 'dbt', 'crm', '--project', 'analytics']),
    ]);
    expect(project).toMatchObject({ code: 1, stdout: '', stderr: 'dpctl: project "nope" not found\n' });
    expect(pipeline).toMatchObject({ code: 1, stdout: '', stderr: 'dpctl: pipeline "weekly" not found in project "analytics"\n' });
    expect(connector).toMatchObject({ code: 1, stdout: '', stderr: 'dpctl: connector "nightly" not found in project "analytics"\n' });
    expect(dbt).toMatchObject({ code: 1, stdout: '', stderr: 'dpctl: dbt project "crm" not found in project "analytics"\n' });
  });

  test('a bad --timeout, a missing --project, an unknown kind: exit 1 before anything is triggered', async () => {
    const [timeout, project, kind] = await Promise.all([
      dpctl(['run', 'sync', 'crm', '--project', 'analytics', '--follow', '--timeout', 'soon']),
      dpctl(['run', 'sync', 'crm']),
      dpctl(['run', 'backfill', 'crm', '--project', 'analytics']),
    ]);
    expect(timeout).toMatchObject({ code: 1, stderr: 'dpctl: --timeout must look like 500ms, 30s, 5m or 1h; got "soon"\n' });
    expect(project.code).toBe(1);
    expect(project.stderr).toContain("error: required option '--project <name>' not specified");
    expect(kind.code).toBe(1);
    expect(kind.stderr).toContain("error: unknown command 'backfill'");
    // crm's last run is still the one of the first test.
    expect(await client.runs(projectId, { connectorId: ids.crm }).listAll()).toHaveLength(1);
  });
});
