import { Command, Option } from 'commander';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULT_OPTIONS, SQLITE_FILE } from '../service/context.js';
import { checkSmtpUrl, redactedSmtpUrl } from '../service/smtp-url.js';
import { readStdin } from './stdin.js';
import { watchParent } from '../parent-watch.js';
import { LOG_FORMAT_HELP, LOG_FORMATS, LOG_LEVELS, type LogFormat } from '../log-format.js';
import type { RunningService, StartServiceOptions } from '../service/server.js';
import type { Db } from '../service/store/db.js';
import type { ProviderMirrorSource } from '../service/provider-mirror.js';
import type { startDemoController } from './demo-controller.js';

const int = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, got "${value}"`);
  return n;
};

const SIZE_UNITS: Record<string, number> = { '': 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, tib: 1024 ** 4 };

/** "10GiB", "500 MiB" or a number of bytes; 0 for no cap. */
const size = (name: string) => (value: string) => {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgt]ib)?$/i.exec(value.trim());
  if (!m) throw new Error(`${name} must be a size like 10GiB, 500MiB or a number of bytes (0: no cap), got "${value}"`);
  return Math.round(Number(m[1]) * SIZE_UNITS[(m[2] ?? '').toLowerCase()]);
};

const positive = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a number above 0, got "${value}"`);
  return n;
};

/**
 * Longest a stop may take before the process exits anyway: the service drains in-flight requests
 * for up to 10 s, the demo controller first finishes the changes it has in flight. A stop that
 * hangs past this must still free the port.
 */
const STOP_DEADLINE_MS = 20_000;

/**
 * Runs `close` once on SIGTERM, SIGINT or (under a package-manager script) the death of the
 * parent, then exits: 0 when everything closed, 1 when closing failed or outlived the deadline.
 * Repeated signals are ignored rather than forcing an exit: when the script's shell execs node
 * (bash, or a shell that does), one Ctrl-C arrives twice, from the terminal and forwarded by npm,
 * and the second must not cut the clean close short. The deadline bounds the wait instead.
 */
function stopOnSignals(close: () => Promise<void>): void {
  let stopping = false;
  const stop = (why: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`${why}: draining in-flight requests and closing the store\n`);
    setTimeout(() => {
      process.stderr.write(`Not stopped after ${STOP_DEADLINE_MS / 1000} s: exiting without closing cleanly\n`);
      process.exit(1);
    }, STOP_DEADLINE_MS).unref();
    close().then(
      () => process.exit(0),
      (err: Error) => {
        process.stderr.write(`Stopping failed: ${err.message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  watchParent(() => stop('Parent process (the npm script) exited'));
}

/** The demo tenant of `npm start`: a well-known password is fine on a laptop, never elsewhere. */
const DEMO = { slug: 'demo', email: 'admin@demo.local', password: 'demo-password' };

/** The flags of `dpctl serve`, as commander parses them. */
interface ServeFlags {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl?: string;
  secretsKeyFile?: string;
  tlsCert?: string;
  tlsKey?: string;
  runHistory: number;
  maxRunsPerTenant: number;
  maxTenantStorage: number;
  auditRetention: number;
  tlsCertCache: number;
  handshakeTimeout: number;
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  maxConnectionsPerAddress: number;
  maxStreamsPerTenant: number;
  baseDomain?: string;
  rateLimit: number;
  anonymousRateLimit: number;
  loginLockAfter: number;
  loginAddressLockAfter: number;
  loginAccountLockAfter: number;
  loginMaxLock: number;
  trustProxy?: string;
  accessTokenTtl: number;
  strictSpec: boolean;
  timeScale: number;
  sourceTimeout: number;
  sourceQueryTimeout: number;
  demo: boolean;
  outboundCaFile?: string;
  smtpUrl?: string;
  smtpFrom: string;
  metrics: boolean;
  metricsToken?: string;
  egressDeny?: string;
  egressAllow?: string;
  reconcile?: string;
  reconcileInterval: string;
  controllerListen: string;
  logLevel: string;
  logFormat?: LogFormat;
}

/** Where it listens, where its data lives, how it is encrypted and how much of it is kept. */
function addStoreOptions(command: Command): Command {
  return command
    .option('--port <port>', 'port to listen on (0 picks a free one)', int('--port'), 8443)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--data-dir <dir>', 'where the SQLite database and the generated certificate live', '.dpctl-data')
    .option('--database-url <url>', "use PostgreSQL (postgres://...) instead of the data dir's SQLite")
    .option(
      '--secrets-key-file <file>',
      'base64 32-byte master key that encrypts write-only values at rest (env DP_SECRETS_KEY; default: generated into <data-dir>/secrets.key, or the database with --database-url)',
    )
    .option('--tls-cert <file>', 'PEM certificate to serve (signed by a CA of yours) instead of one issued by the local CA in the data dir')
    .option('--tls-key <file>', 'PEM private key for --tls-cert')
    .addOption(
      new Option(
        '--run-history <n>',
        'runs kept per connector, pipeline or dbt project; the oldest finished ones are deleted as new ones start (0: keep all)',
      )
        .env('DP_RUN_HISTORY')
        .argParser(int('--run-history'))
        .default(DEFAULT_OPTIONS.runHistory),
    )
    .addOption(
      new Option(
        '--max-runs-per-tenant <n>',
        'runs (syncs, pipeline runs, dbt runs, infrastructure applies) one tenant may have executing at once on this instance; a manual trigger past it is 429, a scheduled one waits (0: no cap)',
      )
        .env('DP_MAX_RUNS_PER_TENANT')
        .argParser(int('--max-runs-per-tenant'))
        .default(DEFAULT_OPTIONS.maxRunsPerTenant),
    )
    .addOption(
      new Option(
        '--max-tenant-storage <size>',
        'what one tenant may store, resources and audit log together (e.g. 10GiB); past it creates and updates are 409, deletes pass (0: no cap)',
      )
        .env('DP_MAX_TENANT_STORAGE')
        .argParser(size('--max-tenant-storage'))
        .default(DEFAULT_OPTIONS.maxTenantStorage, '10GiB'),
    )
    .addOption(
      new Option('--audit-retention <days>', 'days an audit log entry is kept; older ones are deleted (0: keep every entry)')
        .env('DP_AUDIT_RETENTION')
        .argParser(int('--audit-retention'))
        .default(DEFAULT_OPTIONS.auditRetentionDays),
    );
}

/** The limits of connections: certificates kept, timeouts, connections per address. */
function addConnectionOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--tls-cert-cache <n>', 'most per-tenant TLS certificates kept in memory (least recently used dropped)')
        .env('DP_TLS_CERT_CACHE')
        .argParser(int('--tls-cert-cache'))
        .default(DEFAULT_OPTIONS.tlsCertCacheSize),
    )
    .addOption(
      new Option('--handshake-timeout <seconds>', "a new connection's wait for its first byte, then for the end of the TLS handshake")
        .env('DP_HANDSHAKE_TIMEOUT')
        .argParser(positive('--handshake-timeout'))
        .default(DEFAULT_OPTIONS.handshakeTimeout),
    )
    .addOption(
      new Option(
        '--headers-timeout <seconds>',
        "from the handshake to the first request's headers, and from any request's start to its last header",
      )
        .env('DP_HEADERS_TIMEOUT')
        .argParser(positive('--headers-timeout'))
        .default(DEFAULT_OPTIONS.headersTimeout),
    )
    .addOption(
      new Option('--request-timeout <seconds>', "from a request's start to the end of its body")
        .env('DP_REQUEST_TIMEOUT')
        .argParser(positive('--request-timeout'))
        .default(DEFAULT_OPTIONS.requestTimeout),
    )
    .addOption(
      new Option('--keep-alive-timeout <seconds>', 'how long an idle keep-alive connection stays open')
        .env('DP_KEEP_ALIVE_TIMEOUT')
        .argParser(positive('--keep-alive-timeout'))
        .default(DEFAULT_OPTIONS.keepAliveTimeout),
    )
    .addOption(
      new Option(
        '--max-connections-per-address <n>',
        'open connections per client address (IPv4, IPv6 /64), streams included; 0 = no cap; raise it behind a proxy',
      )
        .env('DP_MAX_CONNECTIONS_PER_ADDRESS')
        .argParser(int('--max-connections-per-address'))
        .default(DEFAULT_OPTIONS.maxConnectionsPerAddress),
    )
    .addOption(
      new Option(
        '--max-streams-per-tenant <n>',
        'open WebSocket streams per tenant on this instance, from any address (a new one past it is 429); 0 = no cap',
      )
        .env('DP_MAX_STREAMS_PER_TENANT')
        .argParser(int('--max-streams-per-tenant'))
        .default(DEFAULT_OPTIONS.maxStreamsPerTenant),
    );
}

/** Who reaches it and how often: host names, rate limits, sign-in locks, proxies, tokens, the spec's surface. */
function addAccessOptions(command: Command): Command {
  return command
    .option('--base-domain <domain>', 'tenants are also served at <slug>.<domain>')
    .option('--rate-limit <n>', 'requests per minute per tenant per endpoint', int('--rate-limit'), 600)
    .option(
      '--anonymous-rate-limit <n>',
      'requests per minute per source address per anonymous endpoint (login, refresh, SSO, invitations)',
      int('--anonymous-rate-limit'),
      DEFAULT_OPTIONS.anonymousRateLimit,
    )
    .option(
      '--login-lock-after <n>',
      'failed sign-ins per account and address before back-off (1 s, doubling)',
      positive('--login-lock-after'),
      DEFAULT_OPTIONS.loginLockAfter,
    )
    .option(
      '--login-address-lock-after <n>',
      'failed sign-ins or refreshes per address, across accounts, before back-off',
      positive('--login-address-lock-after'),
      DEFAULT_OPTIONS.loginAddressLockAfter,
    )
    .option(
      '--login-account-lock-after <n>',
      'failed sign-ins per account, across addresses, before back-off (locks of 60 s at most)',
      positive('--login-account-lock-after'),
      DEFAULT_OPTIONS.loginAccountLockAfter,
    )
    .option('--login-max-lock <seconds>', 'longest sign-in lock', positive('--login-max-lock'), DEFAULT_OPTIONS.loginMaxLockSeconds)
    .option(
      '--trust-proxy <addresses>',
      'proxies (addresses/CIDRs, comma-separated; env DP_TRUST_PROXY) whose X-Forwarded-For names the client for per-address limits',
    )
    .option('--access-token-ttl <seconds>', 'access-token lifetime', int('--access-token-ttl'), 3600)
    .option('--strict-spec', "serve only the spec's documented surface (no extensions)", false);
}

/** How its simulated and outbound work behaves: time scale, source timeouts, the demo tenant, email, metrics, egress. */
function addRuntimeOptions(command: Command): Command {
  return command
    .option(
      '--time-scale <factor>',
      'run simulated work (dbt models, simulated syncs, provisioning) this many times faster',
      positive('--time-scale'),
      1,
    )
    .option('--source-timeout <seconds>', "how long connecting to a connector's source may take", positive('--source-timeout'), 5)
    .option(
      '--source-query-timeout <seconds>',
      "how long one statement of a sync (a table's row count) may run on the source",
      positive('--source-query-timeout'),
      300,
    )
    .option(
      '--demo',
      'bootstrap a "demo" tenant (admin@demo.local / demo-password) unless DP_BOOTSTRAP_* say otherwise; local use only',
      false,
    )
    .option('--outbound-ca-file <file>', 'PEM CA trusted (besides the system CAs) for outbound HTTPS: webhook and Slack notifications')
    .option(
      '--smtp-url <url>',
      'send email channels through this SMTP server (smtp://user:password@host:587, smtps://...; env DP_SMTP_URL) instead of the email_outbox table',
      (v: string) => checkSmtpUrl(v, '--smtp-url'),
    )
    .option('--smtp-from <address>', 'sender of notification emails', DEFAULT_OPTIONS.smtpFrom)
    .option('--no-metrics', 'do not serve GET /metrics (Prometheus: event-loop delay, process metrics; no tenant data)')
    .option('--metrics-token <token>', 'GET /metrics asks for "Authorization: Bearer <token>" (env DP_METRICS_TOKEN; default: open)')
    .option(
      '--egress-deny <cidrs>',
      'CIDRs no outbound connection (connector sources, webhooks, Slack, SMTP, SSO) may reach, comma-separated; "default" = link-local/metadata and private ranges, "none" = nothing (env DP_EGRESS_DENY; default: "default")',
    )
    .option(
      '--egress-allow <cidrs>',
      'CIDRs allowed again inside denied ones (the most specific range decides), comma-separated (env DP_EGRESS_ALLOW)',
    );
}

/** The controller run in the same process, and the log of both. */
function addControllerAndLogOptions(command: Command): Command {
  return command
    .option(
      '--reconcile <dir>',
      'also run the controller in this process: keep the bootstrapped tenant equal to the YAML in <dir> (edit a file and it is applied)',
    )
    .option('--reconcile-interval <duration>', "time between the controller's runs with --reconcile", '2s')
    .option('--controller-listen <host:port>', 'status page of the controller with --reconcile', '127.0.0.1:9090')
    .addOption(
      new Option(
        '--log-level <level>',
        'log level of the service and the --reconcile controller: each request is logged at debug, 4xx at info, 5xx at error',
      )
        .choices(LOG_LEVELS)
        .env('DP_LOG_LEVEL')
        .default('info'),
    )
    .addOption(new Option('--log-format <format>', LOG_FORMAT_HELP).choices(LOG_FORMATS).env('DP_LOG_FORMAT'));
}

export function serveCommand(): Command {
  const command = new Command('serve').description('Run the reference Data Platform Management API over HTTPS');
  for (const add of [addStoreOptions, addConnectionOptions, addAccessOptions, addRuntimeOptions, addControllerAndLogOptions]) add(command);
  return command.action((opts: ServeFlags) => serve(opts));
}

/** The service's options from the flags, with the environment variables that stand in for flags. */
export function serviceOptions(opts: ServeFlags, parseCidrList: (text: string, source: string) => string[]): StartServiceOptions {
  return {
    port: opts.port,
    host: opts.host,
    dataDir: opts.dataDir,
    databaseUrl: opts.databaseUrl ?? process.env.DP_DATABASE_URL,
    tlsCert: opts.tlsCert,
    tlsKey: opts.tlsKey,
    tlsCertCacheSize: opts.tlsCertCache,
    runHistory: opts.runHistory,
    maxRunsPerTenant: opts.maxRunsPerTenant,
    maxTenantStorage: opts.maxTenantStorage,
    auditRetentionDays: opts.auditRetention,
    handshakeTimeout: opts.handshakeTimeout,
    headersTimeout: opts.headersTimeout,
    requestTimeout: opts.requestTimeout,
    keepAliveTimeout: opts.keepAliveTimeout,
    maxConnectionsPerAddress: opts.maxConnectionsPerAddress,
    maxStreamsPerTenant: opts.maxStreamsPerTenant,
    secretsKeyFile: opts.secretsKeyFile,
    secretsKey: process.env.DP_SECRETS_KEY,
    baseDomain: opts.baseDomain,
    rateLimit: opts.rateLimit,
    anonymousRateLimit: opts.anonymousRateLimit,
    loginLockAfter: Math.ceil(opts.loginLockAfter),
    loginAddressLockAfter: Math.ceil(opts.loginAddressLockAfter),
    loginAccountLockAfter: Math.ceil(opts.loginAccountLockAfter),
    loginMaxLockSeconds: Math.ceil(opts.loginMaxLock),
    trustProxy: opts.trustProxy ?? process.env.DP_TRUST_PROXY,
    accessTokenTtl: opts.accessTokenTtl,
    strictSpec: opts.strictSpec,
    logLevel: opts.logLevel,
    logFormat: opts.logFormat,
    timeScale: opts.timeScale,
    sourceTimeout: opts.sourceTimeout,
    sourceQueryTimeout: opts.sourceQueryTimeout,
    outboundCaFile: opts.outboundCaFile,
    smtpUrl: opts.smtpUrl ?? (process.env.DP_SMTP_URL ? checkSmtpUrl(process.env.DP_SMTP_URL, 'DP_SMTP_URL') : undefined),
    smtpFrom: opts.smtpFrom,
    metrics: opts.metrics,
    metricsToken: opts.metricsToken ?? (process.env.DP_METRICS_TOKEN || undefined),
    egressDeny: cidrs(parseCidrList, opts.egressDeny, '--egress-deny', 'DP_EGRESS_DENY'),
    egressAllow: cidrs(parseCidrList, opts.egressAllow, '--egress-allow', 'DP_EGRESS_ALLOW'),
  };
}

const BOOTSTRAP_VARIABLES = ['DP_BOOTSTRAP_TENANT', 'DP_BOOTSTRAP_EMAIL', 'DP_BOOTSTRAP_PASSWORD'] as const;

/**
 * The tenant to bootstrap: DP_BOOTSTRAP_* first, the demo tenant's with --demo for what they leave
 * out; none when none is set. Some but not all of them set (without --demo) is an error, not a
 * service started without its tenant: a deployment whose secret lost a key should fail to start,
 * naming the key, rather than run without the tenant it was given.
 */
export function bootstrapAccount(demo: boolean, env: NodeJS.ProcessEnv = process.env): typeof DEMO | undefined {
  const [slug, email, password] = BOOTSTRAP_VARIABLES.map((name) => env[name] || undefined);
  if (demo) return { slug: slug ?? DEMO.slug, email: email ?? DEMO.email, password: password ?? DEMO.password };
  if (slug && email && password) return { slug, email, password };
  const [unset, set] = [BOOTSTRAP_VARIABLES.filter((name) => !env[name]), BOOTSTRAP_VARIABLES.filter((name) => env[name])];
  if (set.length)
    throw new Error(
      `${unset.join(' and ')} ${unset.length > 1 ? 'are' : 'is'} not set, but ${set.join(' and ')} ${set.length > 1 ? 'are' : 'is'}: ` +
        'set all three to bootstrap a tenant (or none, to start without one; or add --demo for demo values)',
    );
  return undefined;
}

/** How many tenants the database holds, and the first slug (for the banner's example URL): the table is small. */
export async function existingTenants(db: Pick<Db, 'get'>): Promise<{ count: number; slug?: string }> {
  const row = await db.get<{ n: number | string; slug: string | null }>('SELECT COUNT(*) AS n, MIN(slug) AS slug FROM tenants');
  return { count: Number(row?.n ?? 0), slug: row?.slug ?? undefined };
}

/**
 * The start-up banner's lines about where the API is, how to sign in, the CA file and where email
 * goes. Without a bootstrap account, `tenants` says whether the database already holds some (a
 * service started without DP_BOOTSTRAP_*), so the hint to create one comes only when it has none.
 */
export function reachLines(
  service: Pick<RunningService, 'port' | 'baseUrl'> & { tls: { certPath?: string; certStats?: unknown }; smtpUrl?: string },
  host: string,
  account: { account: typeof DEMO; created: boolean } | undefined,
  tenants: { count: number; slug?: string } = { count: 0 },
): string[] {
  const lines = [`Data Platform reference service listening on https://${host}:${service.port} (HTTPS only)`];
  if (account) {
    const { slug, email, password } = account.account;
    lines.push(
      `Tenant "${slug}" ${account.created ? 'created' : 'ready'}; admin ${email}`,
      `API:      ${service.baseUrl(slug)}`,
      `Docs:     https://${slug}.localhost:${service.port}/api/docs`,
      `Login:    curl --cacert ${service.tls.certPath} -X POST ${service.baseUrl(slug)}/auth/login -H 'Content-Type: application/json' -d '{"email":"${email}","password":"${password === DEMO.password ? password : '...'}"}'`,
    );
  } else {
    lines.push(`Docs:     https://localhost:${service.port}/api/docs`);
    if (tenants.count && tenants.slug)
      lines.push(
        `Tenants:  ${tenants.count} in the database, ${tenants.count > 1 ? 'e.g. ' : ''}${service.baseUrl(tenants.slug)} (none bootstrapped from DP_BOOTSTRAP_*)`,
      );
    else
      lines.push(
        'No tenant bootstrapped: set DP_BOOTSTRAP_TENANT, DP_BOOTSTRAP_EMAIL and DP_BOOTSTRAP_PASSWORD, or run `dpctl tenant create`.',
      );
  }
  // Our own CA issues the certificates (it counts them); a --tls-cert is the operator's, signed by a CA of theirs.
  if (service.tls.certPath)
    lines.push(
      service.tls.certStats
        ? `CA file:  ${service.tls.certPath} (this service's own CA; pass it to clients)`
        : `TLS:      ${service.tls.certPath} (--tls-cert; clients trust the CA that signed it)`,
    );
  const { smtpUrl } = service;
  lines.push(`Email:    ${smtpUrl ? `sent through ${redactedSmtpUrl(smtpUrl)}` : 'written to the email_outbox table (no --smtp-url)'}`);
  return lines;
}

/** What `dpctl serve` has started, for the stop on signals. */
interface Started {
  service?: RunningService;
  controller?: Awaited<ReturnType<typeof startDemoController>>;
}

/** Starts the service (and with --reconcile the controller), stopping on signals; prints where to reach them. */
async function serve(opts: ServeFlags): Promise<void> {
  const started: Started = {};
  const startup = start(opts, started);
  // Installed before startup completes, so that a stop during it (the parent dying while
  // the controller starts) still waits for what is being opened and closes it.
  stopOnSignals(async () => {
    await startup.catch(() => undefined);
    await started.controller?.stop();
    await started.service?.close();
  });
  await startup;
}

/** The start-up itself: fills `started` as each part runs, so that a stop meanwhile closes what is open. */
async function start(opts: ServeFlags, started: Started): Promise<void> {
  // The service loads when it runs: other commands and --help start without it.
  const [{ startService }, { ensureTenantWithAdmin }, { startDemoController }, { parseCidrList }, { buildRelease }] = await Promise.all([
    import('../service/server.js'),
    import('../service/bootstrap.js'),
    import('./demo-controller.js'),
    import('../service/egress.js'),
    import('../distribution/provider-release.js'),
  ]);
  // The provider mirror serves the package's own release, built on its first request.
  const providerMirror: ProviderMirrorSource = { files: async () => (await buildRelease()).files };
  const account = bootstrapAccount(opts.demo); // before the service: a half-set DP_BOOTSTRAP_* stops the start
  const service = (started.service = await startService({ ...serviceOptions(opts, parseCidrList), providerMirror }));
  const created = account && (await ensureTenantWithAdmin(service.ctx, account.slug, account.email, account.password)).created;
  const lines = reachLines(
    { port: service.port, baseUrl: service.baseUrl, tls: service.tls, smtpUrl: service.ctx.options.smtpUrl },
    opts.host,
    account && { account, created: !!created },
    account ? undefined : await existingTenants(service.ctx.db),
  );
  if (opts.reconcile) {
    if (!account)
      throw new Error(
        '--reconcile needs a bootstrapped tenant: use --demo or set DP_BOOTSTRAP_TENANT, DP_BOOTSTRAP_EMAIL and DP_BOOTSTRAP_PASSWORD',
      );
    const controller = (started.controller = await startDemoController({
      service,
      slug: account.slug,
      email: account.email,
      password: account.password,
      dir: opts.reconcile,
      stateDir: join(opts.dataDir, 'controller'),
      interval: opts.reconcileInterval,
      listen: opts.controllerListen,
      logLevel: opts.logLevel,
      logFormat: opts.logFormat,
    }));
    lines.push(
      `Controller: reconciling ${controller.dir} into tenant "${account.slug}" every ${opts.reconcileInterval}; edit a YAML file there and it is applied`,
      `Status:   ${controller.url}/status`,
    );
  }
  process.stderr.write(lines.join('\n') + '\n');
}

export function tenantCommand(): Command {
  const tenant = new Command('tenant').description('Manage tenants of the reference service');
  tenant
    .command('create <slug>')
    .description('Create a tenant and its admin user (password from DP_ADMIN_PASSWORD or stdin)')
    .requiredOption('--admin-email <email>', 'email of the first admin')
    .option('--data-dir <dir>', 'data dir of the service', '.dpctl-data')
    .option('--database-url <url>', 'PostgreSQL URL, when the service uses one')
    .option('--secrets-key-file <file>', "the service's secrets key file, when it uses one (env DP_SECRETS_KEY)")
    .action(async (slug: string, opts) => {
      const password = process.env.DP_ADMIN_PASSWORD || (await readStdin()).trim();
      if (!password) throw new Error('give the admin password in DP_ADMIN_PASSWORD or on stdin');
      const [{ openServiceContext }, { ensureTenantWithAdmin }] = await Promise.all([
        import('../service/server.js'),
        import('../service/bootstrap.js'),
      ]);
      // Said, because a mistyped --data-dir would otherwise make a database no running service reads.
      const newDatabase = !opts.databaseUrl && !process.env.DP_DATABASE_URL && !existsSync(join(opts.dataDir, SQLITE_FILE));
      const ctx = await openServiceContext({
        dataDir: opts.dataDir,
        databaseUrl: opts.databaseUrl ?? process.env.DP_DATABASE_URL,
        secretsKeyFile: opts.secretsKeyFile,
        secretsKey: process.env.DP_SECRETS_KEY,
      });
      try {
        if (await ctx.tenants.bySlug(slug)) throw new Error(`tenant "${slug}" already exists`);
        await ensureTenantWithAdmin(ctx, slug, opts.adminEmail, password);
        process.stdout.write(
          `${newDatabase ? `Created a new database in ${resolve(opts.dataDir)} (\`dpctl serve --data-dir ${opts.dataDir}\` serves it).\n` : ''}` +
            `Created tenant "${slug}" with admin ${opts.adminEmail}; it is served at https://${slug}.localhost:<port>/api/v1\n`,
        );
      } finally {
        await ctx.db.close();
      }
    });
  return tenant;
}

/** A CIDR list from its flag, else its environment variable, checked (parse: egress.ts, loaded with the service). */
function cidrs(
  parse: (text: string, source: string) => string[],
  flag: string | undefined,
  flagName: string,
  envName: string,
): string[] | undefined {
  if (flag !== undefined) return parse(flag, flagName);
  const env = process.env[envName];
  return env ? parse(env, envName) : undefined;
}
