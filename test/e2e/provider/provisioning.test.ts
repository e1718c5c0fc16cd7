import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import {
  closedPort,
  createSourceDb,
  ensurePasswordRole,
  SECURE_PASSWORD,
  SECURE_ROLE,
  waitForRun,
  type SourceDb,
} from '../../integration/runtime/helpers.js';
import { haveTerraform, PROVIDER_BLOCK, TerraformWorkspace } from './harness.js';

/**
 * What the provider does after the API call, from the descriptors, under the real `terraform`:
 * infrastructure resources (`x-provisioning`) wait for the project's plan + apply (failures at the
 * resource, tainted on create, `timeouts`), connectors (`x-test-action`) test their connection
 * with `run_setup_tests`, and a degraded resource (`x-health`) is a warning. The steps build on
 * each other (one working directory per service), so they run in order.
 */

/** Terraform wraps a diagnostic's detail to the terminal's width: compare it with single spaces. */
const flat = (out: string) => out.replace(/\s+/g, ' ');

const VARS = `variable "project_id" {\n  type = string\n}\n`;

function infra(label: string, o: { name: string; region?: string; type?: string; count?: number; timeouts?: string }): string {
  const name = o.count ? `${o.name}-\${count.index}` : o.name;
  return `resource "dataplatform_infrastructure_resource" "${label}" {
${o.count ? `  count         = ${o.count}\n` : ''}  project_id    = var.project_id
  name          = "${name}"
  resource_type = "${o.type ?? 'bucket'}"
  provider_name = "aws"
  region        = "${o.region ?? 'eu-west-1'}"
${o.timeouts ? `  timeouts {\n    ${o.timeouts}\n  }\n` : ''}}
`;
}

describe.skipIf(testStore() === 'postgres' || !haveTerraform)('provider: provisioning, connection tests, health (real terraform)', () => {
  let svc: TestService;
  let t: TestTenant;
  let ws: TerraformWorkspace;
  let projectId: string;
  let src: SourceDb;
  const api = <T = any>(method: string, path: string, body?: unknown, expected?: number) =>
    svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expected);
  const infraByName = async (name: string) =>
    (await api<{ data: any[] }>('GET', `/projects/${projectId}/infrastructure`)).data.find((r) => r.name === name);
  const platformPlan = () => api<{ changes: any[] }>('POST', `/projects/${projectId}/infrastructure/plan`, undefined, 200);
  const write = (...blocks: string[]) => ws.write('main.tf', [PROVIDER_BLOCK, VARS, ...blocks].join('\n'));
  const failingApply = async () => (await ws.tf(['apply', '-auto-approve', '-input=false'], [1])).out;

  beforeAll(async () => {
    // Provisioning a bucket takes 1-2 s nominal: 0.05-0.1 s at this scale.
    [svc, src] = await Promise.all([startTestService({ timeScale: 20, sourceTimeout: 2 }), createSourceDb(1)]);
    t = await svc.tenant();
    projectId = (await svc.project(t, 'tf-provisioning')).id;
    ws = await TerraformWorkspace.create(svc, t);
    ws.vars.project_id = projectId;
    write();
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await svc?.close();
    ws?.close();
  });

  it('apply waits until the platform has provisioned what it created, three in parallel', { timeout: 90_000 }, async () => {
    write(infra('bucket', { name: 'bucket', count: 3 }));
    const out = await ws.apply();
    expect(out).toContain('Apply complete! Resources: 3 added, 0 changed, 0 destroyed.');
    // Without the provider's plan + apply they would still be pending.
    for (const i of [0, 1, 2]) expect(await infraByName(`bucket-${i}`)).toMatchObject({ status: 'provisioned', last_error: null });
    expect((await platformPlan()).changes).toEqual([]);
    const state = await ws.show();
    const statuses = state.values.root_module.resources.map((r: any) => r.values.status);
    expect(statuses).toEqual(['provisioned', 'provisioned', 'provisioned']);
    expect((await ws.plan()).code).toBe(0);
  });

  it(
    "an unknown region fails the apply at the resource with the platform's message; tainted, fixed by a replace",
    { timeout: 90_000 },
    async () => {
      write(infra('bucket', { name: 'bucket', count: 3 }), infra('bad', { name: 'bad', region: 'mars-1' }));
      const out = await failingApply();
      expect(out).toMatch(/Error: dataplatform_infrastructure_resource: provisioning failed: aws has no region "mars-1"/);
      expect(out).toContain('with dataplatform_infrastructure_resource.bad,');
      expect(flat(out)).toContain('marked tainted');
      // The state holds what exists: the resource, failed, tainted.
      const bad = await infraByName('bad');
      expect(bad).toMatchObject({ status: 'failed', last_error: expect.stringContaining('aws has no region "mars-1"') });
      const inState = (await ws.show()).values.root_module.resources.find(
        (r: any) => r.address === 'dataplatform_infrastructure_resource.bad',
      );
      expect(inState).toMatchObject({ tainted: true, values: { id: bad.id, status: 'failed' } });
      const plan = await ws.plan();
      expect(plan.out).toContain('dataplatform_infrastructure_resource.bad is tainted, so must be replaced');

      write(infra('bucket', { name: 'bucket', count: 3 }), infra('bad', { name: 'bad', region: 'eu-central-1' }));
      expect(await ws.apply()).toContain('Apply complete! Resources: 1 added, 0 changed, 1 destroyed.');
      const fixed = await infraByName('bad');
      expect(fixed).toMatchObject({ status: 'provisioned', region: 'eu-central-1', last_error: null });
      expect(fixed.id).not.toBe(bad.id);
      expect((await platformPlan()).changes).toEqual([]);
      expect((await ws.plan()).code).toBe(0);
    },
  );

  it('an update waits for the platform to provision the change', { timeout: 60_000 }, async () => {
    write(
      infra('bucket', { name: 'bucket', count: 3 }),
      infra('bad', { name: 'bad', region: 'eu-central-1' }).replace('}\n', '  config        = { storage_class = "cold" }\n}\n'),
    );
    expect(await ws.apply()).toContain('Apply complete! Resources: 0 added, 1 changed, 0 destroyed.');
    expect(await infraByName('bad')).toMatchObject({ status: 'provisioned', config: { storage_class: 'cold' } });
    expect((await platformPlan()).changes).toEqual([]);
  });

  it(
    'a change that reached the platform but no apply (pending) is planned as an update, and the apply provisions it',
    { timeout: 60_000 },
    async () => {
      const bad = await infraByName('bad');
      // As an apply stopped between its PATCH and the provisioning leaves it: the configuration says
      // what the PATCH wrote, and nothing provisioned it.
      const cold = infra('bad', { name: 'bad', region: 'eu-central-1' }).replace(
        '}\n',
        '  config        = { storage_class = "cold" }\n}\n',
      );
      write(infra('bucket', { name: 'bucket', count: 3 }), cold.replace('"cold"', '"archive"'));
      await api('PATCH', `/projects/${projectId}/infrastructure/${bad.id}`, { config: { storage_class: 'archive' } }, 200);
      expect(await infraByName('bad')).toMatchObject({ status: 'pending' });
      const plan = await ws.plan();
      expect(plan.code).toBe(2);
      expect(plan.out).toContain('dataplatform_infrastructure_resource.bad will be updated in-place');
      expect(await ws.apply()).toContain('Apply complete! Resources: 0 added, 1 changed, 0 destroyed.');
      expect(await infraByName('bad')).toMatchObject({ status: 'provisioned', config: { storage_class: 'archive' } });
      expect((await platformPlan()).changes).toEqual([]);
      expect((await ws.plan()).code).toBe(0);
    },
  );

  it("a delete deprovisions: the platform's next plan is empty", { timeout: 60_000 }, async () => {
    write();
    expect(await ws.apply()).toContain('Apply complete! Resources: 0 added, 0 changed, 4 destroyed.');
    expect((await api<{ data: any[] }>('GET', `/projects/${projectId}/infrastructure`)).data).toEqual([]);
    expect((await platformPlan()).changes).toEqual([]);
  });

  it('a bad duration in timeouts fails validate at the attribute', { timeout: 60_000 }, async () => {
    write(infra('slow', { name: 'slow', timeouts: 'create = "soon"' }));
    const { out } = await ws.tf(['validate'], [1]);
    expect(out).toContain('Error: dataplatform_infrastructure_resource: timeouts.create "soon" is not a duration');
    expect(out).toMatch(/create = "soon"/);
  });

  it(
    "run_setup_tests: a closed port fails the apply with the test's message; a reachable source and a simulated type pass",
    { timeout: 90_000 },
    async () => {
      const port = await closedPort();
      const passwordAuth = await ensurePasswordRole(src);
      const credentials = passwordAuth
        ? `{ username = "${SECURE_ROLE}", password = "${SECURE_PASSWORD}" }`
        : `{ username = "${src.admin.username}", password = "unused" }`;
      const pg = (p: number) => `resource "dataplatform_connector" "pg" {
  project_id      = var.project_id
  name            = "pg"
  connector_type  = "postgresql"
  config          = { host = "${src.host}", port = ${p}, database = "${src.database}", schema = "shop" }
  credentials     = ${credentials}
  run_setup_tests = true
}
resource "dataplatform_connector" "sim" {
  project_id      = var.project_id
  name            = "sim"
  connector_type  = "mysql"
  selected_tables = ["app.users"]
  run_setup_tests = true
}
`;
      write(pg(port));
      const out = await failingApply();
      expect(out).toMatch(/Error: dataplatform_connector: connection test failed: Host unreachable: connection to [\d.:a-z]+ refused/);
      expect(out).toContain('with dataplatform_connector.pg,');
      expect(out).not.toContain('with dataplatform_connector.sim,');
      // Saved all the same: in the API and (tainted) in the state; run_setup_tests never reaches the API.
      const saved = (await api<{ data: any[] }>('GET', `/projects/${projectId}/connectors`)).data.find((c) => c.name === 'pg');
      expect(saved.config.port).toBe(port);
      expect(saved).not.toHaveProperty('run_setup_tests');
      const resources = (await ws.show()).values.root_module.resources;
      expect(resources.find((r: any) => r.address === 'dataplatform_connector.pg')).toMatchObject({
        tainted: true,
        values: { run_setup_tests: true },
      });
      expect(resources.find((r: any) => r.address === 'dataplatform_connector.sim').tainted).toBeUndefined();

      write(pg(src.port));
      expect(await ws.apply()).toContain('Apply complete! Resources: 1 added, 0 changed, 1 destroyed.');
      expect((await ws.plan()).code).toBe(0);

      // An update whose test fails is saved as configured (not tainted). The identical apply run
      // again tests again, and fails until the test passes: the provider keeps the failure in the
      // resource's private state (it used to be "No changes" and a green run, nothing fixed).
      write(pg(port));
      expect(await failingApply()).toMatch(/Error: dataplatform_connector: connection test failed: Host unreachable/);
      const pgState = async () =>
        (await ws.show()).values.root_module.resources.find((r: any) => r.address === 'dataplatform_connector.pg');
      expect((await pgState()).tainted).toBeUndefined();
      const again = await ws.plan();
      expect(again.code).toBe(2);
      expect(again.out).toContain('Warning: dataplatform_connector "pg": its last connection test failed');
      expect(again.out).toContain('# dataplatform_connector.pg will be updated in-place');
      expect(await failingApply()).toMatch(/Error: dataplatform_connector: connection test failed: Host unreachable/);
      write(pg(src.port));
      expect(await ws.apply()).toContain('Apply complete! Resources: 0 added, 1 changed, 0 destroyed.');
      expect((await ws.plan()).code).toBe(0);
    },
  );

  it('a degraded connector (its last sync failed) is a warning of plan and apply, not an error', { timeout: 90_000 }, async () => {
    const port = await closedPort();
    write(`resource "dataplatform_connector" "flaky" {
  project_id     = var.project_id
  name           = "flaky"
  connector_type = "postgresql"
  config         = { host = "127.0.0.1", port = ${port}, database = "orders" }
  credentials    = { username = "reader", password = "not-used" }
}
`);
    // (The connectors of the step before are destroyed.)
    expect(await ws.apply()).toMatch(/Apply complete! Resources: 1 added, 0 changed, \d+ destroyed\./);
    const flaky = (await api<{ data: any[] }>('GET', `/projects/${projectId}/connectors`)).data.find((c) => c.name === 'flaky');
    const { run_id } = await api('POST', `/projects/${projectId}/connectors/${flaky.id}/sync`);
    expect((await waitForRun(svc, t, `/projects/${projectId}/connectors/${flaky.id}/runs/${run_id}`)).status).toBe('failed');

    const plan = await ws.plan();
    expect(plan.code).toBe(0);
    expect(plan.out).toMatch(/Warning: dataplatform_connector "flaky" is degraded: status is error: Host unreachable/);
    expect(plan.out).toContain('with dataplatform_connector.flaky,');
    // A change to it applies; the warning comes again, the apply succeeds.
    ws.write(
      'main.tf',
      readFileSync(join(ws.work, 'main.tf'), 'utf8').replace(
        'database = "orders" }',
        'database = "orders" }\n  labels         = { team = "data" }',
      ),
    );
    const out = await ws.apply();
    expect(out).toContain('Apply complete! Resources: 0 added, 1 changed, 0 destroyed.');
    expect(out).toMatch(/Warning: dataplatform_connector "flaky" is degraded/);
    // A team whose CI must fail on it says so with a postcondition (terraform.md): plan and apply stop.
    ws.write(
      'main.tf',
      readFileSync(join(ws.work, 'main.tf'), 'utf8').replace(
        '  labels         = { team = "data" }',
        '  labels         = { team = "data" }\n  lifecycle {\n    postcondition {\n      condition     = self.status != "error"\n      error_message = "connector ${self.name} is in error"\n    }\n  }',
      ),
    );
    const strict = await ws.tf(['plan', '-detailed-exitcode', '-input=false'], [1]);
    expect(strict.out).toMatch(/Error: Resource postcondition failed[\s\S]*connector flaky is in error/);
  });
});

describe.skipIf(testStore() === 'postgres' || !haveTerraform)('provider: provisioning timeouts (real terraform, slow platform)', () => {
  let svc: TestService;
  let ws: TerraformWorkspace;
  let t: TestTenant;
  let projectId: string;

  beforeAll(async () => {
    // A warehouse takes 3-4 s nominal: 300 s at this scale.
    svc = await startTestService({ timeScale: 0.01 });
    t = await svc.tenant();
    projectId = (await svc.project(t, 'tf-slow')).id;
    ws = await TerraformWorkspace.create(svc, t);
    ws.vars.project_id = projectId;
    ws.write('main.tf', `${PROVIDER_BLOCK}\n${VARS}\n`);
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await svc?.close();
    ws?.close();
  });

  it('timeouts { create = "1s" } gives up waiting with a timeout error; the resource stays, tainted', { timeout: 60_000 }, async () => {
    ws.write('main.tf', [PROVIDER_BLOCK, VARS, infra('slow', { name: 'slow', type: 'warehouse', timeouts: 'create = "1s"' })].join('\n'));
    const started = Date.now();
    const { out } = await ws.tf(['apply', '-auto-approve', '-input=false'], [1]);
    expect(out).toContain('Error: dataplatform_infrastructure_resource: provisioning did not finish within 1s');
    expect(flat(out)).toContain('(timeouts.create)');
    expect(out).toContain('with dataplatform_infrastructure_resource.slow,');
    // Gave up after about a second, not after the warehouse's 300 s.
    expect(Date.now() - started).toBeLessThan(30_000);
    const slow = (await svc.ok<{ data: any[] }>(t, 'GET', `/projects/${projectId}/infrastructure`)).data.find((r) => r.name === 'slow');
    expect(slow.status).toBe('provisioning');
    const inState = (await ws.show()).values.root_module.resources[0];
    expect(inState).toMatchObject({ tainted: true, values: { id: slow.id, timeouts: { create: '1s', update: null, delete: null } } });
  });
});
