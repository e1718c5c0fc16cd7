/**
 * Load benchmark of the reference service (`npm run bench:service`).
 *
 * Scenarios, all over HTTPS with keep-alive connections, measured with autocannon:
 *   a) a bare Fastify 5 route returning a small JSON list: the baseline. Same TLS code
 *      path as the service (loadOrCreateTls: local CA, ECDSA P-256 leaf per SNI name).
 *   b) GET  /api/v1/projects/{id}/connectors?limit=100 on the real service, API key as
 *      Bearer, with SEED_CONNECTORS (> 100) connectors in the project.
 *   c) POST /api/v1/projects/{id}/connectors, a unique name per request.
 *   d) (b) at a fixed offered rate of 500 req/s (autocannon overallRate) for its p99.
 *   e) a bare Fastify 5 route sending the same payload as (b): 100 connector-shaped
 *      objects (~50 KB), serialised by Fastify. The throughput goal compares b with e;
 *      b / a is printed for reference, but there it mostly measures payload size.
 *      autocannon's rate limit is per connection per second: each connection sends its
 *      share back-to-back when the second starts, then idles. So (d) is the latency of
 *      `connections` concurrent requests in bursts, harsher than a smooth 500 req/s.
 *
 * Latencies in the table are exact percentiles over every 2xx response time (autocannon's
 * 'response' event). autocannon's own histogram is printed too: it keeps whole ms, counts
 * non-2xx responses by default, and with a rate it applies a coordinated-omission
 * correction whose expected interval is Math.ceil(1 / rate) = 1 ms (lib/run.js), which
 * adds synthetic samples below each real one. The p99 goal must hold on both.
 *
 * Goals: b's throughput >= 40 % of e's (same payload); d's p99 < 25 ms.
 *
 * Each server runs in its own child process (this file, forked with a role argument) so
 * autocannon in this process never shares an event loop with the server it measures. The
 * service runs on SQLite in a temp data dir, rate limit 10,000,000/min, log level silent.
 * The reads (b, d) run before the writes (c), so the list is measured on the seeded
 * project, not on one that the create scenario has grown.
 *
 * Environment:
 *   BENCH_SECONDS         seconds per scenario (default 10)
 *   BENCH_WARMUP_SECONDS  unmeasured warm-up before each scenario (default 2; 0 = none)
 *   BENCH_CONNECTIONS     concurrent connections (default 10)
 *   BENCH_CPU_PROF        a directory: the service process runs with --cpu-prof into it
 *   BENCH_ONLY            e.g. "b" or "b,d": run only these scenarios (for profiling)
 *
 * It is a report: it always exits 0 once it has printed, whatever the goals say.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TLSSocket } from 'node:tls';
import autocannon from 'autocannon';

const TENANT = 'bench';
/** SNI and Host name; `<tenant>.localhost` gets its own leaf certificate from the local CA. */
const SERVER_NAME = `${TENANT}.localhost`;
const SEED_CONNECTORS = 150;
const LIST_LIMIT = 100;
const FIXED_RATE = 500;
const GOAL_LIST_RATIO = 0.4;
const GOAL_P99_MS = 25;

const envNumber = (name: string, fallback: number, min: number) => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}, got "${raw}"`);
  return n;
};

const connectorBody = (name: string) => ({
  name,
  connector_type: 'postgresql',
  config: { host: 'db.internal', port: 5432, database: 'shop', schema: 'public', ssl_mode: 'require' },
  credentials: { username: 'replicator', password: 'bench-secret-password' },
  selected_tables: ['public.orders', 'public.customers'],
  schedule: '*/15 * * * *',
  labels: { team: 'data', env: 'bench' },
});

// ---------------------------------------------------------------------------------------
// Server side (child processes)
// ---------------------------------------------------------------------------------------

interface Ready {
  port: number;
  caPath: string;
  projectId?: string;
  apiKey?: string;
}

type ToChild = { id: number; type: 'cpu' | 'stop' };
type Reply = { id: number; cpu?: NodeJS.CpuUsage };
type FromChild = { type: 'ready'; ready: Ready } | Reply;

/** Answers the parent's requests (CPU usage, stop) and exits with it. */
function serveParent(ready: Ready, close: () => Promise<void>) {
  process.on('disconnect', () => process.exit(1));
  process.on('message', (msg: ToChild) => {
    if (msg.type === 'cpu') process.send!({ id: msg.id, cpu: process.cpuUsage() } satisfies FromChild);
    if (msg.type === 'stop') {
      close()
        .catch((err) => console.error('[bench] close failed:', err))
        // process.exit (not a signal) so --cpu-prof writes its profile.
        .finally(() => process.send!({ id: msg.id } satisfies FromChild, () => process.exit(0)));
    }
  });
  process.send!({ type: 'ready', ready } satisfies FromChild);
}

/** (a) Plain Fastify: no hooks, no schemas, no database; the service's TLS material. */
async function runBareServer() {
  const { default: Fastify } = await import('fastify');
  const { loadOrCreateTls } = await import('../src/service/tls.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-bare-'));
  const tls = await loadOrCreateTls({ dataDir });
  const app = Fastify({ https: { cert: tls.cert, key: tls.key, SNICallback: tls.SNICallback }, logger: false });
  const items = Array.from({ length: 10 }, (_, i) => ({ id: `itm_${i}`, name: `item-${i}` }));
  app.get('/items', async () => ({ data: items, has_more: false }));
  // The same payload as the service's list page: LIST_LIMIT connector-shaped objects, serialised by Fastify.
  const now = new Date().toISOString();
  const page = Array.from({ length: LIST_LIMIT }, (_, i) => ({
    id: `con_${i.toString().padStart(16, '0')}`, project_id: 'prj_0000000000000000', ...connectorBody(`bench-${i}`),
    labels: {}, status: 'created', last_sync_at: null, created_at: now, updated_at: now,
  }));
  for (const c of page) delete (c as { credentials: { password?: string } }).credentials.password;
  app.get('/page', async () => ({ data: page, next_cursor: 'x'.repeat(80), has_more: true }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as { port: number }).port;
  serveParent({ port, caPath: tls.certPath }, async () => {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
}

/** (b-d) The real service with a tenant, a project, a read-write API key and seeded connectors. */
async function runServiceServer() {
  const { startService } = await import('../src/service/server.js');
  const { ensureTenantWithAdmin } = await import('../src/service/bootstrap.js');
  const { TestHttp } = await import('../test/support/http.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-service-'));
  const service = await startService({ port: 0, logLevel: 'silent', rateLimit: 10_000_000, dataDir });
  const http = new TestHttp(service.tls.certPath);
  const base = service.baseUrl(TENANT);
  const ok = async (method: string, path: string, token: string, body: unknown, expected: number) => {
    const res = await http.call(method, `${base}${path}`, { token, body });
    if (res.status !== expected) throw new Error(`${method} ${path}: expected ${expected}, got ${res.status}: ${res.text}`);
    return res.body;
  };
  const email = `admin@${TENANT}.test`;
  const password = 'correct-horse-battery';
  await ensureTenantWithAdmin(service.ctx, TENANT, email, password);
  const login = await ok('POST', '/auth/login', '', { email, password }, 200);
  const project = await ok('POST', '/projects', login.access_token, { name: 'bench' }, 201);
  const key = await ok('POST', `/projects/${project.id}/api-keys`, login.access_token, { name: 'bench-key', permission_level: 'read-write' }, 201);
  for (let i = 0; i < SEED_CONNECTORS; i++) await ok('POST', `/projects/${project.id}/connectors`, key.key, connectorBody(`seed-${String(i).padStart(4, '0')}`), 201);
  serveParent({ port: service.port, caPath: service.tls.certPath, projectId: project.id, apiKey: key.key }, async () => {
    await http.close();
    await service.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
}

// ---------------------------------------------------------------------------------------
// Client side (this process)
// ---------------------------------------------------------------------------------------

class ServerProcess {
  private nextId = 0;
  private readonly pending = new Map<number, (msg: Reply) => void>();
  private constructor(
    private readonly child: ChildProcess,
    readonly ready: Ready,
    readonly ca: Buffer,
  ) {
    child.on('message', (msg: FromChild) => {
      if ('id' in msg) {
        this.pending.get(msg.id)?.(msg);
        this.pending.delete(msg.id);
      }
    });
  }

  static start(role: 'bare' | 'service', extraExecArgv: string[] = []): Promise<ServerProcess> {
    const child = fork(fileURLToPath(import.meta.url), [`--role=${role}`], {
      execArgv: [...process.execArgv, ...extraExecArgv],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolvePromise, reject) => {
      const onExit = (code: number | null) => reject(new Error(`${role} server exited (code ${code}) before it was ready`));
      child.once('exit', onExit);
      child.once('error', reject);
      child.on('message', function onReady(msg: FromChild) {
        if ('type' in msg && msg.type === 'ready') {
          child.off('exit', onExit);
          child.off('message', onReady);
          resolvePromise(new ServerProcess(child, msg.ready, readFileSync(msg.ready.caPath)));
        }
      });
    });
  }

  private ask(type: ToChild['type']): Promise<Reply> {
    const id = ++this.nextId;
    return new Promise((resolvePromise) => {
      this.pending.set(id, resolvePromise);
      this.child.send({ id, type } satisfies ToChild);
    });
  }

  async cpu(): Promise<NodeJS.CpuUsage> {
    return (await this.ask('cpu')).cpu ?? { user: 0, system: 0 };
  }

  async stop(): Promise<void> {
    const exited = new Promise((r) => this.child.once('exit', r));
    await this.ask('stop');
    await exited;
  }
}

/**
 * autocannon 8 calls tls.connect({ ...tlsOptions, rejectUnauthorized: false }) (lib/httpClient.js),
 * so it never rejects a certificate itself. We still give it our CA (tlsOptions.ca) and the
 * SNI name, which makes Node verify the chain and host name and set socket.authorized; this
 * hook checks that on every handshake and kills any connection that did not verify. It wraps
 * the client's `conn` property (set on each (re)connect), an autocannon internal: if that ever
 * changes, no handshakes are observed and the report says "not verified" instead of passing.
 */
class TlsVerification {
  handshakes = 0;
  verified = 0;
  readonly failures = new Map<string, number>();

  readonly watch = (client: autocannon.Client) => {
    let socket: TLSSocket | undefined;
    Object.defineProperty(client, 'conn', {
      configurable: true,
      enumerable: true,
      get: () => socket,
      set: (s: TLSSocket) => {
        socket = s;
        s.once('secureConnect', () => {
          this.handshakes++;
          if (s.authorized) {
            this.verified++;
            return;
          }
          const why = String(s.authorizationError ?? 'unknown');
          this.failures.set(why, (this.failures.get(why) ?? 0) + 1);
          s.destroy(new Error(`TLS verification failed: ${why}`));
        });
      },
    });
  };

  describe(): string {
    if (this.handshakes === 0) return 'NOT VERIFIED (no TLS handshake observed)';
    const failed = [...this.failures].map(([why, n]) => `${n}x ${why}`).join(', ');
    return `${this.verified}/${this.handshakes} handshakes verified against the local CA for ${SERVER_NAME}${failed ? `; FAILED: ${failed}` : ''}`;
  }
}

interface Scenario {
  id: 'a' | 'b' | 'c' | 'd' | 'e';
  label: string;
  target: ServerProcess;
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  /** A fresh body per request (autocannon setupRequest). */
  body?: () => string;
  expectedStatus: number;
  overallRate?: number;
  verifyBody?: (body: string) => boolean;
}

interface Measured {
  scenario: Scenario;
  result: autocannon.Result;
  /** Exact percentiles (ms) of every 2xx response time, from autocannon's per-response events. */
  p50: number;
  p99: number;
  count2xx: number;
  /** Responses per second over the run (all statuses), autocannon's per-second average. */
  reqPerSec: number;
  errors: number;
  errorMessages: Map<string, number>;
  /** First body seen for each unexpected status. */
  unexpected: Map<number, string>;
  tls: TlsVerification;
  clientCpuPct: number;
  serverCpuPct: number;
  /** Busy CPU of everything else on the machine during the run (% of a core), when known. */
  otherCpuPct?: number;
}

/** Machine-wide busy CPU time in ms from /proc/stat (Linux), to show what other processes took during a run. */
function machineBusyMs(): number | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = fields;
    return ((user + nice + system + irq + softirq + (steal ?? 0)) * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return undefined;
  }
}

const percentile = (sorted: Float64Array, q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] : NaN);
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;

async function measure(scenario: Scenario, seconds: number, connections: number): Promise<Measured> {
  const { target } = scenario;
  const port = target.ready.port;
  const tls = new TlsVerification();
  const latencies: number[] = [];
  const errorMessages = new Map<string, number>();
  const unexpected = new Map<number, string>();
  const body = scenario.body;

  const serverCpuBefore = await target.cpu();
  const clientCpuBefore = process.cpuUsage();
  const machineBefore = machineBusyMs();
  const started = performance.now();
  const instance = autocannon({
    // Connect to loopback by IP; the tenant travels in Host and in SNI (servername).
    url: `https://127.0.0.1:${port}${scenario.path}`,
    connections,
    duration: seconds,
    timeout: 10,
    servername: SERVER_NAME,
    tlsOptions: { ca: target.ca },
    setupClient: tls.watch,
    overallRate: scenario.overallRate,
    verifyBody: scenario.verifyBody,
    headers: { host: `${SERVER_NAME}:${port}`, ...scenario.headers },
    requests: [
      {
        method: scenario.method,
        ...(body ? { setupRequest: (req) => ({ ...req, body: body() }) } : {}),
        onResponse: (status, responseBody) => {
          if (status !== scenario.expectedStatus && !unexpected.has(status)) unexpected.set(status, responseBody.slice(0, 300));
        },
      },
    ],
  });
  instance.on('response', (_client, statusCode, _bytes, ms) => {
    if (statusCode >= 200 && statusCode < 300) latencies.push(ms);
  });
  instance.on('reqError', (err) => errorMessages.set(err.message, (errorMessages.get(err.message) ?? 0) + 1));
  const result = await instance;
  const wallMs = performance.now() - started;
  const clientCpu = process.cpuUsage(clientCpuBefore);
  const machineAfter = machineBusyMs();
  const serverCpuAfter = await target.cpu();
  const serverMs = cpuMs(serverCpuAfter) - cpuMs(serverCpuBefore);

  const sorted = Float64Array.from(latencies).sort();
  return {
    scenario,
    result,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    count2xx: latencies.length,
    reqPerSec: result.requests.average,
    errors: result.errors,
    errorMessages,
    unexpected,
    tls,
    clientCpuPct: (cpuMs(clientCpu) / wallMs) * 100,
    serverCpuPct: (serverMs / wallMs) * 100,
    otherCpuPct:
      machineBefore === undefined || machineAfter === undefined ? undefined : (Math.max(0, machineAfter - machineBefore - serverMs - cpuMs(clientCpu)) / wallMs) * 100,
  };
}

/** A clean run: every response had the expected status, no errors, bodies as expected, TLS verified. */
const isClean = (m: Measured) =>
  m.result.non2xx === 0 &&
  m.errors === 0 &&
  m.result.mismatches === 0 &&
  (m.result.statusCodeStats[String(m.scenario.expectedStatus)]?.count ?? 0) === m.count2xx &&
  m.count2xx > 0 &&
  m.tls.handshakes > 0 &&
  m.tls.failures.size === 0;

function printTable(rows: Measured[]) {
  const header = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors'];
  const body = rows.map((m) => [
    `${m.scenario.id}) ${m.scenario.label}`,
    m.reqPerSec.toFixed(0),
    m.p50.toFixed(2),
    m.p99.toFixed(2),
    String(m.result.non2xx),
    String(m.errors),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`);
  for (const r of body) console.log(line(r));
}

function printDetails(m: Measured) {
  const r = m.result;
  const codes = Object.entries(r.statusCodeStats)
    .map(([code, { count }]) => `${code}x${count}`)
    .join(' ');
  console.log(`${m.scenario.id}) ${m.scenario.method} ${m.scenario.path}`);
  console.log(
    `   ${r.requests.total} responses in ${r.duration}s (${m.count2xx} 2xx); status codes: ${codes || '(none)'}; mismatched bodies: ${r.mismatches}; timeouts: ${r.timeouts}`,
  );
  console.log(
    `   latency exact 2xx: p50 ${m.p50.toFixed(2)} p99 ${m.p99.toFixed(2)} ms | autocannon histogram (whole ms${m.scenario.overallRate ? ', its coordinated-omission correction' : ''}): p50 ${r.latency.p50} p99 ${r.latency.p99} max ${r.latency.max} ms`,
  );
  const other = m.otherCpuPct === undefined ? '' : `, other processes on the machine ${m.otherCpuPct.toFixed(0)}%${m.otherCpuPct > 20 ? ' (NOISY: numbers are pessimistic)' : ''}`;
  console.log(`   CPU: server process ${m.serverCpuPct.toFixed(0)}% of a core, autocannon (this process) ${m.clientCpuPct.toFixed(0)}%${other}`);
  console.log(`   TLS: ${m.tls.describe()}`);
  for (const [message, n] of m.errorMessages) console.log(`   error ${n}x: ${message}`);
  for (const [status, text] of m.unexpected) console.log(`   unexpected status ${status}, first body: ${text}`);
}

/** One request through undici with real certificate verification, before each scenario: a 401 here would make the run worthless. */
async function preflight(scenario: Scenario): Promise<string | undefined> {
  const { TestHttp } = await import('../test/support/http.js');
  const http = new TestHttp(scenario.target.ready.caPath);
  try {
    const res = await http.call(scenario.method, `https://${SERVER_NAME}:${scenario.target.ready.port}${scenario.path}`, {
      headers: scenario.headers,
      raw: scenario.body?.(),
    });
    if (res.status !== scenario.expectedStatus) return `expected ${scenario.expectedStatus}, got ${res.status}: ${res.text.slice(0, 300)}`;
    if (scenario.verifyBody && !scenario.verifyBody(res.text)) return `unexpected body: ${res.text.slice(0, 300)}`;
    return undefined;
  } catch (err) {
    return `request failed: ${(err as Error).message}`;
  } finally {
    await http.close();
  }
}

async function main() {
  const seconds = envNumber('BENCH_SECONDS', 10, 1);
  const warmup = envNumber('BENCH_WARMUP_SECONDS', 2, 0);
  const connections = envNumber('BENCH_CONNECTIONS', 10, 1);
  const profileDir = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : undefined;
  const only = new Set((process.env.BENCH_ONLY ?? 'a,b,c,d,e').split(',').map((s) => s.trim()));

  const cpu = cpus();
  console.log('Data Platform Management API: service benchmark');
  console.log(
    `machine: ${cpu.length} cores (${cpu[0]?.model ?? 'unknown'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, ${process.platform} ${release()}, node ${process.version}, load avg ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(`settings: ${seconds}s per scenario after ${warmup}s warm-up, ${connections} connections, HTTP/1.1 keep-alive over TLS, autocannon in this process, each server in its own child process`);
  console.log('');

  const measured: Measured[] = [];
  const problems: string[] = [];
  const run = async (scenario: Scenario) => {
    const failure = await preflight(scenario);
    if (failure) problems.push(`${scenario.id}) preflight: ${failure}`);
    process.stdout.write(`running ${scenario.id}) ${scenario.label}${failure ? ' (PREFLIGHT FAILED, measuring anyway)' : ''} ... `);
    if (warmup > 0) {
      const w = await measure(scenario, warmup, connections);
      if (!isClean(w)) problems.push(`${scenario.id}) warm-up was not clean: non-2xx ${w.result.non2xx}, errors ${w.errors}, mismatches ${w.result.mismatches}`);
    }
    const m = await measure(scenario, seconds, connections);
    console.log(`${m.reqPerSec.toFixed(0)} req/s`);
    measured.push(m);
  };

  // (a) the baseline, alone on the machine.
  if (only.has('a')) {
    const bare = await ServerProcess.start('bare');
    try {
      await run({ id: 'a', label: 'bare Fastify GET (10-item JSON list)', target: bare, method: 'GET', path: '/items', headers: {}, expectedStatus: 200, verifyBody: (b) => b.startsWith('{"data":[') });
      if (only.has('e')) await run({ id: 'e', label: `bare Fastify GET (same ${LIST_LIMIT}-connector page)`, target: bare, method: 'GET', path: '/page', headers: {}, expectedStatus: 200, verifyBody: (b) => b.split('"id":"con_').length - 1 === LIST_LIMIT });
    } finally {
      await bare.stop();
    }
  }

  // (b-d) the service.
  if (only.has('b') || only.has('c') || only.has('d')) {
    const service = await ServerProcess.start('service', profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []);
    try {
      const { projectId, apiKey } = service.ready;
      const auth = { authorization: `Bearer ${apiKey}` };
      const listPath = `/api/v1/projects/${projectId}/connectors?limit=${LIST_LIMIT}`;
      // A full page of the seeded connectors (LIST_LIMIT items; has_more because SEED_CONNECTORS > LIST_LIMIT).
      const fullPage = (b: string) => b.startsWith('{"data":[{') && b.includes('"has_more":true') && b.split('"id":"con_').length - 1 === LIST_LIMIT;
      const list: Omit<Scenario, 'id' | 'label'> = { target: service, method: 'GET', path: listPath, headers: auth, expectedStatus: 200, verifyBody: fullPage };
      if (only.has('b')) await run({ ...list, id: 'b', label: `service GET connectors?limit=${LIST_LIMIT}` });
      if (only.has('d')) await run({ ...list, id: 'd', label: `service GET connectors @ ${FIXED_RATE} req/s`, overallRate: FIXED_RATE });
      if (only.has('c')) {
        const runTag = Date.now().toString(36);
        let n = 0;
        await run({
          id: 'c',
          label: 'service POST connectors (create)',
          target: service,
          method: 'POST',
          path: `/api/v1/projects/${projectId}/connectors`,
          headers: { ...auth, 'content-type': 'application/json' },
          body: () => JSON.stringify(connectorBody(`load-${runTag}-${++n}`)),
          expectedStatus: 201,
        });
      }
    } finally {
      await service.stop();
    }
  }

  measured.sort((x, y) => x.scenario.id.localeCompare(y.scenario.id));
  console.log('');
  printTable(measured);
  console.log('');
  console.log('req/s: autocannon average of per-second samples; p50/p99: exact, over every 2xx response; non-2xx and errors (incl. timeouts) must be 0.');
  console.log('');
  for (const m of measured) printDetails(m);
  for (const m of measured) if (!isClean(m)) problems.push(`${m.scenario.id}) run was not clean (see details): its numbers do not count`);

  const by = (id: Scenario['id']) => measured.find((m) => m.scenario.id === id);
  const a = by('a');
  const b = by('b');
  const d = by('d');
  console.log('');
  console.log('goals:');
  // The goal compares like with like: a bare route sending the same 100-connector page (e).
  // Against the tiny 10-item route (a) the ratio mostly measures payload size; it is printed for reference.
  const e = by('e');
  if (e && b) {
    const ratio = b.reqPerSec / e.reqPerSec;
    const pass = isClean(e) && isClean(b) && ratio >= GOAL_LIST_RATIO;
    console.log(
      `  [${pass ? 'PASS' : 'FAIL'}] list throughput >= ${GOAL_LIST_RATIO * 100}% of a bare route with the same payload: ${b.reqPerSec.toFixed(0)} / ${e.reqPerSec.toFixed(0)} req/s = ${(ratio * 100).toFixed(1)}%${isClean(e) && isClean(b) ? '' : ' (a run was not clean)'}`,
    );
  } else console.log('  [SKIP] list throughput vs same-payload bare route (needs b and e)');
  if (a && b) {
    const ratio = b.reqPerSec / a.reqPerSec;
    console.log(`  [INFO] vs the 10-item bare route (different payload, ~50 KB vs ~0.3 KB): ${b.reqPerSec.toFixed(0)} / ${a.reqPerSec.toFixed(0)} req/s = ${(ratio * 100).toFixed(1)}%`);
  }
  if (d) {
    const achieved = d.reqPerSec;
    const rateOk = achieved >= FIXED_RATE * 0.95;
    // Both the exact p99 and autocannon's own (coordinated-omission corrected) p99 must hold.
    const pass = isClean(d) && rateOk && d.p99 < GOAL_P99_MS && d.result.latency.p99 < GOAL_P99_MS;
    console.log(
      `  [${pass ? 'PASS' : 'FAIL'}] p99 < ${GOAL_P99_MS} ms at ${FIXED_RATE} req/s: p99 ${d.p99.toFixed(2)} ms exact, ${d.result.latency.p99} ms autocannon; achieved ${achieved.toFixed(0)} req/s${rateOk ? '' : ' (offered rate not reached)'}${isClean(d) ? '' : ' (run was not clean)'}`,
    );
    console.log(
      `         note: autocannon's overallRate lets each connection send its per-second quota back-to-back at the start of each second, so this is the p99 of ${connections} concurrent requests during those bursts, not of a smooth ${FIXED_RATE} req/s arrival.`,
    );
  } else console.log('  [SKIP] p99 at fixed rate (needs d)');
  if (problems.length) {
    console.log('');
    console.log('PROBLEMS:');
    for (const p of problems) console.log(`  - ${p}`);
  }
  if (profileDir) console.log(`\nCPU profile of the service process written to ${profileDir} (open in Chrome DevTools > Performance, or speedscope).`);
}

const role = process.argv.find((arg) => arg.startsWith('--role='))?.slice('--role='.length);
if (role === 'bare') await runBareServer();
else if (role === 'service') await runServiceServer();
else {
  try {
    await main();
  } catch (err) {
    console.error('benchmark failed:', err);
  }
  process.exit(0);
}
