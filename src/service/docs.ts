import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { ServiceContext } from './context.js';

/**
 * OpenAPI 3.1 generated from the route schemas (which come from schemas/), and the
 * interactive reference with try-it-out and a pasted bearer token.
 */
export async function registerDocs(app: FastifyInstance, ctx: ServiceContext) {
  // The reference is served on every host (tenant or not) without a token.
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/api/docs')) route.config = { ...(route.config as object), settings: { tenantless: true, public: true } };
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Data Platform Management API',
        version: 'v1',
        description:
          'Reference implementation. Operations marked `x-extension: true` are our documented additions to the spec; ' +
          'start the service with `--strict-spec` to serve only the documented surface. ' +
          'WebSocket streams (not listed as operations): `wss://<tenant host>/api/v1/ws/pipelines/{pipelineId}/runs/{runId}` sends ' +
          '`step_update` messages {type, step_id, step_name, status, duration_seconds, timestamp}; `wss://<tenant host>/api/v1/ws/alerts` sends ' +
          '{type: alert_fired | alert_acknowledged | alert_resolved, alert, timestamp}. Both authenticate with the `token` query parameter only ' +
          '(access token or API key); refusals are HTTP 401/404/426 before the upgrade; close codes 4401 (credential revoked or expired), ' +
          '4403 (no longer allowed), 4404 (pipeline deleted), 1001 (server shutting down), 1011 (server error). See the README, "Streams (WebSocket)".',
      },
      servers: [{ url: '/api/v1', description: 'This tenant host' }],
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'An access token from /auth/login or an API key' } } },
      security: [{ bearerAuth: [] }],
    },
    stripBasePath: true,
    // @fastify/swagger marks every request body required; an operation whose schema says
    // `x-body-optional: true` (infrastructure apply) takes none at all.
    transformObject: (document) => {
      const openapiObject = (document as { openapiObject: { paths?: Record<string, Record<string, Record<string, unknown>>> } }).openapiObject;
      for (const item of Object.values(openapiObject.paths ?? {})) {
        for (const op of Object.values(item)) {
          if (!op?.['x-body-optional']) continue;
          delete op['x-body-optional'];
          if (op.requestBody) (op.requestBody as { required?: boolean }).required = false;
        }
      }
      return openapiObject as never;
    },
    // Shared schemas (app.addSchema) keep their $id as the component name, e.g.
    // #/components/schemas/ErrorEnvelope instead of the default "def-0".
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  await app.register(swaggerUi, {
    routePrefix: '/api/docs',
    uiConfig: { persistAuthorization: true, tryItOutEnabled: true, displayOperationId: false },
    staticCSP: false,
  });
  app.get('/api/docs/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  void ctx;
}
