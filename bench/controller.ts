/**
 * Benchmark of `dpctl controller` as a user runs it (`npm run bench:controller`; BENCH_BACKENDS
 * narrows the databases).
 *
 * For each database of benchBackends(), `dpctl serve` runs as in bench/engine.ts (a child process,
 * a throwaway PostgreSQL server for the postgres rows), and `dpctl controller` runs as a user runs
 * it: `node bin/dpctl.js controller --source <bare repository> --path <dir>` in a process of its
 * own (bench/lib/dpctl-controller.ts: the compiled package, its default concurrency), following a
 * local bare git repository that this bench commits and pushes to. What the bench reads of it is
 * what an operator has: its `/metrics` (the converged revision, runs by result), its status and
 * /proc (CPU, memory).
 *
 *   a) commit -> applied through the webhook: a config of 1 project + 20 connectors; per commit
 *      (BENCH_COMMITS, default 10) one connector's schedule changes, the commit is pushed, the
 *      signed push webhook is sent, and the time runs until /metrics names that commit as
 *      converged (scraped every 20 ms while waiting); the change is then read back from the API.
 *      Goal: the slowest under 2 s. (The interval is 1 h: only the webhook triggers these runs.)
 *   b) steady state with BENCH_RESOURCES (default 10,000) connectors, 100 per project, seeded
 *      through the API with the controller's ownership label (bench/engine.ts seed), the same
 *      YAML committed (bench/engine.ts writeConfig). After its first run, the controller runs every
 *      BENCH_INTERVAL (default 30s) for BENCH_INTERVALS (default 3) runs; reported: its CPU over
 *      that window (/proc, % of a core), RSS and peak RSS, each run's duration (/status.json, read
 *      once the window is over). /metrics is scraped once a second meanwhile, as a scraper would.
 *      Every run must find the platform in sync.
 *   c) commit -> applied through the webhook on that 10,000-resource repository (BENCH_BIG_COMMITS,
 *      default 3, each changing one connector's schedule): a run observes every resource and
 *      re-parses only the changed file. Goal: the slowest under 2 s.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { TestRepo } from '../test/controller/helpers.js';
import { median } from './lib/alternate.js';
import { DpctlController, totalRuns } from './lib/dpctl-controller.js';
import { freshDatabase } from './lib/pg.js';
import { benchBackends, machineLoad, report, seconds, type BenchRow } from './lib/report.js';
import {
  connectorName,
  DEFAULT_SCHEDULE,
  otherSchedule,
  projectFile,
  projectName,
  seed,
  settle,
  SOURCE,
  startServe,
  userEnv,
  writeConfig,
  type RunningServe,
} from './engine.js';

const WEBHOOK_SECRET = 'bench-webhook-secret';
const COMMITS = Number(process.env.BENCH_COMMITS ?? 10);
const RESOURCES = Number(process.env.BENCH_RESOURCES ?? 10_000);
const INTERVAL = process.env.BENCH_INTERVAL ?? '30s';
const INTERVALS = Number(process.env.BENCH_INTERVALS ?? 3);
const BIG_COMMITS = Number(process.env.BENCH_BIG_COMMITS ?? 3);
const PER_PROJECT = 100;
const LATENCY_GOAL_MS = 2_000;
/** What a run that found nothing to change reports. */
const IN_SYNC = new Set(['in-sync', 'converged']);

/** Pushes a commit, sends its webhook and waits until the controller converged on it; returns the ms from webhook to converged. */
async function commitAndNotify(controller: DpctlController, repo: TestRepo, message: string, timeoutMs: number): Promise<number> {
  const head = repo.commit(message);
  const t0 = performance.now();
  await controller.notifyPush(head);
  await controller.waitForConverged(head, timeoutMs);
  return performance.now() - t0;
}

function latencyRow(scenario: string, backend: string, size: number, samples: number[], peakMb: number): BenchRow {
  const max = Math.max(...samples);
  return {
    bench: 'controller',
    scenario,
    backend,
    size,
    product: samples.length ? `median ${seconds(median(samples))}, max ${seconds(max)}` : 'not run',
    baseline: '-',
    ratio: null,
    peakMb,
    goal: `slowest < ${LATENCY_GOAL_MS / 1000} s`,
    met: samples.length > 0 && max < LATENCY_GOAL_MS,
    load: machineLoad(),
  };
}

/** a) One project of 20 connectors; each commit changes one schedule; read back from the API. */
async function latencyScenario(serve: RunningServe, backend: string, work: string): Promise<BenchRow> {
  const { DataPlatformClient } = await import('../src/client/index.js');
  const repo = new TestRepo();
  const project = 'latency';
  const schedules = Array.from({ length: 20 }, () => DEFAULT_SCHEDULE);
  const writeFile = () =>
    repo.write(
      `${project}/${project}.yaml`,
      projectFile(project, schedules.length, (i) => schedules[i]),
    );
  writeFile();
  const head = repo.commit('initial config');
  const env = userEnv(serve);
  const controller = await DpctlController.start({
    repository: repo.remote,
    path: project,
    interval: '1h',
    stateDir: join(work, 'latency-state'),
    webhookSecret: WEBHOOK_SECRET,
    env,
  });
  const client = new DataPlatformClient({
    url: env.DATAPLATFORM_URL!,
    email: env.DATAPLATFORM_EMAIL!,
    password: env.DATAPLATFORM_PASSWORD!,
    ca: readFileSync(env.DATAPLATFORM_CA_FILE!),
  });
  const samples: number[] = [];
  try {
    await controller.waitForConverged(head, 60_000);
    const projectId = (await client.projects.listAll()).find((p) => p.name === project)!.id;
    for (let c = 0; c < COMMITS; c++) {
      const i = c % schedules.length;
      schedules[i] = otherSchedule(c);
      writeFile();
      samples.push(await commitAndNotify(controller, repo, `connector ${i}: schedule ${schedules[i]}`, 30_000));
      const live = (await client.resources('connector', { projectId }).listAll()).find((r) => r.name === connectorName(i)) as
        { schedule?: string } | undefined;
      if (live?.schedule !== schedules[i]) throw new Error(`connector ${i} has schedule ${live?.schedule}, expected ${schedules[i]}`);
    }
    const peakMb = controller.usage().maxRssMb;
    return latencyRow(
      `dpctl controller: commit -> applied through the signed push webhook, 1 project x 20 connectors, ${samples.length} commits`,
      backend,
      21,
      samples,
      peakMb,
    );
  } finally {
    await client.close();
    await controller.stop();
    repo.close();
  }
}

/** b) and c): the steady state with RESOURCES managed connectors, then webhook commits on that repository. */
async function steadyScenario(serve: RunningServe, backend: string, work: string, databaseUrl: string | undefined): Promise<BenchRow[]> {
  const projects = Math.max(1, Math.ceil(RESOURCES / PER_PROJECT));
  const resources = projects * (PER_PROJECT + 1);
  const repo = new TestRepo();
  writeConfig(repo.work, projects);
  const head = repo.commit(`${resources} resources`);
  const seedMs = await seed(serve, projects);
  if (databaseUrl) await settle(databaseUrl);
  const controller = await DpctlController.start({
    repository: repo.remote,
    path: SOURCE,
    interval: INTERVAL,
    stateDir: join(work, 'steady-state'),
    webhookSecret: WEBHOOK_SECRET,
    env: userEnv(serve),
  });
  try {
    await controller.waitForConverged(head, 600_000);
    // From here whole cycles: wait an interval, fetch (nothing new), plan every resource, nothing to apply.
    const before = await controller.scrape();
    const usage0 = controller.usage();
    const t0 = performance.now();
    const deadline = Date.now() + 600_000 + INTERVALS * 120_000;
    let now = before;
    while (totalRuns(now) < totalRuns(before) + INTERVALS) {
      if (Date.now() > deadline) throw new Error(`only ${totalRuns(now) - totalRuns(before)} of ${INTERVALS} runs happened`);
      await sleep(1_000);
      now = await controller.scrape();
    }
    const usage = controller.usage();
    const cpuPct = ((usage.cpuMs - usage0.cpuMs) / (performance.now() - t0)) * 100;
    const runs = (await controller.status()).recent_runs; // newest first
    const steady = runs.slice(0, INTERVALS).reverse();
    const first = runs[INTERVALS];
    const steadyRow: BenchRow = {
      bench: 'controller',
      scenario: `dpctl controller: steady state, interval ${INTERVAL}, ${INTERVALS} runs (fetch, plan of every resource, nothing to apply); first run ${first ? seconds(first.duration_ms) : '?'}; seeded in ${seconds(seedMs)}`,
      backend,
      size: resources,
      product: `CPU ${cpuPct.toFixed(1)} % of a core, RSS ${usage.rssMb} MB; runs ${steady.map((r) => `${seconds(r.duration_ms)} ${r.result}`).join(', ')}`,
      baseline: '-',
      ratio: null,
      peakMb: usage.maxRssMb,
      goal: 'every run in sync',
      met: steady.length === INTERVALS && steady.every((r) => IN_SYNC.has(r.result)),
      load: machineLoad(),
    };

    // c) One more connector's schedule changes with each commit, in the first project's file.
    const file = `${SOURCE}/${projectName(0)}.yaml`;
    const schedules = Array.from({ length: PER_PROJECT }, () => DEFAULT_SCHEDULE);
    const samples: number[] = [];
    for (let c = 0; c < BIG_COMMITS; c++) {
      schedules[c % PER_PROJECT] = otherSchedule(c);
      writeFileSync(
        join(repo.work, file),
        projectFile(projectName(0), PER_PROJECT, (i) => schedules[i]),
      );
      samples.push(await commitAndNotify(controller, repo, `connector ${c}: schedule ${schedules[c % PER_PROJECT]}`, 120_000));
    }
    const bigRow = latencyRow(
      `dpctl controller: commit -> applied through the signed push webhook on that repository (one connector per commit), ${samples.length} commits`,
      backend,
      resources,
      samples,
      controller.usage().maxRssMb,
    );
    return [steadyRow, bigRow];
  } finally {
    await controller.stop();
    repo.close();
  }
}

async function main() {
  const rows: BenchRow[] = [];
  for (const backend of benchBackends()) {
    const { startThrowawayPostgres } = await import('../test/support/postgres-server.js');
    const pg =
      backend === 'postgres'
        ? await startThrowawayPostgres({ fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' })
        : undefined;
    const work = mkdtempSync(join(tmpdir(), 'dp-bench-controller-'));
    try {
      const databaseUrl = pg ? await freshDatabase(pg.url, 'bench_controller') : undefined;
      const serve = await startServe({ databaseUrl });
      try {
        rows.push(await latencyScenario(serve, backend, work));
        rows.push(...(await steadyScenario(serve, backend, work, databaseUrl)));
      } finally {
        await serve.stop();
      }
    } finally {
      await pg?.stop();
      rmSync(work, { recursive: true, force: true });
    }
  }
  report(rows);
}

await main();
