/**
 * Load benchmark of the reference service (`npm run bench:service`), SQLite against PostgreSQL.
 *
 * For each size of benchSizes() (connectors the tenant's project holds: 1k, 10k, 100k) and each
 * backend of benchBackends(), one service runs as a user runs it, `node bin/dpctl.js serve` in a
 * process of its own (rate limit lifted; its CPU and memory read from /proc), over real HTTPS,
 * with a tenant, a project seeded with that many connectors and a read-write API key, used as a
 * user uses it (`Authorization: Bearer dpk_...`). The data is seeded first by a child of this file
 * (`--role=seed`: straight into the store, in transactions of 1,000; the seeding is not what is
 * measured), which exits; the service then starts fresh on it, as a service restarted on a full
 * database does (why: runSeeder).
 * autocannon, in this process, measures:
 *
 *   list   GET  /api/v1/projects/{id}/connectors?limit=100 (a full first page, has_more)
 *   create POST /api/v1/projects/{id}/connectors, a unique name per request (the connector has a
 *          yearly schedule, so its `schedules` row is written too, and nothing becomes due)
 *   bare   a bare Fastify 5 route (same TLS material, no hooks, no database) sending the very
 *          bytes of the service's list page, prebuilt: what the list costs above the framework
 *   floor  per database, a bare Fastify 5 route (its own process, same TLS material) that reads the
 *          same page through the service's own store (ResourceStore.listPage: the same statement,
 *          driver and pool settings, on the same database) and assembles it (toJsonPage), with no
 *          authentication, rate limit or hooks: what reading the page from that database on every
 *          request costs anything, whatever runs around it. Its ratios bound the list's: a goal
 *          above the floor's own ratio cannot be met by any service that reads the page per request.
 *
 * in short alternated rounds: list on SQLite, list on PostgreSQL, floor on SQLite, floor on
 * PostgreSQL, bare, list on SQLite, ...; then
 * create on SQLite, create on PostgreSQL, ... Each ratio (PostgreSQL / SQLite, list / bare) is the
 * median of the per-round ratios, so a machine that slows down mid-run slows both sides of a pair.
 * Throughput is responses per second over the round; p99 is exact over every 2xx response.
 *
 * Durability, stated side by side because it decides what a commit costs:
 *   SQLite:     WAL, synchronous=NORMAL (src/service/store/sqlite.ts): a commit does not wait for
 *               an fsync; the WAL is synced at checkpoints. A crash of the OS can lose the last commits.
 *   PostgreSQL: fsync=on, synchronous_commit=off: a commit does not wait for its WAL flush; the WAL
 *               writer flushes within wal_writer_delay (200 ms, at most 3x that). The same promise.
 * BENCH_PG_SYNC=on measures PostgreSQL with synchronous_commit=on instead (every commit flushed).
 *
 * The PostgreSQL server is a throwaway one (test/support/postgres-server.ts), one database per
 * size, max_connections 200; the service's pool is its own default.
 *
 * Environment:
 *   BENCH_SIZES           e.g. 1000,10000 (default 1000,10000,100000)
 *   BENCH_BACKENDS        e.g. sqlite (default sqlite,postgres)
 *   BENCH_SECONDS         seconds per measured round (default 5)
 *   BENCH_ROUNDS          alternated rounds per scenario (default 3)
 *   BENCH_WARMUP_SECONDS  unmeasured warm-up of each target before its rounds (default 2)
 *   BENCH_CONNECTIONS     concurrent connections (default 10)
 *   BENCH_PG_SYNC         synchronous_commit for PostgreSQL (default off, see above)
 *   BENCH_VERBOSE=1       every round's figures
 *
 * It is a report: it exits 0 once it has printed, whatever the goals say.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TLSSocket } from 'node:tls';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import { DpctlServe } from './lib/dpctl-serve.js';
import type { ProcessUsage } from './lib/proc.js';
import { freshDatabase, withPg } from './lib/pg.js';
import { benchBackends, benchSizes, figureRow, machine, machineLoad, report, type BenchRow } from './lib/report.js';
import { median } from './lib/alternate.js';
import { backendCpuMs, backendDelta } from './lib/pg-cpu.js';

const THIS_FILE = fileURLToPath(import.meta.url);
export const TENANT = 'bench';
export const OTHER_TENANT = 'other';
export const hostOf = (tenant: string) => `${tenant}.localhost`;
const LIST_LIMIT = 100;
const GOAL_LIST_PG = 0.8;
const GOAL_CREATE_PG = 0.5;
const GOAL_LIST_BARE = 0.4;
const SEED_BATCH = 1_000;
const databaseOf = (size: number) => `bench_${size}`;

export const envNumber = (name: string, fallback: number, min: number) => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}, got "${raw}"`);
  return n;
};

export const DURABILITY = {
  sqlite: 'WAL, synchronous=NORMAL',
  postgres: (sync: string) => `fsync=on, synchronous_commit=${sync}`,
};

/** PostgreSQL settings of the benches: the durability above, and room for several services' pools. */
export const pgSettings = (sync = process.env.BENCH_PG_SYNC || 'off') => ({
  fsync: 'on',
  synchronous_commit: sync,
  max_connections: '200',
});

const connectorBody = (name: string, schedule: string) => ({
  name,
  connector_type: 'postgresql',
  config: { host: 'db.internal', port: 5432, database: 'shop', schema: 'public', ssl_mode: 'require' },
  credentials: { username: 'replicator', password: 'bench-secret-password' },
  selected_tables: ['public.orders', 'public.customers'],
  schedule,
  labels: { team: 'data', env: 'bench' },
});

// ---------------------------------------------------------------------------------------
// Server side (child processes)
// ---------------------------------------------------------------------------------------

/** What a service child holds. */
export interface ServiceChildConfig {
  /** PostgreSQL database URL; SQLite in a temp data dir when absent. */
  databaseUrl?: string;
  /** Connectors seeded in the `bench` tenant's project. */
  connectors: number;
  /**
   * Schedules of the seeded connectors: none (the service bench), or a mix by weight
   * (the scheduler bench), e.g. { '*\/15 * * * *': 1, '0 * * * *': 4, '0 0 1 1 *': 95 }.
   */
  scheduleMix?: Record<string, number>;
  /** Connector type of the seeded connectors (default postgresql; the scheduler bench uses a simulated one). */
  connectorType?: string;
  /** Connectors in the `other` tenant's project (0: no other tenant). */
  otherConnectors?: number;
}

/** Where a server listens; a measured service also has what was seeded for it (its data dir is what a floor child opens). */
export type Ready = { port: number; caPath: string } & Partial<Seeded>;

type ToChild = { id: number; type: 'cpu' | 'stop' };
type Reply = { id: number; cpu?: NodeJS.CpuUsage; rssMb?: number; maxRssMb?: number };
type FromChild = { type: 'ready'; ready: Ready } | { type: 'seeded'; seeded: Seeded } | Reply;

/** Answers the parent's requests (CPU usage, stop) and exits with it. */
function serveParent(ready: Ready, close: () => Promise<void>) {
  process.on('disconnect', () => process.exit(1));
  process.on('message', (msg: ToChild) => {
    if (msg.type === 'cpu') {
      process.send!({
        id: msg.id,
        cpu: process.cpuUsage(),
        rssMb: Math.round(process.memoryUsage().rss / 2 ** 20),
        maxRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
      } satisfies FromChild);
    }
    if (msg.type === 'stop') {
      close()
        .catch((err) => console.error('[bench] close failed:', err))
        .finally(() => process.send!({ id: msg.id } satisfies FromChild, () => process.exit(0)));
    }
  });
  process.send!({ type: 'ready', ready } satisfies FromChild);
}

/** A bare Fastify 5 server on the service's TLS material: GET /page sends the file BENCH_PAGE_FILE as it is. */
async function runBareServer() {
  const { default: Fastify } = await import('fastify');
  const { loadOrCreateTls } = await import('../src/service/tls.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-bare-'));
  const tls = await loadOrCreateTls({ dataDir });
  const app = Fastify({ https: { cert: tls.cert, key: tls.key, SNICallback: tls.SNICallback }, logger: false });
  const page = readFileSync(process.env.BENCH_PAGE_FILE!, 'utf8');
  app.get('/page', async (_req, reply) => {
    reply.type('application/json');
    return page;
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as { port: number }).port;
  serveParent({ port, caPath: tls.certPath }, async () => {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
}

/** What a floor child opens: the service's database (its data directory for SQLite) and the page to read. */
interface FloorConfig {
  databaseUrl?: string;
  dataDir: string;
  tenantId: string;
  projectId: string;
}

/**
 * The floor of a list (see the header): bare Fastify on the service's TLS material, GET /page reads
 * the page from the service's database through the service's own store and sends it as the service
 * does, and nothing else.
 */
async function runFloorServer() {
  const config = JSON.parse(process.env.BENCH_FLOOR_CONFIG!) as FloorConfig;
  const { default: Fastify } = await import('fastify');
  const { loadOrCreateTls } = await import('../src/service/tls.js');
  const { openServiceContext } = await import('../src/service/server.js');
  const { PAGE_BYTES, toJsonPage } = await import('../src/service/pagination.js');
  const ctx = await openServiceContext({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  const tlsDir = mkdtempSync(join(tmpdir(), 'dp-bench-floor-'));
  const tls = await loadOrCreateTls({ dataDir: tlsDir });
  const app = Fastify({ https: { cert: tls.cert, key: tls.key, SNICallback: tls.SNICallback }, logger: false });
  const query = { tenantId: config.tenantId, projectId: config.projectId, kind: 'connector', afterSeq: 0 };
  const scope = `${config.tenantId}:${config.projectId}:connector`;
  app.get('/page', async (_req, reply) => {
    const bounded = await ctx.resources.listPage(query, LIST_LIMIT, PAGE_BYTES);
    reply.type('application/json');
    return toJsonPage(bounded.page, bounded.limit, scope, ctx.cursors);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as { port: number }).port;
  serveParent({ port, caPath: tls.certPath }, async () => {
    await app.close();
    await ctx.db.close();
    rmSync(tlsDir, { recursive: true, force: true });
  });
}

/** What the seeding child leaves for the service child: the data and who may read it. */
interface Seeded {
  /** The data directory (TLS material; the SQLite file unless there is a database URL). */
  dataDir: string;
  tenantId: string;
  projectId: string;
  apiKey: string;
  otherProjectId?: string;
  otherApiKey?: string;
  seedMs: number;
}

/**
 * Seeds the data: tenant `bench` with a project, a read-write API key and the connectors; optionally
 * tenant `other`. It runs a service of its own for the API calls, and exits when done.
 *
 * The measured service is another, fresh process on this data, as a service restarted on a full
 * database is. Seeding in the measured process itself left V8's heap in a state no user's service
 * is in: inserting thousands of rows in one transaction made V8 allocate some objects of the
 * request path directly in the old generation (allocation-site pretenuring, decided while those
 * rows were all alive). On PostgreSQL, the list then ran 20 % slower in about two runs of three,
 * with a mark-compact every 70-200 ms. A service filled through the API never showed it.
 */
async function runSeeder() {
  const config = JSON.parse(process.env.BENCH_SERVICE_CONFIG!) as ServiceChildConfig;
  const { startService } = await import('../src/service/server.js');
  const { ensureTenantWithAdmin } = await import('../src/service/bootstrap.js');
  const { newId, nowIso } = await import('../src/service/ids.js');
  const { TestHttp } = await import('../test/support/http.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'dp-bench-service-'));
  const service = await startService({ port: 0, logLevel: 'silent', rateLimit: 10_000_000, dataDir, databaseUrl: config.databaseUrl });
  const { ctx } = service;
  const http = new TestHttp(service.tls.certPath);

  const setUpTenant = async (slug: string, seed: number, mix: Record<string, number> | undefined) => {
    const base = service.baseUrl(slug);
    const ok = async (method: string, path: string, token: string, body: unknown, expected: number) => {
      const res = await http.call(method, `${base}${path}`, { token, body });
      if (res.status !== expected) throw new Error(`${method} ${path}: expected ${expected}, got ${res.status}: ${res.text}`);
      return res.body;
    };
    const email = `admin@${slug}.test`;
    const password = 'correct-horse-battery';
    await ensureTenantWithAdmin(ctx, slug, email, password);
    const tenantId = (await ctx.tenants.bySlug(slug))!.id;
    const login = await ok('POST', '/auth/login', '', { email, password }, 200);
    const project = await ok('POST', '/projects', login.access_token, { name: 'bench' }, 201);
    const key = await ok(
      'POST',
      `/projects/${project.id}/api-keys`,
      login.access_token,
      { name: 'bench-key', permission_level: 'read-write' },
      201,
    );
    if (seed > 0) {
      // One connector through the API as the template (its stored form: defaults, sealed secrets), the rest straight into the store.
      const expressions = mix ? Object.entries(mix).flatMap(([expr, weight]) => Array<string>(weight).fill(expr)) : ['0 0 1 1 *'];
      const type = config.connectorType ?? 'postgresql';
      const body = {
        ...connectorBody('seed-0', expressions[0]),
        connector_type: type,
        ...(type === 'postgresql' ? {} : { config: undefined, credentials: undefined, selected_tables: ['Account'] }),
      };
      if (!mix) delete (body as { schedule?: string }).schedule;
      const template = await ok('POST', `/projects/${project.id}/connectors`, key.key, body, 201);
      const stored = (await ctx.resources.get(tenantId, project.id, 'connector', template.id))!;
      for (let i = 1; i < seed; i += SEED_BATCH) {
        await ctx.db.tx(async (q) => {
          for (let j = i; j < Math.min(seed, i + SEED_BATCH); j++) {
            const id = newId('connector');
            const name = `seed-${j}`;
            const now = nowIso();
            const data: Record<string, unknown> = { ...stored.data, id, name, created_at: now, updated_at: now };
            if (mix) data.schedule = expressions[j % expressions.length];
            await ctx.resources.insert(
              { id, tenantId, projectId: project.id, kind: 'connector', parentId: '', name, data, secrets: stored.secrets },
              q,
            );
          }
        });
      }
    }
    return { projectId: project.id as string, apiKey: key.key as string, tenantId };
  };

  const started = performance.now();
  const main = await setUpTenant(TENANT, config.connectors, config.scheduleMix);
  const other = config.otherConnectors ? await setUpTenant(OTHER_TENANT, config.otherConnectors, undefined) : undefined;
  const seedMs = performance.now() - started;
  await http.close();
  await service.close();
  const seeded: Seeded = { dataDir, ...main, otherProjectId: other?.projectId, otherApiKey: other?.apiKey, seedMs };
  process.send!({ type: 'seeded', seeded } satisfies FromChild, () => process.exit(0));
}

// ---------------------------------------------------------------------------------------
// Client side (this process)
// ---------------------------------------------------------------------------------------

/** A server the bench measures or compares with: where it listens, and its process's CPU and memory. */
export interface BenchServer {
  readonly ready: Ready;
  readonly ca: Buffer;
  usage(): Promise<ProcessUsage>;
  stop(): Promise<void>;
}

/**
 * The service as a user runs it: `dpctl serve` (bench/lib/dpctl-serve.ts), rate limit lifted, in a
 * fresh process on data a child of its own seeded first (runSeeder).
 */
export class MeasuredService implements BenchServer {
  private constructor(
    private readonly serve: DpctlServe,
    readonly ready: Ready & { dataDir: string },
    readonly ca: Buffer,
    private readonly databaseUrl: string | undefined,
  ) {}

  static async start(config: ServiceChildConfig): Promise<MeasuredService> {
    const seeder = fork(THIS_FILE, ['--role=seed'], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, BENCH_SERVICE_CONFIG: JSON.stringify(config) },
    });
    const seeded = await new Promise<Seeded>((resolvePromise, reject) => {
      let result: Seeded | undefined;
      seeder.on('message', (msg: FromChild) => {
        if ('type' in msg && msg.type === 'seeded') result = msg.seeded;
      });
      seeder.once('error', reject);
      seeder.once('exit', (code) => (code === 0 && result ? resolvePromise(result) : reject(new Error(`seeding exited (code ${code})`))));
    });
    // What autovacuum would do after the bulk load within a minute anyway.
    if (config.databaseUrl) await withPg(config.databaseUrl, (c) => c.query('ANALYZE'));
    const serve = await DpctlServe.start({ dataDir: seeded.dataDir, databaseUrl: config.databaseUrl, flags: ['--rate-limit', '10000000'] });
    const ready = { port: serve.port, caPath: serve.caPath, ...seeded };
    return new MeasuredService(serve, ready, readFileSync(serve.caPath), config.databaseUrl);
  }

  async usage(): Promise<ProcessUsage> {
    return this.serve.usage();
  }

  pause(): void {
    this.serve.pause();
  }

  resume(): void {
    this.serve.resume();
  }

  /** Schedule ticks claimed so far, read from the service's database. */
  async ticks(): Promise<number> {
    const sql = 'SELECT COUNT(*) AS n FROM schedule_ticks';
    if (this.databaseUrl) return withPg(this.databaseUrl, async (c) => Number((await c.query(sql)).rows[0].n));
    const db = new Database(join(this.ready.dataDir, 'dataplatform.sqlite'), { readonly: true, fileMustExist: true });
    try {
      return Number((db.prepare(sql).get() as { n: number }).n);
    } finally {
      db.close();
    }
  }

  async stop(): Promise<void> {
    await this.serve.stop();
    rmSync(this.ready.dataDir, { recursive: true, force: true });
  }
}

/** The bare and floor servers: this file in a child process (`--role=bare|floor`), answering over IPC. */
export class ServerProcess implements BenchServer {
  private nextId = 0;
  private readonly pending = new Map<number, (msg: Reply) => void>();
  private constructor(
    readonly child: ChildProcess,
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

  static start(role: 'bare' | 'floor', env: Record<string, string> = {}): Promise<ServerProcess> {
    const child = fork(THIS_FILE, [`--role=${role}`], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, ...env } });
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

  async usage(): Promise<ProcessUsage> {
    const r = await this.ask('cpu');
    return { cpuMs: r.cpu ? (r.cpu.user + r.cpu.system) / 1000 : 0, rssMb: r.rssMb ?? 0, maxRssMb: r.maxRssMb ?? 0 };
  }

  async stop(): Promise<void> {
    const exited = new Promise((r) => this.child.once('exit', r));
    await this.ask('stop');
    await exited;
  }
}

/**
 * autocannon 8 calls tls.connect({ ...tlsOptions, rejectUnauthorized: false }), so it never rejects
 * a certificate itself. We give it our CA and the SNI name, which makes Node verify the chain and
 * host name and set socket.authorized; this hook checks that on every handshake and kills any
 * connection that did not verify (it wraps the client's `conn` property, an autocannon internal:
 * if that changes, no handshakes are observed and the run counts as not clean).
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
}

export interface Target {
  name: string;
  server: BenchServer;
  method: 'GET' | 'POST';
  path: string;
  tenantHost: string;
  headers: Record<string, string>;
  /** A fresh body per request. */
  body?: () => string;
  expectedStatus: number;
  verifyBody?: (body: string) => boolean;
  /** The service's PostgreSQL database, whose backends' CPU is counted too. */
  pg?: { adminUrl: string; database: string };
}

export interface Measured {
  reqPerSec: number;
  p50: number;
  p99: number;
  count2xx: number;
  /** Service process CPU over the round, % of one core. */
  serverCpuPct: number;
  /** CPU per response, µs: the service process, its PostgreSQL backends (0 on SQLite), and this process (autocannon). */
  cpuUs: { service: number; backends: number; client: number };
  clean: boolean;
  problem?: string;
}

const percentile = (sorted: Float64Array, q: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] : NaN;

export async function measure(target: Target, seconds: number, connections: number): Promise<Measured> {
  const tls = new TlsVerification();
  const latencies: number[] = [];
  const unexpected = new Map<number, string>();
  const errors = new Map<string, number>();
  const body = target.body;
  const backends = async () => (target.pg ? backendCpuMs(target.pg.adminUrl, target.pg.database) : new Map<number, number>());
  const before = { usage: await target.server.usage(), backends: await backends(), client: process.cpuUsage() };
  const started = performance.now();
  const instance = autocannon({
    url: `https://127.0.0.1:${target.server.ready.port}${target.path}`,
    connections,
    duration: seconds,
    timeout: 10,
    servername: target.tenantHost,
    tlsOptions: { ca: target.server.ca },
    setupClient: tls.watch,
    verifyBody: target.verifyBody,
    headers: { host: `${target.tenantHost}:${target.server.ready.port}`, ...target.headers },
    requests: [
      {
        method: target.method,
        ...(body ? { setupRequest: (req) => ({ ...req, body: body() }) } : {}),
        onResponse: (status, responseBody) => {
          if (status !== target.expectedStatus && !unexpected.has(status)) unexpected.set(status, responseBody.slice(0, 300));
        },
      },
    ],
  });
  instance.on('response', (_client, statusCode, _bytes, ms) => {
    if (statusCode >= 200 && statusCode < 300) latencies.push(ms);
  });
  instance.on('reqError', (err) => errors.set(err.message, (errors.get(err.message) ?? 0) + 1));
  const result = await instance;
  const wallMs = performance.now() - started;
  const client = process.cpuUsage(before.client);
  const after = { usage: await target.server.usage(), backends: await backends() };
  const usPerResponse = (ms: number) => (ms * 1000) / Math.max(1, result.requests.total);
  const sorted = Float64Array.from(latencies).sort();
  const clean =
    result.non2xx === 0 &&
    result.errors === 0 &&
    result.mismatches === 0 &&
    latencies.length > 0 &&
    tls.handshakes > 0 &&
    tls.failures.size === 0 &&
    (result.statusCodeStats[String(target.expectedStatus)]?.count ?? 0) === latencies.length;
  const problem = clean
    ? undefined
    : `${target.name}: non-2xx ${result.non2xx}, errors ${result.errors}, mismatches ${result.mismatches}, TLS ${tls.verified}/${tls.handshakes}${[...unexpected].map(([s, t]) => `; status ${s}: ${t}`).join('')}${[...errors].map(([m, n]) => `; ${n}x ${m}`).join('')}`;
  return {
    // Every response over the wall time of the round (autocannon's per-second average drops partial seconds).
    reqPerSec: result.requests.total / (wallMs / 1000),
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    count2xx: latencies.length,
    serverCpuPct: ((after.usage.cpuMs - before.usage.cpuMs) / wallMs) * 100,
    cpuUs: {
      service: usPerResponse(after.usage.cpuMs - before.usage.cpuMs),
      backends: usPerResponse(backendDelta(before.backends, after.backends)),
      client: usPerResponse((client.user + client.system) / 1000),
    },
    clean,
    problem,
  };
}

/** One request through undici with real certificate verification: a 401 here would make the run worthless. */
async function fetchOnce(target: Target): Promise<{ status: number; text: string }> {
  const { TestHttp } = await import('../test/support/http.js');
  const http = new TestHttp(target.server.ready.caPath);
  try {
    const res = await http.call(target.method, `https://${target.tenantHost}:${target.server.ready.port}${target.path}`, {
      headers: target.headers,
      raw: target.body?.(),
    });
    return { status: res.status, text: res.text };
  } finally {
    await http.close();
  }
}

async function preflight(target: Target): Promise<void> {
  const res = await fetchOnce(target);
  if (res.status !== target.expectedStatus)
    throw new Error(`${target.name}: expected ${target.expectedStatus}, got ${res.status}: ${res.text.slice(0, 300)}`);
  if (target.verifyBody && !target.verifyBody(res.text)) throw new Error(`${target.name}: unexpected body: ${res.text.slice(0, 300)}`);
}

/**
 * Measures the targets in alternation, A B C A B C ..., `rounds` times, after one warm-up each.
 * Returns each target's rounds.
 */
async function alternated(
  targets: Target[],
  o: { rounds: number; seconds: number; warmup: number; connections: number; verbose: boolean },
): Promise<Measured[][]> {
  for (const t of targets) await preflight(t);
  if (o.warmup > 0) for (const t of targets) await measure(t, o.warmup, o.connections);
  const out: Measured[][] = targets.map(() => []);
  for (let r = 0; r < o.rounds; r++) {
    for (const [i, t] of targets.entries()) {
      const m = await measure(t, o.seconds, o.connections);
      out[i].push(m);
      if (o.verbose)
        console.log(
          `  round ${r + 1} ${t.name}: ${m.reqPerSec.toFixed(0)} req/s, p50 ${m.p50.toFixed(1)} ms, p99 ${m.p99.toFixed(1)} ms, service CPU ${m.serverCpuPct.toFixed(0)}%, CPU per response: service ${m.cpuUs.service.toFixed(0)} µs, PG backends ${m.cpuUs.backends.toFixed(0)} µs, client ${m.cpuUs.client.toFixed(0)} µs${m.clean ? '' : ' NOT CLEAN'}`,
        );
    }
  }
  return out;
}

const fmtRate = (n: number) => `${Math.round(n).toLocaleString('en-US')} req/s`;
const fmtUs = (n: number) => `${Math.round(n)} µs`;
const fmtMs = (n: number) => `p99 ${n < 10 ? n.toFixed(1) : Math.round(n)} ms`;
const pairRatio = (a: Measured[], b: Measured[], f: (m: Measured) => number) => median(a.map((m, i) => f(m) / f(b[i])));
const med = (ms: Measured[], f: (m: Measured) => number) => median(ms.map(f));

async function main() {
  const sizes = benchSizes();
  const backends = benchBackends();
  const seconds = envNumber('BENCH_SECONDS', 5, 1);
  const rounds = envNumber('BENCH_ROUNDS', 3, 1);
  const warmup = envNumber('BENCH_WARMUP_SECONDS', 2, 0);
  const connections = envNumber('BENCH_CONNECTIONS', 10, 1);
  const verbose = process.env.BENCH_VERBOSE === '1';
  const pgSync = process.env.BENCH_PG_SYNC || 'off';
  const o = { rounds, seconds, warmup, connections, verbose };

  console.log('Data Platform Management API: service benchmark (bench/service.ts)');
  console.log(`machine: ${machine()}, load ${machineLoad()}`);
  console.log(
    `settings: sizes ${sizes.join(', ')}; ${backends.join(' and ')}; ${rounds} alternated rounds of ${seconds} s per target after ${warmup} s warm-up; ${connections} connections, HTTP/1.1 keep-alive over TLS; autocannon here, each server in its own child process`,
  );
  console.log(`durability: SQLite ${DURABILITY.sqlite} | PostgreSQL ${DURABILITY.postgres(pgSync)}`);
  console.log('');

  const rows: BenchRow[] = [];
  const problems: string[] = [];
  const { startThrowawayPostgres } = await import('../test/support/postgres-server.js');
  const pgServer = backends.includes('postgres') ? await startThrowawayPostgres(pgSettings(pgSync)) : undefined;
  const pageDir = mkdtempSync(join(tmpdir(), 'dp-bench-page-'));
  try {
    for (const size of sizes) {
      const servers = new Map<'sqlite' | 'postgres', MeasuredService>();
      let bare: ServerProcess | undefined;
      const floors = new Map<'sqlite' | 'postgres', ServerProcess>();
      const databaseUrls = new Map<'sqlite' | 'postgres', string | undefined>();
      try {
        for (const backend of backends) {
          const started = performance.now();
          const databaseUrl = backend === 'postgres' ? await freshDatabase(pgServer!.url, databaseOf(size)) : undefined;
          const server = await MeasuredService.start({ databaseUrl, connectors: size });
          servers.set(backend, server);
          databaseUrls.set(backend, databaseUrl);
          console.log(
            `${backend}, ${size.toLocaleString('en-US')} connectors: service ready in ${((performance.now() - started) / 1000).toFixed(1)} s (seeding ${((server.ready.seedMs ?? 0) / 1000).toFixed(1)} s)`,
          );
        }
        const pgOf = (backend: 'sqlite' | 'postgres') =>
          backend === 'postgres' ? { adminUrl: pgServer!.url, database: databaseOf(size) } : undefined;
        const listTarget = (backend: 'sqlite' | 'postgres', s: MeasuredService): Target => ({
          name: `list ${backend}`,
          server: s,
          method: 'GET',
          path: `/api/v1/projects/${s.ready.projectId}/connectors?limit=${LIST_LIMIT}`,
          tenantHost: hostOf(TENANT),
          headers: { authorization: `Bearer ${s.ready.apiKey}` },
          expectedStatus: 200,
          verifyBody: (b) => b.startsWith('{"data":[{') && b.includes('"has_more":true') && b.split('"id":"con_').length - 1 === LIST_LIMIT,
          pg: pgOf(backend),
        });
        const lists = [...servers].map(([backend, s]) => listTarget(backend, s));
        // The bare route sends the bytes of the first backend's list page.
        const page = await fetchOnce(lists[0]);
        const pageFile = join(pageDir, `page-${size}.json`);
        writeFileSync(pageFile, page.text);
        bare = await ServerProcess.start('bare', { BENCH_PAGE_FILE: pageFile });
        const bareTarget: Target = {
          name: 'bare',
          server: bare,
          method: 'GET',
          path: '/page',
          tenantHost: hostOf(TENANT),
          headers: {},
          expectedStatus: 200,
          verifyBody: (b) => b.length === page.text.length,
        };

        for (const [backend, s] of servers) {
          const floorConfig: FloorConfig = {
            databaseUrl: databaseUrls.get(backend),
            dataDir: s.ready.dataDir!,
            tenantId: s.ready.tenantId!,
            projectId: s.ready.projectId!,
          };
          floors.set(backend, await ServerProcess.start('floor', { BENCH_FLOOR_CONFIG: JSON.stringify(floorConfig) }));
        }
        const floorTargets = [...floors].map(([backend, f]): Target => ({
          name: `floor ${backend}`,
          server: f,
          method: 'GET',
          path: '/page',
          tenantHost: hostOf(TENANT),
          headers: {},
          expectedStatus: 200,
          // The very bytes of the service's page (same rows, same cursor key).
          verifyBody: (b) => b.length === page.text.length && b.startsWith('{"data":[{'),
          pg: pgOf(backend),
        }));

        console.log(
          `list (GET connectors?limit=${LIST_LIMIT}, ${page.text.length.toLocaleString('en-US')} bytes), alternated: ${[...lists, ...floorTargets, bareTarget].map((t) => t.name).join(', ')}`,
        );
        const listRuns = await alternated([...lists, ...floorTargets, bareTarget], o);
        const runTag = Date.now().toString(36);
        let n = 0;
        const creates: Target[] = [...servers].map(([backend, s]) => ({
          name: `create ${backend}`,
          server: s,
          method: 'POST',
          path: `/api/v1/projects/${s.ready.projectId}/connectors`,
          tenantHost: hostOf(TENANT),
          headers: { authorization: `Bearer ${s.ready.apiKey}`, 'content-type': 'application/json' },
          body: () => JSON.stringify(connectorBody(`load-${runTag}-${++n}`, '0 0 1 1 *')),
          expectedStatus: 201,
          pg: pgOf(backend),
        }));
        console.log(`create (POST connectors), alternated: ${creates.map((t) => t.name).join(', ')}`);
        const createRuns = await alternated(creates, o);
        const load = machineLoad();

        for (const [i, runs] of [...listRuns, ...createRuns].entries())
          for (const m of runs) if (!m.clean) problems.push(`${size}: ${m.problem ?? `target ${i} not clean`}`);
        const peak = async (s: BenchServer) => (await s.usage()).maxRssMb;
        const bareRuns = listRuns[listRuns.length - 1];
        const sqliteAt = backends.indexOf('sqlite');
        const pgAt = backends.indexOf('postgres');
        for (const [i, backend] of backends.entries()) {
          const ratio = pairRatio(listRuns[i], bareRuns, (m) => m.reqPerSec);
          rows.push({
            bench: 'service',
            scenario: `GET connectors?limit=${LIST_LIMIT} vs bare Fastify, same bytes`,
            backend,
            size,
            product: `${fmtRate(med(listRuns[i], (m) => m.reqPerSec))}, ${fmtMs(med(listRuns[i], (m) => m.p99))}`,
            baseline: `bare ${fmtRate(med(bareRuns, (m) => m.reqPerSec))}`,
            ratio,
            peakMb: await peak(servers.get(backend)!),
            goal: backend === 'sqlite' ? `>= ${GOAL_LIST_BARE}x` : '-',
            met: backend === 'sqlite' ? ratio >= GOAL_LIST_BARE : null,
            load,
          });
          const floorRuns = listRuns[backends.length + i];
          rows.push({
            bench: 'service',
            scenario: `floor of the list: bare Fastify + the service's own page read (same statement, store, database) and page assembly, no authentication, rate limit or hooks, vs bare Fastify; the most any service reading the page per request gets`,
            backend,
            size,
            product: `${fmtRate(med(floorRuns, (m) => m.reqPerSec))}, ${fmtMs(med(floorRuns, (m) => m.p99))}`,
            baseline: `bare ${fmtRate(med(bareRuns, (m) => m.reqPerSec))}`,
            ratio: pairRatio(floorRuns, bareRuns, (m) => m.reqPerSec),
            peakMb: null,
            goal: '-',
            met: null,
            load,
          });
          rows.push({
            bench: 'service',
            scenario: `GET connectors?limit=${LIST_LIMIT} vs its floor: what authentication, rate limit, routing, hooks and headers cost`,
            backend,
            size,
            product: fmtRate(med(listRuns[i], (m) => m.reqPerSec)),
            baseline: `floor ${fmtRate(med(floorRuns, (m) => m.reqPerSec))}`,
            ratio: pairRatio(listRuns[i], floorRuns, (m) => m.reqPerSec),
            peakMb: null,
            goal: '-',
            met: null,
            load,
          });
        }
        if (sqliteAt >= 0 && pgAt >= 0) {
          const [pgFloor, sqliteFloor] = [listRuns[backends.length + pgAt], listRuns[backends.length + sqliteAt]];
          rows.push({
            bench: 'service',
            scenario: `floor of the list (above), PostgreSQL / SQLite: the most the GET list ratio can reach on this machine`,
            backend: 'postgres',
            size,
            product: fmtRate(med(pgFloor, (m) => m.reqPerSec)),
            baseline: `SQLite floor ${fmtRate(med(sqliteFloor, (m) => m.reqPerSec))}`,
            ratio: pairRatio(pgFloor, sqliteFloor, (m) => m.reqPerSec),
            peakMb: null,
            goal: '-',
            met: null,
            load,
          });
        }
        if (sqliteAt >= 0 && pgAt >= 0) {
          const durability = `PG ${DURABILITY.postgres(pgSync)} vs SQLite ${DURABILITY.sqlite}`;
          const [l, c] = [listRuns, createRuns];
          const rate = (runs: Measured[][], what: string, goal: number) => {
            const ratio = pairRatio(runs[pgAt], runs[sqliteAt], (m) => m.reqPerSec);
            rows.push({
              bench: 'service',
              scenario: `${what} req/s, PostgreSQL / SQLite (${durability})`,
              backend: 'postgres',
              size,
              product: fmtRate(med(runs[pgAt], (m) => m.reqPerSec)),
              baseline: `SQLite ${fmtRate(med(runs[sqliteAt], (m) => m.reqPerSec))}`,
              ratio,
              peakMb: null,
              goal: `>= ${goal}x`,
              met: ratio >= goal,
              load,
            });
          };
          const p99 = (runs: Measured[][], what: string) => {
            rows.push({
              bench: 'service',
              scenario: `${what} p99, PostgreSQL / SQLite`,
              backend: 'postgres',
              size,
              product: fmtMs(med(runs[pgAt], (m) => m.p99)),
              baseline: `SQLite ${fmtMs(med(runs[sqliteAt], (m) => m.p99))}`,
              ratio: pairRatio(runs[pgAt], runs[sqliteAt], (m) => m.p99),
              peakMb: null,
              goal: '-',
              met: null,
              load,
            });
          };
          rate(l, `GET connectors?limit=${LIST_LIMIT}`, GOAL_LIST_PG);
          p99(l, `GET connectors?limit=${LIST_LIMIT}`);
          // Where the req/s ratio comes from: on a machine whose cores are all busy (service, database
          // and client share them), throughput follows the CPU each response costs on the whole machine.
          const cpuOf = (runs: Measured[]) => ({
            service: med(runs, (m) => m.cpuUs.service),
            backends: med(runs, (m) => m.cpuUs.backends),
            client: med(runs, (m) => m.cpuUs.client),
          });
          const [pgCpu, sqliteCpu] = [cpuOf(l[pgAt]), cpuOf(l[sqliteAt])];
          const total = (c: ReturnType<typeof cpuOf>) => c.service + c.backends + c.client;
          rows.push({
            bench: 'service',
            scenario: `GET connectors?limit=${LIST_LIMIT}, CPU per response on the whole machine: service process + PostgreSQL backends + client (autocannon), PostgreSQL / SQLite`,
            backend: 'postgres',
            size,
            product: `${fmtUs(pgCpu.service)} + ${fmtUs(pgCpu.backends)} + ${fmtUs(pgCpu.client)} = ${fmtUs(total(pgCpu))}`,
            baseline: `SQLite ${fmtUs(sqliteCpu.service)} + ${fmtUs(sqliteCpu.client)} = ${fmtUs(total(sqliteCpu))}`,
            ratio: pairRatio(l[pgAt], l[sqliteAt], (m) => m.cpuUs.service + m.cpuUs.backends + m.cpuUs.client),
            peakMb: null,
            goal: '-',
            met: null,
            load,
          });
          rate(c, 'POST connectors (create)', GOAL_CREATE_PG);
          p99(c, 'POST connectors (create)');
        } else {
          for (const [i, backend] of backends.entries()) {
            rows.push(
              figureRow({
                bench: 'service',
                scenario: 'POST connectors (create)',
                backend,
                size,
                product: `${fmtRate(med(createRuns[i], (m) => m.reqPerSec))}, ${fmtMs(med(createRuns[i], (m) => m.p99))}`,
                load,
              }),
            );
          }
        }
        const cpu = [...listRuns.slice(0, backends.length), ...createRuns].map(
          (runs, i) =>
            `${i < backends.length ? 'list' : 'create'} ${backends[i % backends.length]} ${Math.round(med(runs, (m) => m.serverCpuPct))}%`,
        );
        console.log(`  service process CPU (median of rounds, % of one core): ${cpu.join(', ')}`);
      } finally {
        await bare?.stop().catch(() => undefined);
        // The floors read the services' databases: they stop first.
        for (const f of floors.values()) await f.stop().catch(() => undefined);
        for (const s of servers.values()) await s.stop().catch(() => undefined);
      }
    }
  } finally {
    rmSync(pageDir, { recursive: true, force: true });
    await pgServer?.stop();
  }
  console.log('');
  report(rows);
  console.log('');
  console.log(
    `Ratios are medians of per-round ratios (rounds alternated). req/s: every response over the round's wall time; p99: exact, over every 2xx. Durability: SQLite ${DURABILITY.sqlite}; PostgreSQL ${DURABILITY.postgres(pgSync)}.`,
  );
  if (problems.length) {
    console.log('\nPROBLEMS (their rounds do not count as clean):');
    for (const p of problems) console.log(`  - ${p}`);
  }
}

const role = process.argv.find((arg) => arg.startsWith('--role='))?.slice('--role='.length);
if (role === 'bare') await runBareServer();
else if (role === 'floor') await runFloorServer();
else if (role === 'seed') await runSeeder();
else if (resolve(process.argv[1] ?? '') === THIS_FILE) {
  try {
    await main();
  } catch (err) {
    console.error('benchmark failed:', err);
  }
  process.exit(0);
}
