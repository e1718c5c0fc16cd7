/**
 * Benchmark of `dpctl controller` (`node --import tsx bench/controller.ts`).
 *
 *   a) commit -> applied latency through the webhook: a config of 1 project + 20 connectors in
 *      a local bare git repo; per commit (BENCH_COMMITS, default 10) one connector's schedule
 *      changes, the commit is pushed, POST /hooks/git (signed) is sent, and we wait until the
 *      controller's status shows a converged run of that commit; the change is then read back
 *      from the API. Goal: median and max under 2 s. (The interval is 1 h: only the webhook
 *      can trigger these runs.)
 *   b) steady state with BENCH_RESOURCES (default 10,000) managed resources: 100 connectors per
 *      project, seeded through the API with the controller's ownership label (as bench/engine.ts
 *      does), the same YAML committed to the repo. The controller runs every BENCH_INTERVAL
 *      (default 30s) for BENCH_INTERVALS (default 3) intervals after its first run; we report
 *      its CPU (process.cpuUsage delta / wall), RSS and the duration of each run.
 *   c) commit -> applied via the webhook on that same 10,000-resource repo (BENCH_BIG_COMMITS,
 *      default 3 commits, each changing one connector's schedule): a run plans the whole repo
 *      (observing 10,000 resources); only the changed file is parsed again. Goal: under 2 s.
 *
 * The service runs in a child process (this file, forked with --role=service; SQLite, rate
 * limit 10,000,000/min, log level silent), which also seeds the 10,000 resources through its
 * own client, so this process's CPU and memory are the controller's alone (its git children's
 * CPU is not in process.cpuUsage; it is small next to a plan of 10,000 resources). It is a
 * report: it exits 0 once it has printed.
 */
import { execFileSync, fork } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DataPlatformClient } from '../src/client/index.js';
import type { RunningController } from '../src/controller/index.js';

const TENANT = 'bench';
const EMAIL = `admin@${TENANT}.test`;
const PASSWORD = 'correct-horse-battery';
const WEBHOOK_SECRET = 'bench-webhook-secret';

const COMMITS = Number(process.env.BENCH_COMMITS ?? 10);
const RESOURCES = Number(process.env.BENCH_RESOURCES ?? 10_000);
const INTERVAL = process.env.BENCH_INTERVAL ?? '30s';
const INTERVALS = Number(process.env.BENCH_INTERVALS ?? 3);
const BIG_COMMITS = Number(process.env.BENCH_BIG_COMMITS ?? 3);

interface Ready {
  port: number;
  caPath: string;
}

async function runService() {
  const { startService } = await import('../src/service/server.js');
  const { ensureTenantWithAdmin } = await import('../src/service/bootstrap.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-controller-'));
  const service = await startService({ port: 0, logLevel: 'silent', rateLimit: 10_000_000, dataDir });
  await ensureTenantWithAdmin(service.ctx, TENANT, EMAIL, PASSWORD);
  process.on('disconnect', () => process.exit(1));
  process.on('message', (msg: { type: string; seed?: SeedRequest }) => {
    if (msg.type === 'seed') {
      void seedConnectors(service.port, readFileSync(service.tls.certPath), msg.seed!).then(
        (seconds) => process.send!({ type: 'seeded', seconds }),
        (err: Error) => process.send!({ type: 'seed-failed', message: err.message }),
      );
    }
    if (msg.type === 'stop') {
      void service
        .close()
        .finally(() => rmSync(dataDir, { recursive: true, force: true }))
        .finally(() => process.send!({ type: 'stopped' }, () => process.exit(0)));
    }
  });
  process.send!({ type: 'ready', ready: { port: service.port, caPath: service.tls.certPath } satisfies Ready });
}

const pad = (n: number) => String(n).padStart(3, '0');

interface SeedRequest {
  sourceId: string;
  projects: number;
  perProject: number;
}

/**
 * Creates what the steady-state repo declares, owned by its source, through the API (as
 * bench/engine.ts does): the bench is about steady state, not the first apply. Runs in the
 * service's process so that the garbage of 10,000 creates does not count as controller memory.
 */
async function seedConnectors(port: number, ca: string | Buffer, { sourceId, projects, perProject }: SeedRequest): Promise<number> {
  const { DataPlatformClient } = await import('../src/client/index.js');
  const { mapLimit, MANAGED_BY_LABEL } = await import('../src/engine/index.js');
  const client = new DataPlatformClient({ url: `https://${TENANT}.localhost:${port}`, email: EMAIL, password: PASSWORD, ca });
  const started = performance.now();
  try {
    const projectIds = await mapLimit(
      Array.from({ length: projects }, (_, p) => p),
      16,
      async (p) =>
        (await client.projects.create({ name: `${sourceId}-${pad(p)}`, description: 'bench', labels: { [MANAGED_BY_LABEL]: sourceId } }))
          .id,
    );
    const jobs = projectIds.flatMap((id) => Array.from({ length: perProject }, (_, i) => ({ id, i })));
    await mapLimit(jobs, 32, async ({ id, i }) =>
      client.resources('connector', { projectId: id }).create({
        name: `conn-${pad(i)}`,
        connector_type: 'postgresql',
        config: { host: `db-${i}.internal`, port: 5432, database: 'shop' },
        selected_tables: ['public.orders', 'public.customers'],
        schedule: '*/15 * * * *',
        labels: { team: 'data', [MANAGED_BY_LABEL]: sourceId },
      }),
    );
  } finally {
    await client.close();
  }
  return (performance.now() - started) / 1000;
}

function connectorDoc(project: string, i: number, schedule = '*/15 * * * *'): string {
  return `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: conn-${pad(i)}
  project: ${project}
  labels: { team: data }
spec:
  connector_type: postgresql
  config: { host: db-${i}.internal, port: 5432, database: shop }
  selected_tables: [public.orders, public.customers]
  schedule: "${schedule}"
`;
}

function projectFile(name: string, connectors: number, scheduleOf: (i: number) => string = () => '*/15 * * * *'): string {
  const docs = [`apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${name}\nspec:\n  description: bench\n`];
  for (let i = 0; i < connectors; i++) docs.push(connectorDoc(name, i, scheduleOf(i)));
  return docs.join('---\n');
}

/** A bare repository (what the controller follows) and a working clone we commit and push from. */
class BenchRepo {
  readonly bare: string;
  readonly work: string;
  constructor(root: string) {
    this.bare = join(root, 'origin.git');
    this.work = join(root, 'work');
    mkdirSync(root, { recursive: true });
    this.git(root, 'init', '--quiet', '--bare', '--initial-branch=main', this.bare);
    this.git(root, 'clone', '--quiet', this.bare, this.work);
    this.git(this.work, 'checkout', '--quiet', '-B', 'main');
  }

  private git(cwd: string, ...args: string[]): string {
    const env = {
      ...process.env,
      GIT_AUTHOR_NAME: 'bench',
      GIT_AUTHOR_EMAIL: 'bench@example.com',
      GIT_COMMITTER_NAME: 'bench',
      GIT_COMMITTER_EMAIL: 'bench@example.com',
    };
    return execFileSync('git', args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  }

  /** Writes the files, commits and pushes; returns the commit id. */
  commit(files: Record<string, string>, message: string): string {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(this.work, name), text);
    this.git(this.work, 'add', '--all');
    this.git(this.work, 'commit', '--quiet', '-m', message);
    this.git(this.work, 'push', '--quiet', 'origin', 'main');
    return this.git(this.work, 'rev-parse', 'HEAD');
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Waits until the controller finished a run of `commit` that left nothing to do or failing. */
async function waitForApplied(controller: RunningController, commit: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = controller.status().last_run;
    if (run?.revision === commit) {
      if (run.result === 'converged' || run.result === 'in-sync') return;
      if (run.result !== 'incomplete')
        throw new Error(`the run of ${commit.slice(0, 8)} ended ${run.result}: ${run.errors.slice(0, 3).join('; ')}`);
    }
    if (Date.now() > deadline)
      throw new Error(`commit ${commit.slice(0, 8)} was not applied within ${timeoutMs} ms; last run: ${JSON.stringify(run)}`);
    await sleep(5);
  }
}

/** Commits and pushes, sends the signed push webhook, waits until that commit is applied; returns the ms from webhook to applied. */
async function commitAndNotify(
  controller: RunningController,
  repo: BenchRepo,
  files: Record<string, string>,
  message: string,
  timeoutMs: number,
): Promise<number> {
  const { signBody } = await import('../src/controller/index.js');
  const head = repo.commit(files, message);
  const body = JSON.stringify({ ref: 'refs/heads/main', after: head });
  const t0 = performance.now();
  const res = await fetch(`${controller.url}/hooks/git`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-hub-signature-256': signBody(WEBHOOK_SECRET, body) },
  });
  if (res.status !== 202) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
  await waitForApplied(controller, head, timeoutMs);
  return performance.now() - t0;
}

async function startBenchController(client: DataPlatformClient, repo: BenchRepo, stateDir: string, intervalMs: number, sourceId: string) {
  const { startController, GitSource } = await import('../src/controller/index.js');
  const pino = (await import('pino')).default;
  return startController({
    source: new GitSource({ url: repo.bare, branch: 'main', path: '.', stateDir }),
    client,
    mode: 'apply',
    intervalMs,
    listen: { host: '127.0.0.1', port: 0 },
    webhookSecret: WEBHOOK_SECRET,
    engine: { sourceId, concurrency: 8 },
    logger: pino({ level: 'silent' }),
    closeClient: false,
  });
}

async function latencyScenario(client: DataPlatformClient, work: string): Promise<string[]> {
  const repo = new BenchRepo(join(work, 'latency'));
  const project = 'latency';
  const schedules: string[] = Array.from({ length: 20 }, () => '*/15 * * * *');
  const head = repo.commit({ 'latency.yaml': projectFile(project, 20, (i) => schedules[i]) }, 'initial config');
  const controller = await startBenchController(client, repo, join(work, 'latency-state'), 3_600_000, 'latency');
  const samples: number[] = [];
  try {
    await waitForApplied(controller, head, 60_000);
    const projectId = (await client.projects.listAll()).find((p) => p.name === project)!.id;
    for (let c = 0; c < COMMITS; c++) {
      const i = c % schedules.length;
      schedules[i] = `${c % 60} * * * *`;
      samples.push(
        await commitAndNotify(
          controller,
          repo,
          { 'latency.yaml': projectFile(project, 20, (k) => schedules[k]) },
          `conn-${pad(i)}: schedule ${schedules[i]}`,
          30_000,
        ),
      );
      // Read it back: the platform has the new schedule.
      const live = (await client.resources('connector', { projectId }).listAll()).find((r) => r.name === `conn-${pad(i)}`) as
        { schedule?: string } | undefined;
      if (live?.schedule !== schedules[i]) throw new Error(`conn-${pad(i)} has schedule ${live?.schedule}, expected ${schedules[i]}`);
    }
  } finally {
    await controller.stop();
  }
  const med = median(samples);
  const max = Math.max(...samples);
  return [
    `a) commit -> applied via webhook (${COMMITS} commits, 1 project x 20 connectors)`,
    `median ${(med / 1000).toFixed(2)} s, max ${(max / 1000).toFixed(2)} s`,
    '< 2 s',
    max < 2000 ? 'PASS' : 'FAIL',
  ];
}

async function steadyScenario(
  client: DataPlatformClient,
  work: string,
  seed: (request: SeedRequest) => Promise<number>,
): Promise<{ rows: string[][]; detail: string }> {
  const { parseDuration } = await import('../src/controller/index.js');
  const sourceId = 'steady';
  const perProject = Math.min(100, RESOURCES);
  const projects = Math.max(1, Math.ceil(RESOURCES / perProject));
  const repo = new BenchRepo(join(work, 'steady'));
  const files: Record<string, string> = {};
  for (let p = 0; p < projects; p++) files[`${sourceId}-${pad(p)}.yaml`] = projectFile(`${sourceId}-${pad(p)}`, perProject);
  const head = repo.commit(files, `${projects * perProject} connectors`);

  const seedS = await seed({ sourceId, projects, perProject });

  const intervalMs = parseDuration(INTERVAL, 'BENCH_INTERVAL');
  const controller = await startBenchController(client, repo, join(work, 'steady-state'), intervalMs, sourceId);
  const runs: Array<{ ms: number; result: string }> = [];
  let cpuPct: number;
  let rssMb: number;
  let peakRssMb: number;
  try {
    await waitForApplied(controller, head, 300_000);
    const first = controller.status().last_run!;
    const resources = controller.status().resources.length;
    // Steady state from here: whole cycles (wait an interval, fetch with no new commit, plan
    // over every resource, nothing to apply), measured from one run's end to the Nth next one's.
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let lastRun = first.finished_at;
    let peakRss = process.memoryUsage().rss;
    const deadline = t0 + INTERVALS * intervalMs * 1.1 + 300_000;
    while (runs.length < INTERVALS) {
      if (performance.now() > deadline) throw new Error(`only ${runs.length} of ${INTERVALS} runs happened`);
      await sleep(100);
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      const run = controller.status().last_run!;
      if (run.finished_at !== lastRun) {
        lastRun = run.finished_at;
        runs.push({ ms: run.duration_ms, result: run.result });
      }
    }
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    cpuPct = ((cpu.user + cpu.system) / 1000 / wall) * 100;
    rssMb = process.memoryUsage().rss / 1024 / 1024;
    const heapMb = process.memoryUsage().heapUsed / 1024 / 1024;
    peakRssMb = peakRss / 1024 / 1024;
    const row = [
      `b) steady state, ${resources} managed resources, interval ${INTERVAL} (${runs.length} runs)`,
      `CPU ${cpuPct.toFixed(1)} % of a core, RSS ${rssMb.toFixed(0)} MB (peak ${peakRssMb.toFixed(0)} MB)`,
      'report',
      runs.length >= 1 && runs.every((r) => r.result === 'in-sync' || r.result === 'converged') ? 'OK' : 'FAIL',
    ];
    const detail = `b) seeded ${projects * perProject} connectors + ${projects} projects in ${seedS.toFixed(1)} s; first run (plan, nothing to do) ${(first.duration_ms / 1000).toFixed(2)} s (${first.result}); steady runs: ${runs.map((r) => `${(r.ms / 1000).toFixed(2)} s ${r.result}`).join(', ') || 'none'}; window ${(wall / 1000).toFixed(0)} s; heap used at the end ${heapMb.toFixed(0)} MB`;

    // c) The webhook on the big repo: one connector's schedule changes per commit.
    const bigSamples: number[] = [];
    const firstProject = `${sourceId}-${pad(0)}`;
    for (let c = 0; c < BIG_COMMITS; c++) {
      const schedule = `${(c * 7) % 60} * * * *`;
      const file = { [`${firstProject}.yaml`]: projectFile(firstProject, perProject, (i) => (i === c ? schedule : '*/15 * * * *')) };
      bigSamples.push(await commitAndNotify(controller, repo, file, `conn-${pad(c)}: schedule ${schedule}`, 120_000));
    }
    const big = [
      `c) commit -> applied via webhook on the ${resources}-resource repo (${bigSamples.length} commits)`,
      bigSamples.length
        ? `median ${(median(bigSamples) / 1000).toFixed(2)} s, max ${(Math.max(...bigSamples) / 1000).toFixed(2)} s`
        : 'not run',
      '< 2 s',
      bigSamples.length && Math.max(...bigSamples) < 2000 ? 'PASS' : 'FAIL',
    ];
    return { rows: [row, big], detail };
  } finally {
    await controller.stop();
  }
}

async function main() {
  const child = fork(fileURLToPath(import.meta.url), ['--role=service'], {
    execArgv: process.execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`service exited (${code}) before it was ready`)));
    child.on('message', (m: { type: string; ready?: Ready }) => m.type === 'ready' && resolve(m.ready!));
  });
  const { DataPlatformClient } = await import('../src/client/index.js');
  const client = new DataPlatformClient({
    url: `https://${TENANT}.localhost:${ready.port}`,
    email: EMAIL,
    password: PASSWORD,
    ca: readFileSync(ready.caPath),
  });
  const work = mkdtempSync(join(tmpdir(), 'dp-bench-controller-work-'));
  const rows: string[][] = [];
  const details: string[] = [];
  try {
    rows.push(await latencyScenario(client, work));
    const seed = (request: SeedRequest) =>
      new Promise<number>((resolve, reject) => {
        const onMessage = (m: { type: string; seconds?: number; message?: string }) => {
          if (m.type !== 'seeded' && m.type !== 'seed-failed') return;
          child.off('message', onMessage);
          if (m.type === 'seeded') resolve(m.seconds!);
          else reject(new Error(`seeding failed: ${m.message}`));
        };
        child.on('message', onMessage);
        child.send({ type: 'seed', seed: request });
      });
    const steady = await steadyScenario(client, work, seed);
    rows.push(...steady.rows);
    details.push(steady.detail);
  } finally {
    await client.close();
    rmSync(work, { recursive: true, force: true });
    const exited = new Promise((r) => child.once('exit', r));
    child.send({ type: 'stop' });
    await exited;
  }
  const header = ['scenario', 'measured', 'goal', 'result'];
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(r));
  for (const d of details) console.log(`\n${d}`);
  console.log(
    `\nnode ${process.version}; ${process.env.BENCH_RESOURCES ? 'BENCH_RESOURCES set; ' : ''}service in a child process on SQLite; CPU and RSS are this (controller) process's; the 10,000 resources were seeded by the service's process.`,
  );
}

if (process.argv.includes('--role=service')) await runService();
else await main();
