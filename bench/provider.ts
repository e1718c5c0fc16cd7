/**
 * Benchmark of the Terraform provider (`node --import tsx bench/provider.ts`).
 *
 *   a) `terraform plan` over 1,000 existing resources (10 projects x 99 notification
 *      channels, plus the projects): wall time, API calls, per-resource overhead; and
 *      `dpctl plan` (the built CLI) over the same resources declared in YAML, against the same
 *      service in the same run. Both plans must come out empty.
 *   b) provider start-up, median of 10 (goal < 300 ms; `-- --startup` runs only this part):
 *      from spawning the bundled provider to its handshake line on stdout, and to its first
 *      answered GetProviderSchema over an mTLS gRPC connection like Terraform's (served from
 *      the build's encoding; the implementation loads after it). Terraform starts the provider
 *      several times per command, so this is paid repeatedly.
 *
 * The service runs in this process (SQLite in a temp dir, rate limit off); Terraform's provider
 * processes and dpctl reach it through a forwarding HTTPS proxy (test/support/fault-proxy.ts)
 * that counts every request, so both tools' calls are counted the same way, on the wire.
 * Resources are seeded through the API; the Terraform state is written from the provider's
 * own API-to-state mapping (what `terraform import` stores), so the plan is a pure refresh.
 * It is a report: it exits 0 once it has printed (1 if a plan is not empty).
 */
import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FaultProxy } from '../test/support/fault-proxy.js';
import type { TestService } from '../test/support/service.js';
import { DataPlatformClient } from '../src/client/index.js';
import { MANAGED_BY_LABEL, mapLimit } from '../src/engine/index.js';
import { installProvider, PROVIDER_ENTRY } from '../src/provider/install.js';
import { pluginCertificate } from '../src/provider/cert.js';
import { loadDefinitions } from '../src/provider/proto.js';
import * as grpc from '@grpc/grpc-js';
import { objectToTf, resourceSpecs, PROVIDER_HOST, PROVIDER_SOURCE } from '../src/provider/schema.js';
import { ensureTenantWithAdmin } from '../src/service/bootstrap.js';
import { startService } from '../src/service/server.js';

const PROJECTS = 10;
const PER_PROJECT = 99;
const SOURCE = 'bench';
const TENANT = 'bench';
const EMAIL = `admin@${TENANT}.test`;
const PASSWORD = 'correct-horse-battery';
const DPCTL = join(import.meta.dirname, '..', 'bin', 'dpctl.js');

const pad = (n: number) => String(n).padStart(2, '0');
const projectName = (p: number) => `bench-${pad(p)}`;
const channelBody = (i: number) => ({
  name: `ch-${String(i).padStart(3, '0')}`,
  type: 'email',
  config: { email_addresses: [`team-${i}@example.com`] },
  labels: { team: 'data', [MANAGED_BY_LABEL]: SOURCE },
});

function run(cmd: string, args: string[], options: { cwd?: string; env: NodeJS.ProcessEnv }): Promise<{ code: number; out: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    execFile(cmd, args, { ...options, maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: `${stdout}\n${stderr}`, ms: performance.now() - t0 });
    });
  });
}

/** The Terraform configuration: one project block and one counted channel block per project. */
function hcl(): string {
  let out = `terraform {\n  required_providers {\n    dataplatform = {\n      source  = "${PROVIDER_SOURCE}"\n    }\n  }\n}\n\nprovider "dataplatform" {}\n`;
  for (let p = 0; p < PROJECTS; p++) {
    out += `\nresource "dataplatform_project" "p${pad(p)}" {\n  name   = "${projectName(p)}"\n  labels = { "${MANAGED_BY_LABEL}" = "${SOURCE}" }\n}\n`;
    out += `\nresource "dataplatform_notification_channel" "p${pad(p)}" {\n  count      = ${PER_PROJECT}\n  project_id = dataplatform_project.p${pad(p)}.id\n  name       = format("ch-%03d", count.index)\n  type       = "email"\n  config     = { email_addresses = ["team-\${count.index}@example.com"] }\n  labels     = { team = "data", "${MANAGED_BY_LABEL}" = "${SOURCE}" }\n}\n`;
  }
  return out;
}

/** The same resources as dpctl YAML: one file per project. */
function yaml(dir: string) {
  mkdirSync(dir, { recursive: true });
  for (let p = 0; p < PROJECTS; p++) {
    const docs = [`apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${projectName(p)}\nspec: {}\n`];
    for (let i = 0; i < PER_PROJECT; i++) {
      const b = channelBody(i);
      docs.push(`apiVersion: dataplatform/v1\nkind: NotificationChannel\nmetadata:\n  name: ${b.name}\n  project: ${projectName(p)}\n  labels: { team: data }\nspec:\n  type: email\n  config: { email_addresses: [${b.config.email_addresses[0]}] }\n`);
    }
    writeFileSync(join(dir, `${projectName(p)}.yaml`), docs.join('---\n'));
  }
}

/** A version-4 state holding the seeded objects, as the provider maps API objects to state. */
function state(projects: Record<string, unknown>[], channels: Map<string, Record<string, unknown>[]>): string {
  const specs = resourceSpecs();
  const projectSpec = specs.get('dataplatform_project')!;
  const channelSpec = specs.get('dataplatform_notification_channel')!;
  const provider = `provider["${PROVIDER_HOST}/${PROVIDER_SOURCE}"]`;
  const resources = projects.flatMap((project, p) => [
    { mode: 'managed', type: 'dataplatform_project', name: `p${pad(p)}`, provider, instances: [{ schema_version: 0, attributes: objectToTf(projectSpec.attrs, project), sensitive_attributes: [] }] },
    {
      mode: 'managed',
      type: 'dataplatform_notification_channel',
      name: `p${pad(p)}`,
      provider,
      instances: channels.get(project.id as string)!.map((ch, i) => ({
        index_key: i,
        schema_version: 0,
        attributes: { ...objectToTf(channelSpec.attrs, ch), project_id: project.id },
        sensitive_attributes: [],
        dependencies: [`dataplatform_project.p${pad(p)}`],
      })),
    },
  ]);
  return JSON.stringify({ version: 4, terraform_version: '1.11.4', serial: 1, lineage: randomUUID(), outputs: {}, resources, check_results: null }, null, 1);
}

/** Spawn to handshake line, in ms, as Terraform would start the provider. */
function startupOnce(clientCert: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [PROVIDER_ENTRY], { env: { PATH: process.env.PATH, TF_PLUGIN_MAGIC_COOKIE: 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2', PLUGIN_CLIENT_CERT: clientCert }, stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.once('data', (line: Buffer) => {
      const ms = performance.now() - t0;
      if (!line.toString().startsWith('1|6|unix|')) reject(new Error(`unexpected handshake: ${line}`));
      child.once('exit', () => resolve(ms));
      child.kill('SIGTERM');
    });
    child.once('error', reject);
  });
}

/**
 * Spawn to the first answered GetProviderSchema, in ms: the handshake, an mTLS gRPC connection
 * as Terraform makes it (our client certificate, the provider's from the handshake line), and
 * the provider's handlers loaded (they load after the handshake).
 */
let Provider: any;

function startupToSchemaOnce(client: { certPem: string; keyPem: string }): Promise<number> {
  // Terraform's client is compiled in; ours is made once, before any clock starts.
  Provider ??= (grpc.loadPackageDefinition(loadDefinitions()) as any).tfplugin6.Provider;
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [PROVIDER_ENTRY], { env: { PATH: process.env.PATH, TF_PLUGIN_MAGIC_COOKIE: 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2', PLUGIN_CLIENT_CERT: client.certPem }, stdio: ['ignore', 'pipe', 'inherit'] });
    child.once('error', reject);
    child.stdout.once('data', (line: Buffer) => {
      const [, , network, address, , certB64] = line.toString().trim().split('|');
      if (network !== 'unix') return reject(new Error(`unexpected handshake: ${line}`));
      const serverPem = `-----BEGIN CERTIFICATE-----\n${Buffer.from(certB64, 'base64').toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----\n`;
      const credentials = grpc.credentials.createSsl(Buffer.from(serverPem), Buffer.from(client.keyPem), Buffer.from(client.certPem));
      const stub = new Provider(`unix:${address}`, credentials, { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' });
      stub.GetProviderSchema({}, (err: Error | null, res: { resource_schemas?: Record<string, unknown> }) => {
        const ms = performance.now() - t0;
        stub.close();
        child.once('exit', () => (err ? reject(err) : Object.keys(res.resource_schemas ?? {}).length ? resolve(ms) : reject(new Error('empty schema'))));
        child.kill('SIGTERM');
      });
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Start-up rows: spawn -> handshake, and spawn -> first GetProviderSchema answered (medians of 10). */
async function measureStartup(): Promise<string[][]> {
  const rows: string[][] = [];
  const clientCert = pluginCertificate().certPem;
  await startupOnce(clientCert); // warm the file cache
  const times: number[] = [];
  for (let i = 0; i < 10; i++) times.push(await startupOnce(clientCert));
  const startup = median(times);
  rows.push([`provider start-up, spawn -> handshake (median of 10; min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)})`, '-', '-', (startup / 1000).toFixed(3), '-', startup < 300 ? 'PASS (< 300 ms)' : 'FAIL (goal < 300 ms)']);
  const pair = pluginCertificate();
  await startupToSchemaOnce(pair);
  const toSchema: number[] = [];
  for (let i = 0; i < 10; i++) toSchema.push(await startupToSchemaOnce(pair));
  const first = median(toSchema);
  rows.push([`provider start-up, spawn -> first GetProviderSchema answered over mTLS gRPC (median of 10; min ${Math.min(...toSchema).toFixed(0)}, max ${Math.max(...toSchema).toFixed(0)})`, '-', '-', (first / 1000).toFixed(3), '-', first < 300 ? 'PASS (< 300 ms)' : 'FAIL (goal < 300 ms)']);
  return rows;
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-provider-'));
  const work = mkdtempSync(join(tmpdir(), 'dp-bench-provider-work-'));
  const service = await startService({ port: 0, logLevel: 'silent', rateLimit: 10_000_000, dataDir });
  // The proxy needs only the service's TLS material and port.
  const proxy = await FaultProxy.start({ service, port: service.port } as unknown as TestService);
  const rows: string[][] = [];
  let failed = false;
  try {
    await ensureTenantWithAdmin(service.ctx, TENANT, EMAIL, PASSWORD);
    const client = new DataPlatformClient({ url: `https://${TENANT}.localhost:${service.port}`, email: EMAIL, password: PASSWORD, ca: readFileSync(service.tls.certPath) });
    const seedStart = performance.now();
    const projects = await mapLimit(Array.from({ length: PROJECTS }, (_, p) => p), 8, async (p) => (await client.resourcesOf('project').create({ name: projectName(p), labels: { [MANAGED_BY_LABEL]: SOURCE } })) as Record<string, unknown>);
    const channels = new Map<string, Record<string, unknown>[]>();
    const jobs = projects.flatMap((project) => Array.from({ length: PER_PROJECT }, (_, i) => ({ project: project.id as string, i })));
    const created = await mapLimit(jobs, 32, ({ project, i }) => client.resourcesOf('notification_channel', { projectId: project }).create(channelBody(i)));
    jobs.forEach((job, n) => channels.set(job.project, [...(channels.get(job.project) ?? []), created[n]]));
    await client.close();
    const seeded = ((performance.now() - seedStart) / 1000).toFixed(1);
    const resources = PROJECTS * (PER_PROJECT + 1);

    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: work,
      CHECKPOINT_DISABLE: '1',
      TF_IN_AUTOMATION: '1',
      TF_CLI_CONFIG_FILE: join(work, 'cli.tfrc'),
      DATAPLATFORM_URL: `https://${TENANT}.localhost:${proxy.port}`,
      DATAPLATFORM_EMAIL: EMAIL,
      DATAPLATFORM_PASSWORD: PASSWORD,
      DATAPLATFORM_CA_FILE: service.tls.certPath,
    };
    const mirror = join(work, 'mirror');
    await installProvider({ dir: mirror });
    writeFileSync(env.TF_CLI_CONFIG_FILE!, `provider_installation {\n  filesystem_mirror {\n    path    = "${mirror}"\n    include = ["${PROVIDER_HOST}/${PROVIDER_SOURCE}"]\n  }\n  direct {\n    exclude = ["${PROVIDER_HOST}/${PROVIDER_SOURCE}"]\n  }\n}\n`);
    const tfDir = join(work, 'tf');
    mkdirSync(tfDir);
    writeFileSync(join(tfDir, 'main.tf'), hcl());
    writeFileSync(join(tfDir, 'terraform.tfstate'), state(projects, channels));
    const init = await run('terraform', ['init', '-input=false', '-no-color'], { cwd: tfDir, env });
    if (init.code !== 0) throw new Error(`terraform init failed:\n${init.out}`);
    const yamlDir = join(work, 'yaml');
    yaml(yamlDir);

    const counted = () => {
      const seen = proxy.seen.filter((r) => !r.path.startsWith('/api/v1/auth/'));
      const lists = seen.filter((r) => r.method === 'GET' && /\/(projects|notification-channels)(\?|$)/.test(r.path)).length;
      return { calls: seen.length, lists, logins: proxy.seen.length - seen.length };
    };

    proxy.inject(() => 'forward');
    const tf = await run('terraform', ['plan', '-detailed-exitcode', '-input=false', '-no-color', '-lock=false'], { cwd: tfDir, env });
    const tfCalls = counted();
    if (tf.code !== 0) {
      failed = true;
      console.error(`terraform plan is not empty (exit ${tf.code}):\n${tf.out.slice(-3000)}`);
    }

    proxy.inject(() => 'forward');
    const dp = await run(process.execPath, [DPCTL, 'plan', yamlDir, '--source-id', SOURCE], { env });
    const dpCalls = counted();
    if (dp.code !== 0 || !/no changes/i.test(dp.out)) {
      failed = true;
      console.error(`dpctl plan is not empty (exit ${dp.code}):\n${dp.out.slice(-3000)}`);
    }

    const perResource = (ms: number) => `${(ms / resources).toFixed(2)} ms`;
    rows.push([`terraform plan (refresh, seeded in ${seeded} s)`, String(resources), `${tfCalls.calls} (${tfCalls.lists} lists, ${tfCalls.calls - tfCalls.lists} GETs) + ${tfCalls.logins} logins`, (tf.ms / 1000).toFixed(2), perResource(tf.ms), tf.code === 0 ? 'empty' : 'NOT EMPTY']);
    rows.push(['dpctl plan (built CLI, default --concurrency)', String(resources), `${dpCalls.calls} (${dpCalls.lists} lists) + ${dpCalls.logins} logins`, (dp.ms / 1000).toFixed(2), perResource(dp.ms), dp.code === 0 ? 'empty' : 'NOT EMPTY']);

    // Start-up, measured last so the service is idle.
    rows.push(...(await measureStartup()));
  } finally {
    await proxy.close();
    await service.close();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
  printTable(rows);
  console.log(`\nnode ${process.version}; ${PROJECTS} projects x ${PER_PROJECT} notification channels; service in this process (SQLite), calls counted at a forwarding proxy.`);
  if (failed) process.exitCode = 1;
}

function printTable(rows: string[][]) {
  const header = ['scenario', 'resources', 'API calls', 'wall s', 'per resource', 'result'];
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(r));
}

// `npm run bench:provider -- --startup` measures only the start-up (no service, no terraform).
if (process.argv.includes('--startup')) printTable(await measureStartup());
else await main();
