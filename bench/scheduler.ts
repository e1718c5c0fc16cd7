/**
 * The idle service with many schedules (`npm run bench:scheduler`), issue 18.
 *
 * For each backend of benchBackends(), two services, each `dpctl serve` in a process of its own,
 * started fresh on data seeded beforehand (bench/service.ts MeasuredService), over real HTTPS:
 *   full   tenant `bench` holds BENCH_SCHEDULED (100,000) connectors with cron schedules, a mix by
 *          weight (BENCH_SCHEDULE_MIX, default 1 % `*\/15 * * * *`, 4 % hourly `0 * * * *`, 95 % yearly
 *          `0 0 1 1 *`), of a simulated type (a due tick starts a simulated sync, no network);
 *   empty  the same service with an empty database;
 * and in both, tenant `other` with a project of 10 connectors and an API key.
 *
 * Measured:
 *   1. CPU of the service process (process.cpuUsage() of the child: every thread) over an idle window
 *      of BENCH_IDLE_SECONDS (60), all services in the same window (they are idle: none disturbs the
 *      others, and a machine that is busier during the window is busier for all of them), repeated
 *      BENCH_ROUNDS times; also the CPU of the PostgreSQL backends serving each service's database
 *      (/proc/<pid>/stat of the pids pg_stat_activity lists for it). Goal: < 5 % of one core.
 *   2. GET /api/v1/projects/{id}/connectors?limit=10 of tenant `other`, with its API key, at a fixed
 *      open-loop rate (BENCH_PROBE_RATE, 20 req/s: a request every 50 ms whether or not the previous
 *      one answered) for BENCH_PROBE_SECONDS (20), full and empty alternated (A B A B, per backend);
 *      p99 of each round; the ratio full / empty is the median of the per-round ratios. Goal: <= 1.5x.
 *
 * "Idle" means no tick is due: windows are placed so that no tick of the mix's non-yearly
 * expressions falls in them or in the 90 s before them (the 0-59 s spread of a tick plus the
 * simulated runs it starts). The ticks the full service claimed during each window are counted
 * (schedule_ticks) and reported: 0 means the window was idle. The work of a due wave itself is
 * not measured here.
 *
 * Environment: BENCH_SCHEDULED, BENCH_SCHEDULE_MIX (`expr=weight;expr=weight`), BENCH_BACKENDS,
 * BENCH_IDLE_SECONDS, BENCH_ROUNDS (2), BENCH_PROBE_SECONDS, BENCH_PROBE_RATE, BENCH_SETTLE_SECONDS
 * (30: after start, before measuring: the start-up back-fills read every scheduled row once),
 * BENCH_PG_SYNC (see bench/service.ts). It is a report: it exits 0 once it has printed.
 */
import { DURABILITY, MeasuredService, envNumber, pgSettings } from './service.js';
import { freshDatabase } from './lib/pg.js';
import { benchBackends, machine, machineLoad, report, type BenchRow } from './lib/report.js';
import { median } from './lib/alternate.js';
import { probeOtherTenant, type ProbeResult } from './lib/probe.js';
import { backendCpuMs, backendDelta } from './lib/pg-cpu.js';
import { nextTickAfter } from '../src/kinds/cron.js';
import { startThrowawayPostgres } from '../test/support/postgres-server.js';

const GOAL_CPU_PCT = 5;
const GOAL_P99_RATIO = 1.5;
/** A due tick keeps the service busy for up to this long: the 0-59 s spread and the simulated runs. */
const WAVE_MS = 90_000;
const YEARLY = '0 0 1 1 *';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function parseMix(raw: string | undefined): Record<string, number> {
  if (!raw) return { '*/15 * * * *': 1, '0 * * * *': 4, [YEARLY]: 95 };
  return Object.fromEntries(
    raw.split(';').map((part) => {
      const [expr, weight] = part.split('=');
      const w = Number(weight);
      if (!expr?.trim() || !Number.isInteger(w) || w < 1) throw new Error(`BENCH_SCHEDULE_MIX: "${part}" is not expr=weight`);
      return [expr.trim(), w];
    }),
  );
}

/** Waits until [now, now + ms] is clear of the mix's ticks (and of the wave before it); returns how long it waited. */
async function waitForQuiet(expressions: string[], ms: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const now = Date.now();
    // The latest tick that could still be busy, and the next one.
    const busy = expressions.map((e) => nextTickAfter(e, now - WAVE_MS - 1));
    const blocking = busy.filter((t) => t <= now + ms);
    if (!blocking.length) return Date.now() - started;
    const until = Math.max(...blocking) + WAVE_MS + 1_000;
    console.log(
      `  waiting ${Math.round((until - now) / 1000)} s for the tick at ${new Date(Math.max(...blocking)).toISOString()} and its wave to pass`,
    );
    await sleep(until - now);
  }
}

interface Service {
  label: string;
  backend: 'sqlite' | 'postgres';
  full: boolean;
  server: MeasuredService;
  databaseUrl?: string;
  database?: string;
}

async function main() {
  const backends = benchBackends();
  const count = envNumber('BENCH_SCHEDULED', 100_000, 1);
  const mix = parseMix(process.env.BENCH_SCHEDULE_MIX);
  const idleSeconds = envNumber('BENCH_IDLE_SECONDS', 60, 1);
  const rounds = envNumber('BENCH_ROUNDS', 2, 1);
  const probeSeconds = envNumber('BENCH_PROBE_SECONDS', 20, 1);
  const probeRate = envNumber('BENCH_PROBE_RATE', 20, 1);
  const settleSeconds = envNumber('BENCH_SETTLE_SECONDS', 30, 0);
  const pgSync = process.env.BENCH_PG_SYNC || 'off';
  const frequent = Object.keys(mix).filter((e) => e !== YEARLY);
  const total = Object.values(mix).reduce((a, b) => a + b, 0);
  const mixText = Object.entries(mix)
    .map(([e, w]) => `${Math.round((w / total) * 1000) / 10} % \`${e}\``)
    .join(', ');

  console.log('Data Platform Management API: idle scheduler benchmark (bench/scheduler.ts)');
  console.log(`machine: ${machine()}, load ${machineLoad()}`);
  console.log(
    `settings: ${count.toLocaleString('en-US')} scheduled connectors (${mixText}) vs an empty database; ${backends.join(' and ')}; ${rounds} idle windows of ${idleSeconds} s; probe ${probeRate} req/s for ${probeSeconds} s x ${rounds} rounds each`,
  );
  console.log(`durability: SQLite ${DURABILITY.sqlite} | PostgreSQL ${DURABILITY.postgres(pgSync)}`);

  const pgServer = backends.includes('postgres') ? await startThrowawayPostgres(pgSettings(pgSync)) : undefined;
  const services: Service[] = [];
  const rows: BenchRow[] = [];
  try {
    for (const backend of backends) {
      for (const full of [true, false]) {
        const database = backend === 'postgres' ? `sched_${full ? 'full' : 'empty'}` : undefined;
        const databaseUrl = database ? await freshDatabase(pgServer!.url, database) : undefined;
        const started = performance.now();
        const server = await MeasuredService.start({
          databaseUrl,
          connectors: full ? count : 0,
          scheduleMix: mix,
          connectorType: 'salesforce',
          otherConnectors: 10,
        });
        const label = `${backend} ${full ? 'full' : 'empty'}`;
        services.push({ label, backend, full, server, databaseUrl, database });
        console.log(`${label}: ready in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      }
    }
    console.log(`settling ${settleSeconds} s (start-up back-fills)`);
    await sleep(settleSeconds * 1000);

    // 1. CPU over idle windows, every service in the same window.
    const cpu = new Map<string, { service: number[]; backends: number[]; ticks: number[] }>(
      services.map((s) => [s.label, { service: [], backends: [], ticks: [] }]),
    );
    for (let r = 0; r < rounds; r++) {
      await waitForQuiet(frequent, idleSeconds * 1000);
      const before = await Promise.all(
        services.map(async (s) => ({
          usage: await s.server.usage(),
          pg: s.database ? await backendCpuMs(pgServer!.url, s.database) : new Map<number, number>(),
          ticks: await s.server.ticks(),
        })),
      );
      const t0 = performance.now();
      await sleep(idleSeconds * 1000);
      const wall = performance.now() - t0;
      const after = await Promise.all(
        services.map(async (s) => ({
          usage: await s.server.usage(),
          pg: s.database ? await backendCpuMs(pgServer!.url, s.database) : new Map<number, number>(),
          ticks: await s.server.ticks(),
        })),
      );
      for (const [i, s] of services.entries()) {
        const c = cpu.get(s.label)!;
        c.service.push(((after[i].usage.cpuMs - before[i].usage.cpuMs) / wall) * 100);
        c.backends.push((backendDelta(before[i].pg, after[i].pg) / wall) * 100);
        c.ticks.push(after[i].ticks - before[i].ticks);
      }
      console.log(
        `  idle window ${r + 1}: ${services.map((s) => `${s.label} ${cpu.get(s.label)!.service[r].toFixed(2)} %${s.database ? ` (+ PG backends ${cpu.get(s.label)!.backends[r].toFixed(2)} %)` : ''}, ${cpu.get(s.label)!.ticks[r]} ticks`).join('; ')}`,
      );
    }

    // 2. The other tenant's GET, full and empty alternated per backend.
    const probes = new Map<string, ProbeResult[]>(services.map((s) => [s.label, []]));
    for (let r = 0; r < rounds; r++) {
      await waitForQuiet(frequent, probeSeconds * services.length * 1000 + 10_000);
      for (const s of services) {
        const p = await probeOtherTenant(s.server, probeSeconds, probeRate);
        probes.get(s.label)!.push(p);
        console.log(
          `  probe round ${r + 1} ${s.label}: ${p.count} x 200, p50 ${p.p50.toFixed(1)} ms, p99 ${p.p99.toFixed(1)} ms, max ${p.max.toFixed(1)} ms${p.failures ? `, ${p.failures} FAILED` : ''}`,
        );
      }
    }

    const load = machineLoad();
    for (const backend of backends) {
      const full = services.find((s) => s.backend === backend && s.full)!;
      const empty = services.find((s) => s.backend === backend && !s.full)!;
      const cf = cpu.get(full.label)!;
      const ce = cpu.get(empty.label)!;
      const fullCpu = median(cf.service);
      const pgNote =
        backend === 'postgres' ? `; its PG backends ${median(cf.backends).toFixed(2)} % (empty ${median(ce.backends).toFixed(2)} %)` : '';
      rows.push({
        bench: 'scheduler',
        scenario: `idle service CPU over ${idleSeconds} s, ${count.toLocaleString('en-US')} scheduled connectors (${mixText}); ticks claimed in the windows: ${cf.ticks.join(', ')}${pgNote}`,
        backend,
        size: count,
        product: `${fullCpu.toFixed(2)} % of a core`,
        baseline: `empty database ${median(ce.service).toFixed(2)} %`,
        ratio: null,
        peakMb: (await full.server.usage()).maxRssMb,
        goal: `< ${GOAL_CPU_PCT} % of a core`,
        met: fullCpu < GOAL_CPU_PCT,
        load,
      });
      const pf = probes.get(full.label)!;
      const pe = probes.get(empty.label)!;
      const ratio = median(pf.map((p, i) => p.p99 / pe[i].p99));
      const failures = [...pf, ...pe].reduce((n, p) => n + p.failures, 0);
      rows.push({
        bench: 'scheduler',
        scenario: `other tenant's GET connectors?limit=10 at ${probeRate} req/s (open loop), p99${failures ? ` (${failures} requests FAILED)` : ''}`,
        backend,
        size: count,
        product: `p99 ${median(pf.map((p) => p.p99)).toFixed(1)} ms`,
        baseline: `empty database p99 ${median(pe.map((p) => p.p99)).toFixed(1)} ms`,
        ratio,
        peakMb: null,
        goal: `<= ${GOAL_P99_RATIO}x`,
        met: ratio <= GOAL_P99_RATIO && failures === 0,
        load,
      });
    }
  } finally {
    for (const s of services) await s.server.stop().catch(() => undefined);
    await pgServer?.stop();
  }
  console.log('');
  report(rows);
  console.log('');
  console.log(
    `CPU: % of one core over the window, median of ${rounds} windows. p99 ratio: median of per-round ratios (full and empty alternated). Durability: SQLite ${DURABILITY.sqlite}; PostgreSQL ${DURABILITY.postgres(pgSync)}.`,
  );
}

try {
  await main();
} catch (err) {
  console.error('benchmark failed:', err);
}
process.exit(0);
