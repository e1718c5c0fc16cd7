/**
 * Scheduled waves (`npm run bench:waves`), issue 18: "at a quarter-hour tick 39,983 syncs start at
 * once". bench/scheduler.ts measures the service between waves; this one measures it during them.
 *
 * For each backend of benchBackends(), two services, each `dpctl serve` in a process of its own,
 * started fresh on data seeded beforehand (bench/service.ts MeasuredService), over real HTTPS:
 *   wave   tenant `bench` holds BENCH_WAVE_SCHEDULED (10,000) connectors of a simulated type, all on
 *          `* * * * *`: every minute each one is due (at its stable 0-59 s offset in the minute), far
 *          more than the tenant may run (the scheduler's bounded queue: 10 run starts of a tenant at a
 *          time, and `--max-runs-per-tenant`, 100, executing), so the service never rests;
 *   empty  the same service with an empty database;
 * and in both, tenant `other` with a project of 10 connectors and an API key.
 *
 * After BENCH_WAVE_WARMUP_SECONDS (90: the first minute's wave is under way), measured in
 * BENCH_ROUNDS (3) rounds, wave and empty alternated:
 *   1. the other tenant's GET connectors?limit=10 at BENCH_PROBE_RATE (20) req/s, open loop, for
 *      BENCH_PROBE_SECONDS (20); goal: p99 within 1.5x of the empty service's. The wave service is
 *      paused (SIGSTOP) while the empty one is probed, so the baseline is a quiet machine, not one
 *      the wave is also loading;
 *   2. the wave service's CPU (and its PostgreSQL backends') over its probe rounds, and the ticks its
 *      scheduler claimed a minute (each a started run or a skip of a connector still syncing).
 *
 * Environment: BENCH_WAVE_SCHEDULED, BENCH_WAVE_WARMUP_SECONDS, BENCH_BACKENDS, BENCH_ROUNDS,
 * BENCH_PROBE_SECONDS, BENCH_PROBE_RATE, BENCH_PG_SYNC (see bench/service.ts). It is a report: it
 * exits 0 once it has printed.
 */
import { DURABILITY, MeasuredService, envNumber, pgSettings } from './service.js';
import { freshDatabase } from './lib/pg.js';
import { benchBackends, figureRow, machine, machineLoad, report, type BenchRow } from './lib/report.js';
import { median } from './lib/alternate.js';
import { backendCpuMs, backendDelta } from './lib/pg-cpu.js';
import { probeOtherTenant, type ProbeResult } from './lib/probe.js';
import { startThrowawayPostgres } from '../test/support/postgres-server.js';

const GOAL_P99_RATIO = 1.5;
const EVERY_MINUTE = '* * * * *';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface WaveRound {
  wave: ProbeResult;
  empty: ProbeResult;
  /** % of one core over the wave's probe, the service and its PostgreSQL backends. */
  cpu: number;
  pgCpu: number;
}

async function measureBackend(
  backend: 'sqlite' | 'postgres',
  pgUrl: string | undefined,
  o: { count: number; warmup: number; rounds: number; seconds: number; rate: number },
): Promise<BenchRow[]> {
  const databases = { wave: backend === 'postgres' ? 'waves_full' : undefined, empty: backend === 'postgres' ? 'waves_empty' : undefined };
  const urlOf = async (name?: string) => (name ? freshDatabase(pgUrl!, name) : undefined);
  const config = (connectors: number, databaseUrl?: string) => ({
    databaseUrl,
    connectors,
    scheduleMix: { [EVERY_MINUTE]: 1 },
    connectorType: 'salesforce',
    otherConnectors: 10,
  });
  const wave = await MeasuredService.start(config(o.count, await urlOf(databases.wave)));
  const empty = await MeasuredService.start(config(0, await urlOf(databases.empty)));
  try {
    console.log(`${backend}: both services ready; warming up ${o.warmup} s (the first wave)`);
    await sleep(o.warmup * 1000);
    const ticksAt = { count: await wave.ticks(), t: performance.now() };
    const rounds: WaveRound[] = [];
    for (let r = 0; r < o.rounds; r++) {
      const before = { usage: await wave.usage(), pg: databases.wave ? await backendCpuMs(pgUrl!, databases.wave) : new Map() };
      const t0 = performance.now();
      const waveProbe = await probeOtherTenant(wave, o.seconds, o.rate);
      const wall = performance.now() - t0;
      const after = { usage: await wave.usage(), pg: databases.wave ? await backendCpuMs(pgUrl!, databases.wave) : new Map() };
      wave.pause();
      let emptyProbe: ProbeResult;
      try {
        emptyProbe = await probeOtherTenant(empty, o.seconds, o.rate);
      } finally {
        wave.resume();
      }
      const round: WaveRound = {
        wave: waveProbe,
        empty: emptyProbe,
        cpu: ((after.usage.cpuMs - before.usage.cpuMs) / wall) * 100,
        pgCpu: (backendDelta(before.pg, after.pg) / wall) * 100,
      };
      rounds.push(round);
      console.log(
        `  round ${r + 1}: wave p99 ${waveProbe.p99.toFixed(1)} ms (p50 ${waveProbe.p50.toFixed(1)}, max ${waveProbe.max.toFixed(1)}, ${waveProbe.failures} failed), empty p99 ${emptyProbe.p99.toFixed(1)} ms (max ${emptyProbe.max.toFixed(1)}); wave service CPU ${round.cpu.toFixed(1)} %${databases.wave ? ` + PG ${round.pgCpu.toFixed(1)} %` : ''}`,
      );
    }
    // Ticks a minute over the rounds (the wave service was paused during the empty probes: not counted).
    const running = (performance.now() - ticksAt.t) / 1000 - o.rounds * o.seconds;
    const perMinute = ((await wave.ticks()) - ticksAt.count) / (running / 60);
    const ratio = median(rounds.map((r) => r.wave.p99 / r.empty.p99));
    const failures = rounds.reduce((n, r) => n + r.wave.failures + r.empty.failures, 0);
    const load = machineLoad();
    const size = o.count;
    const scenario = `${size.toLocaleString('en-US')} connectors on \`${EVERY_MINUTE}\` in one tenant (every one due every minute; ${Math.round(perMinute).toLocaleString('en-US')} ticks claimed a minute)`;
    return [
      {
        bench: 'waves',
        scenario: `other tenant's GET connectors?limit=10 at ${o.rate} req/s (open loop) during the waves of ${scenario}, p99${failures ? ` (${failures} requests FAILED)` : ''}`,
        backend,
        size,
        product: `p99 ${median(rounds.map((r) => r.wave.p99)).toFixed(1)} ms`,
        baseline: `empty database p99 ${median(rounds.map((r) => r.empty.p99)).toFixed(1)} ms (wave service paused)`,
        ratio,
        peakMb: (await wave.usage()).maxRssMb,
        goal: `<= ${GOAL_P99_RATIO}x`,
        met: ratio <= GOAL_P99_RATIO && failures === 0,
        load,
      },
      figureRow({
        bench: 'waves',
        scenario: `service CPU during the waves of ${scenario}`,
        backend,
        size,
        product: `${median(rounds.map((r) => r.cpu)).toFixed(1)} % of a core${databases.wave ? ` + PG backends ${median(rounds.map((r) => r.pgCpu)).toFixed(1)} %` : ''}`,
        load,
      }),
    ];
  } finally {
    await wave.stop().catch(() => undefined);
    await empty.stop().catch(() => undefined);
  }
}

async function main() {
  const backends = benchBackends();
  const o = {
    count: envNumber('BENCH_WAVE_SCHEDULED', 10_000, 1),
    warmup: envNumber('BENCH_WAVE_WARMUP_SECONDS', 90, 0),
    rounds: envNumber('BENCH_ROUNDS', 3, 1),
    seconds: envNumber('BENCH_PROBE_SECONDS', 20, 1),
    rate: envNumber('BENCH_PROBE_RATE', 20, 1),
  };
  const pgSync = process.env.BENCH_PG_SYNC || 'off';
  console.log('Data Platform Management API: scheduled waves benchmark (bench/waves.ts)');
  console.log(`machine: ${machine()}, load ${machineLoad()}`);
  console.log(
    `settings: ${o.count.toLocaleString('en-US')} connectors on \`${EVERY_MINUTE}\` vs an empty database; ${backends.join(' and ')}; ${o.rounds} rounds, probe ${o.rate} req/s for ${o.seconds} s`,
  );
  console.log(`durability: SQLite ${DURABILITY.sqlite} | PostgreSQL ${DURABILITY.postgres(pgSync)}`);
  const pgServer = backends.includes('postgres') ? await startThrowawayPostgres(pgSettings(pgSync)) : undefined;
  const rows: BenchRow[] = [];
  try {
    for (const backend of backends) rows.push(...(await measureBackend(backend, pgServer?.url, o)));
  } finally {
    await pgServer?.stop();
  }
  console.log('');
  report(rows);
  console.log('');
  console.log(`p99 ratio: median of per-round ratios (wave and empty alternated; the wave service paused while the empty one is probed).`);
}

try {
  await main();
} catch (err) {
  console.error('benchmark failed:', err);
}
process.exit(0);
