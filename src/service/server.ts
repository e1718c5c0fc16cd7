import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import pino from 'pino';
import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { AddressInfo, Socket } from 'node:net';
import type { Server as HttpsServer } from 'node:https';
import { createAjv, toFieldErrors } from '../kinds/validator.js';
import { PERMISSION_RANK } from '../kinds/index.js';
import { openDb, type Db } from './store/db.js';
import { migrate } from './store/migrations.js';
import { ResourceStore } from './store/resources.js';
import { describeOrigin, openSecrets, sealClearSecrets } from './secrets/index.js';
import { AuthService } from './auth/auth-service.js';
import { TenantStore, tenantSlugFromHost } from './tenants.js';
import { AuditLog } from './audit.js';
import { Cursors } from './pagination.js';
import { RateLimiter } from './rate-limit.js';
import { clientAddress } from './auth/client-address.js';
import { ApiError, forbidden, unauthorized } from './errors.js';
import { newRequestId, nowIso } from './ids.js';
import { loadOrCreateTls, type TlsMaterial } from './tls.js';
import { createPlainHttpGuard } from './plain-http-guard.js';
import { clientErrorHandler, connectionLimits, enforceHttpTimeouts, httpsTimeoutOptions } from './connection-limits.js';
import { assertKeyMayReach } from './auth/key-reach.js';
import { egressPolicy } from './egress.js';
import { DEFAULT_OPTIONS, type ServiceContext, type ServiceOptions } from './context.js';
import { registerDocs } from './docs.js';
import { registerProviderMirror } from './provider-mirror.js';
import { registerMetrics } from './metrics.js';
import { registerRoutes } from './routes/index.js';
import { registerStreams } from './streams/index.js';
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

/**
 * Strips credentials carried in query parameters so they never reach a log line: `token`
 * (WebSocket auth) and an SSO callback's authorization `code` and `state`.
 */
const redactUrl = (url: string) => url.replace(/([?&](?:token|code|state)=)[^&]*/gi, '$1[redacted]');

/**
 * The level of a request's log line. A service polled by controllers, Terraform and dashboards
 * answers thousands of successful requests an hour: one line each would bury what an operator
 * must see, so they are debug. A 4xx (a client's bad token, a missing resource, the rate limit)
 * is info: worth seeing on the default level, nothing for the operator to fix. A 5xx is error.
 */
const requestLevel = (statusCode: number) => (statusCode >= 500 ? 'error' : statusCode >= 400 ? 'info' : 'debug');

function toApiError(err: FastifyError | ApiError | Error): ApiError {
  if (err instanceof ApiError) return err;
  const fe = err as FastifyError & { validationContext?: string };
  if (fe.validation) {
    const prefix = fe.validationContext === 'body' ? '' : '';
    const details = toFieldErrors(fe.validation as never, prefix);
    const summary = details.map((d) => `${d.field} ${d.message}`).join('; ');
    return new ApiError('validation_error', `Invalid ${fe.validationContext ?? 'request'}: ${summary}`, details);
  }
  const status = fe.statusCode ?? 500;
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new ApiError(
      'validation_error',
      'Request body is larger than the limit of this service',
      [{ field: '(body)', message: 'too large' }],
      413,
    );
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return new ApiError(
      'validation_error',
      'Request bodies must be JSON with Content-Type: application/json',
      [{ field: 'Content-Type', message: 'must be application/json' }],
      415,
    );
  if (status === 404) return new ApiError('resource_not_found', 'Not found');
  if (status >= 400 && status < 500)
    return new ApiError('validation_error', `Malformed request: ${fe.message}`, [{ field: '(body)', message: fe.message }], 400);
  return new ApiError('internal_error', 'Internal error; quote the X-Request-Id when reporting it');
}

/** Opens the store (migrating it) and builds what routes and the CLI's admin commands share. */
export async function openServiceContext(partial: Partial<ServiceOptions> & { dataDir: string }): Promise<ServiceContext> {
  const options: ServiceOptions = { ...DEFAULT_OPTIONS, ...partial };
  // A bad --egress-deny/--egress-allow range stops start-up here, before the store is opened.
  egressPolicy(options);
  mkdirSync(options.dataDir, { recursive: true });
  const db = await openDb({ databaseUrl: options.databaseUrl, sqlitePath: join(options.dataDir, 'dataplatform.sqlite') });
  await migrate(db);
  // A wrong or missing secrets key stops start-up here with a message, the store closed.
  const secrets = await openSecrets(db, options).catch(async (err) => {
    await db.close();
    throw err;
  });
  return {
    options,
    db,
    resources: new ResourceStore(db, secrets.cipher, { nowMs: () => options.clock(), timeScale: options.timeScale }),
    auth: new AuthService(db, { accessTokenTtl: options.accessTokenTtl, clock: options.clock }),
    tenants: new TenantStore(db),
    audit: new AuditLog(db),
    cursors: new Cursors(await cursorKey(db)),
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

export async function startService(partial: Partial<ServiceOptions> & { dataDir: string; logFormat?: LogFormat }): Promise<RunningService> {
  const ctx = await openServiceContext(partial);
  const { options, db } = ctx;
  const rateLimiter = new RateLimiter(db, options.rateLimit, options.clock);
  // Anonymous endpoints have a budget per source address, so an anonymous burst never spends the quota of the tenant's users.
  const anonymousLimiter = new RateLimiter(db, options.anonymousRateLimit, options.clock, ' from this address');
  // A certificate (and key) is issued only for a tenant's host name: any client can name any host.
  const issuable = async (name: string) => {
    const slug = tenantSlugFromHost(name, options.baseDomain);
    return name === options.baseDomain || (!!slug && !!(await ctx.tenants.bySlug(slug)));
  };
  const tls = await loadOrCreateTls({
    certFile: options.tlsCert,
    keyFile: options.tlsKey,
    dataDir: options.dataDir,
    baseDomain: options.baseDomain,
    issuable,
    certCacheSize: options.tlsCertCacheSize,
  });
  const limits = connectionLimits(options);

  const bodyAjv = createAjv({ useDefaults: true });
  const queryAjv = createAjv({ coerceTypes: true, useDefaults: true });
  const app = Fastify({
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
      stream: logStream(resolveLogFormat(partial.logFormat), pino.destination({ fd: 1, sync: true })) as pino.DestinationStream,
    },
    ajv: undefined,
    return503OnClosing: false,
    // Undecodable URLs and over-long path parameters get the error envelope too, not Fastify's own body.
    frameworkErrors: (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      const apiError = new ApiError('validation_error', `Invalid URL: ${err.message}`, [{ field: '(path)', message: err.message }]);
      reply.code(apiError.status).header('X-Request-Id', req.id).type('application/json').send(apiError.toJSON());
    },
  });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : queryAjv).compile(schema));
  // Bodies are JSON only (anything else is a 415); triggers take no body, so an empty one is accepted
  // even when a client sends Content-Type: application/json.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(
        new ApiError('validation_error', `Body is not valid JSON: ${(err as Error).message}`, [
          { field: '(body)', message: 'is not valid JSON' },
        ]),
        undefined,
      );
    }
  });

  let inFlight = 0;
  // WebSocket upgrades are not drained (streams close them with 1001); an accepted one never gets onResponse.
  const drained = (req: FastifyRequest) => !req.raw.headers.upgrade;
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (drained(req)) inFlight++;
    reply.header('X-Request-Id', req.id);
    const settings = req.routeOptions.config?.settings ?? {};
    if (settings.tenantless) return;
    const slug = tenantSlugFromHost(req.headers.host, options.baseDomain);
    const tenant = slug ? await ctx.tenants.bySlug(slug) : undefined;
    if (!tenant)
      throw new ApiError(
        'resource_not_found',
        `No tenant at host ${req.headers.host ?? '(none)'}; use https://<tenant>.localhost:${options.port}/api/v1`,
      );
    req.tenant = tenant;
    if (!settings.public) {
      const header = req.headers.authorization;
      const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
      if (!match)
        throw unauthorized(header ? 'Authorization header must be "Bearer <token>"' : 'Missing Authorization header with a Bearer token');
      req.actor = await ctx.auth.authenticate(tenant.id, match[1]);
      if (settings.permission && PERMISSION_RANK[req.actor.level] < PERMISSION_RANK[settings.permission]) {
        throw forbidden(
          `This operation needs ${settings.permission} permission; the ${req.actor.type === 'api_key' ? 'API key' : 'user'} has ${req.actor.level}`,
        );
      }
      assertKeyMayReach(req.actor, settings.keys, { method: req.method, url: req.routeOptions.url, params: req.params });
    }
    const endpoint = `${req.method} ${req.routeOptions.url ?? '(unmatched)'}`;
    if (settings.anonymous) await anonymousLimiter.hit(`address:${clientAddress(req.ip)}`, endpoint);
    else await rateLimiter.hit(tenant.id, endpoint);
  });

  app.addHook('onSend', async (req, reply, payload) => {
    const audit = req.routeOptions.config?.settings?.audit;
    if (audit && req.tenant) {
      const d = req.auditDetails ?? {};
      const actor =
        d.actor ??
        (req.actor
          ? { type: req.actor.type, id: req.actor.id, name: req.actor.name }
          : { type: 'anonymous' as const, id: null, name: null });
      const params = req.params as Record<string, string | undefined>;
      await ctx.audit.record({
        tenantId: req.tenant.id,
        projectId: d.projectId ?? req.actor?.projectId ?? params.id ?? null,
        actor,
        action: audit.action,
        resourceType: audit.resourceType,
        resourceId: d.resourceId ?? params.resourceId ?? null,
        resourceName: d.resourceName ?? null,
        requestId: req.id,
        statusCode: reply.statusCode,
        diff: d.diff ?? null,
        timestamp: nowIso(options.clock),
      });
    }
    return payload;
  });

  // Requests whose error the error handler has logged (with its stack): their request line is debug.
  const errorLogged = new WeakSet<FastifyRequest>();
  app.addHook('onResponse', async (req, reply) => {
    if (drained(req)) inFlight--;
    // req.log carries the request id already (fastify's child logger binds reqId).
    const level = errorLogged.has(req) ? 'debug' : requestLevel(reply.statusCode);
    req.log[level](
      {
        method: req.method,
        url: redactUrl(req.url),
        statusCode: reply.statusCode,
        tenant: req.tenant?.slug,
        actor: req.actor && `${req.actor.type}:${req.actor.id}`,
        ms: Math.round(reply.elapsedTime),
      },
      'request',
    );
  });

  app.setErrorHandler(async (err: FastifyError, req, reply) => {
    const apiError = toApiError(err);
    // Logged at once (the client may be gone before the response completes), with what the request line would say.
    if (apiError.status >= 500) {
      errorLogged.add(req);
      req.log.error(
        {
          err,
          method: req.method,
          url: redactUrl(req.url),
          statusCode: apiError.status,
          tenant: req.tenant?.slug,
          actor: req.actor && `${req.actor.type}:${req.actor.id}`,
        },
        'request failed',
      );
    }
    reply.code(apiError.status).headers(apiError.headers).type('application/json');
    return apiError.toJSON();
  });
  app.setNotFoundHandler(async (req, reply) => {
    reply.code(404).type('application/json');
    return new ApiError('resource_not_found', `No route ${req.method} ${req.url.split('?')[0]}`).toJSON();
  });

  await registerDocs(app, ctx);
  registerProviderMirror(app);
  const metrics = options.metrics === false ? undefined : registerMetrics(app, { token: options.metricsToken });
  await registerRoutes(app, ctx);
  const streams = await registerStreams(app, ctx);
  await app.ready();

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
  const port = (guard.address() as AddressInfo).port;
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
    close: () =>
      (closing ??= (async () => {
        guard.close();
        await streams.close();
        https.closeIdleConnections?.();
        // Drain: requests already being served finish (up to 10 s), then the store closes cleanly.
        const deadline = Date.now() + 10_000;
        while (inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        for (const s of sockets) s.destroy();
        await app.close();
        metrics?.stop();
        secretsMigration.stop();
        await secretsMigration.done.catch(() => undefined);
        await db.close();
      })()),
  };
}
