import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { capFieldErrors, fieldErrorsText } from '../kinds/validator.js';
import { PERMISSION_RANK } from '../kinds/index.js';
import type { AuditEvent } from './audit.js';
import type { Actor } from './auth/actor.js';
import { assertKeyMayReach } from './auth/key-reach.js';
import { clientAddress } from './auth/client-address.js';
import type { RouteSettings, ServiceContext } from './context.js';
import { ApiError, forbidden, unauthorized } from './errors.js';
import { nowIso } from './ids.js';
import { RateLimiter, type QuotaLeft } from './rate-limit.js';
import { tenantSlugFromHost, type Tenant } from './tenants.js';

/**
 * What every request goes through around its route's handler: admission (tenant from the host,
 * bearer token, permission, API key reach, rate limit), the audit entry, one log line, and the
 * error envelope. Registration of the hooks is here; the steps are functions of their own.
 */

/**
 * Strips credentials carried in query parameters so they never reach a log line: `token`
 * (WebSocket auth) and an SSO callback's authorization `code` and `state`.
 */
export const redactUrl = (url: string) => url.replace(/([?&](?:token|code|state)=)[^&]*/gi, '$1[redacted]');

/**
 * The level of a request's log line. A service polled by controllers, Terraform and dashboards
 * answers thousands of successful requests an hour: one line each would bury what an operator
 * must see, so they are debug. A 4xx (a client's bad token, a missing resource, the rate limit)
 * is info: worth seeing on the default level, nothing for the operator to fix. A 5xx is error.
 */
export const requestLevel = (statusCode: number) => (statusCode >= 500 ? 'error' : statusCode >= 400 ? 'info' : 'debug');

/** The error envelope of anything a handler, a hook or Fastify itself threw. */
export function toApiError(err: FastifyError | ApiError | Error): ApiError {
  if (err instanceof ApiError) return err;
  const fe = err as FastifyError & { validationContext?: string };
  if (fe.validation) {
    // At most MAX_FIELD_ERRORS details, however many errors Ajv found (validator.ts).
    const found = capFieldErrors(fe.validation as never);
    return new ApiError('validation_error', `Invalid ${fe.validationContext ?? 'request'}: ${fieldErrorsText(found)}`, found.details);
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

/** The token of an `Authorization: Bearer <token>` header; anything else is a 401. */
export function bearerToken(header: string | undefined): string {
  const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
  if (!match)
    throw unauthorized(header ? 'Authorization header must be "Bearer <token>"' : 'Missing Authorization header with a Bearer token');
  return match[1];
}

/** Refuses an actor below the route's permission level. */
export function assertPermission(actor: Actor, permission: RouteSettings['permission']): void {
  if (permission && PERMISSION_RANK[actor.level] < PERMISSION_RANK[permission]) {
    throw forbidden(
      `This operation needs ${permission} permission; the ${actor.type === 'api_key' ? 'API key' : 'user'} has ${actor.level}`,
    );
  }
}

/** What an audited route's audit entry says, from what its handler left in `req.auditDetails`. */
export function auditEntry(
  req: Pick<FastifyRequest, 'auditDetails' | 'actor' | 'params' | 'id'> & { tenant: Tenant },
  audit: NonNullable<RouteSettings['audit']>,
  statusCode: number,
  timestamp: string,
): AuditEvent {
  const d = req.auditDetails ?? {};
  const actor =
    d.actor ??
    (req.actor ? { type: req.actor.type, id: req.actor.id, name: req.actor.name } : { type: 'anonymous' as const, id: null, name: null });
  const params = req.params as Record<string, string | undefined>;
  return {
    tenantId: req.tenant.id,
    projectId: d.projectId ?? req.actor?.projectId ?? params.id ?? null,
    actor,
    action: audit.action,
    resourceType: audit.resourceType,
    resourceId: d.resourceId ?? params.resourceId ?? null,
    resourceName: d.resourceName ?? null,
    requestId: req.id,
    statusCode,
    diff: d.diff ?? null,
    timestamp,
  };
}

/** The fields of a request's log line (and of a 5xx's error line). */
const requestFields = (req: FastifyRequest, statusCode: number) => ({
  method: req.method,
  url: redactUrl(req.url),
  statusCode,
  tenant: req.tenant?.slug,
  actor: req.actor && `${req.actor.type}:${req.actor.id}`,
});

/**
 * Admission of a request before its handler: the tenant its host names, then (unless the route is
 * public) the bearer token's actor, its permission and reach, then the rate limit. Tenantless
 * routes (docs, metrics, the provider mirror) and requests no route matches skip the tenant and
 * the token but not the per-address budget of anonymous requests: they are served on any host to
 * anyone, and the docs document alone cost 4-8 ms of CPU a request. A path no route has is a 404
 * with or without a token (it was a 401 without one, which said nothing about the path).
 */
function requestAdmission(ctx: ServiceContext): (req: FastifyRequest) => Promise<QuotaLeft | undefined> {
  const { options, db } = ctx;
  const rateLimiter = new RateLimiter(db, options.rateLimit, options.clock);
  // Anonymous endpoints have a budget per source address, so an anonymous burst never spends the quota of the tenant's users.
  const anonymousLimiter = new RateLimiter(db, options.anonymousRateLimit, options.clock, ' from this address');
  return async (req) => {
    const settings = req.routeOptions.config?.settings ?? {};
    // req.ip: the TCP peer, or the client named in X-Forwarded-For when the peer is a --trust-proxy proxy (server.ts).
    const byAddress = (endpoint: string) => anonymousLimiter.hit(`address:${clientAddress(req.ip)}`, endpoint);
    // Every path no route has shares one budget: one per path would make each made-up path a fresh one.
    // No tenant lookup either: the answer is the not-found handler's 404 on any host.
    if (req.routeOptions.url === undefined) return byAddress('(no route)');
    // HEAD shares GET's budget (Fastify answers it from the GET route): not a second one for the same route.
    if (settings.tenantless && settings.unmetered) return undefined;
    if (settings.tenantless) return byAddress(`${req.method === 'HEAD' ? 'GET' : req.method} ${req.routeOptions.url}`);
    const slug = tenantSlugFromHost(req.headers.host, options.baseDomain);
    const tenant = slug ? await ctx.tenants.bySlug(slug) : undefined;
    if (!tenant)
      throw new ApiError(
        'resource_not_found',
        `No tenant at host ${req.headers.host ?? '(none)'}; use https://<tenant>.localhost:${options.port}/api/v1`,
      );
    req.tenant = tenant;
    if (!settings.public) {
      const token = bearerToken(req.headers.authorization);
      req.actor = await ctx.auth.authenticate(tenant.id, token);
      assertPermission(req.actor, settings.permission);
      assertKeyMayReach(req.actor, settings.keys, { method: req.method, url: req.routeOptions.url, params: req.params });
    }
    const endpoint = `${req.method} ${req.routeOptions.url}`;
    // A stream's credential first: 600 requests without one used up the tenant's stream quota, and
    // its users' own streams were 429 until the minute ended.
    const queryToken = settings.queryToken ? (req.query as { token?: unknown }).token : undefined;
    if (typeof queryToken === 'string' && queryToken) req.actor = await ctx.auth.authenticate(tenant.id, queryToken);
    if (settings.anonymous || (settings.queryToken && !req.actor)) return byAddress(endpoint);
    return rateLimiter.hit(tenant.id, endpoint);
  };
}

/** Requests being served now: a closing service waits for them. */
export interface RequestCounter {
  readonly inFlight: number;
}

/**
 * Installs the hooks and handlers every route shares, in this order: onRequest (admission),
 * onSend (audit), onResponse (the log line), the error handler and the not-found handler.
 */
export function installRequestPipeline(app: FastifyInstance, ctx: ServiceContext): RequestCounter {
  const counter = { inFlight: 0 };
  // WebSocket upgrades are not drained (streams close them with 1001); an accepted one never gets onResponse.
  const drained = (req: FastifyRequest) => !req.raw.headers.upgrade;
  const admit = requestAdmission(ctx);
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (drained(req)) counter.inFlight++;
    reply.header('X-Request-Id', req.id);
    const quota = await admit(req);
    // What is left of the quota, so a client can leave some to the tenant's other callers (dpctl
    // keeps a fifth: client/http.ts); the names of the IETF draft's first versions, as GitHub's X-RateLimit-*.
    if (quota)
      reply.headers({
        'RateLimit-Limit': String(quota.limit),
        'RateLimit-Remaining': String(quota.remaining),
        'RateLimit-Reset': String(quota.resetSeconds),
      });
  });

  app.addHook('onSend', async (req, reply, payload) => {
    const settings = req.routeOptions.config?.settings;
    if (settings?.noStore) reply.header('Cache-Control', 'no-store');
    const audit = settings?.audit;
    if (!audit || !req.tenant) return payload;
    const entry = auditEntry(req as FastifyRequest & { tenant: Tenant }, audit, reply.statusCode, nowIso(ctx.options.clock));
    try {
      await ctx.audit.record(entry);
    } catch (err) {
      // The answer is already made (a write committed, or the error that the database is down): an
      // error thrown here bypassed the error handler, and Fastify answered a bare 500 that echoed
      // the database's address.
      // The entry goes to the log instead (its diff left out: it may be 64 KiB).
      const { diff: _diff, ...summary } = entry;
      req.log.error({ err, audit: summary }, 'audit entry not recorded: the database refused it');
    }
    return payload;
  });

  // Requests whose error the error handler has logged (with its stack): their request line is debug.
  const errorLogged = new WeakSet<FastifyRequest>();
  app.addHook('onResponse', async (req, reply) => {
    if (drained(req)) counter.inFlight--;
    // req.log carries the request id already (fastify's child logger binds reqId).
    const level = errorLogged.has(req) ? 'debug' : requestLevel(reply.statusCode);
    req.log[level]({ ...requestFields(req, reply.statusCode), ms: Math.round(reply.elapsedTime) }, 'request');
  });

  // Fastify's own formatter joins every Ajv error into the message (0.2 s for 500,000 of them), which
  // toApiError never reads: it builds the envelope, capped, from `err.validation`.
  app.setSchemaErrorFormatter((errors, dataVar) => new Error(`Invalid ${dataVar}: ${errors.length} errors`));
  app.setErrorHandler(async (err: FastifyError, req, reply) => {
    const apiError = toApiError(err);
    // Logged at once (the client may be gone before the response completes), with what the request line would say.
    if (apiError.status >= 500) {
      errorLogged.add(req);
      req.log.error({ err, ...requestFields(req, apiError.status) }, 'request failed');
    }
    reply.code(apiError.status).headers(apiError.headers).type('application/json');
    return apiError.toJSON();
  });
  app.setNotFoundHandler(async (req, reply) => {
    reply.code(404).type('application/json');
    return new ApiError('resource_not_found', `No route ${req.method} ${req.url.split('?')[0]}`).toJSON();
  });
  return counter;
}
