/**
 * Benchmark of the Terraform provider at scale (`npm run bench:provider`, i.e.
 * `node --import tsx bench/provider.ts`): where the time of `terraform apply` and `terraform plan`
 * goes with our provider, against `dpctl` on the same resources.
 *
 * For each size N of `benchSizes([500, 2000, 5000])` (BENCH_SIZES=500,2000 narrows it): N/100
 * projects, each with 99 notification channels (one `count` block per project), and per run:
 *   1. `terraform apply -auto-approve` of the N resources, all new (a fresh tenant each run);
 *   2. a no-op `terraform plan -detailed-exitcode` on that state, with refresh (the default);
 *   3. the same plan with `-refresh=false`;
 *   4. `dpctl apply` of the same resources written as YAML (another fresh tenant): the baseline;
 *   5. a no-op `dpctl plan` and a `dpctl drift` on them (what `-refresh=false` leaves to dpctl);
 *   6. `terraform apply -parallelism=30` of the N resources (a fresh tenant), then its no-op plan
 *      with `-parallelism=30`;
 *   7. `terraform apply` with the state in a `pg` backend (a throwaway PostgreSQL server; a fresh
 *      schema and tenant each run), then its no-op plans with and without refresh. The local
 *      backend rewrites the whole terraform.tfstate after every resource; a remote one does not.
 * A Terraform command running past BENCH_TIMEOUT_S (default 600) is interrupted with SIGINT and
 * its row says how many resources it had written. BENCH_SCENARIOS=<prefixes> picks scenarios
 * (e.g. `tf apply (pg,dpctl`); BENCH_VERBOSE=1 prints each provider process's figures;
 * BENCH_CPU_PROF=<dir> makes each provider process write a V8 CPU profile there.
 * Runs alternate (1-7, 1-7, ...) so a machine that slows down slows every command alike; rows
 * give medians of BENCH_RUNS runs (default 3; 1 for sizes of 5,000 and more, BENCH_RUNS_LARGE).
 *
 * Every command is the real user command in a fresh process (terraform, or node bin/dpctl.js),
 * timed from spawn to exit under GNU time, which also gives its CPU (user + system, including the
 * provider processes Terraform waited for) and peak RSS. The provider reports its own CPU: the
 * bench sets DATAPLATFORM_PROVIDER_STATS, and each provider process appends its
 * process.cpuUsage(), its life and its RPC counts and times to that file at exit (see
 * recordStats in src/provider/server.ts; nothing is recorded without the variable). Terraform
 * core's CPU is Terraform's total minus the providers'. The service runs in a child process
 * (this file with --role=service; SQLite in a temp dir, rate limit off, log level silent) that
 * reports its CPU and counts the HTTP requests it receives, so nothing of the service is in the
 * measured commands' figures. `terraform init` runs once per size, unmeasured.
 *
 * `npm run bench:provider -- --startup` measures only the provider's start-up (median of 10:
 * spawn to handshake line, and to the first GetProviderSchema answered over mTLS gRPC).
 * It is a report: it exits 0 once it has printed (1 if a plan that should be empty is not).
 */
import { execFile, fork, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { benchSizes, machine, machineLoad, report, seconds, type BenchRow } from './lib/report.js';
import { median } from './lib/alternate.js';

const SOURCE = 'bench';
const EMAIL = 'admin@bench.test';
const PASSWORD = 'correct-horse-battery';
const PER_PROJECT = 99;
const ROOT = join(import.meta.dirname, '..');
const DPCTL = join(ROOT, 'bin', 'dpctl.js');
const PROVIDER_SOURCE = 'dataplatform/dataplatform';
const PROVIDER_HOST = 'registry.terraform.io';
const MAGIC_COOKIE = 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2';

// ---------------------------------------------------------------------------------------------
// The service (child process)
// ---------------------------------------------------------------------------------------------

interface Ready {
  port: number;
  caPath: string;
}
interface Counted {
  cpuMs: number;
  requests: number;
  lists: number;
  gets: number;
  writes: number;
  logins: number;
}

async function runService() {
  const { startService } = await import('../src/service/server.js');
  const { ensureTenantWithAdmin } = await import('../src/service/bootstrap.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-provider-'));
  const service = await startService({ port: 0, logLevel: 'silent', rateLimit: 10_000_000, dataDir });
  const counts = { requests: 0, lists: 0, gets: 0, writes: 0, logins: 0 };
  // Counted as they arrive, beside Fastify's own listener (which answers them).
  service.app.server.on('request', (req: { method?: string; url?: string }) => {
    const path = (req.url ?? '').split('?')[0];
    counts.requests++;
    if (path.startsWith('/api/v1/auth/')) counts.logins++;
    else if (req.method !== 'GET') counts.writes++;
    else if (/\/[a-z]+_[A-Za-z0-9]+$/.test(path)) counts.gets++;
    else counts.lists++;
  });
  process.on('disconnect', () => process.exit(1));
  process.on('message', (msg: { type: string; slug?: string }) => {
    if (msg.type === 'tenant') {
      void ensureTenantWithAdmin(service.ctx, msg.slug!, EMAIL, PASSWORD).then(
        () => process.send!({ type: 'tenant-ready' }),
        (err: Error) => process.send!({ type: 'tenant-failed', message: err.message }),
      );
    } else if (msg.type === 'counts') {
      const cpu = process.cpuUsage();
      process.send!({ type: 'counts', counts: { cpuMs: (cpu.user + cpu.system) / 1000, ...counts } satisfies Counted });
    } else if (msg.type === 'stop') {
      void service
        .close()
        .finally(() => rmSync(dataDir, { recursive: true, force: true }))
        .finally(() => process.send!({ type: 'stopped' }, () => process.exit(0)));
    }
  });
  process.send!({ type: 'ready', ready: { port: service.port, caPath: service.tls.certPath } satisfies Ready });
}

class ServiceProcess {
  private constructor(
    private readonly child: ReturnType<typeof fork>,
    readonly ready: Ready,
  ) {}

  static async start(): Promise<ServiceProcess> {
    const child = fork(fileURLToPath(import.meta.url), ['--role=service'], {
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const ready = await new Promise<Ready>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`service exited (${code}) before it was ready`)));
      child.on('message', (m: { type: string; ready?: Ready }) => m.type === 'ready' && resolve(m.ready!));
    });
    return new ServiceProcess(child, ready);
  }

  private ask<T>(msg: object, answer: string, failed?: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const on = (m: { type: string; message?: string }) => {
        if (m.type !== answer && m.type !== failed) return;
        this.child.off('message', on);
        if (m.type === answer) resolve(m as T);
        else reject(new Error(m.message));
      };
      this.child.on('message', on);
      this.child.send(msg);
    });
  }

  tenant(slug: string): Promise<unknown> {
    return this.ask({ type: 'tenant', slug }, 'tenant-ready', 'tenant-failed');
  }

  async counts(): Promise<Counted> {
    return (await this.ask<{ counts: Counted }>({ type: 'counts' }, 'counts')).counts;
  }

  async stop() {
    await this.ask({ type: 'stop' }, 'stopped');
  }
}

// ---------------------------------------------------------------------------------------------
// The configurations
// ---------------------------------------------------------------------------------------------

const pad = (n: number) => String(n).padStart(2, '0');
const projectsFor = (size: number) => Math.max(1, Math.round(size / (PER_PROJECT + 1)));

/** N/100 projects, each a project block and a `count = 99` channel block. */
function hcl(size: number): string {
  let out = `terraform {\n  required_providers {\n    dataplatform = {\n      source  = "${PROVIDER_SOURCE}"\n    }\n  }\n}\n\nprovider "dataplatform" {}\n`;
  for (let p = 0; p < projectsFor(size); p++) {
    out += `\nresource "dataplatform_project" "p${pad(p)}" {\n  name = "bench-${pad(p)}"\n}\n`;
    out += `\nresource "dataplatform_notification_channel" "p${pad(p)}" {\n  count      = ${PER_PROJECT}\n  project_id = dataplatform_project.p${pad(p)}.id\n  name       = format("ch-%03d", count.index)\n  type       = "email"\n  config     = { email_addresses = ["team-\${count.index}@example.com"] }\n  labels     = { team = "data" }\n}\n`;
  }
  return out;
}

/** The same resources as dpctl YAML: one file per project. */
function yaml(size: number, dir: string) {
  mkdirSync(dir, { recursive: true });
  for (let p = 0; p < projectsFor(size); p++) {
    const docs = [`apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: bench-${pad(p)}\nspec: {}\n`];
    for (let i = 0; i < PER_PROJECT; i++) {
      docs.push(
        `apiVersion: dataplatform/v1\nkind: NotificationChannel\nmetadata:\n  name: ch-${String(i).padStart(3, '0')}\n  project: bench-${pad(p)}\n  labels: { team: data }\nspec:\n  type: email\n  config: { email_addresses: [team-${i}@example.com] }\n`,
      );
    }
    writeFileSync(join(dir, `bench-${pad(p)}.yaml`), docs.join('---\n'));
  }
}

// ---------------------------------------------------------------------------------------------
// Running and measuring one command
// ---------------------------------------------------------------------------------------------

interface ProviderStats {
  processes: number;
  cpuMs: number;
  /** Summed over the processes: per method, calls and ms from request to answer. */
  rpcs: Record<string, { calls: number; ms: number }>;
}

interface Measured {
  wallMs: number;
  /** The command's CPU (user + system) with the children it waited for (Terraform's providers). */
  cpuMs: number;
  peakMb: number;
  provider: ProviderStats;
  service: Counted;
  code: number;
  /** Stopped at BENCH_TIMEOUT_S (Terraform interrupted with SIGINT, as Ctrl-C does). */
  timedOut: boolean;
}

/** BENCH_TIMEOUT_S: a Terraform command running longer is interrupted; the row says how far it got. */
const TIMEOUT_MS = Number(process.env.BENCH_TIMEOUT_S ?? 600) * 1000;

/** The pid of GNU time's child (the measured command), to interrupt it. */
function childOf(pid: number): number | undefined {
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return kids ? Number(kids.split(' ')[0]) : undefined;
  } catch {
    return undefined;
  }
}

let statsSeq = 0;

async function measure(
  service: ServiceProcess,
  cmd: string,
  args: string[],
  options: { cwd?: string; env: NodeJS.ProcessEnv; okCodes?: number[]; name: string },
): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), 'dp-bench-run-'));
  const timeFile = join(dir, 'time');
  const statsFile = join(dir, `provider-${statsSeq++}.jsonl`);
  const before = await service.counts();
  try {
    const started = performance.now();
    let timedOut = false;
    const { code, output } = await new Promise<{ code: number; output: string }>((resolve, reject) => {
      const child = spawn('/usr/bin/time', ['-f', '%U %S %M', '-o', timeFile, cmd, ...args], {
        cwd: options.cwd,
        env: { ...options.env, DATAPLATFORM_PROVIDER_STATS: statsFile },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      const keep = (d: Buffer) => {
        output = (output + d.toString()).slice(-20_000);
      };
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      child.once('error', reject);
      // GNU time does not pass signals on: interrupt the command itself (Terraform then finishes
      // the calls in flight, saves the state and exits 1).
      const timer = setTimeout(() => {
        const pid = childOf(child.pid!);
        if (pid) {
          timedOut = true;
          process.kill(pid, 'SIGINT');
        }
      }, TIMEOUT_MS);
      child.once('close', (c) => {
        clearTimeout(timer);
        resolve({ code: c ?? 1, output });
      });
    });
    const wallMs = performance.now() - started;
    if (!timedOut && !(options.okCodes ?? [0]).includes(code))
      throw new Error(`${options.name} exited with ${code}:\n${output.slice(-4000)}`);
    const after = await service.counts();
    const [user, sys, kb] = readFileSync(timeFile, 'utf8').trim().split('\n').pop()!.split(' ').map(Number);
    const provider: ProviderStats = { processes: 0, cpuMs: 0, rpcs: {} };
    if (existsSync(statsFile)) {
      for (const line of readFileSync(statsFile, 'utf8').trim().split('\n')) {
        const s = JSON.parse(line) as { cpuMs: number; lifeMs: number; rpcs: Record<string, { calls: number; ms: number }> };
        if (process.env.BENCH_VERBOSE)
          console.error(
            `  ${options.name}: provider process life ${s.lifeMs} ms, CPU ${s.cpuMs} ms, ${Object.entries(s.rpcs)
              .map(([m, r]) => `${m} ${r.calls}x${(r.ms / r.calls).toFixed(1)}ms`)
              .join(', ')}`,
          );
        provider.processes++;
        provider.cpuMs += s.cpuMs;
        for (const [m, r] of Object.entries(s.rpcs)) {
          const t = (provider.rpcs[m] ??= { calls: 0, ms: 0 });
          t.calls += r.calls;
          t.ms += r.ms;
        }
      }
    }
    const service_ = Object.fromEntries(
      Object.keys(after).map((k) => [k, after[k as keyof Counted] - before[k as keyof Counted]]),
    ) as unknown as Counted;
    return { wallMs, cpuMs: (user + sys) * 1000, peakMb: Math.round(kb / 1024), provider, service: service_, code, timedOut };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Provider start-up (--startup)
// ---------------------------------------------------------------------------------------------

async function startupOnce(entry: string, clientCert: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [entry], {
      env: { PATH: process.env.PATH, TF_PLUGIN_MAGIC_COOKIE: MAGIC_COOKIE, PLUGIN_CLIENT_CERT: clientCert },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout.once('data', (line: Buffer) => {
      const ms = performance.now() - t0;
      if (!line.toString().startsWith('1|6|unix|')) reject(new Error(`unexpected handshake: ${line}`));
      child.once('exit', () => resolve(ms));
      child.kill('SIGTERM');
    });
    child.once('error', reject);
  });
}

/** Spawn to the first answered GetProviderSchema over an mTLS gRPC connection like Terraform's. */
async function startupToSchemaOnce(entry: string, client: { certPem: string; keyPem: string }, Provider: any): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [entry], {
      env: { PATH: process.env.PATH, TF_PLUGIN_MAGIC_COOKIE: MAGIC_COOKIE, PLUGIN_CLIENT_CERT: client.certPem },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.once('error', reject);
    child.stdout.once('data', (line: Buffer) => {
      const [, , network, address, , certB64] = line.toString().trim().split('|');
      if (network !== 'unix') return reject(new Error(`unexpected handshake: ${line}`));
      const serverPem = `-----BEGIN CERTIFICATE-----\n${Buffer.from(certB64, 'base64')
        .toString('base64')
        .replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----\n`;
      const credentials = grpc.credentials.createSsl(Buffer.from(serverPem), Buffer.from(client.keyPem), Buffer.from(client.certPem));
      const stub = new Provider(`unix:${address}`, credentials, {
        'grpc.ssl_target_name_override': 'localhost',
        'grpc.default_authority': 'localhost',
      });
      stub.GetProviderSchema({}, (err: Error | null, res: { resource_schemas?: Record<string, unknown> }) => {
        const ms = performance.now() - t0;
        stub.close();
        child.once('exit', () =>
          err ? reject(err) : Object.keys(res.resource_schemas ?? {}).length ? resolve(ms) : reject(new Error('empty schema')),
        );
        child.kill('SIGTERM');
      });
    });
  });
}

async function measureStartup(): Promise<BenchRow[]> {
  const { PROVIDER_ENTRY } = await import('../src/distribution/install.js');
  const { pluginCertificate } = await import('../src/provider/cert.js');
  const { loadDefinitions } = await import('../src/provider/proto.js');
  const Provider = (grpc.loadPackageDefinition(loadDefinitions()) as any).tfplugin6.Provider;
  const clientCert = pluginCertificate();
  await startupOnce(PROVIDER_ENTRY, clientCert.certPem); // warm the file cache
  const toHandshake: number[] = [];
  for (let i = 0; i < 10; i++) toHandshake.push(await startupOnce(PROVIDER_ENTRY, clientCert.certPem));
  await startupToSchemaOnce(PROVIDER_ENTRY, clientCert, Provider);
  const toSchema: number[] = [];
  for (let i = 0; i < 10; i++) toSchema.push(await startupToSchemaOnce(PROVIDER_ENTRY, clientCert, Provider));
  const row = (scenario: string, xs: number[]): BenchRow => ({
    bench: 'provider',
    scenario: `${scenario} (median of 10; min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)} ms)`,
    backend: '-',
    size: 0,
    product: `${median(xs).toFixed(0)} ms`,
    baseline: '-',
    ratio: null,
    peakMb: null,
    goal: '< 300 ms',
    met: median(xs) < 300,
    load: machineLoad(),
  });
  return [
    row('provider start-up, spawn -> handshake line', toHandshake),
    row('provider start-up, spawn -> first GetProviderSchema answered over mTLS gRPC', toSchema),
  ];
}

// ---------------------------------------------------------------------------------------------
// The scenarios
// ---------------------------------------------------------------------------------------------

type Scenario =
  | 'tf apply'
  | 'tf plan'
  | 'tf plan -refresh=false'
  | 'dpctl apply'
  | 'dpctl plan'
  | 'dpctl drift'
  | 'tf apply -parallelism=30'
  | 'tf plan -parallelism=30'
  | 'tf apply (pg backend)'
  | 'tf plan (pg backend)'
  | 'tf plan -refresh=false (pg backend)';
const SCENARIOS: Scenario[] = [
  'tf apply',
  'tf plan',
  'tf plan -refresh=false',
  'dpctl apply',
  'dpctl plan',
  'dpctl drift',
  'tf apply -parallelism=30',
  'tf plan -parallelism=30',
  'tf apply (pg backend)',
  'tf plan (pg backend)',
  'tf plan -refresh=false (pg backend)',
];

function run(cmd: string, args: string[], options: { cwd?: string; env: NodeJS.ProcessEnv }): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { ...options, maxBuffer: 256 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: `${stdout}\n${stderr}` }),
    );
  });
}

async function main() {
  const sizes = benchSizes([500, 2000, 5000]);
  const runsFor = (size: number) => Number(size >= 5000 ? (process.env.BENCH_RUNS_LARGE ?? 1) : (process.env.BENCH_RUNS ?? 3));
  // Not BENCH_ONLY: `npm run bench` passes that on (the benches to run), and it picked no scenario here.
  const only = process.env.BENCH_SCENARIOS?.split(',').map((s) => s.trim());
  const wanted = (s: string) => !only || only.some((o) => s.startsWith(o));
  const { installProvider } = await import('../src/distribution/install.js');
  const service = await ServiceProcess.start();
  // The pg backend variant: state in PostgreSQL (a throwaway server, durability as shipped), which
  // Terraform keeps in memory during an apply and uploads every 20 s, where the local backend
  // rewrites the whole terraform.tfstate after each resource.
  const { startThrowawayPostgres } = await import('../test/support/postgres-server.js');
  const pgServer = wanted('tf apply (pg backend)') ? await startThrowawayPostgres({}) : undefined;
  const work = mkdtempSync(join(tmpdir(), 'dp-bench-provider-work-'));
  const rows: BenchRow[] = [];
  const detail: string[][] = [];
  let failed = false;
  let tenantSeq = 0;
  try {
    const mirror = join(work, 'mirror');
    await installProvider({ dir: mirror, platforms: ['linux_amd64'] });
    const cliConfig = join(work, 'cli.tfrc');
    writeFileSync(
      cliConfig,
      `provider_installation {\n  filesystem_mirror {\n    path    = "${mirror}"\n    include = ["${PROVIDER_HOST}/${PROVIDER_SOURCE}"]\n  }\n  direct {\n    exclude = ["${PROVIDER_HOST}/${PROVIDER_SOURCE}"]\n  }\n}\n`,
    );
    // BENCH_CPU_PROF=<dir>: every provider process writes a V8 CPU profile there. `--cpu-prof` is
    // refused in NODE_OPTIONS, so Terraform runs a launcher that passes it (a dev override).
    const profDir = process.env.BENCH_CPU_PROF;
    if (profDir) {
      const { PROVIDER_ENTRY } = await import('../src/distribution/install.js');
      const launcher = join(work, 'launcher');
      mkdirSync(launcher);
      writeFileSync(
        join(launcher, 'terraform-provider-dataplatform'),
        `#!/bin/sh\nexec "${process.execPath}" --cpu-prof --cpu-prof-dir="${profDir}" "${PROVIDER_ENTRY}" "$@"\n`,
        { mode: 0o755 },
      );
      writeFileSync(
        cliConfig,
        `provider_installation {\n  dev_overrides {\n    "${PROVIDER_SOURCE}" = "${launcher}"\n  }\n  direct {}\n}\n`,
      );
    }
    const baseEnv: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: work,
      CHECKPOINT_DISABLE: '1',
      TF_IN_AUTOMATION: '1',
      TF_CLI_CONFIG_FILE: cliConfig,
      DATAPLATFORM_EMAIL: EMAIL,
      DATAPLATFORM_PASSWORD: PASSWORD,
      DATAPLATFORM_CA_FILE: service.ready.caPath,
    };
    const freshTenant = async () => {
      const slug = `b${++tenantSeq}`;
      await service.tenant(slug);
      return { ...baseEnv, DATAPLATFORM_URL: `https://${slug}.localhost:${service.ready.port}` };
    };

    for (const size of sizes) {
      const tfDir = join(work, `tf-${size}`);
      mkdirSync(tfDir);
      writeFileSync(join(tfDir, 'main.tf'), hcl(size));
      const init = profDir
        ? { code: 0, out: '' }
        : await run('terraform', ['init', '-input=false', '-no-color'], { cwd: tfDir, env: baseEnv });
      if (init.code !== 0) throw new Error(`terraform init failed:\n${init.out}`);
      const pgDir = join(work, `tf-${size}-pg`);
      if (pgServer) {
        mkdirSync(pgDir);
        writeFileSync(join(pgDir, 'main.tf'), hcl(size).replace('terraform {\n', 'terraform {\n  backend "pg" {}\n'));
        const pgInit = await run('terraform', ['init', '-input=false', '-no-color'], {
          cwd: pgDir,
          env: { ...baseEnv, PG_CONN_STR: `${pgServer.url}?sslmode=disable`, PG_SCHEMA_NAME: 'init' },
        });
        if (pgInit.code !== 0) throw new Error(`terraform init (pg backend) failed:\n${pgInit.out}`);
      }
      const yamlDir = join(work, `yaml-${size}`);
      yaml(size, yamlDir);
      const resources = projectsFor(size) * (PER_PROJECT + 1);
      const results = new Map<Scenario, Measured[]>(SCENARIOS.map((s) => [s, []]));
      const tf = (args: string[], env: NodeJS.ProcessEnv, name: string, okCodes = [0]) =>
        measure(service, 'terraform', args, { cwd: tfDir, env, name, okCodes });
      const freshState = () => {
        for (const f of ['terraform.tfstate', 'terraform.tfstate.backup']) rmSync(join(tfDir, f), { force: true });
      };
      const noOpPlan = async (scenario: Scenario, extra: string[], env: NodeJS.ProcessEnv) => {
        const m = await tf(['plan', '-detailed-exitcode', '-input=false', '-no-color', ...extra], env, scenario, [0, 2]);
        if (m.code !== 0) {
          failed = true;
          console.error(`${scenario} at ${size} is not empty (exit ${m.code})`);
        }
        results.get(scenario)!.push(m);
      };
      for (let i = 0; i < runsFor(size); i++) {
        if (wanted('tf apply') || wanted('tf plan')) {
          const env = await freshTenant();
          freshState();
          const applied = await tf(['apply', '-auto-approve', '-input=false', '-no-color'], env, 'terraform apply');
          results.get('tf apply')!.push(applied);
          // A plan after an interrupted apply is not a no-op: skipped.
          if (wanted('tf plan') && !applied.timedOut) await noOpPlan('tf plan', [], env);
          if (wanted('tf plan -refresh=false') && !applied.timedOut) await noOpPlan('tf plan -refresh=false', ['-refresh=false'], env);
        }
        if (wanted('dpctl')) {
          const env = await freshTenant();
          const dpctl = (scenario: Scenario, args: string[], okCodes = [0]) =>
            measure(service, process.execPath, [DPCTL, ...args], { env, name: scenario, okCodes });
          results.get('dpctl apply')!.push(await dpctl('dpctl apply', ['apply', yamlDir, '--source-id', SOURCE]));
          results.get('dpctl plan')!.push(await dpctl('dpctl plan', ['plan', yamlDir, '--source-id', SOURCE]));
          results.get('dpctl drift')!.push(await dpctl('dpctl drift', ['drift', yamlDir, '--source-id', SOURCE]));
        }
        if (wanted('tf apply -parallelism=30')) {
          const env = await freshTenant();
          freshState();
          const applied = await tf(
            ['apply', '-auto-approve', '-input=false', '-no-color', '-parallelism=30'],
            env,
            'terraform apply -parallelism=30',
          );
          results.get('tf apply -parallelism=30')!.push(applied);
          if (!applied.timedOut) await noOpPlan('tf plan -parallelism=30', ['-parallelism=30'], env);
        }
        if (pgServer) {
          const env = { ...(await freshTenant()), PG_CONN_STR: `${pgServer.url}?sslmode=disable`, PG_SCHEMA_NAME: `state_${size}_${i}` };
          const applied = await measure(service, 'terraform', ['apply', '-auto-approve', '-input=false', '-no-color'], {
            cwd: pgDir,
            env,
            name: 'terraform apply (pg backend)',
          });
          results.get('tf apply (pg backend)')!.push(applied);
          if (!applied.timedOut) {
            const m = await measure(service, 'terraform', ['plan', '-detailed-exitcode', '-input=false', '-no-color'], {
              cwd: pgDir,
              env,
              name: 'terraform plan (pg backend)',
              okCodes: [0, 2],
            });
            if (m.code !== 0) failed = true;
            results.get('tf plan (pg backend)')!.push(m);
            const r = await measure(service, 'terraform', ['plan', '-detailed-exitcode', '-input=false', '-no-color', '-refresh=false'], {
              cwd: pgDir,
              env,
              name: 'terraform plan -refresh=false (pg backend)',
              okCodes: [0, 2],
            });
            if (r.code !== 0) failed = true;
            results.get('tf plan -refresh=false (pg backend)')!.push(r);
          }
        }
        console.error(`[bench:provider] size ${size}: run ${i + 1} of ${runsFor(size)} done`);
      }

      const med = (s: Scenario, f: (m: Measured) => number) => median(results.get(s)!.map(f));
      const has = (s: Scenario) => results.get(s)!.length > 0;
      const baselineOf: Partial<Record<Scenario, Scenario>> = {
        'tf apply': 'dpctl apply',
        'tf apply -parallelism=30': 'dpctl apply',
        'tf apply (pg backend)': 'dpctl apply',
        'tf plan (pg backend)': 'dpctl plan',
        'tf plan -refresh=false (pg backend)': 'dpctl plan',
        'tf plan': 'dpctl plan',
        'tf plan -parallelism=30': 'dpctl plan',
        'tf plan -refresh=false': 'dpctl plan',
      };
      for (const s of SCENARIOS) {
        if (!has(s)) continue;
        const b = baselineOf[s];
        const runs = results.get(s)!.length;
        const label = `${s.replace(/^tf /, 'terraform ')}${s.includes('plan') || s.includes('drift') ? ' (no changes)' : ' (all new)'}, median of ${runs}`;
        const ratios = b && has(b) ? results.get(s)!.map((m, i) => m.wallMs / (results.get(b)![i] ?? results.get(b)![0]).wallMs) : [];
        rows.push({
          bench: 'provider',
          scenario: label,
          backend: 'sqlite',
          size: resources,
          product: results.get(s)!.some((m) => m.timedOut)
            ? `stopped at ${seconds(TIMEOUT_MS)}: ${med(s, (m) => m.service.writes)} of ${resources} written`
            : seconds(med(s, (m) => m.wallMs)),
          baseline: b && has(b) ? `${b} ${seconds(med(b, (m) => m.wallMs))}` : '-',
          ratio: ratios.length && !results.get(s)!.some((m) => m.timedOut) ? median(ratios) : null,
          peakMb: med(s, (m) => m.peakMb),
          goal: '-',
          met: null,
          load: machineLoad(),
        });
        const rpc = (name: string) => {
          const xs = results
            .get(s)!
            .map((m) => m.provider.rpcs[name])
            .filter(Boolean);
          return xs.length ? `${median(xs.map((r) => r.calls))} x ${median(xs.map((r) => r.ms / r.calls)).toFixed(1)} ms` : '-';
        };
        const wall = med(s, (m) => m.wallMs);
        const providerCpu = med(s, (m) => m.provider.cpuMs);
        const total = med(s, (m) => m.cpuMs);
        detail.push([
          String(resources),
          s.replace(/^tf /, 'terraform '),
          seconds(wall),
          s.startsWith('tf') ? seconds(Math.max(0, total - providerCpu)) : '-',
          s.startsWith('tf') ? `${seconds(providerCpu)} (${med(s, (m) => m.provider.processes)} processes)` : seconds(total),
          seconds(med(s, (m) => m.service.cpuMs)),
          `${med(s, (m) => m.service.requests - m.service.logins)} (${med(s, (m) => m.service.lists)} lists, ${med(s, (m) => m.service.gets)} GETs, ${med(s, (m) => m.service.writes)} writes) + ${med(s, (m) => m.service.logins)} logins`,
          s.startsWith('tf')
            ? ['PlanResourceChange', 'ApplyResourceChange', 'ReadResource', 'UpgradeResourceState', 'ValidateResourceConfig']
                .map((n) => `${n.replace('Resource', '').replace('Change', '')} ${rpc(n)}`)
                .join('; ')
            : '-',
        ]);
      }
    }
    if (process.argv.includes('--with-startup')) rows.push(...(await measureStartup()));
  } finally {
    await service.stop().catch(() => undefined);
    await pgServer?.stop();
    rmSync(work, { recursive: true, force: true });
  }
  if (!rows.length) throw new Error('no scenario measured (BENCH_SCENARIOS picks none?)');
  report(rows);
  console.log(
    '\nWhere the time goes (medians; CPU is user + system; "terraform core" is Terraform\'s CPU minus its provider processes\'):\n',
  );
  const header = [
    'resources',
    'command',
    'wall',
    'terraform core CPU',
    'provider CPU (dpctl: its CPU)',
    'service CPU',
    'API calls',
    'provider RPCs: calls x mean ms',
  ];
  const line = (c: string[]) => `| ${c.join(' | ')} |`;
  console.log([line(header), `|${header.map(() => '---').join('|')}|`, ...detail.map(line)].join('\n'));
  console.log(
    `\n${machine()}; ${process.env.BENCH_RUNS ?? 3} runs per size below 5,000 (${process.env.BENCH_RUNS_LARGE ?? 1} at 5,000 and more); service in a child process (SQLite).`,
  );
  if (failed) process.exitCode = 1;
}

if (process.argv.includes('--role=service')) await runService();
else if (process.argv.includes('--startup')) report(await measureStartup());
else await main();
