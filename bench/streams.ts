/**
 * WebSocket stream benchmark (`npm run bench:streams`): 500 subscribers on one pipeline run.
 *
 * BENCH_SUBSCRIBERS (default 500) clients subscribe with the `ws` package to one pipeline run
 * (wss://bench.localhost/api/v1/ws/pipelines/{p}/runs/{r}?token=<API key>) and must receive every
 * step_update of it. The run: a slow dbt "gate" step (ten table models, ~12 s at time scale 2),
 * during which the subscribers connect (so they catch up from the stored run first), then a chain
 * of 20 steps alternating notification (instant) and one-model dbt runs: 42 step updates per
 * subscriber, bursts included.
 *
 * Process layout: the service runs in a child process of its own (this file forked with
 * --role=server; log level silent) and the subscribers in BENCH_CLIENT_PROCS others
 * (--role=clients; default one per core left after the server's, at least one), so clients and
 * server never share an event loop; all read the same host clock (one machine). The service
 * allows SUBSCRIBERS + 100 connections per source address (the default cap is 256 per address;
 * here every subscriber comes from 127.0.0.1).
 *
 * What a latency is: receive time (Date.now in the client process) minus the message's
 * `timestamp`, which the service sets when the step's state changes in the run it executes
 * (src/service/runtime/pipelines.ts): the moment a user would call "the step finished". Counted
 * for the updates emitted after that subscriber connected; earlier ones arrive in the catch-up
 * and count only for loss. It is split in two: "first arrival" (the first subscriber of a client
 * process to get the update, minus its timestamp: the service and the kernel) and "queued in the
 * client" (this subscriber's receive minus that first arrival: the client process working through
 * its other sockets' copies of the same update). "Server fan-out" is the time in the service from
 * the runtime's step_update to the end of the batch write that carries it to every subscriber
 * (Streams.onFlush; the bus delivers locally at once on both backends).
 * Lost = expected (step, status) pairs of the finished run not received by a subscriber.
 * RSS is the service process's (sampled every 100 ms; the peak is reported).
 *
 * Baseline ("bare ws"): a child process with a bare `ws` WebSocketServer on node:https (the same
 * TLS material: the service's local CA issuing bench.localhost) that replays the product run's
 * live updates with the same gaps, to the same client processes, sending each with
 * `JSON.stringify` once and `ws.send()` per socket, its timestamp taken when it is sent. It is what
 * TLS, `ws`, the kernel and the measuring clients cost on this machine with no service at all.
 * Product and baseline alternate (A B A B ..., BENCH_RUNS pairs per backend, default 3); the
 * figures are medians over the runs and the ratio the median of the per-pair p99 ratios.
 *
 * Backends (BENCH_BACKENDS, default sqlite,postgres), durability stated side by side:
 *   SQLite:     WAL, synchronous=NORMAL (src/service/store/sqlite.ts).
 *   PostgreSQL: a throwaway server (test/support/postgres-server.ts) with fsync=on,
 *               synchronous_commit=off; a fresh database per run; one replica, so stream events
 *               still go through LISTEN/NOTIFY (PostgresBus) but are delivered locally first.
 *
 * BENCH_PROFILE=<dir> runs the service child with --cpu-prof into that directory.
 *
 * Goal (issue 18): p99 < 50 ms and nothing lost. It is a report: it exits 0 once it has printed.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { benchBackends, machine, machineLoad, report, type BenchRow } from './lib/report.js';
import { median } from './lib/alternate.js';
import { freshDatabase } from './lib/pg.js';

const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 500);
const TENANT = 'bench';
const CHAIN = 20;
const CLIENT_PROCS = Number(process.env.BENCH_CLIENT_PROCS ?? Math.max(1, availableParallelism() - 1));
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const GOAL_P99_MS = 50;
const self = fileURLToPath(import.meta.url);

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

interface ClientReport {
  error?: string;
  subs: { missing: number; dup: number; latencies: number[] }[];
  firstArrival: number[];
  queued: number[];
}

/** A share of the subscribers: connects them, reports when all are open, then what they received. */
async function clients() {
  const { localhostLookup } = await import('../test/support/http.js');
  const ca = readFileSync(arg('ca')!);
  /** When this process first received each (step, status), and the split of every live sample. */
  const firstAt = new Map<string, number>();
  const firstArrival: number[] = [];
  const queued: number[] = [];
  interface Sub {
    openedAt: number;
    received: [at: number, data: Buffer][];
    got: Set<string>;
    latencies: number[];
    dup: number;
    ws: WebSocket;
  }
  let subs: Sub[];
  try {
    subs = await Promise.all(
      Array.from(
        { length: Number(arg('count')) },
        () =>
          new Promise<Sub>((resolve, reject) => {
            const ws = new WebSocket(arg('url')!, { ca, lookup: localhostLookup } as WebSocket.ClientOptions);
            const sub: Sub = { openedAt: 0, received: [], got: new Set(), latencies: [], dup: 0, ws };
            // Only the receive time is taken here: parsing now would delay the other sockets'
            // copies of the same update in this process and count the load generator's work as
            // delivery latency. Messages are decoded when the results are collected.
            ws.on('message', (data: Buffer) => sub.received.push([Date.now(), data]));
            ws.once('open', () => {
              sub.openedAt = Date.now();
              resolve(sub);
            });
            ws.once('error', reject);
          }),
      ),
    );
  } catch (err) {
    process.send!({ error: String(err), subs: [], firstArrival: [], queued: [] } satisfies ClientReport, () => process.exit(1));
    return;
  }
  /** Decodes what every subscriber received, in arrival order across the process. */
  const decode = () => {
    const all = subs.flatMap((sub) => sub.received.map(([now, data]) => ({ sub, now, m: JSON.parse(String(data)) })));
    all.sort((a, b) => a.now - b.now);
    for (const { sub, now, m } of all) {
      const k = `${m.step_id}:${m.status}`;
      if (sub.got.has(k)) sub.dup++;
      sub.got.add(k);
      const at = Date.parse(m.timestamp);
      let first = firstAt.get(k);
      const isFirst = first === undefined;
      if (first === undefined) firstAt.set(k, (first = now));
      if (at >= sub.openedAt) {
        sub.latencies.push(now - at);
        if (isFirst) firstArrival.push(now - at);
        queued.push(now - first);
      }
    }
    for (const sub of subs) sub.received = [];
  };
  process.send!({ subs: [], firstArrival: [], queued: [] } satisfies ClientReport);
  process.on('message', (msg: { type: string; expected?: string[] }) => {
    if (msg.type === 'collect') {
      decode();
      process.send!({
        subs: subs.map((s) => ({ missing: msg.expected!.filter((k) => !s.got.has(k)).length, dup: s.dup, latencies: s.latencies })),
        firstArrival,
        queued,
      } satisfies ClientReport);
    }
    if (msg.type === 'stop') {
      for (const s of subs) s.ws.terminate();
      process.exit(0);
    }
  });
}

interface Timed {
  at: number;
  message: Record<string, unknown>;
}
type FromChild =
  | { type: 'ready'; port: number; caPath: string; token?: string }
  | { type: 'rss'; rss: number }
  | { type: 'fanout'; ms: number[]; updates: Timed[] }
  | { type: 'replayed'; ms: number[] };

/** Answers the parent's rss / fanout / stop questions (both servers). */
function serveParent(close: () => Promise<void>, fanout: number[], updates: Timed[]) {
  process.on('message', (msg: { type: string }) => {
    if (msg.type === 'fanout') process.send!({ type: 'fanout', ms: fanout, updates } satisfies FromChild);
    if (msg.type === 'rss') process.send!({ type: 'rss', rss: process.memoryUsage().rss } satisfies FromChild);
    if (msg.type === 'stop') void close().finally(() => process.exit(0));
  });
}

/** The product: `dpctl serve`'s service, SQLite in a temp dir or the PostgreSQL database given. */
async function server() {
  const { startService } = await import('../src/service/server.js');
  const { ensureTenantWithAdmin } = await import('../src/service/bootstrap.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-streams-'));
  const svc = await startService({
    port: 0,
    dataDir,
    databaseUrl: arg('db') || undefined,
    logLevel: 'silent',
    rateLimit: 10_000_000,
    timeScale: 2,
    maxConnectionsPerAddress: SUBSCRIBERS + 100,
  });
  await ensureTenantWithAdmin(svc.ctx, TENANT, 'admin@bench.test', 'correct-horse-battery');
  const tenant = (await svc.ctx.tenants.bySlug(TENANT))!;
  const { tokens } = await svc.ctx.auth.login(tenant.id, 'admin@bench.test', 'correct-horse-battery');
  const { runtimeOf } = await import('../src/service/runtime/runtime.js');
  const events = runtimeOf(svc.ctx).events;
  const { streamsOf } = await import('../src/service/streams/index.js');
  const fanout: number[] = [];
  const updates: Timed[] = [];
  // Server fan-out of an update: from the runtime's step_update to the end of the write of the
  // batch that carries it to every subscriber (streams write batches, see BATCH_MS).
  let unwritten: number[] = [];
  events.prependListener('step_update', (_t: string, e: { message: Record<string, unknown> }) => {
    const at = performance.now();
    updates.push({ at, message: e.message });
    unwritten.push(at);
  });
  streamsOf(svc.ctx)!.onFlush = (startedAt, endedAt, sockets) => {
    if (sockets < SUBSCRIBERS) return void (unwritten = []); // a catch-up, not a fan-out to all
    for (const at of unwritten) if (at <= startedAt) fanout.push(endedAt - at);
    unwritten = unwritten.filter((at) => at > startedAt);
  };
  serveParent(() => svc.close().finally(() => rmSync(dataDir, { recursive: true, force: true })), fanout, updates);
  process.send!({ type: 'ready', port: svc.port, caPath: svc.tls.certPath, token: tokens.access_token } satisfies FromChild);
}

/** The baseline: a bare ws server on node:https replaying the product's updates (see the top). */
async function bare() {
  const { createServer } = await import('node:https');
  const { WebSocketServer } = await import('ws');
  const { loadOrCreateTls } = await import('../src/service/tls.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-bare-'));
  const tls = await loadOrCreateTls({ dataDir });
  const https = createServer({ cert: tls.cert, key: tls.key, SNICallback: tls.SNICallback });
  const wss = new WebSocketServer({ server: https });
  await new Promise<void>((r) => https.listen(0, '127.0.0.1', r));
  const fanout: number[] = [];
  process.on('message', (msg: { type: string; updates?: Timed[] }) => {
    if (msg.type !== 'replay') return;
    const updates = msg.updates!;
    const t0 = performance.now();
    updates.forEach((u, i) => {
      const at = u.at - updates[0].at;
      setTimeout(
        () => {
          const started = performance.now();
          const data = JSON.stringify({ ...u.message, timestamp: new Date().toISOString() });
          for (const ws of wss.clients) ws.send(data);
          fanout.push(performance.now() - started);
          if (i === updates.length - 1) process.send!({ type: 'replayed', ms: fanout } satisfies FromChild);
        },
        Math.max(0, t0 + at - performance.now()),
      );
    });
  });
  serveParent(
    async () => {
      for (const ws of wss.clients) ws.terminate();
      await new Promise((r) => https.close(r));
      rmSync(dataDir, { recursive: true, force: true });
    },
    fanout,
    [],
  );
  process.send!({ type: 'ready', port: (https.address() as { port: number }).port, caPath: tls.certPath } satisfies FromChild);
}

const pct = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN;
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

/** One child process and its question/answer IPC. */
function child(role: string, args: string[], execArgv = process.execArgv) {
  const proc = fork(self, [`--role=${role}`, ...args], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiters: { resolve: (m: FromChild) => void; reject: (e: Error) => void }[] = [];
  proc.on('message', (m: FromChild) => waiters.shift()?.resolve(m));
  proc.on('exit', (code) => {
    for (const w of waiters.splice(0)) w.reject(new Error(`${role} exited with ${code}`));
  });
  const ask = <T extends FromChild>(msg?: object) =>
    new Promise<T>((resolve, reject) => {
      waiters.push({ resolve: resolve as (m: FromChild) => void, reject });
      if (msg) proc.send(msg);
    });
  const stop = async () => {
    if (proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.send({ type: 'stop' });
    await exited;
  };
  return { proc, ask, stop };
}

/** The subscribers' processes, each with its share, on `url`. */
function subscribers(url: string, caPath: string) {
  const procs: ChildProcess[] = Array.from({ length: CLIENT_PROCS }, (_, i) => {
    const n = Math.floor(SUBSCRIBERS / CLIENT_PROCS) + (i < SUBSCRIBERS % CLIENT_PROCS ? 1 : 0);
    return fork(self, ['--role=clients', `--count=${n}`, `--url=${url}`, `--ca=${caPath}`], {
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
  });
  const ask = (msg?: object) =>
    Promise.all(
      procs.map(
        (c) =>
          new Promise<ClientReport>((resolve, reject) => {
            const onExit = (code: number) => reject(new Error(`a client process exited with ${code}`));
            c.once('exit', onExit);
            c.once('message', (m: ClientReport) => {
              c.off('exit', onExit);
              if (m.error) reject(new Error(`a subscriber failed: ${m.error}`));
              else resolve(m);
            });
            if (msg) c.send(msg);
          }),
      ),
    );
  const stop = () =>
    Promise.all(
      procs.map((c) => {
        if (c.exitCode !== null) return undefined;
        const exited = new Promise((r) => c.once('exit', r));
        c.send({ type: 'stop' });
        return exited;
      }),
    );
  return { ask, stop, kill: () => procs.forEach((c) => c.exitCode === null && c.kill()) };
}

interface Measured {
  status: string;
  connectMs: number;
  samples: number;
  p50: number;
  p99: number;
  max: number;
  first: [number, number];
  queued: [number, number];
  fanout: [number, number];
  lost: number;
  dups: number;
  rssPeakMb: number | null;
  load: number;
  /** The product's live updates, for the baseline to replay. */
  updates: Timed[];
}

function measure(reports: ClientReport[], fan: number[]): Omit<Measured, 'status' | 'connectMs' | 'rssPeakMb' | 'load' | 'updates'> {
  const subs = reports.flatMap((r) => r.subs);
  const lat = sorted(subs.flatMap((s) => s.latencies));
  const first = sorted(reports.flatMap((r) => r.firstArrival));
  const queued = sorted(reports.flatMap((r) => r.queued));
  const f = sorted(fan);
  return {
    samples: lat.length,
    p50: pct(lat, 50),
    p99: pct(lat, 99),
    max: lat.at(-1) ?? NaN,
    first: [pct(first, 50), pct(first, 99)],
    queued: [pct(queued, 50), pct(queued, 99)],
    fanout: [pct(f, 50), pct(f, 99)],
    lost: subs.reduce((n, s) => n + s.missing, 0),
    dups: subs.reduce((n, s) => n + s.dup, 0),
  };
}

/** One run of the product: a service child, the pipeline, the subscribers joining during its gate step. */
async function productRun(databaseUrl: string | undefined): Promise<Measured> {
  const { TestHttp } = await import('../test/support/http.js');
  const profile = process.env.BENCH_PROFILE;
  const svc = child(
    'server',
    databaseUrl ? [`--db=${databaseUrl}`] : [],
    profile ? [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${profile}`] : process.execArgv,
  );
  let subs: ReturnType<typeof subscribers> | undefined;
  let http: InstanceType<typeof TestHttp> | undefined;
  let sampler: NodeJS.Timeout | undefined;
  try {
    const ready = await svc.ask<Extract<FromChild, { type: 'ready' }>>();
    http = new TestHttp(ready.caPath);
    const base = `https://${TENANT}.localhost:${ready.port}/api/v1`;
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await http!.call(method, `${base}${path}`, { body, token: ready.token });
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
      return res.body;
    };
    const project = (await call('POST', '/projects', { name: 'bench-streams' })).id as string;
    const p = `/projects/${project}`;
    const key = (await call('POST', `${p}/api-keys`, { name: 'bench', permission_level: 'read-only' })).key as string;
    const channel = (
      await call('POST', `${p}/notification-channels`, { name: 'ops', type: 'email', config: { email_addresses: ['ops@example.com'] } })
    ).id;
    const gate = (
      await call('POST', `${p}/dbt-projects`, {
        name: 'gate',
        repository: 'https://git.example.com/g.git',
        models: Array.from({ length: 10 }, (_, i) => ({
          name: `m${i}`,
          materialization: 'table',
          ...(i ? { depends_on: [`m${i - 1}`] } : {}),
        })),
      })
    ).id;
    const small = (
      await call('POST', `${p}/dbt-projects`, {
        name: 'small',
        repository: 'https://git.example.com/s.git',
        models: [{ name: 'v', materialization: 'view' }],
      })
    ).id;
    const steps: Record<string, unknown>[] = [{ name: 'gate', type: 'dbt_run', dbt_project_id: gate }];
    for (let i = 1; i <= CHAIN; i++) {
      const prev = i === 1 ? 'gate' : `s${i - 1}`;
      steps.push(
        i % 2
          ? { name: `s${i}`, type: 'notification', channel_id: channel, depends_on: [prev] }
          : { name: `s${i}`, type: 'dbt_run', dbt_project_id: small, depends_on: [prev] },
      );
    }
    const pipeline = (await call('POST', `${p}/pipelines`, { name: 'bench', steps })).id;

    let rssPeak = (await svc.ask<Extract<FromChild, { type: 'rss' }>>({ type: 'rss' })).rss;
    sampler = setInterval(
      () =>
        void svc.ask<Extract<FromChild, { type: 'rss' }>>({ type: 'rss' }).then(
          (m) => (rssPeak = Math.max(rssPeak, m.rss)),
          () => undefined,
        ),
      100,
    );
    const load = machineLoad();

    const runId = (await call('POST', `${p}/pipelines/${pipeline}/run`)).run_id as string;
    subs = subscribers(
      `wss://${TENANT}.localhost:${ready.port}/api/v1/ws/pipelines/${pipeline}/runs/${runId}?token=${encodeURIComponent(key)}`,
      ready.caPath,
    );
    const connectStart = Date.now();
    await subs.ask();
    const connectMs = Date.now() - connectStart;

    let run: { status: string; steps: { step_id: string; status: string; started_at: string | null }[] };
    for (;;) {
      run = await call('GET', `${p}/pipelines/${pipeline}/runs/${runId}`);
      if (run.status !== 'running' && run.status !== 'queued') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const expected = run.steps.flatMap((s) => [...(s.started_at ? [`${s.step_id}:running`] : []), `${s.step_id}:${s.status}`]);
    await new Promise((r) => setTimeout(r, 1000));
    const reports = await subs.ask({ type: 'collect', expected });
    clearInterval(sampler);
    const fan = await svc.ask<Extract<FromChild, { type: 'fanout' }>>({ type: 'fanout' });
    // The updates every subscriber got live (all connected): what the baseline replays.
    const allConnected = connectStart + connectMs;
    const updates = fan.updates.filter((u) => Date.parse(String(u.message.timestamp)) >= allConnected);
    return { status: run.status, connectMs, rssPeakMb: Math.round(rssPeak / 2 ** 20), load, updates, ...measure(reports, fan.ms) };
  } finally {
    clearInterval(sampler);
    await subs?.stop().catch(() => subs?.kill());
    await http?.close();
    await svc.stop();
  }
}

/** One run of the baseline: the same clients, a bare ws server replaying `updates`. */
async function bareRun(updates: Timed[]): Promise<Measured> {
  const srv = child('bare', []);
  let subs: ReturnType<typeof subscribers> | undefined;
  try {
    const ready = await srv.ask<Extract<FromChild, { type: 'ready' }>>();
    subs = subscribers(`wss://${TENANT}.localhost:${ready.port}/bare`, ready.caPath);
    const connectStart = Date.now();
    await subs.ask();
    const connectMs = Date.now() - connectStart;
    await new Promise((r) => setTimeout(r, 200));
    const load = machineLoad();
    const replayed = await srv.ask<Extract<FromChild, { type: 'replayed' }>>({ type: 'replay', updates });
    await new Promise((r) => setTimeout(r, 1000));
    const expected = updates.map((u) => `${u.message.step_id}:${u.message.status}`);
    const reports = await subs.ask({ type: 'collect', expected });
    return { status: 'replayed', connectMs, rssPeakMb: null, load, updates: [], ...measure(reports, replayed.ms) };
  } finally {
    await subs?.stop().catch(() => subs?.kill());
    await srv.stop();
  }
}

async function main() {
  const rows: BenchRow[] = [];
  const detail: string[] = [];
  const line = (cells: (string | number)[]) => detail.push(`| ${cells.join(' | ')} |`);
  line([
    'db',
    'run',
    'server',
    'p50',
    'p99',
    'max',
    'first arrival p50/p99',
    'queued in client p50/p99',
    'server fan-out p50/p99',
    'live samples',
    'lost',
    'dup',
    'connect ms',
    'RSS peak MB',
    'load',
  ]);
  line(Array(15).fill('---'));
  const ms = (x: number) => (Number.isFinite(x) ? (x < 10 ? x.toFixed(1) : x.toFixed(0)) : '-');

  for (const backend of benchBackends()) {
    const { startThrowawayPostgres } = await import('../test/support/postgres-server.js');
    const pg =
      backend === 'postgres' ? await startThrowawayPostgres({ fsync: 'on', synchronous_commit: 'off', max_connections: '100' }) : undefined;
    const product: Measured[] = [];
    const baseline: Measured[] = [];
    try {
      for (let i = 0; i < RUNS; i++) {
        const db = pg ? await freshDatabase(pg.url, `bench_streams_${i}`) : undefined;
        const a = await productRun(db);
        const b = await bareRun(a.updates);
        product.push(a);
        baseline.push(b);
        for (const [name, m] of [
          ['product', a],
          ['bare ws', b],
        ] as const) {
          line([
            backend,
            i + 1,
            name,
            ms(m.p50),
            ms(m.p99),
            ms(m.max),
            `${ms(m.first[0])} / ${ms(m.first[1])}`,
            `${ms(m.queued[0])} / ${ms(m.queued[1])}`,
            `${ms(m.fanout[0])} / ${ms(m.fanout[1])}`,
            m.samples,
            m.lost,
            m.dups,
            m.connectMs,
            m.rssPeakMb ?? '-',
            m.load.toFixed(2),
          ]);
        }
        console.error(
          `streams ${backend} run ${i + 1}/${RUNS}: product p99 ${a.p99} ms (lost ${a.lost}, ${a.status}), bare ws p99 ${b.p99} ms`,
        );
      }
    } finally {
      await pg?.stop();
    }
    const p99 = median(product.map((m) => m.p99));
    const lost = product.reduce((n, m) => n + m.lost + m.dups, 0);
    const allSucceeded = product.every((m) => m.status === 'succeeded');
    rows.push({
      bench: 'streams',
      scenario: `${SUBSCRIBERS} subscribers on one pipeline run, step change -> received, p99 (p50); ${CLIENT_PROCS} client process(es)`,
      backend,
      size: SUBSCRIBERS,
      product: `p99 ${ms(p99)} ms (p50 ${ms(median(product.map((m) => m.p50)))} ms), lost ${lost}${allSucceeded ? '' : ', a run did not succeed'}`,
      baseline: `bare ws fan-out, same clients: p99 ${ms(median(baseline.map((m) => m.p99)))} ms (p50 ${ms(median(baseline.map((m) => m.p50)))} ms)`,
      ratio: median(product.map((m, i) => m.p99 / Math.max(1, baseline[i].p99))),
      peakMb: median(product.map((m) => m.rssPeakMb ?? 0)),
      goal: `p99 < ${GOAL_P99_MS} ms, nothing lost`,
      met: p99 < GOAL_P99_MS && lost === 0 && allSucceeded,
      load: median(product.map((m) => m.load)),
    });
  }

  console.log(
    `\nWebSocket streams: ${SUBSCRIBERS} subscribers on one pipeline run, ${RUNS} product/baseline pairs per backend (medians)\n`,
  );
  report(rows);
  console.log(
    `\nEvery run (ms; "first arrival" = service + kernel, "queued in client" = the measuring process's own queue, "server fan-out" = step_update to last socket write in the server):\n`,
  );
  console.log(detail.join('\n'));
  console.log(
    `\n${machine()}. SQLite: WAL, synchronous=NORMAL. PostgreSQL: throwaway server, fsync=on, synchronous_commit=off, one replica (events still NOTIFYed). ` +
      `Service: its own child process; subscribers: ${CLIENT_PROCS} other process(es). peak MB = the service's RSS peak (sampled every 100 ms).`,
  );
}

const role = arg('role');
if (role === 'server') await server();
else if (role === 'bare') await bare();
else if (role === 'clients') await clients();
else await main();
