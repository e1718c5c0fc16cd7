import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { runDpctl } from '../../support/cli.js';
import { haveTerraform, TerraformWorkspace } from '../provider/harness.js';
import { cliEnvFor, EXAMPLE as YAML_EXAMPLE, SECRET_ENV } from '../../integration/engine/helpers.js';
import { closedPort } from '../../integration/runtime/helpers.js';

/**
 * examples/cdktf under the real cdktf CLI (cdktf-cli 0.21, terraform 1.11) against a real
 * service: deploy of both stacks (the TypeScript one and the YAML bridge's, examples/platform),
 * drift made through the API in diff, deploy again, the HCL exit path, the bridge's resources checked
 * by `dpctl adopt --dry-run`, destroy; then failures through the generated constructs. The steps
 * build on each other (one state), so they run in order. Each cdktf command costs 10-15 s (the CLI,
 * Terraform and the provider starting), so a test shares commands where it can: both stacks in one
 * deploy, the synth inside the deploy.
 *
 * The app runs from the repository (examples/cdktf/main.ts); only the working directory is a
 * temporary one, because cdktf's default local backend keeps the state beside cdktf.json.
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');
const EXAMPLE = join(ROOT, 'examples', 'cdktf');
const CDKTF = join(ROOT, 'node_modules', '.bin', 'cdktf');
/** What a small app's main.ts imports: the cdktf core and the generated constructs, from the repository. */
const CDK_MODULE = join(ROOT, 'src', 'cdktf', 'cdk.js');
const CONSTRUCTS_MODULE = join(ROOT, 'src', 'cdktf', 'index.js');
const SECRETS = {
  ORDERS_DB_PASSWORD: 'orders-secret-1',
  BILLING_DB_PASSWORD: 'billing-secret-1',
  SLACK_WEBHOOK_URL: 'https://hooks.slack.example/services/T1/B1/secret-1',
};

describe.skipIf(testStore() === 'postgres' || !haveTerraform)('cdktf CLI end to end (examples/cdktf)', () => {
  let svc: TestService;
  let t: TestTenant;
  let ws: TerraformWorkspace;
  let app: string;
  let env: NodeJS.ProcessEnv;
  let projectId: string;

  /** The cdktf CLI in `cwd`; rejects unless it exits with `code` (a failed deploy is 1). */
  function cdktfIn(cwd: string, args: string[], code = 0): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(CDKTF, args, { cwd, env, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
        const out = `${stdout}\n${stderr}`;
        const exit = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        if (exit !== code) reject(new Error(`cdktf ${args.join(' ')} exited ${err?.code ?? 0}, expected ${code}:\n${out}`));
        else resolve(out);
      });
    });
  }
  const cdktf = (args: string[]) => cdktfIn(app, args);
  /**
   * The numbers a pattern's first group captures in the output, in order. With several stacks cdktf
   * names the stack on the first line of each chunk of its output only, so a line does not always say
   * which stack it belongs to: a test counts the results of both instead.
   */
  const counts = (out: string, pattern: RegExp) => [...out.matchAll(pattern)].map((m) => Number(m[1])).sort((a, b) => a - b);
  /** A small app of its own (own cdktf.json, and so its own state beside it) for a main.ts written by the test. */
  function constructsApp(name: string): string {
    const dir = join(ws.root, name);
    mkdirSync(dir);
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    writeFileSync(
      join(dir, 'cdktf.json'),
      JSON.stringify({ language: 'typescript', app: 'node --import tsx main.ts', terraformProviders: [], context: {} }),
    );
    return dir;
  }
  const api = <T = any>(method: string, path: string, body?: unknown, expected?: number) =>
    svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expected);
  const list = async (collection: string) => (await api<{ data: any[] }>('GET', `/projects/${projectId}/${collection}`)).data;
  const byName = async (collection: string, name: string) => (await list(collection)).find((i) => i.name === name);

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    // The provider in a filesystem mirror, a Terraform CLI config and DATAPLATFORM_* for the tenant.
    ws = await TerraformWorkspace.create(svc, t);
    app = join(ws.root, 'app');
    mkdirSync(app);
    const config = JSON.parse(readFileSync(join(EXAMPLE, 'cdktf.json'), 'utf8'));
    config.app = config.app.replace('main.ts', join(EXAMPLE, 'main.ts'));
    writeFileSync(join(app, 'cdktf.json'), JSON.stringify(config, null, 2));
    // `node --import tsx` resolves tsx from the working directory.
    symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'));
    env = {
      ...ws.env,
      CDKTF_DISABLE_TELEMETRY: '1',
      DISABLE_VERSION_CHECK: '1',
      CI: '1',
      FORCE_COLOR: '0',
      // examples/platform's secretRefs (for the yaml-platform stack), then the TypeScript stack's.
      ...Object.fromEntries(Object.entries({ ...SECRET_ENV, ...SECRETS }).map(([k, v]) => [`TF_VAR_${k}`, v])),
    };
  }, 60_000);

  afterAll(async () => {
    await svc?.close();
    ws?.close();
  });

  it(
    'cdktf deploy of both stacks: synthesized with required_providers and no secret values, everything created, references resolved to ids',
    { timeout: 180_000 },
    async () => {
      // Both stacks in one command (cdktf deploys them side by side): one CLI start and one synth for the file.
      const out = await cdktf(['deploy', 'platform', 'yaml-platform', '--auto-approve', '--no-color', '--skip-provider-lock']);
      // The TypeScript stack's 11 resources and examples/platform's 25.
      expect(counts(out, /Apply complete! Resources: (\d+) added, 0 changed, 0 destroyed/g)).toEqual([11, 25]);
      for (const value of Object.values({ ...SECRETS, ...SECRET_ENV })) expect(out).not.toContain(value);
      const text = readFileSync(join(app, 'cdktf.out', 'stacks', 'platform', 'cdk.tf.json'), 'utf8');
      const json = JSON.parse(text);
      expect(json.terraform.required_providers.dataplatform).toEqual({ source: 'dataplatform/dataplatform', version: '0.1.0' });
      expect(json.terraform.backend.local.path).toBe(join(app, 'terraform.platform.tfstate'));
      for (const value of Object.values(SECRETS)) expect(text).not.toContain(value);
      const yamlText = readFileSync(join(app, 'cdktf.out', 'stacks', 'yaml-platform', 'cdk.tf.json'), 'utf8');
      for (const value of Object.values(SECRET_ENV)) expect(yamlText).not.toContain(value);
      const project = (await api<{ data: any[] }>('GET', '/projects')).data.find((p) => p.name === 'commerce');
      expect(project).toMatchObject({ description: 'Orders, billing and the revenue models.', labels: { owner: 'data-platform' } });
      projectId = project.id;
      const orders = await byName('connectors', 'orders-db');
      const billing = await byName('connectors', 'billing-db');
      expect(orders).toMatchObject({
        connector_type: 'postgresql',
        config: { host: 'orders.db.internal', port: 5432, ssl_mode: 'verify-full' },
        credentials: { username: 'replicator' },
        schedule: '0 * * * *',
      });
      expect(orders.credentials.password).toBeUndefined();
      const slack = await byName('notification-channels', 'data-team-slack');
      const models = await byName('dbt-projects', 'warehouse-models');
      expect(models.models.find((m: any) => m.name === 'stg_invoices').sources).toEqual([{ connector_id: billing.id, table: 'invoices' }]);
      const pipeline = await byName('pipelines', 'nightly-revenue');
      expect(pipeline.steps.map((s: any) => [s.name, s.type, s.connector_id ?? s.dbt_project_id ?? s.channel_id, s.depends_on])).toEqual([
        ['sync-orders', 'connector_sync', orders.id, []],
        ['sync-billing', 'connector_sync', billing.id, []],
        ['build-models', 'dbt_run', models.id, ['sync-orders', 'sync-billing']],
        ['announce', 'notification', slack.id, ['build-models']],
      ]);
      const escalation = await byName('escalation-policies', 'revenue-escalation');
      expect(await byName('alert-rules', 'revenue-pipeline-failed')).toMatchObject({
        target: { pipeline_id: pipeline.id },
        channel_ids: [slack.id],
        escalation_policy_id: escalation.id,
      });
      const pii = await byName('classifications', 'pii-email');
      expect(await byName('masking-policies', 'hash-emails')).toMatchObject({ classification_id: pii.id, method: 'hash' });
    },
  );

  it('a change made through the API shows in cdktf diff, and cdktf deploy restores it', { timeout: 120_000 }, async () => {
    const orders = await byName('connectors', 'orders-db');
    await api('PATCH', `/projects/${projectId}/connectors/${orders.id}`, { schedule: '5 * * * *', selected_tables: ['public.orders'] });
    const diff = await cdktf(['diff', 'platform', '--no-color', '--skip-synth', '--skip-provider-lock']);
    // One change and no other: nothing the deploy created reads back differently (no perpetual diff).
    expect(diff).toMatch(/~ schedule\s+= "5 \* \* \* \*" -> "0 \* \* \* \*"/);
    expect(diff).toContain('Plan: 0 to add, 1 to change, 0 to destroy.');
    const out = await cdktf(['deploy', 'platform', '--auto-approve', '--no-color', '--skip-synth', '--skip-provider-lock']);
    expect(out).toMatch(/Apply complete! Resources: 0 added, 1 changed, 0 destroyed/);
    expect(await byName('connectors', 'orders-db')).toMatchObject({
      id: orders.id,
      schedule: '0 * * * *',
      selected_tables: ['public.orders', 'public.order_items', 'public.customers'],
    });
  });

  it('cdktf synth --hcl is an exit path: plain terraform with the HCL and the same state plans nothing', { timeout: 120_000 }, async () => {
    await cdktf(['synth', '--hcl', '--output', 'hcl.out']);
    const dir = join(app, 'hcl.out', 'stacks', 'platform');
    const hcl = readFileSync(join(dir, 'cdk.tf'), 'utf8');
    expect(hcl).toContain('resource "dataplatform_connector"');
    expect(hcl).toContain('source  = "dataplatform/dataplatform"');
    for (const value of Object.values(SECRETS)) expect(hcl).not.toContain(value);
    const terraform = (args: string[], allowed = [0]) =>
      new Promise<{ code: number; out: string }>((resolve, reject) =>
        execFile('terraform', args, { cwd: dir, env, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          if (!allowed.includes(code)) reject(new Error(`terraform ${args.join(' ')} exited ${code}:\n${stdout}\n${stderr}`));
          else resolve({ code, out: `${stdout}\n${stderr}` });
        }),
      );
    await terraform(['init', '-input=false', '-no-color']);
    const plan = await terraform(['plan', '-detailed-exitcode', '-input=false', '-no-color'], [0, 2]);
    expect(plan.code, plan.out).toBe(0);
  });

  it('the YAML bridge: dpctl finds every document of examples/platform that cdktf deployed matching (adopt --dry-run)', async () => {
    // The same YAML under the reconciler: every resource cdktf made is what dpctl would make (exit 0, nothing written).
    const adopt = await runDpctl(['adopt', YAML_EXAMPLE, '--dry-run', '--trust-secrets'], { env: cliEnvFor(svc, t) });
    expect(adopt.code, `${adopt.stdout}\n${adopt.stderr}`).toBe(0);
    expect(adopt.stdout).toMatch(/Pipeline\s+analytics\s+nightly-revenue/);
    expect(adopt.stdout).not.toMatch(/^(differs|missing)/m);
  });

  it('cdktf destroy of both stacks removes everything', { timeout: 120_000 }, async () => {
    const out = await cdktf([
      'destroy',
      'platform',
      'yaml-platform',
      '--auto-approve',
      '--no-color',
      '--skip-synth',
      '--skip-provider-lock',
    ]);
    expect(counts(out, /Destroy complete! Resources: (\d+) destroyed/g)).toEqual([11, 25]);
    const names = (await api<{ data: any[] }>('GET', '/projects')).data.map((p) => p.name);
    expect(names).not.toContain('commerce');
    expect(names).not.toContain('analytics');
    expect(names).not.toContain('marketing');
    await api('GET', `/projects/${projectId}`, undefined, 404);
  });

  it(
    'failures through the generated constructs: an unknown region and a failing run_setup_tests fail cdktf deploy at their resources; the fixed stack converges, deploy waiting (timeouts block) until it is provisioned',
    { timeout: 240_000 },
    async () => {
      const failingApp = constructsApp('failing-app');
      const port = await closedPort();
      // As a cdktf user writes it; the second version is the fix: a region aws has, a connector whose test passes (simulated type).
      const stack = (fixed: boolean) => `import { App, TerraformStack } from '${CDK_MODULE}';
import { Connector, DataplatformProvider, InfrastructureResource, Project } from '${CONSTRUCTS_MODULE}';
const app = new App();
const stack = new TerraformStack(app, 'failing');
new DataplatformProvider(stack, 'provider');
const project = new Project(stack, 'project', { name: 'cdktf-failing' });
new InfrastructureResource(stack, 'lake', {
  projectId: project.id, name: 'cdktf-lake', resourceType: 'bucket', providerName: 'aws', region: '${fixed ? 'eu-west-1' : 'mars-1'}',
  timeouts: { create: '2m' },
});
new Connector(stack, 'orders', {
  projectId: project.id, name: 'cdktf-orders',
  ${fixed ? `connectorType: 'mysql', selectedTables: ['app.users'],` : `connectorType: 'postgresql', config: { host: '127.0.0.1', port: ${port}, database: 'orders' }, credentials: { username: 'reader', password: 'not-used' },`}
  runSetupTests: true,
});
app.synth();
`;
      const deploy = (code: number) =>
        cdktfIn(failingApp, ['deploy', 'failing', '--auto-approve', '--no-color', '--skip-provider-lock'], code);
      const tainted = () => {
        const state = JSON.parse(readFileSync(join(failingApp, 'terraform.failing.tfstate'), 'utf8'));
        return state.resources.filter((r: any) => r.instances.some((i: any) => i.status === 'tainted')).map((r: any) => r.type);
      };

      writeFileSync(join(failingApp, 'main.ts'), stack(false));
      const failed = await deploy(1);
      const synthesized = JSON.parse(readFileSync(join(failingApp, 'cdktf.out', 'stacks', 'failing', 'cdk.tf.json'), 'utf8'));
      expect(Object.values(synthesized.resource.dataplatform_infrastructure_resource)[0]).toMatchObject({
        provider_name: 'aws',
        timeouts: { create: '2m' },
      });
      // Both fail at their resource with the platform's message (each is independent of the other).
      expect(failed).toMatch(/Error: dataplatform_infrastructure_resource: provisioning failed: aws has no region "mars-1"/);
      expect(failed).toMatch(/with dataplatform_infrastructure_resource\.lake/);
      expect(failed).toMatch(/Error: dataplatform_connector: connection test failed: Host unreachable: connection to [\d.:a-z]+ refused/);
      expect(failed).toMatch(/with dataplatform_connector\.orders/);
      expect(failed).not.toMatch(/Apply complete!/);
      const project = (await api<{ data: any[] }>('GET', '/projects')).data.find((p) => p.name === 'cdktf-failing');
      const infraOf = async () => (await api<{ data: any[] }>('GET', `/projects/${project.id}/infrastructure`)).data;
      const connectorsOf = async () => (await api<{ data: any[] }>('GET', `/projects/${project.id}/connectors`)).data;
      // Created all the same, and held tainted in the stack's state.
      const [lake] = await infraOf();
      expect(lake).toMatchObject({
        name: 'cdktf-lake',
        region: 'mars-1',
        status: 'failed',
        last_error: expect.stringContaining('aws has no region "mars-1"'),
      });
      expect(await connectorsOf()).toMatchObject([{ name: 'cdktf-orders', connector_type: 'postgresql', config: { port } }]);
      expect(tainted().sort()).toEqual(['dataplatform_connector', 'dataplatform_infrastructure_resource']);

      writeFileSync(join(failingApp, 'main.ts'), stack(true));
      const fixed = await deploy(0);
      expect(fixed).toMatch(/# dataplatform_infrastructure_resource\.lake \(lake\) is tainted, so must be replaced/);
      expect(fixed).toMatch(/Apply complete! Resources: 2 added, 0 changed, 2 destroyed/);
      const infra = await infraOf();
      expect(infra).toMatchObject([{ name: 'cdktf-lake', region: 'eu-west-1', status: 'provisioned', last_error: null }]);
      expect(infra[0].id).not.toBe(lake.id);
      expect(await connectorsOf()).toMatchObject([{ name: 'cdktf-orders', connector_type: 'mysql' }]);
      expect(tainted()).toEqual([]);
      expect((await api<{ changes: unknown[] }>('POST', `/projects/${project.id}/infrastructure/plan`, undefined, 200)).changes).toEqual(
        [],
      );
      expect(await cdktfIn(failingApp, ['destroy', 'failing', '--auto-approve', '--no-color', '--skip-provider-lock'])).toMatch(
        /Destroy complete! Resources: 3 destroyed/,
      );
    },
  );
});
