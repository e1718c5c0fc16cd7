import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../context.js';
import { errorResponses } from './crud.js';
import { ApiError, unauthorized } from '../errors.js';
import { nowIso } from '../ids.js';
import { LoginThrottle, loginThrottlePolicies, type Attempt } from '../auth/login-throttle.js';
import { clientAddress } from '../auth/client-address.js';

export const tokenResponse = {
  type: 'object',
  properties: {
    access_token: { type: 'string' },
    refresh_token: { type: 'string' },
    token_type: { type: 'string', enum: ['Bearer'] },
    expires_in: { type: 'integer' },
  },
};

/** Each lock a failed attempt started goes to the tenant's audit log: who was guessed, from where, for how long. */
async function auditLocks(
  ctx: ServiceContext,
  req: FastifyRequest,
  attempt: Attempt,
  account: string | null,
  address: string,
  action: string,
) {
  for (const lock of attempt.locks) {
    await ctx.audit.record({
      tenantId: req.tenant!.id,
      projectId: null,
      actor: { type: 'anonymous', id: null, name: account },
      action,
      resourceType: 'login_throttle',
      resourceId: null,
      resourceName: address,
      requestId: req.id,
      statusCode: 401,
      diff: {
        scope: { before: null, after: lock.scope },
        failures: { before: null, after: lock.failures },
        locked_seconds: { before: null, after: lock.seconds },
      },
      timestamp: nowIso(ctx.options.clock),
    });
  }
}

/** Runs a sign-in check under the throttle: refused before `check` when locked; a 401 stays counted, a success is taken back. */
async function throttled<T>(attempt: Attempt, check: () => Promise<T>, onFailure: () => Promise<void>): Promise<T> {
  let result: T;
  try {
    result = await check();
  } catch (err) {
    if (err instanceof ApiError && err.code === 'unauthorized') await onFailure();
    throw err;
  }
  await attempt.succeeded();
  return result;
}

export function registerAuthRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const throttle = new LoginThrottle(ctx.db, loginThrottlePolicies(ctx.options), ctx.options.clock);
  app.post(
    '/api/v1/auth/login',
    {
      config: { settings: { noStore: true, public: true, anonymous: true, audit: { resourceType: 'session', action: 'auth.login' } } },
      schema: {
        tags: ['Authentication'],
        summary: 'Log in with email and password',
        operationId: 'login',
        security: [],
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['email', 'password'],
          properties: { email: { type: 'string', format: 'email' }, password: { type: 'string', minLength: 1 } },
        },
        response: { 200: tokenResponse, ...errorResponses },
      },
    },
    async (req) => {
      const { email, password } = req.body as { email: string; password: string };
      const account = email.trim().toLowerCase();
      req.auditDetails = { actor: { type: 'anonymous', id: null, name: account } };
      const address = clientAddress(req.ip);
      const attempt = await throttle.admit(throttle.loginKeys(req.tenant!.id, account, address));
      const { tokens, userId } = await throttled(
        attempt,
        () => ctx.auth.login(req.tenant!.id, email, password),
        () => auditLocks(ctx, req, attempt, account, address, 'login.throttled'),
      );
      req.auditDetails = { actor: { type: 'user', id: userId, name: email.toLowerCase() }, resourceId: userId };
      return tokens;
    },
  );

  app.post(
    '/api/v1/auth/refresh',
    {
      config: { settings: { noStore: true, public: true, anonymous: true } },
      schema: {
        tags: ['Authentication'],
        summary: 'Exchange a refresh token for a new token pair (single use)',
        operationId: 'refresh',
        security: [],
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['refresh_token'],
          properties: { refresh_token: { type: 'string', minLength: 1 } },
        },
        response: { 200: tokenResponse, ...errorResponses },
      },
    },
    async (req) => {
      const address = clientAddress(req.ip);
      const attempt = await throttle.admit(throttle.refreshKeys(address));
      const refresh = () => ctx.auth.refresh(req.tenant!.id, (req.body as { refresh_token: string }).refresh_token);
      return throttled(attempt, refresh, () => auditLocks(ctx, req, attempt, null, address, 'refresh.throttled'));
    },
  );

  // Served with --strict-spec too: it completes the spec's "Invite a user" (POST /users), whose
  // invited user could otherwise never sign in with a password (as the SSO callbacks complete their flows).
  app.post(
    '/api/v1/auth/invitations/accept',
    {
      config: {
        settings: { noStore: true, public: true, anonymous: true, audit: { resourceType: 'user', action: 'user.accept_invitation' } },
      },
      schema: {
        tags: ['Authentication'],
        summary: 'Set the password of an invited user with the one-time invitation token',
        operationId: 'accept_invitation',
        security: [],
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['invitation_token', 'password'],
          properties: { invitation_token: { type: 'string', minLength: 1 }, password: { type: 'string', minLength: 8, maxLength: 1024 } },
        },
        response: { 200: tokenResponse, ...errorResponses },
      },
    } as never,
    async (req) => {
      const { invitation_token, password } = req.body as { invitation_token: string; password: string };
      const tenantId = req.tenant!.id;
      const user = await ctx.db.tx(async (q) => {
        const userId = await ctx.auth.redeemInvitation(q, tenantId, invitation_token);
        if (!userId) return null;
        const stored = await ctx.resources.get(tenantId, '', 'user', userId, q);
        if (!stored) return null;
        await ctx.auth.setPassword(q, tenantId, userId, password);
        stored.data.status = stored.data.disabled ? 'disabled' : 'active';
        stored.data.updated_at = nowIso(ctx.options.clock);
        await ctx.resources.update(stored, q);
        return stored;
      });
      if (!user) throw unauthorized('Invalid or expired invitation token');
      req.auditDetails = { actor: { type: 'user', id: user.id, name: user.name }, resourceId: user.id, resourceName: user.name };
      return (await ctx.auth.login(tenantId, user.name, password)).tokens;
    },
  );
}
