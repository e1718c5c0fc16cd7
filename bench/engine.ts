/**
 * Benchmark of `dpctl plan` as a user runs it (`npm run bench:engine`; BENCH_SIZES and
 * BENCH_BACKENDS narrow it, e.g. `BENCH_SIZES=10000 BENCH_BACKENDS=sqlite npm run bench:engine`).
 *
 * For each size (1k, 10k, 100k: `size / 100` projects of 100 connectors each, plus the
 * projects; "10k" is the issue's 10,100 resources) and database (SQLite, PostgreSQL):
 *   - a service is started as a user starts it, `node bin/dpctl.js serve` in a child process
 *     (`--database-url` of a throwaway PostgreSQL for the postgres backend), rate limit lifted;
 *   - the config directory is written (one file per project) and the live resources are seeded
 *     through the API (parallel creates, labelled as owned by the config's source), so the plan
 *     has no changes; on PostgreSQL the database is then vacuumed and analysed, as autovacuum would
 *     within a minute, so that it does not run during the measured plans;
 *   - the measured command is exactly `node bin/dpctl.js plan <dir>` in a fresh process, with
 *     DATAPLATFORM_URL / _EMAIL / _PASSWORD / _CA_FILE in its environment, exit 0 required
 *     ("No changes"). Two variants:
 *       fresh: `--no-cache` (nothing reused from an earlier run);
 *       cached: the persistent parse/validation cache filled by a first run (DPCTL_CACHE_DIR in a
 *       temp dir), as on a developer's machine or a CI runner with a cached ~/.cache;
 *   - the baseline (the floor) is a small node script that reads every file of the same
 *     directory and parses it with the `yaml` package (parseAllDocuments + toJS), nothing else.
 * Each pair runs A B A B in fresh processes (bench/lib/alternate.ts), the ratio is the median of
 * the per-pair ratios, peak RSS is the kernel's figure for the plan process.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { alternate, type Alternated, type Command } from './lib/alternate.js';
import { DpctlServe } from './lib/dpctl-serve.js';
import { freshDatabase, withPg } from './lib/pg.js';
import { benchBackends, benchSizes, machine, machineLoad, report, seconds, type BenchRow } from './lib/report.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DPCTL = join(ROOT, 'bin', 'dpctl.js');
const TENANT = 'bench';
const EMAIL = `admin@${TENANT}.test`;
const PASSWORD = 'correct-horse-battery';
export const SOURCE = 'platform';
const PER_PROJECT = 100;

export interface RunningServe {
  url: string;
  caFile: string;
  stop(): Promise<void>;
}

/** `dpctl serve` in a child process, as a user starts it (bench/lib/dpctl-serve.ts); resolves once it listens. */
export async function startServe(options: { databaseUrl?: string } = {}): Promise<RunningServe> {
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-engine-data-'));
  const serve = await DpctlServe.start({
    dataDir,
    databaseUrl: options.databaseUrl,
    flags: ['--rate-limit', '1000000000'],
    env: { DP_BOOTSTRAP_TENANT: TENANT, DP_BOOTSTRAP_EMAIL: EMAIL, DP_BOOTSTRAP_PASSWORD: PASSWORD },
    readyText: `Tenant "${TENANT}"`,
  });
  return {
    url: `https://${TENANT}.localhost:${serve.port}`,
    caFile: serve.caPath,
    async stop() {
      await serve.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const projectName = (p: number) => `proj-${String(p).padStart(4, '0')}`;
export const connectorName = (i: number) => `conn-${String(i).padStart(3, '0')}`;
/**
 * Yearly, so that no sync becomes due while a bench runs: the connectors are of a type the service
 * really connects to (postgresql, at hosts that do not exist), and with a frequent schedule every
 * quarter hour would start 10,000 failing syncs beside the measured commands (and leave the
 * connectors in error, which the controller reports as degraded). The scheduler's own cost is
 * bench/scheduler.ts's.
 */
export const DEFAULT_SCHEDULE = '0 0 1 1 *';
/** A schedule other than the default that never comes due during a bench either (Jan 1 at hour 1-23). */
export const otherSchedule = (n: number) => `0 ${(n % 23) + 1} 1 1 *`;

function connectorDoc(project: string, i: number, schedule: string): string {
  return `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: ${connectorName(i)}
  project: ${project}
  labels: { team: data }
spec:
  connector_type: postgresql
  config: { host: db-${i}.internal, port: 5432, database: shop }
  selected_tables: [public.orders, public.customers]
  schedule: "${schedule}"
`;
}

/** One project's file: its Project document and `connectors` connectors (connector i's schedule is `scheduleOf(i)`). */
export function projectFile(name: string, connectors = PER_PROJECT, scheduleOf: (i: number) => string = () => DEFAULT_SCHEDULE): string {
  const docs = [`apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${name}\nspec:\n  description: bench\n`];
  for (let i = 0; i < connectors; i++) docs.push(connectorDoc(name, i, scheduleOf(i)));
  return docs.join('---\n');
}

/** The config directory (named after the source id): one file per project, its Project document and its connectors. */
export function writeConfig(root: string, projects: number): string {
  const dir = join(root, SOURCE);
  mkdirSync(dir, { recursive: true });
  for (let p = 0; p < projects; p++) writeFileSync(join(dir, `${projectName(p)}.yaml`), projectFile(projectName(p)));
  return dir;
}

/** Creates the live resources the config declares, owned by its source, through the API (parallel creates). */
export async function seed(serve: RunningServe, projects: number): Promise<number> {
  const { readFileSync } = await import('node:fs');
  const { DataPlatformClient } = await import('../src/client/index.js');
  const { mapLimit, MANAGED_BY_LABEL } = await import('../src/engine/index.js');
  const client = new DataPlatformClient({ url: serve.url, email: EMAIL, password: PASSWORD, ca: readFileSync(serve.caFile) });
  const t0 = performance.now();
  try {
    const ids = await mapLimit(
      Array.from({ length: projects }, (_, p) => p),
      16,
      async (p) =>
        (await client.projects.create({ name: projectName(p), description: 'bench', labels: { [MANAGED_BY_LABEL]: SOURCE } })).id,
    );
    const jobs = ids.flatMap((id) => Array.from({ length: PER_PROJECT }, (_, i) => ({ id, i })));
    await mapLimit(jobs, 32, async ({ id, i }) =>
      client.resources('connector', { projectId: id }).create({
        name: connectorName(i),
        connector_type: 'postgresql',
        config: { host: `db-${i}.internal`, port: 5432, database: 'shop' },
        selected_tables: ['public.orders', 'public.customers'],
        schedule: DEFAULT_SCHEDULE,
        labels: { team: 'data', [MANAGED_BY_LABEL]: SOURCE },
      }),
    );
  } finally {
    await client.close();
  }
  return performance.now() - t0;
}

/** The floor: read and parse every YAML file of the directory with the `yaml` package, nothing else. */
const PARSE_ONLY = `
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
const dir = process.argv[1];
let n = 0;
for (const f of readdirSync(dir).sort()) {
  if (!/\\.ya?ml$/.test(f)) continue;
  for (const doc of parseAllDocuments(readFileSync(join(dir, f), 'utf8'))) if (doc.toJS() !== null) n++;
}
if (!n) process.exit(1);
`;

export function userEnv(serve: RunningServe, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    DATAPLATFORM_URL: serve.url,
    DATAPLATFORM_EMAIL: EMAIL,
    DATAPLATFORM_PASSWORD: PASSWORD,
    DATAPLATFORM_CA_FILE: serve.caFile,
    ...extra,
  };
}

interface Measured {
  backend: string;
  resources: number;
  fresh: Alternated;
  cached: Alternated;
}

/**
 * After the bulk load, what autovacuum would do within a minute anyway (VACUUM ANALYZE), so it does not
 * run in the middle of the measured plans: the plans measure a database in its steady state.
 */
export async function settle(databaseUrl: string): Promise<void> {
  await withPg(databaseUrl, (c) => c.query('VACUUM ANALYZE'));
}

async function main() {
  const sizes = benchSizes([1_000, 10_000, 100_000]).sort((a, b) => a - b);
  const backends = benchBackends();
  const measured: Measured[] = [];
  const notes: string[] = [];
  const started = performance.now();
  const work = mkdtempSync(join(tmpdir(), 'dp-bench-engine-'));
  try {
    for (const backend of backends) {
      const { startThrowawayPostgres } = await import('../test/support/postgres-server.js');
      const pg =
        backend === 'postgres'
          ? await startThrowawayPostgres({ fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' })
          : undefined;
      try {
        for (const size of sizes) {
          const projects = Math.max(1, Math.round(size / PER_PROJECT));
          const resources = projects * (PER_PROJECT + 1);
          const big = resources > 50_000;
          const runs = big ? 3 : 5;
          const databaseUrl = pg ? await freshDatabase(pg.url, `bench_${size}`) : undefined;
          const serve = await startServe({ databaseUrl });
          const root = join(work, `${backend}-${size}`);
          try {
            const dir = writeConfig(root, projects);
            const seedMs = await seed(serve, projects);
            if (databaseUrl) await settle(databaseUrl);
            const env = userEnv(serve, { DPCTL_CACHE_DIR: join(root, 'cache') });
            const parse: Command = {
              name: 'bare YAML parse',
              cmd: process.execPath,
              args: ['--input-type=module', '-e', PARSE_ONLY, dir],
              cwd: ROOT,
            };
            const fresh: Command = {
              name: 'dpctl plan --no-cache',
              cmd: process.execPath,
              args: [DPCTL, 'plan', '--no-cache', dir],
              cwd: root,
              env,
            };
            // The warm-up run fills the cache; every measured run reads it.
            const cached: Command = {
              name: 'dpctl plan (cache filled)',
              cmd: process.execPath,
              args: [DPCTL, 'plan', dir],
              cwd: root,
              env,
            };
            const a = await alternate(fresh, parse, { runs, warmup: big ? 0 : 1 });
            const c = await alternate(cached, parse, { runs, warmup: 1 });
            measured.push({ backend, resources, fresh: a, cached: c });
            notes.push(
              `${backend} ${resources.toLocaleString('en-US')} resources: seeded in ${seconds(seedMs)}; fresh plan ${seconds(a.a.minMs)}..${seconds(a.a.maxMs)}, cached ${seconds(c.a.minMs)}..${seconds(c.a.maxMs)}, bare parse ${seconds(a.b.minMs)}..${seconds(a.b.maxMs)} (min..max)`,
            );
          } finally {
            await serve.stop();
            rmSync(root, { recursive: true, force: true });
          }
        }
      } finally {
        await pg?.stop();
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const rows: BenchRow[] = [];
  for (const m of measured) {
    // Memory per resource: the growth of peak RSS from the next smaller size (Node's own ~50 MB is no resource's).
    const smaller = measured.filter((x) => x.backend === m.backend && x.resources < m.resources).pop();
    // `side`: the plan (a) or, by the same measure, the bare parse (b): at 10,100 most of the growth is
    // V8's young generation growing to its full size, which the parse alone shows as well.
    const perResource = (pick: (x: Measured) => Alternated, side: 'a' | 'b' = 'a') => {
      const peak = pick(m)[side].medianPeakMb;
      const base = smaller ? pick(smaller)[side].medianPeakMb : null;
      return peak === null || base === null ? null : ((peak - base) * 1024) / (m.resources - smaller!.resources);
    };
    rows.push(
      row(
        'dpctl plan, no changes, fresh process, --no-cache',
        m.backend,
        m.resources,
        m.fresh,
        perResource((x) => x.fresh),
        freshGoal(m.resources),
        perResource((x) => x.fresh, 'b'),
      ),
    );
    rows.push(
      row(
        'dpctl plan, no changes, fresh process, cache filled',
        m.backend,
        m.resources,
        m.cached,
        perResource((x) => x.cached),
        cachedGoal(m.resources),
        perResource((x) => x.cached, 'b'),
      ),
    );
  }
  report(rows);
  console.log(`\n${notes.join('\n')}`);
  console.log(
    `\n${machine()}; bench wall ${seconds(performance.now() - started)}. Each figure is the median of fresh processes alternated with the baseline (A B A B); ratio = median of per-pair ratios; peak MB = kernel max RSS of the dpctl process; KB/resource = growth of peak RSS per added resource from the next smaller size (needs two sizes), for the plan and, by the same measure, the bare parse.`,
  );
}

interface Goal {
  text: string;
  met: (a: Alternated, kbPerResource: number | null) => boolean;
}

const MAX_KB_PER_RESOURCE = 3;

function freshGoal(resources: number): Goal {
  const maxS = resources <= 11_000 ? 2 : resources <= 101_000 ? 10 : Infinity;
  const gb = resources >= 50_000;
  return {
    text: `< ${maxS} s, <= 1.3x parse, <= ${MAX_KB_PER_RESOURCE} KB/resource${gb ? ', < 1 GB' : ''}`,
    met: (a, kb) =>
      a.a.medianMs < maxS * 1000 && a.ratio <= 1.3 && (kb === null || kb <= MAX_KB_PER_RESOURCE) && (!gb || (a.a.medianPeakMb ?? 0) < 1024),
  };
}

function cachedGoal(resources: number): Goal {
  const maxS = resources <= 11_000 ? 1 : Infinity;
  return {
    text: `${Number.isFinite(maxS) ? `< ${maxS} s, ` : ''}<= 1.3x parse, <= ${MAX_KB_PER_RESOURCE} KB/resource`,
    met: (a, kb) => a.a.medianMs < maxS * 1000 && a.ratio <= 1.3 && (kb === null || kb <= MAX_KB_PER_RESOURCE),
  };
}

function row(
  scenario: string,
  backend: string,
  resources: number,
  a: Alternated,
  kb: number | null,
  goal: Goal,
  baselineKb: number | null,
): BenchRow {
  return {
    bench: 'engine',
    scenario,
    backend,
    size: resources,
    product: `${seconds(a.a.medianMs)}${kb === null ? '' : `, ${kb.toFixed(1)} KB/resource`}`,
    baseline: `bare YAML parse ${seconds(a.b.medianMs)}${baselineKb === null ? '' : `, ${baselineKb.toFixed(1)} KB/resource`}`,
    ratio: a.ratio,
    peakMb: a.a.medianPeakMb,
    goal: goal.text,
    met: goal.met(a, kb),
    load: machineLoad(),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
