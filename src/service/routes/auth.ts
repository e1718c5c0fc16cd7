import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../context.js';
import { errorResponses } from './crud.js';
import { unauthorized } from '../errors.js';
import { nowIso } from '../ids.js';

export const tokenResponse = {
  type: 'object',
  properties: {
    access_token: { type: 'string' },
    refresh_token: { type: 'string' },
    token_type: { type: 'string', enum: ['Bearer'] },
    expires_in: { type: 'integer' },
  },
};

export function registerAuthRoutes(app: FastifyInstance, ctx: ServiceContext) {
  app.post(
    '/api/v1/auth/login',
    {
      config: { settings: { public: true, audit: { resourceType: 'session', action: 'auth.login' } } },
      schema: {
        tags: ['Authentication'],
        summary: 'Log in with email and password',
        operationId: 'login',
        security: [],
        body: { type: 'object', additionalProperties: false, required: ['email', 'password'], properties: { email: { type: 'string', format: 'email' }, password: { type: 'string', minLength: 1 } } },
        response: { 200: tokenResponse, ...errorResponses },
      },
    },
    async (req) => {
      const { email, password } = req.body as { email: string; password: string };
      req.auditDetails = { actor: { type: 'anonymous', id: null, name: email.toLowerCase() } };
      const { tokens, userId } = await ctx.auth.login(req.tenant!.id, email, password);
      req.auditDetails = { actor: { type: 'user', id: userId, name: email.toLowerCase() }, resourceId: userId };
      return tokens;
    },
  );

  app.post(
    '/api/v1/auth/refresh',
    {
      config: { settings: { public: true } },
      schema: {
        tags: ['Authentication'],
        summary: 'Exchange a refresh token for a new token pair (single use)',
        operationId: 'refresh',
        security: [],
        body: { type: 'object', additionalProperties: false, required: ['refresh_token'], properties: { refresh_token: { type: 'string', minLength: 1 } } },
        response: { 200: tokenResponse, ...errorResponses },
      },
    },
    async (req) => ctx.auth.refresh(req.tenant!.id, (req.body as { refresh_token: string }).refresh_token),
  );

  if (ctx.options.strictSpec) return;
  app.post(
    '/api/v1/auth/invitations/accept',
    {
      config: { settings: { public: true, audit: { resourceType: 'user', action: 'user.accept_invitation' } } },
      schema: {
        tags: ['Authentication'],
        summary: 'Set the password of an invited user with the one-time invitation token',
        operationId: 'accept_invitation',
        'x-extension': true,
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
