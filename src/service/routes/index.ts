import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../context.js';
import { writableKinds } from '../../kinds/index.js';
import { API_ERROR_CODES } from '../../kinds/errors.js';
import { registerKindRoutes } from './crud.js';
import { registerAuthRoutes } from './auth.js';
import { registerAuditLogRoutes } from './audit-logs.js';
import { registerViewRoutes } from './views.js';
import { registerRuntimeRoutes } from './runtime.js';
import { registerNotificationRoutes } from './notifications.js';
import { registerSsoRoutes } from './sso.js';

export async function registerRoutes(app: FastifyInstance, ctx: ServiceContext) {
  app.addSchema({
    $id: 'ErrorEnvelope',
    type: 'object',
    description: 'Every error: a code from the spec, a message, and per-field details for validation errors.',
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: {
            type: 'string',
            enum: API_ERROR_CODES,
          },
          message: { type: 'string' },
          details: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' } } } },
        },
      },
    },
  });
  registerAuthRoutes(app, ctx);
  registerSsoRoutes(app, ctx);
  for (const d of writableKinds()) registerKindRoutes(app, ctx, d);
  registerAuditLogRoutes(app, ctx);
  registerViewRoutes(app, ctx);
  registerRuntimeRoutes(app, ctx);
  registerNotificationRoutes(app, ctx);
}
