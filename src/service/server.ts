import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import pino from 'pino';
import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { AddressInfo, Socket } from 'node:net';
import type { Server as HttpsServer } from 'node:https';
import { openDb, type Db } from './store/db.js';
import { migrate } from './store/migrations.js';
import { ResourceStore } from './store/resources.js';
import { describeOrigin, openSecrets, sealClearSecrets } from './secrets/index.js';
import { AuthService } from './auth/auth-service.js';
import { keyCacheOf } from './auth/key-cache.js';
import { TenantStore, tenantSlugFromHost } from './tenants.js';
import { AuditLog } from './audit.js';
import { Cursors } from './pagination.js';
import { ApiError } from './errors.js';
import { newRequestId } from './ids.js';
import { loadOrCreateTls, type TlsMaterial } from './tls.js';
import { createPlainHttpGuard } from './plain-http-guard.js';
import {
  clientErrorHandler,
  connectionLimits,
  enforceHttpTimeouts,
  httpsTimeoutOptions,
  type ConnectionLimits,
} from './connection-limits.js';
import { egressPolicy } from './egress.js';
import { DEFAULT_OPTIONS, SQLITE_FILE, type ServiceContext, type ServiceOptions } from './context.js';
import { registerDocs } from './docs.js';
import { registerProviderMirror, type ProviderMirrorSource } from './provider-mirror.js';
import { registerMetrics, type ServiceMetrics } from './metrics.js';
import { registerHealth } from './health.js';
import { registerRoutes } from './routes/index.js';
import { registerStreams, type Streams } from './streams/index.js';
import { installRequestPipeline, redactUrl, type RequestCounter } from './request-pipeline.js';
import { buildSerializer, buildValidator } from './schema-compilers.js';
import { installJsonBodyParsing } from './json-body.js';
import { logStartState } from './start-report.js';
import { logStream, resolveLogFormat, type LogFormat } from '../log-format.js';

export interface RunningService {
  ctx: ServiceContext;
  app: FastifyInstance;
  port: number;
  tls: TlsMaterial;
  /** `https://<tenant>.localhost:<port>/api/v1` */
  baseUrl(tenantSlug: string): string;
  /** The background sealing of secrets written in clear by older versions: resolves to the rows sealed. */
  secretsMigration: Promise<number>;
  close(): Promise<void>;
}

/** The cursor signing key is generated once per database so cursors survive restarts and work on every replica. */
async function cursorKey(db: Db): Promise<Buffer> {
  const fresh = randomBytes(32).toString('base64');
  await db.run('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', ['cursor_key', fresh]);
  const row = await db.get<{ value: string }>('SELECT value FROM meta WHERE key = ?', ['cursor_key']);
  return Buffer.from(row!.value, 'base64');
}

/** Opens the store (migrating it) and builds what routes and the CLI's admin commands share. */
export async function openServiceContext(partial: Partial<ServiceOptions> & { dataDir: string }): Promise<ServiceContext> {
  const options: ServiceOptions = { ...DEFAULT_OPTIONS, ...partial };
  // A bad --egress-deny/--egress-allow range stops start-up here, before the store is opened.
  egressPolicy(options);
  // Owner only when created here (the store, its key and the TLS keys live in it).
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const db = await openDb({ databaseUrl: options.databaseUrl, sqlitePath: join(options.dataDir, SQLITE_FILE) });
  const migrations = await migrate(db);
  // A wrong or missing secrets key stops start-up here with a message, the store closed.
  const secrets = await openSecrets(db, options).catch(async (err) => {
    await db.close();
    throw err;
  });
  return {
    options,
    db,
    // A project's deletion clears the API key cache the auth service fills (both keyed by this db handle).
    resources: new ResourceStore(
      db,
      secrets.cipher,
      { nowMs: () => options.clock(), timeScale: options.timeScale },
      { projectContentsDeleted: (tenantId, projectId) => keyCacheOf(db).forgetProject(tenantId, projectId) },
    ),
    auth: new AuthService(db, { accessTokenTtl: options.accessTokenTtl, clock: options.clock }),
    tenants: new TenantStore(db),
    audit: new AuditLog(db),
    cursors: new Cursors(await cursorKey(db)),
    migrations,
  };
}

/** Seals secrets left in clear by older versions, in the background; warns when PostgreSQL keeps its own key. */
function startSecretsMigration(app: FastifyInstance, ctx: ServiceContext): { done: Promise<number>; stop: () => void } {
  const { options } = ctx;
  if (options.databaseUrl && !options.secretsKeyFile && !options.secretsKey) {
    app.log.warn(
      `Secrets at rest are sealed with ${describeOrigin('database')}: a dump of the whole database holds the key. Give every replica the same --secrets-key-file or DP_SECRETS_KEY (docs/security.md).`,
    );
  }
  const abort = new AbortController();
  const done = sealClearSecrets(ctx.db, ctx.resources.cipher, abort.signal);
  done.then(
    (sealed) => sealed && app.log.info({ sealed }, 'secrets written in clear by an older version are now encrypted'),
    (err) => app.log.error({ err }, 'encrypting secrets stored in clear failed; they stay readable and it is retried at the next start'),
  );
  return { done, stop: () => abort.abort() };
}

/** What `startService` takes: the service's options, how its log is written, and its plug-ins. */
export type StartServiceOptions = Partial<ServiceOptions> & {
  dataDir: string;
  logFormat?: LogFormat;
  /** The release the provider mirror serves (src/cli/serve.ts passes the package's); without it the mirror answers 404. */
  providerMirror?: ProviderMirrorSource;
};

/** The certificate (and key) of the service: issued only for a tenant's host name, since any client can name any host. */
function loadServiceTls(ctx: ServiceContext): Promise<TlsMaterial> {
  const { options } = ctx;
  const issuable = async (name: string) => {
    const slug = tenantSlugFromHost(name, options.baseDomain);
    return name === options.baseDomain || (!!slug && !!(await ctx.tenants.bySlug(slug)));
  };
  return loadOrCreateTls({
    certFile: options.tlsCert,
    keyFile: options.tlsKey,
    dataDir: options.dataDir,
    baseDomain: options.baseDomain,
    issuable,
    certCacheSize: options.tlsCertCacheSize,
  });
}

/** Undecodable URLs and over-long path parameters get the error envelope too, not Fastify's own body. */
function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const apiError = new ApiError('validation_error', `Invalid URL: ${err.message}`, [{ field: '(path)', message: err.message }]);
  reply.code(apiError.status).header('X-Request-Id', req.id).type('application/json').send(apiError.toJSON());
}

/** The Fastify instance over HTTPS, with its logger, before any hook or route. */
function createApp(options: ServiceOptions, tls: TlsMaterial, limits: ConnectionLimits, logFormat: LogFormat | undefined): FastifyInstance {
  return Fastify({
    https: { cert: tls.cert, key: tls.key, SNICallback: tls.SNICallback, ...httpsTimeoutOptions(limits) },
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    clientErrorHandler: clientErrorHandler(limits),
    bodyLimit: options.bodyLimit,
    // req.ip (per-address limits) is the socket's peer unless the peer is a proxy named here.
    trustProxy: options.trustProxy ?? false,
    genReqId: () => newRequestId(),
    // Our onResponse hook writes one line per request with tenant and actor instead.
    logController: new LogController({ disableRequestLogging: true }),
    logger: {
      level: options.logLevel,
      // Headers (Authorization) and bodies (passwords) are never logged; URLs lose `token`.
      serializers: { req: (req) => ({ method: req.method, url: redactUrl(req.url) }) },
      // JSON lines, or one human-readable line each on a terminal; written synchronously, so a
      // line logged just before the process exits is not lost.
      stream: logStream(resolveLogFormat(logFormat), pino.destination({ fd: 1, sync: true })) as pino.DestinationStream,
    },
    ajv: undefined,
    schemaController: { compilersFactory: { buildValidator, buildSerializer } },
    return503OnClosing: false,
    // `/connectors/` is the collection, as `/connectors` is (without this it reached
    // `/connectors/:name` with an empty name: 404 "Connector not found").
    routerOptions: { ignoreTrailingSlash: true },
    frameworkErrors,
  });
}

/** What the routes phase starts that closing must stop. */
interface Features {
  metrics?: ServiceMetrics;
  streams: Streams;
}

/** Docs, the provider mirror, metrics, health probes, the API's routes and the WebSocket streams, in that order. */
async function registerFeatures(app: FastifyInstance, ctx: ServiceContext, providerMirror?: ProviderMirrorSource): Promise<Features> {
  await registerDocs(app, ctx);
  registerProviderMirror(app, providerMirror);
  const metrics = ctx.options.metrics === false ? undefined : registerMetrics(app, { token: ctx.options.metricsToken });
  registerHealth(app, ctx);
  await registerRoutes(app, ctx);
  const streams = await registerStreams(app, ctx);
  await app.ready();
  return { metrics, streams };
}

/** The listening side: the plain-HTTP guard in front of the HTTPS server, and every open socket. */
interface Listener {
  https: HttpsServer;
  guard: ReturnType<typeof createPlainHttpGuard>;
  sockets: Set<Socket>;
  port: number;
}

/** Listens on the options' host and port (0 picks one: the port taken is in the result). */
async function listen(app: FastifyInstance, options: ServiceOptions, limits: ConnectionLimits): Promise<Listener> {
  const https = app.server as HttpsServer;
  const sockets = new Set<Socket>();
  enforceHttpTimeouts(https, limits);
  const guard = createPlainHttpGuard(https, limits);
  guard.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    guard.once('error', reject);
    guard.listen(options.port, options.host, () => resolve());
  });
  return { https, guard, sockets, port: (guard.address() as AddressInfo).port };
}

/** Longest a close waits for the requests being served. */
const DRAIN_MS = 10_000;

/**
 * Stops taking connections, closes the streams, drains the requests being served (up to
 * DRAIN_MS), then closes the app, the metrics, the secrets migration and the store.
 */
async function closeService(
  parts: {
    app: FastifyInstance;
    ctx: ServiceContext;
    requests: RequestCounter;
    secretsMigration: { done: Promise<number>; stop: () => void };
  },
  features: Features,
  listener: Listener,
): Promise<void> {
  listener.guard.close();
  await features.streams.close();
  listener.https.closeIdleConnections?.();
  // Drain: requests already being served finish (up to 10 s), then the store closes cleanly.
  const deadline = Date.now() + DRAIN_MS;
  while (parts.requests.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  for (const s of listener.sockets) s.destroy();
  await parts.app.close();
  features.metrics?.stop();
  parts.secretsMigration.stop();
  await parts.secretsMigration.done.catch(() => undefined);
  await parts.ctx.db.close();
}

/**
 * Starts the service: opens the store, loads TLS, builds the app (body parsing, the request
 * pipeline), registers its features, listens, then seals old clear secrets in the background.
 */
export async function startService(partial: StartServiceOptions): Promise<RunningService> {
  const { providerMirror, ...serviceOptions } = partial;
  const ctx = await openServiceContext(serviceOptions);
  const { options } = ctx;
  const tls = await loadServiceTls(ctx);
  const limits = connectionLimits(options);
  const app = createApp(options, tls, limits, partial.logFormat);
  await logStartState(app.log, ctx);
  installJsonBodyParsing(app);
  const requests = installRequestPipeline(app, ctx);
  const features = await registerFeatures(app, ctx, providerMirror);
  const listener = await listen(app, options, limits);
  const port = listener.port;
  ctx.options.port = port;
  const secretsMigration = startSecretsMigration(app, ctx);

  let closing: Promise<void> | undefined;
  return {
    ctx,
    app,
    port,
    tls,
    baseUrl: (slug) => `https://${slug}.localhost:${port}/api/v1`,
    secretsMigration: secretsMigration.done,
    close: () => (closing ??= closeService({ app, ctx, requests, secretsMigration }, features, listener)),
  };
}
