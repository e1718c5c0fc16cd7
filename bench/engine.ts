/**
 * Benchmark of the reconciler engine (`npm run bench:engine`).
 *
 *   a) apply of 1,000 new resources: 10 projects x 100 connectors (plus the 10 projects),
 *      from a config directory written to a temp dir. Goal: under 15 s.
 *   b) a no-op plan over 10,000 resources: 100 projects x 100 connectors, seeded through the
 *      API with 32 concurrent creates of the same client, labelled as managed by the config's
 *      source (so they are owned). Goals: at most one list call per 100 resources per kind per
 *      project (plus the project list), and under 5 s wall (config load + observe + plan).
 *
 * The service runs in a child process (this file, forked with --role=service): SQLite in a
 * temp data dir, rate limit 10,000,000/min, log level silent. The engine runs in this process,
 * so its peak RSS (process.resourceUsage().maxRSS, the whole process so far) is the engine's.
 * API calls come from client.stats(). It is a report: it exits 0 once it has printed.
 */
import { fork } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const TENANT = 'bench';
const EMAIL = `admin@${TENANT}.test`;
const PASSWORD = 'correct-horse-battery';

interface Ready {
  port: number;
  caPath: string;
}

async function runService() {
  const { startService } = await import('../src/service/server.js');
  const { ensureTenantWithAdmin } = await import('../src/service/bootstrap.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-engine-'));
  const service = await startService({ port: 0, logLevel: 'silent', rateLimit: 10_000_000, dataDir });
  await ensureTenantWithAdmin(service.ctx, TENANT, EMAIL, PASSWORD);
  process.on('disconnect', () => process.exit(1));
  process.on('message', (msg: { type: string }) => {
    if (msg.type === 'stop') {
      void service
        .close()
        .finally(() => rmSync(dataDir, { recursive: true, force: true }))
        .finally(() => process.send!({ type: 'stopped' }, () => process.exit(0)));
    }
  });
  process.send!({ type: 'ready', ready: { port: service.port, caPath: service.tls.certPath } satisfies Ready });
}

function connectorDoc(project: string, i: number): string {
  return `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: conn-${String(i).padStart(3, '0')}
  project: ${project}
  labels: { team: data }
spec:
  connector_type: postgresql
  config: { host: db-${i}.internal, port: 5432, database: shop }
  selected_tables: [public.orders, public.customers]
  schedule: "*/15 * * * *"
`;
}

/** A config directory: one file per project (its Project document and its connectors). */
function writeConfig(root: string, prefix: string, projects: number, perProject: number): string {
  mkdirSync(root, { recursive: true });
  for (let p = 0; p < projects; p++) {
    const name = `${prefix}-${String(p).padStart(3, '0')}`;
    const docs = [`apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${name}\nspec:\n  description: bench\n`];
    for (let i = 0; i < perProject; i++) docs.push(connectorDoc(name, i));
    writeFileSync(join(root, `${name}.yaml`), docs.join('---\n'));
  }
  return root;
}

const mb = () => Math.round(process.resourceUsage().maxRSS / 1024);
const totalCalls = (stats: { byEndpoint: Record<string, { calls: number }> }) => Object.values(stats.byEndpoint).reduce((n, e) => n + e.calls, 0);

async function main() {
  const child = fork(fileURLToPath(import.meta.url), ['--role=service'], { execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`service exited (${code}) before it was ready`)));
    child.on('message', (m: { type: string; ready?: Ready }) => m.type === 'ready' && resolve(m.ready!));
  });
  const { DataPlatformClient } = await import('../src/client/index.js');
  const { reconcile, preparePlan, mapLimit, MANAGED_BY_LABEL } = await import('../src/engine/index.js');
  const client = new DataPlatformClient({ url: `https://${TENANT}.localhost:${ready.port}`, email: EMAIL, password: PASSWORD, ca: readFileSync(ready.caPath) });
  const work = mkdtempSync(join(tmpdir(), 'dp-bench-engine-cfg-'));
  const rows: string[][] = [];
  let breakdown = '';
  try {
    // (a) apply of 1,000 new resources.
    {
      const dir = writeConfig(join(work, 'apply'), 'apply', 10, 100);
      client.resetStats();
      const t0 = performance.now();
      const r = await reconcile(client, [dir], { sourceId: 'apply', concurrency: 8 });
      const wall = (performance.now() - t0) / 1000;
      if (!r.result?.converged) throw new Error(`apply did not converge: ${r.plan.errors.join('; ')} ${r.result?.outcomes.filter((o) => o.status !== 'done').slice(0, 3).map((o) => o.message).join('; ')}`);
      const calls = totalCalls(client.stats());
      rows.push(['a) apply, 10 projects x 100 connectors (new)', String(r.plan.summary.create), String(calls), wall.toFixed(2), String(mb()), '< 15 s', wall < 15 ? 'PASS' : 'FAIL']);
    }
    // (b) no-op plan over 10,000 owned resources.
    {
      const source = 'noop';
      const dir = writeConfig(join(work, source), source, 100, 100);
      const seedStart = performance.now();
      const projectIds = await mapLimit(Array.from({ length: 100 }, (_, p) => p), 16, async (p) => (await client.projects.create({ name: `${source}-${String(p).padStart(3, '0')}`, description: 'bench', labels: { [MANAGED_BY_LABEL]: source } })).id);
      const jobs = projectIds.flatMap((id, p) => Array.from({ length: 100 }, (_, i) => ({ id, i, p })));
      await mapLimit(jobs, 32, async ({ id, i }) =>
        client.resources('connector', { projectId: id }).create({
          name: `conn-${String(i).padStart(3, '0')}`, connector_type: 'postgresql', config: { host: `db-${i}.internal`, port: 5432, database: 'shop' },
          selected_tables: ['public.orders', 'public.customers'], schedule: '*/15 * * * *', labels: { team: 'data', [MANAGED_BY_LABEL]: source },
        }),
      );
      const seedWall = (performance.now() - seedStart) / 1000;
      client.resetStats();
      const t0 = performance.now();
      const { plan } = await preparePlan(client, [dir], { sourceId: source, concurrency: 8 });
      const wall = (performance.now() - t0) / 1000;
      const stats = client.stats();
      // Where the time goes (the same steps again, timed one by one).
      const { loadConfig, resolveSecrets } = await import('../src/config/index.js');
      const { observe, makePlan } = await import('../src/engine/index.js');
      let t = performance.now();
      const { config } = loadConfig([dir]);
      const tLoad = performance.now() - t;
      t = performance.now();
      const state = await observe(client, config.documents, { allKinds: false, concurrency: 8, sourceId: source });
      const tObserve = performance.now() - t;
      t = performance.now();
      makePlan(config.documents, state, resolveSecrets(config.documents).secrets, { sourceId: source, prune: false, allowMassDelete: false, adopt: false, specOperations: false });
      const tPlan = performance.now() - t;
      breakdown = `b) breakdown: load+validate config ${(tLoad / 1000).toFixed(2)} s, observe ${(tObserve / 1000).toFixed(2)} s, diff+plan ${(tPlan / 1000).toFixed(2)} s`;
      const changed = plan.changes.filter((c) => c.action !== 'no-op').length;
      if (plan.errors.length || changed) throw new Error(`the no-op plan is not empty: ${changed} changes, errors: ${plan.errors.slice(0, 3).join('; ')}`);
      const calls = totalCalls(stats);
      const lists = Object.entries(stats.byEndpoint).filter(([k]) => k.startsWith('GET ')).reduce((n, [, e]) => n + e.calls, 0);
      const resources = plan.summary['no-op'];
      // One page per 100 resources of each (kind, project) collection, plus the project list.
      const projectsListed = 100 + 10; // this benchmark's projects and scenario a's
      const allowed = 100 * Math.ceil(100 / 100) + Math.ceil(projectsListed / 100);
      const ok = wall < 5 && lists <= allowed;
      rows.push([`b) no-op plan, 100 projects x 100 connectors (owned; seeded in ${seedWall.toFixed(1)} s)`, String(resources), `${calls} (${lists} lists; allowed ${allowed} = resources/100 + project pages)`, wall.toFixed(2), String(mb()), '< 5 s, <= 1 list per 100', ok ? 'PASS' : 'FAIL']);
    }
  } finally {
    await client.close();
    rmSync(work, { recursive: true, force: true });
    const exited = new Promise((r) => child.once('exit', r));
    child.send({ type: 'stop' });
    await exited;
  }
  const header = ['scenario', 'resources', 'API calls', 'wall s', 'peak RSS MB', 'goal', 'result'];
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(r));
  if (breakdown) console.log(`\n${breakdown}`);
  console.log(`\nnode ${process.version}; service in a child process on SQLite; peak RSS is this (engine) process's maximum so far.`);
}

if (process.argv.includes('--role=service')) await runService();
else await main();
